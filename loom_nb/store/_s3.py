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
and the restore sees the blob as absent for a moment, never wrong bytes: every read re-hashes.
"""

from __future__ import annotations

import base64
import builtins
import contextlib
import hashlib
import json
import os
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urlsplit

try:
    import obstore
    from obstore.exceptions import AlreadyExistsError, BaseError, NotFoundError
except ImportError:  # pragma: no cover - the optional dependency is missing
    obstore = None  # type: ignore[assignment]

from loom_nb.content import ContentRef
from loom_nb.errors import (
    ConfigurationError,
    ContentIntegrityError,
    ContentNotFoundError,
    StoreError,
)
from loom_nb.store._protocol import Progress, StoreEntry, check_address, check_tenant

if TYPE_CHECKING:
    from obstore import ObjectMeta
    from obstore.store import S3Store

    from loom_nb.journal import Journal
    from loom_nb.store._pg_index import PostgresIndex

__all__ = ["INDEX_ENV", "S3ContentStore"]

INDEX_ENV = "LOOM_STORE_INDEX"
"""Environment variable naming the PostgreSQL database an S3 store's tenant index is in (``index=``)."""

_CHUNK = 8 * 1024 * 1024
_READ_CHUNK = 1024 * 1024  # a read is hashed a chunk at a time, as it arrives
_MAX_TENANT_BYTES = 512
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_LAYOUT = "loom-store.json"  # where the store's tenant index is kept (see _check_layout)
_SEEN = 4096  # blobs a store object remembers as present (to look before re-sending their bytes)


class _Marker:
    """One tenant's record of a blob: a parsed marker key, or a row of the PostgreSQL index.

    ``key`` is unique to the put that wrote it (an erase compares keys to spot a new put);
    ``encoded`` is the tenant in URL-safe base64, as in marker keys.
    """

    __slots__ = ("created", "encoded", "key", "put", "size", "tenant")

    def __init__(
        self, key: str, tenant: str, put: int, size: int, created: int, encoded: str = ""
    ) -> None:
        self.key = key
        self.tenant = tenant
        self.put = put
        self.size = size
        self.created = created
        self.encoded = encoded


class S3ContentStore:
    """A content store on S3 (or any S3-compatible server): same addresses and tenancy as the local one.

    ``S3ContentStore("s3://bucket/prefix")`` reads the endpoint and credentials from the
    standard ``AWS_*`` environment variables unless given: ``endpoint`` (an ``http://`` endpoint
    is allowed for a local server), ``region``, ``access_key_id``, ``secret_access_key``.
    ``chunk_size`` is the part size of multipart uploads (``put_file`` of a larger file).
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
    ) -> None:
        if obstore is None:  # pragma: no cover - the optional dependency is missing
            raise ConfigurationError(
                "the S3 content store needs obstore: pip install 'loom_nb[s3]'.",
                code="backend_not_installed",
            )
        from obstore.store import S3Store

        bucket, prefix = _parse_url(url)
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 5 << 20:
            raise ConfigurationError(
                f"chunk_size must be an int of at least 5 MiB (S3's smallest part), not {chunk_size!r}.",
                code="invalid_chunk_size",
            )
        self.url = f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"
        """The store's ``s3://bucket/prefix`` URL."""
        self.chunk_size = chunk_size
        """Part size of multipart uploads, in bytes."""
        self._clock = clock or (lambda: datetime.now(UTC))
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._seen_lock = threading.Lock()
        config: dict[str, Any] = {}
        endpoint = (
            endpoint or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        )
        for name, value in (
            ("endpoint", endpoint),
            ("region", region),
            ("access_key_id", access_key_id),
            ("secret_access_key", secret_access_key),
        ):
            if value is not None:
                if not isinstance(value, str) or not value:
                    raise ConfigurationError(
                        f"{name} must be a non-empty string, not {value!r}.",
                        code="invalid_s3_option",
                    )
                config[name] = value
        if "region" not in config and not os.environ.get("AWS_REGION") and endpoint:
            config["region"] = "us-east-1"  # S3-compatible servers ignore it; signing needs one
        options: dict[str, Any] = {"timeout": "120s", "connect_timeout": "5s"}
        if endpoint and endpoint.startswith("http://"):
            options["allow_http"] = True
        retry: Any = {
            "max_retries": max_retries,
            "retry_timeout": timedelta(seconds=30),
            "backoff": {
                "init_backoff": timedelta(milliseconds=50),
                "max_backoff": timedelta(seconds=2),
                "base": 2,
            },
        }
        try:
            self._s3: S3Store = S3Store(
                bucket,
                prefix=prefix or None,
                client_options=options,  # type: ignore[arg-type]
                retry_config=retry,
                **config,
            )
        except (BaseError, ValueError, TypeError) as exc:
            raise StoreError(
                f"cannot configure the S3 store {self.url}: {exc}. Check the endpoint, region and "
                "credentials (arguments or AWS_* environment variables).",
                code="store_unavailable",
            ) from exc
        self._index: _ObjectIndex | PostgresIndex
        if index is None:
            index = os.environ.get(INDEX_ENV) or None
        self._index_chosen = index is not None
        self._pair_with: str | Journal | None = None  # a journal to keep the index beside
        self._layout_lock = threading.Lock()
        if index is None:
            self._index = _ObjectIndex(self)
        else:
            from loom_nb.store._pg_index import PostgresIndex

            self._index = PostgresIndex(index, self.url)
        self._layout_checked = threading.Event()  # set once the layout was checked

    def __repr__(self) -> str:
        return f"S3ContentStore({self.url!r})"

    def close(self) -> None:
        """Release the PostgreSQL index's connections, if it has its own (S3 connections are pooled by the client)."""
        self._index.close()

    def __enter__(self) -> S3ContentStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------------------------

    def put(self, data: bytes, tenant: str) -> ContentRef:
        """Store ``data`` for ``tenant``; returns ``ContentRef(address, size)``."""
        encoded = _tenant_key(tenant)
        if not isinstance(data, bytes | bytearray | memoryview):
            raise StoreError(
                f"put() takes bytes, got {type(data).__name__}; use put_file() for a file on disk.",
                code="invalid_data",
            )
        view = memoryview(data)
        address = "sha256:" + hashlib.sha256(view).hexdigest()
        digest = address[7:]

        def upload(overwrite: bool) -> None:
            self._call(
                "put",
                digest,
                lambda: obstore.put(
                    self._s3, _blob(digest), view, mode="overwrite" if overwrite else "create"
                ),
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
        encoded = _tenant_key(tenant)
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
                    self._call(
                        "put",
                        digest,
                        lambda: obstore.put(
                            self._s3,
                            _blob(digest),
                            body,
                            mode="overwrite" if overwrite else "create",
                        ),
                    )
                else:
                    # Multipart cannot be conditional here; the caller looked first, and a racing
                    # upload of the same address writes the same bytes.
                    self._call(
                        "put",
                        digest,
                        lambda: obstore.put(
                            self._s3,
                            _blob(digest),
                            chunks(src),
                            chunk_size=self.chunk_size,
                            max_concurrency=4,
                        ),
                    )
            if check.hexdigest() != digest or done != total:
                self._delete_quietly([_blob(digest)])
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
        now = _micros(self._clock())
        marker = self._index.record(digest, encoded_tenant, size, now)
        present = self._blob_meta(digest) if (large or digest in self._seen) else None
        fresh = False
        if present is None:
            try:
                upload(False)
                fresh = True
            except _Exists:
                present = self._blob_meta(digest)
        if not fresh and (present is None or not _sound(present, size, md5)):
            upload(True)  # vanished, or a damaged copy: rewrite it
        self._remember(digest)
        if not fresh:
            # The blob was (or may have been) there: earlier markers hold its first put time.
            self._index.settle(marker, now, encoded_tenant, digest, size)

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
        encoded = _tenant_key(tenant)
        markers = self._markers(digest)
        mine = [m for m in markers if m.encoded == encoded]
        if not mine:
            return False
        self._index.remove(digest, mine, what="delete")
        if all(m.encoded == encoded for m in markers):
            self._erase(digest, {m.key for m in markers}, remove=[])
        return True

    def purge(self, address: str, *, older_than: datetime | None = None) -> bool:
        """Erase the blob and every tenant marker; False when there was nothing to erase.

        With ``older_than`` nothing is erased if any tenant put the blob at or after that time,
        and a put that lands while the erase runs keeps its blob.
        """
        digest = check_address(address)[7:]
        markers = self._markers(digest)
        if older_than is not None and any(m.put >= _micros(older_than) for m in markers):
            return False
        erased = self._erase(digest, {m.key for m in markers}, remove=markers)
        return erased is not None and (erased or bool(markers))

    def _erase(self, digest: str, seen: set[str], *, remove: builtins.list[_Marker]) -> bool | None:
        """Move the blob aside, re-list the markers, restore it if a new put arrived, else drop it.

        Returns whether a blob was erased, or None when a put arrived and the erase was undone.
        ``remove`` are the markers to delete once the blob is gone.
        """
        trash = f"trash/{digest}/{uuid.uuid4().hex}"
        try:
            self._call("erase", digest, lambda: obstore.copy(self._s3, _blob(digest), trash))
        except ContentNotFoundError:
            moved = False
        else:
            moved = True
            self._call("erase", digest, lambda: obstore.delete(self._s3, _blob(digest)))
        arrived = [m for m in self._markers(digest) if m.key not in seen]
        if arrived:
            if moved:
                self._call("erase", digest, lambda: obstore.copy(self._s3, trash, _blob(digest)))
                self._delete_quietly([trash])
            return None
        if remove:
            self._index.remove(digest, remove, what="erase")
        if moved:
            self._delete_quietly([trash])
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
        result = self._call("get", digest, lambda: obstore.get(self._s3, _blob(digest)))
        # Hashed while it streams (each chunk as it arrives, not a second pass over the whole),
        # then joined once: one copy, as a bare client's bytes(result.bytes()) makes.
        check = hashlib.sha256()
        parts = []
        stream = self._call("get", digest, lambda: result.stream(min_chunk_size=_READ_CHUNK))
        while True:
            try:
                part = next(stream)
            except StopIteration:
                break
            except (BaseError, OSError, RuntimeError) as exc:
                self._fail("get", digest, exc)
            check.update(part)
            parts.append(part)
        if check.hexdigest() != digest:
            self._quarantine(digest, result.meta.get("e_tag"))
            raise ContentIntegrityError(
                f"the object for {address} in {self.url} does not hash to its address (corrupted); "
                "it was moved to corrupt/. Store the original bytes again to repair it.",
                address=address,
            )
        return bytes(parts[0]) if len(parts) == 1 else b"".join(parts)

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
        entry = _entry(digest, self._markers(digest))
        if entry is None:
            raise ContentNotFoundError(f"no blob at {address} in {self.url}.", address=address)
        return entry

    def list(self) -> builtins.list[StoreEntry]:
        """Every blob some tenant recorded, plus blobs no marker names (so GC can reclaim them), by address."""
        self._check_layout()
        grouped = self._index.everything()
        entries: dict[str, StoreEntry] = {}
        for digest, markers in grouped.items():
            entry = _entry(digest, markers)
            if entry is not None:
                entries[digest] = entry
        for meta in self._listing("blobs/"):
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

    def _markers(self, digest: str) -> builtins.list[_Marker]:
        self._check_layout()
        return self._index.markers(digest)

    def _check_layout(self) -> None:
        """On first use: the store's ``loom-store.json`` says where its index is, and must agree.

        Every client of one store has to keep its index in the same place: a client counting
        marker objects would take blobs only PostgreSQL rows name for orphans, and its sweep
        would reclaim them. The first client to use a store writes the file (a conditional
        create); any later one opened with the other index is refused.
        """
        if self._layout_checked.is_set():
            return
        with self._layout_lock:
            if self._layout_checked.is_set():  # another thread checked it meanwhile
                return
            if self._pair_with is not None and not self._index_chosen:
                self._take_journal_index(self._pair_with)
            ours = self._index.layout()
            recorded = self._recorded_layout(ours)
            if recorded is not None:
                _check_same_index(self.url, recorded, ours)
            self._layout_checked.set()

    def _recorded_layout(self, ours: dict[str, str] | None) -> dict[str, Any] | None:
        """The layout the bucket records; with ``ours``, first try to record it (None: ours is now it)."""
        if ours is not None:
            wanted = json.dumps({"format": 1, **ours}).encode()
            try:
                self._call(
                    "put", _LAYOUT, lambda: obstore.put(self._s3, _LAYOUT, wanted, mode="create")
                )
                return None
            except _Exists:
                pass
        try:
            found = self._call("get", _LAYOUT, lambda: obstore.get(self._s3, _LAYOUT).bytes())
        except ContentNotFoundError:
            return None
        try:
            recorded = json.loads(bytes(found))
        except ValueError:
            recorded = None
        return recorded if isinstance(recorded, dict) else {}

    def _follow_journal(self, journal: str | Journal) -> None:
        """Keep the tenant index in ``journal``'s PostgreSQL database, unless told otherwise.

        A PostgreSQL ``Journal(url, store=self)`` calls this (and ``loom-nb`` for a store and a
        journal named together), so a team's store and journal pair without ``index=``. On the
        store's first use (no I/O here): nothing changes when it was opened with an index of its
        own (``index=`` or ``$LOOM_STORE_INDEX``) or its bucket already records marker objects;
        a new bucket, or one that records PostgreSQL, takes the journal's database, which
        ``_check_layout`` then checks is the recorded one.
        """
        with self._layout_lock:
            if not self._index_chosen and not self._layout_checked.is_set():
                self._pair_with = journal

    def _take_journal_index(self, journal: str | Journal) -> None:
        """Under the layout lock, on first use: switch to ``journal``'s database unless the bucket records markers."""
        recorded = self._recorded_layout(None)
        if recorded is not None and recorded.get("index") != "postgresql":
            return
        from loom_nb.store._pg_index import PostgresIndex

        previous = self._index
        self._index = PostgresIndex(journal, self.url)
        self._index_chosen = True
        previous.close()

    def _listing(self, prefix: str) -> Iterator[ObjectMeta]:
        stream = self._call("list", prefix, lambda: obstore.list(self._s3, prefix, chunk_size=1000))
        while True:
            try:
                batch: Sequence[ObjectMeta] = next(stream)
            except StopIteration:
                return
            except BaseError as exc:
                self._fail("list", prefix, exc)
            yield from batch

    def _blob_meta(self, digest: str) -> ObjectMeta | None:
        try:
            meta: ObjectMeta = self._call(
                "head", digest, lambda: obstore.head(self._s3, _blob(digest))
            )
        except ContentNotFoundError:
            return None
        return meta

    def _quarantine(self, digest: str, e_tag: str | None) -> None:
        """Move a corrupted object aside, unless a put replaced it since it was read."""
        with contextlib.suppress(StoreError):  # best effort: the read already refused the bytes
            current = self._call("head", digest, lambda: obstore.head(self._s3, _blob(digest)))
            if e_tag is None or current.get("e_tag") == e_tag:
                self._call(
                    "quarantine",
                    digest,
                    lambda: obstore.copy(self._s3, _blob(digest), f"corrupt/{digest}"),
                )
                self._call("quarantine", digest, lambda: obstore.delete(self._s3, _blob(digest)))

    def _delete_quietly(self, keys: builtins.list[str]) -> None:
        # Leftovers are harmless: a stale marker of the same tenant, a trash copy.
        with contextlib.suppress(BaseError, OSError):
            obstore.delete(self._s3, keys)

    def _call(self, what: str, where: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except AlreadyExistsError as exc:
            raise _Exists from exc
        except (FileNotFoundError, NotFoundError) as exc:
            raise ContentNotFoundError(
                f"no object for {where} in {self.url}. Store it first with put().",
                address=f"sha256:{where}" if len(where) == 64 else where,
            ) from exc
        except (BaseError, OSError, RuntimeError) as exc:
            self._fail(what, where, exc)

    def _fail(self, what: str, where: str, exc: BaseException) -> NoReturn:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise StoreError(
            f"the S3 store {self.url} failed to {what} {where}: {text}. Check that the server is "
            "reachable, the bucket exists and the credentials may read and write it, then retry.",
            code="store_unavailable",
        ) from exc


class _ObjectIndex:
    """Who stored what, as one empty marker object per tenant and blob (``tenants/...``)."""

    kind = "objects"

    def __init__(self, store: S3ContentStore) -> None:
        self._store = store

    def record(self, digest: str, encoded: str, size: int, now: int) -> str:
        """Write this put's marker (a new, unique key); returns it."""
        marker = f"tenants/{digest}/{encoded}/{now:016d}-{size}-{now:016d}-{uuid.uuid4().hex[:12]}"
        self._store._call("put", digest, lambda: obstore.put(self._store._s3, marker, b""))
        return marker

    def settle(self, marker: str, now: int, encoded: str, digest: str, size: int) -> None:
        """After deduping: carry the blob's first put time into this put's marker, drop the tenant's older ones.

        The corrected marker is written before the provisional one goes, so the tenant is never
        without a marker a racing erase would see.
        """
        markers = self._store._markers(digest)
        older = [m.key for m in markers if m.key != marker and m.encoded == encoded]
        created = min((m.created for m in markers), default=now)
        if created < now:
            fixed = f"tenants/{digest}/{encoded}/{now:016d}-{size}-{created:016d}-{uuid.uuid4().hex[:12]}"
            self._store._call("put", digest, lambda: obstore.put(self._store._s3, fixed, b""))
            older.append(marker)
        if older:
            self._store._delete_quietly(older)

    def markers(self, digest: str) -> builtins.list[_Marker]:
        found = []
        for meta in self._store._listing(f"tenants/{digest}/"):
            marker = _parse_marker(meta["path"])
            if marker is not None:
                found.append(marker)
        return found

    def remove(self, digest: str, markers: builtins.list[_Marker], *, what: str) -> None:
        keys = [m.key for m in markers]
        self._store._call(what, digest, lambda: obstore.delete(self._store._s3, keys))

    def everything(self) -> dict[str, builtins.list[_Marker]]:
        grouped: dict[str, builtins.list[_Marker]] = {}
        for meta in self._store._listing("tenants/"):
            marker = _parse_marker(meta["path"])
            if marker is not None:
                grouped.setdefault(meta["path"].split("/")[1], []).append(marker)
        return grouped

    def layout(self) -> dict[str, str]:
        """What the store's ``loom-store.json`` records about this index."""
        return {"index": self.kind}

    def close(self) -> None:
        """Nothing to release."""


def _check_same_index(url: str, recorded: dict[str, Any], ours: dict[str, str]) -> None:
    """Refuse a client whose tenant index is not the one the bucket records (``store_index_mismatch``).

    Two indexes of one bucket would each count only their own tenants, and either one's sweep
    would reclaim blobs only the other names.
    """
    kind = ours["index"]
    if recorded.get("index") != kind:
        remedy = (
            f"index=<a Journal or URL of that database> (the bucket records it at "
            f"{recorded.get('where', 'an unrecorded place')}), or through "
            "Journal(<that database's URL>, store=...), which pairs them"
            if recorded.get("index") == "postgresql"
            else "without index= and without a PostgreSQL journal paired with it"
        )
        raise ConfigurationError(
            f"the S3 store {url} keeps its tenant index in {recorded.get('index')!r}, but it was "
            f"opened with the index in {kind!r}. Open it the way it was first used: {remedy}.",
            code="store_index_mismatch",
        )
    theirs, mine = recorded.get("database"), ours.get("database")
    if kind == "postgresql" and theirs is not None and mine is not None and theirs != mine:
        raise ConfigurationError(
            f"the S3 store {url} keeps its tenant index in the PostgreSQL database at "
            f"{recorded.get('where', '?')}, but it was opened with the index in another "
            f"database, {ours.get('where', '?')}: each would count only its own tenants and "
            "its sweep would reclaim the other's blobs. Open the store with that database "
            "(index=<its URL>, or a Journal on it).",
            code="store_index_mismatch",
        )


class _Exists(Exception):
    """Internal: a conditional create found the object already there."""


def _parse_url(url: object) -> tuple[str, str]:
    if not isinstance(url, str):
        raise ConfigurationError(
            f"an S3 store URL is a string like 's3://bucket/prefix', not {type(url).__name__}.",
            code="invalid_store_url",
        )
    parts = urlsplit(url)
    bucket = parts.netloc
    if parts.scheme != "s3" or not bucket or parts.query or parts.fragment or "@" in bucket:
        raise ConfigurationError(
            f"{url!r} is not an S3 store URL: write 's3://bucket' or 's3://bucket/prefix' "
            "(credentials go in arguments or AWS_* environment variables, not the URL).",
            code="invalid_store_url",
        )
    prefix = parts.path.strip("/")
    if any(segment in ("", ".", "..") for segment in prefix.split("/")) and prefix:
        raise ConfigurationError(
            f"{url!r}: the prefix {prefix!r} has an empty, '.' or '..' segment.",
            code="invalid_store_url",
        )
    return bucket, prefix


def _sound(meta: ObjectMeta, size: int, md5: Callable[[], str] | None) -> bool:
    """Whether a present object can stand for ``size`` bytes with this MD5 (as far as S3 tells)."""
    if meta["size"] != size:
        return False
    e_tag = (meta.get("e_tag") or "").strip('"')
    if md5 is None or "-" in e_tag or len(e_tag) != 32:
        return True  # a multipart (or encrypted) ETag is no MD5: every read verifies instead
    return e_tag == md5()


def _blob(digest: str) -> str:
    return f"blobs/{digest}"


def _tenant_key(tenant: object) -> str:
    check_tenant(tenant)
    assert isinstance(tenant, str)
    try:
        raw = tenant.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise StoreError(
            f"invalid tenant {tenant!r}: it is not valid Unicode text (a lone surrogate).",
            code="invalid_tenant",
        ) from exc
    if len(raw) > _MAX_TENANT_BYTES:
        raise StoreError(
            f"invalid tenant: {len(raw)} bytes of UTF-8, over the {_MAX_TENANT_BYTES} an S3 "
            "store can put in an object key. Use a shorter tenant id.",
            code="invalid_tenant",
        )
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=") or "="


def _parse_marker(key: str) -> _Marker | None:
    """A marker key's fields, or None for a key that is not one (ignored, never trusted)."""
    parts = key.split("/")
    if len(parts) != 4 or parts[0] != "tenants" or len(parts[1]) != 64:
        return None
    fields = parts[3].split("-")
    if len(fields) != 4:
        return None
    try:
        encoded = parts[2]
        tenant = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode("utf-8")
        return _Marker(key, tenant, int(fields[0]), int(fields[1]), int(fields[2]), encoded)
    except ValueError:
        return None


def _entry(digest: str, markers: builtins.list[_Marker]) -> StoreEntry | None:
    if not markers:
        return None
    return StoreEntry(
        address="sha256:" + digest,
        size=max(m.size for m in markers),
        created=_EPOCH + timedelta(microseconds=min(m.created for m in markers)),
        last_put=_EPOCH + timedelta(microseconds=max(m.put for m in markers)),
        tenants=frozenset(m.tenant for m in markers),
    )


def _micros(moment: datetime) -> int:
    if moment.tzinfo is None:
        raise ConfigurationError(
            "the store's clock must return timezone-aware datetimes (for example datetime.now(UTC)).",
            code="naive_datetime",
        )
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
