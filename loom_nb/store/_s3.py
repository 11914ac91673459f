"""S3ContentStore: the content store on S3-compatible object storage (issue 16), through obstore.

Layout under ``s3://bucket/prefix``::

    blobs/<hex>                                   the bytes, named by their sha256
    tenants/<hex>/<tenant>/<put>-<size>-<created>-<nonce>
                                                  one empty marker object per put: who stored
                                                  the blob, its size, when it was first and last put
    trash/<hex>/<nonce>                           a blob being erased (moved aside, see below)
    corrupt/<hex>                                 a blob that failed its hash check on read

``<tenant>`` is the tenant's UTF-8 in URL-safe base64, the times are microseconds since the
epoch from the store's clock, so everything a listing needs is in the key and ``list()`` is one
paginated LIST. Each put writes a NEW marker (a unique key); a put that finds the blob already
there then lists the markers, carries the blob's first put time into a marker of its own and
removes the tenant's older ones (a marker, once written, is only deleted by someone who saw it).
A put that creates the blob lists nothing: a new blob costs the marker PUT and the blob PUT.

A put writes its marker FIRST and then makes sure the blob is there (a conditional create,
``If-None-Match: *``, so concurrent puts of the same bytes cannot clobber each other; a blob
that is present but of the wrong size is rewritten, which repairs it). Large files go up as a
streaming multipart upload, hashed as they are read and checked against the address at the end.

Erasing (the last tenant's ``delete``, and ``purge`` for the garbage collector) cannot take a
lock on an object store, so it moves the blob aside to ``trash/``, lists the markers again, and
puts the blob back if a marker it had not seen appeared meanwhile: a put racing the erase either
wrote its marker before the second listing (and the blob is restored) or after it (and then it
finds the blob gone and uploads it). Together with ``purge(older_than=...)`` refusing a blob put
within the grace period, a sweep never takes bytes from under a put. A reader between the move
and the restore sees the blob as absent for a moment, never wrong bytes: every read re-hashes
(``get`` hashes the whole body before returning it; ``open`` streams it through a
``BlobReader``, which raises from the read that would complete a damaged blob).

The pieces: ``_s3_client`` is the bucket through obstore (configuration, errors), ``_s3_index``
the tenant markers (and the interface the PostgreSQL index, ``_pg_index``, fills too), and
``_s3_layout`` which index a bucket uses (``loom-store.json``) and the pairing with a journal.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import os
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loom_nb.content import ContentRef
from loom_nb.errors import (
    ConfigurationError,
    ContentIntegrityError,
    ContentNotFoundError,
    StoreError,
)
from loom_nb.store._protocol import Progress, StoreEntry, check_address
from loom_nb.store._reader import BlobReader, denied
from loom_nb.store._s3_client import (
    AVAILABLE,
    Exists,
    S3Objects,
    S3Reader,
    blob,
    connect,
    parse_url,
    sound,
)
from loom_nb.store._s3_index import (
    Marker,
    ObjectIndex,
    TenantIndex,
    entry_of,
    micros,
    tenant_key,
)
from loom_nb.store._s3_layout import IndexChoice

if TYPE_CHECKING:
    from obstore import ObjectMeta
    from obstore.store import S3Store

    from loom_nb.journal import Journal

__all__ = ["INDEX_ENV", "S3ContentStore"]

INDEX_ENV = "LOOM_STORE_INDEX"
"""Environment variable naming the PostgreSQL database an S3 store's tenant index is in (``index=``)."""

_CHUNK = 8 * 1024 * 1024
_SEEN = 4096  # blobs a store object remembers as present (to look before re-sending their bytes)


class S3ContentStore:
    """A content store on S3 (or any S3-compatible server): same addresses and tenancy as the local one.

    ``S3ContentStore("s3://bucket/prefix")`` reads the endpoint and credentials from the
    standard ``AWS_*`` environment variables unless given: ``endpoint`` (an ``http://`` endpoint
    is allowed for a local server), ``region``, ``access_key_id``, ``secret_access_key``.
    ``chunk_size`` is the part size of multipart uploads (``put_file`` of a larger file).
    ``timeout`` is how many seconds one request may take, its body included (default 120): a
    server that stalls ends the call in ``StoreError`` code ``store_timeout``; raise it for very
    large blobs on a slow link. ``max_retries`` retries a failed request (transient errors).
    ``clock`` supplies the put times the garbage collector compares (default: UTC now).
    ``index`` keeps the per-tenant index in PostgreSQL instead of marker objects: a PostgreSQL
    ``Journal`` (its connection pool is shared) or a ``postgresql://`` URL (the table is
    ``loom_store_tenants``, one row per tenant and blob, keyed by this store's URL); unset, it is
    ``$LOOM_STORE_INDEX`` when that is set, else the database of the PostgreSQL ``Journal`` the
    store is given to (``Journal(url, store=...)``; ``loom-nb`` pairs a store and a journal named
    together), unless the bucket already records marker objects; else marker objects. The bucket
    must exist; its ``loom-store.json`` records where the index is (the database by its identity,
    no credentials) and a client with another index is refused (``store_index_mismatch``).
    """

    def __init__(
        self,
        url: str,
        *,
        endpoint: str | None = None,
        region: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        chunk_size: int = _CHUNK,
        clock: Callable[[], datetime] | None = None,
        max_retries: int = 3,
        index: str | Journal | None = None,
        timeout: float = 120.0,
    ) -> None:
        if not AVAILABLE:  # pragma: no cover - the optional dependency is missing
            raise ConfigurationError(
                "the S3 content store needs obstore: pip install 'loom_nb[s3]'.",
                code="backend_not_installed",
            )
        bucket, prefix = parse_url(url)
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 5 << 20:
            raise ConfigurationError(
                f"chunk_size must be an int of at least 5 MiB (S3's smallest part), not {chunk_size!r}.",
                code="invalid_chunk_size",
            )
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout <= 86_400
        ):
            raise ConfigurationError(
                f"timeout must be a number of seconds above 0 (at most a day), not {timeout!r}.",
                code="invalid_timeout",
            )
        self.url = f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"
        """The store's ``s3://bucket/prefix`` URL."""
        self.chunk_size = chunk_size
        """Part size of multipart uploads, in bytes."""
        self.timeout = float(timeout)
        """Seconds one request to the server may take (its body included)."""
        self._clock = clock or (lambda: datetime.now(UTC))
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._seen_lock = threading.Lock()
        self._s3: S3Store = connect(
            self.url,
            bucket,
            prefix,
            endpoint=endpoint,
            region=region,
            access_key_id=access_key_id,
            secret_access_key=secret_access_key,
            max_retries=max_retries,
            timeout=self.timeout,
        )
        self._objects = S3Objects(self.url, self._s3, timeout=self.timeout)
        if index is None:
            index = os.environ.get(INDEX_ENV) or None
        initial: TenantIndex
        if index is None:
            initial = ObjectIndex(self)
        else:
            from loom_nb.store._pg_index import PostgresIndex

            initial = PostgresIndex(index, self.url)
        self._choice = IndexChoice(self._objects, initial, chosen=index is not None)

    def __repr__(self) -> str:
        return f"S3ContentStore({self.url!r})"

    def close(self) -> None:
        """Release the PostgreSQL index's connections, if it has its own (S3 connections are pooled by the client)."""
        self._choice.index.close()

    def __enter__(self) -> S3ContentStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------------------------

    def put(self, data: bytes, tenant: str) -> ContentRef:
        """Store ``data`` for ``tenant``; returns ``ContentRef(address, size)``."""
        encoded = tenant_key(tenant)
        if not isinstance(data, bytes | bytearray | memoryview):
            raise StoreError(
                f"put() takes bytes, got {type(data).__name__}; use put_file() for a file on disk.",
                code="invalid_data",
            )
        view = memoryview(data)
        address = "sha256:" + hashlib.sha256(view).hexdigest()
        digest = address[7:]

        def upload(overwrite: bool) -> None:
            self._objects.put(
                "put", digest, blob(digest), view, mode="overwrite" if overwrite else "create"
            )

        self._record_and_ensure(
            digest,
            encoded,
            view.nbytes,
            upload,
            md5=lambda: hashlib.md5(view, usedforsecurity=False).hexdigest(),
        )
        return ContentRef(address=address, size=view.nbytes)

    def put_file(
        self, path: str | os.PathLike[str], tenant: str, *, progress: Progress | None = None
    ) -> ContentRef:
        """Store a file's bytes for ``tenant``, streaming: hashed, then uploaded in parts, never read whole.

        The file is read twice (once to learn its address, once to upload) and the upload is
        hashed again; a file that changed in between is refused (``file_changed``) and nothing
        wrong is left readable under its address.
        """
        encoded = tenant_key(tenant)
        source = Path(path)
        digest_of = hashlib.sha256()
        md5_of = hashlib.md5(usedforsecurity=False)
        try:
            with source.open("rb") as src:
                total = os.fstat(src.fileno()).st_size
                while chunk := src.read(1 << 20):
                    digest_of.update(chunk)
                    md5_of.update(chunk)
        except OSError as exc:
            raise StoreError(
                f"cannot read {source}: {exc.strerror}. Pass the path of a readable file.",
                code="unreadable_file",
            ) from exc
        digest = digest_of.hexdigest()
        size = total

        def upload(overwrite: bool) -> None:
            check = hashlib.sha256()
            done = 0

            def chunks(src: Any) -> Iterator[bytes]:
                nonlocal done
                while chunk := src.read(self.chunk_size):
                    check.update(chunk)
                    done += len(chunk)
                    if progress is not None:
                        progress(done, total)
                    yield chunk

            try:
                src = source.open("rb")
            except OSError as exc:
                raise StoreError(
                    f"cannot read {source}: {exc.strerror}.", code="unreadable_file"
                ) from exc
            with src:
                if total <= self.chunk_size:
                    pieces = []
                    while piece := src.read(1 << 20):
                        check.update(piece)
                        pieces.append(piece)
                        done += len(piece)
                        if progress is not None:
                            progress(done, total)
                    body = b"".join(pieces)
                    self._objects.put(
                        "put",
                        digest,
                        blob(digest),
                        body,
                        mode="overwrite" if overwrite else "create",
                    )
                else:
                    # Multipart cannot be conditional here; the caller looked first, and a racing
                    # upload of the same address writes the same bytes.
                    self._objects.put(
                        "put",
                        digest,
                        blob(digest),
                        chunks(src),
                        chunk_size=self.chunk_size,
                        max_concurrency=4,
                    )
            if check.hexdigest() != digest or done != total:
                self._objects.delete_quietly([blob(digest)])
                raise StoreError(
                    f"{source} changed while it was being stored (its bytes no longer hash to "
                    f"sha256:{digest}); nothing was stored. Store it again once it is complete.",
                    code="file_changed",
                )

        self._record_and_ensure(
            digest, encoded, size, upload, large=size > self.chunk_size, md5=md5_of.hexdigest
        )
        return ContentRef(address="sha256:" + digest, size=size)

    def _record_and_ensure(
        self,
        digest: str,
        encoded_tenant: str,
        size: int,
        upload: Callable[[bool], None],
        *,
        large: bool = False,
        md5: Callable[[], str] | None = None,
    ) -> None:
        """Write this put's marker, then make sure the blob is there (see the module docstring).

        A new blob costs two requests: the marker, then the conditional create. Only when the
        blob may already be there (this store saw it, a large upload, or the create found it) is
        it looked at (HEAD) and the markers listed, to keep the tenant's first put time and drop
        its older markers. With ``md5`` (the bytes' MD5, computed only if an object is found), a
        present object whose single-part ETag is another MD5 was damaged in place at the same
        size, and is rewritten rather than deduped onto.
        """
        self._check_layout()
        now = micros(self._clock())
        marker = self._choice.index.record(digest, encoded_tenant, size, now)
        try:
            present = self._blob_meta(digest) if (large or digest in self._seen) else None
            fresh = False
            if present is None:
                try:
                    upload(False)
                    fresh = True
                except Exists:
                    present = self._blob_meta(digest)
            if not fresh and (present is None or not sound(present, size, md5)):
                upload(True)  # vanished, or a damaged copy: rewrite it
        except BaseException:
            self._withdraw(digest, encoded_tenant, marker, size, now)
            raise
        self._remember(digest)
        if not fresh:
            # The blob was (or may have been) there: earlier markers hold its first put time.
            self._choice.index.settle(marker, now, encoded_tenant, digest, size)

    def _withdraw(self, digest: str, encoded: str, marker: str, size: int, now: int) -> None:
        """Take back the entry of a put whose upload failed (cut off, timed out, refused).

        Left behind, ``list()`` and ``stat()`` would show a blob ``has()`` and ``get()`` say is
        absent. Best effort, and only while the blob is not there: when it is (another put of
        the same bytes landed), the entry is true. A put killed outright cannot withdraw; its
        entry is reclaimed by the content sweep once older than the TTL.
        """
        with contextlib.suppress(Exception):
            if self._blob_meta(digest) is not None:
                return
        with contextlib.suppress(Exception):
            mine = Marker(marker, "", now, size, now, encoded)
            self._choice.index.remove(digest, [mine], what="withdraw")

    def _remember(self, digest: str) -> None:
        """Note a blob as present, so the next put of it looks before sending the bytes."""
        with self._seen_lock:
            self._seen[digest] = None
            self._seen.move_to_end(digest)
            while len(self._seen) > _SEEN:
                self._seen.popitem(last=False)

    def delete(self, address: str, tenant: str) -> bool:
        """Remove ``tenant`` from the address's set; the blob is erased when no tenant is left.

        Returns False when that tenant had not stored the address.
        """
        digest = check_address(address)[7:]
        encoded = tenant_key(tenant)
        markers = self._markers(digest)
        mine = [m for m in markers if m.encoded == encoded]
        if not mine:
            return False
        self._choice.index.remove(digest, mine, what="delete")
        if all(m.encoded == encoded for m in markers):
            self._erase(digest, {m.key for m in markers}, remove=[])
        return True

    def purge(
        self,
        address: str,
        *,
        older_than: datetime | None = None,
        keep: Callable[[str], bool] | None = None,
    ) -> bool:
        """Erase the blob and every tenant marker; False when there was nothing to erase.

        With ``older_than`` nothing is erased if any tenant put the blob at or after that time,
        and a put that lands while the erase runs keeps its blob. With ``keep``, once the blob is
        moved aside ``keep(address)`` decides: True (or an exception) puts it back.
        """
        digest = check_address(address)[7:]
        markers = self._markers(digest)
        if older_than is not None and any(m.put >= micros(older_than) for m in markers):
            return False
        erased = self._erase(digest, {m.key for m in markers}, remove=markers, keep=keep)
        return erased is not None and (erased or bool(markers))

    def _erase(
        self,
        digest: str,
        seen: set[str],
        *,
        remove: builtins.list[Marker],
        keep: Callable[[str], bool] | None = None,
    ) -> bool | None:
        """Move the blob aside, re-list the markers, restore it if a new put arrived (or ``keep``
        says so), else drop it.

        Returns whether a blob was erased, or None when the erase was undone. ``remove`` are the
        markers to delete once the blob is gone.
        """
        trash = f"trash/{digest}/{uuid.uuid4().hex}"
        try:
            self._objects.copy("erase", digest, blob(digest), trash)
        except ContentNotFoundError:
            moved = False
        else:
            moved = True
            self._objects.delete("erase", digest, blob(digest))
        wanted = True  # until decided (an error on the way puts the blob back, then propagates)
        try:
            arrived = [m for m in self._markers(digest) if m.key not in seen]
            wanted = bool(arrived) or (keep is not None and keep("sha256:" + digest))
        finally:
            if wanted and moved:
                self._objects.copy("erase", digest, trash, blob(digest))
                self._objects.delete_quietly([trash])
        if wanted:
            return None
        if remove:
            self._choice.index.remove(digest, remove, what="erase")
        if moved:
            self._objects.delete_quietly([trash])
        with self._seen_lock:
            self._seen.pop(digest, None)
        return moved

    # -- reading ---------------------------------------------------------------------------------

    def get(self, address: str) -> bytes:
        """The bytes at ``address``, re-hashed on every read (corruption raises, never returns).

        A corrupted object is moved aside to ``corrupt/`` so that the next put of the original
        bytes writes a sound copy.
        """
        digest = check_address(address)[7:]
        result = self._fetch(digest)
        # The body in one buffer, hashed whole, copied once into bytes: the bare client's
        # bytes(result.bytes()) plus the hash and nothing else. Hashing chunk by chunk as they
        # arrived was slower (0.82x of a bare get at 4 MiB against 0.86x, and 0.74x against 0.82x
        # at 32 MiB): the client does not read ahead between chunks, so the hash never overlapped
        # the download, and each chunk and the join cost an allocation of their own.
        body = self._objects.call("get", digest, result.bytes)
        if hashlib.sha256(body).hexdigest() != digest:
            self._objects.quarantine(digest, result.meta.get("e_tag"))
            raise ContentIntegrityError(
                f"the object for {address} in {self.url} does not hash to its address (corrupted); "
                "it was moved to corrupt/. Store the original bytes again to repair it.",
                address=address,
            )
        return bytes(body)

    def open(self, address: str, *, tenant: str) -> BlobReader:
        """The blob as a binary stream, hashed as its body arrives (``loom_nb.store._reader``).

        Allowed when ``tenant`` stored the blob; an absent and another tenant's blob are refused
        alike (``ContentAccessDeniedError``). Reading the last byte of a blob that does not hash
        to its address raises ``ContentIntegrityError`` (and moves the object to ``corrupt/``).
        """
        digest = check_address(address)[7:]
        tenant_key(tenant)  # a malformed tenant is refused before any request
        if tenant not in self.tenants(address):
            raise denied(address, tenant, self.url)
        return S3Reader(self._objects, digest, self._fetch(digest))

    def _fetch(self, digest: str) -> Any:
        """The blob's GET, waiting a moment while an erase holds it in ``trash/`` to decide.

        An erase puts a blob back when a put or a step in flight wants it (``_erase``); a read
        landing in between would otherwise report it absent.
        """
        waits = iter((0.05, 0.1, 0.2, 0.4, 0.8, 1.6))
        while True:
            try:
                return self._objects.get("get", digest, blob(digest))
            except ContentNotFoundError:
                delay = next(waits, None)
                if delay is None:
                    raise
                if not any(True for _ in self._objects.listing(f"trash/{digest}/")):
                    # No erase holds it now, but one may have put it back between the GET and
                    # the listing: one more GET tells (absent for good: ContentNotFoundError).
                    return self._objects.get("get", digest, blob(digest))
                time.sleep(delay)

    def has(self, address: str) -> bool:
        """Whether a blob is stored at ``address`` (some tenant recorded and the object present)."""
        digest = check_address(address)[7:]
        return bool(self._markers(digest)) and self._blob_meta(digest) is not None

    def tenants(self, address: str) -> set[str]:
        """The tenants that stored ``address`` and have not deleted it (empty when none)."""
        digest = check_address(address)[7:]
        return {m.tenant for m in self._markers(digest)}

    def stat(self, address: str) -> StoreEntry:
        """Size, first and last put time, and tenants of the blob at ``address``."""
        digest = check_address(address)[7:]
        entry = entry_of(digest, self._markers(digest))
        if entry is None:
            raise ContentNotFoundError(f"no blob at {address} in {self.url}.", address=address)
        return entry

    def list(self) -> builtins.list[StoreEntry]:
        """Every blob some tenant recorded, plus blobs no marker names (so GC can reclaim them), by address."""
        self._check_layout()
        grouped = self._choice.index.everything()
        entries: dict[str, StoreEntry] = {}
        for digest, markers in grouped.items():
            entry = entry_of(digest, markers)
            if entry is not None:
                entries[digest] = entry
        for meta in self._objects.listing("blobs/"):
            digest = meta["path"].rsplit("/", 1)[-1]
            if digest not in entries and len(digest) == 64:
                moment = meta["last_modified"]
                entries[digest] = StoreEntry(
                    address="sha256:" + digest,
                    size=meta["size"],
                    created=moment,
                    last_put=moment,
                    tenants=frozenset(),
                )
        return [entries[d] for d in sorted(entries)]

    def __iter__(self) -> Iterator[StoreEntry]:
        return iter(self.list())

    # -- internals -------------------------------------------------------------------------------

    def _markers(self, digest: str) -> builtins.list[Marker]:
        self._check_layout()
        return self._choice.index.markers(digest)

    def _blob_meta(self, digest: str) -> ObjectMeta | None:
        return self._objects.blob_meta(digest)

    def _check_layout(self) -> None:
        """On first use: the store's ``loom-store.json`` says where its index is, and must agree (``_s3_layout``)."""
        self._choice.check()

    def _follow_journal(self, journal: str | Journal) -> None:
        """Keep the tenant index in ``journal``'s PostgreSQL database, unless told otherwise.

        A PostgreSQL ``Journal(url, store=self)`` calls this (and ``loom-nb`` for a store and a
        journal named together), so a team's store and journal pair without ``index=`` (see
        ``_s3_layout``).
        """
        self._choice.follow(journal)
