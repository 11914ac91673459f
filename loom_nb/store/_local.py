"""LocalContentStore: blobs in a sharded directory, a SQLite index of who stored what and when.

Layout under the store directory::

    objects/ab/cdef...      one file per blob, named by its sha256 hex (first two digits shard)
    tmp/                    puts in progress (same file system, so the final rename is atomic),
                            and blobs a sweep moved aside while it decides (``erase-<hex>-...``)
    corrupt/                blobs that failed their hash check on read, moved aside
    index.sqlite3           rows (address, tenant, size, created, last_put); WAL mode

A put writes a temporary file while hashing (in parallel from 4 MiB on: ``_local_io``), fsyncs
it, then, holding SQLite's write lock,
renames it into place and records the tenant in the same transaction. A delete drops the tenant
row and unlinks the blob when no row remains, also under that lock. Because every change to the
set of blob files happens inside a write transaction, two processes sharing the store cannot
interleave a put and the last delete of the same address into "row without blob". Reads need no
lock: a blob file is immutable once renamed, and every read re-hashes it, so a corrupted file
raises ``ContentIntegrityError`` instead of returning wrong bytes (and is moved aside, so storing
the original bytes again repairs it). ``open`` streams a blob file and re-hashes it as it reads
(``_reader``): the read that would complete a damaged blob raises instead. A ``put`` of bytes
already present compares them with the stored copy before taking the dedupe path (under 4 MiB;
a larger put always writes its fresh copy over the old one), so it repairs a copy damaged in
place (same size) too.

A sweep's ``purge(keep=...)`` moves the blob aside under the write lock, asks ``keep`` and puts it
back or erases it before releasing the lock; a read that finds no file waits for the lock and
looks once more, so it never reports a blob absent that the sweep then keeps. A blob left aside
by a process killed mid-decision is put back when the store is next opened.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import io
import os
import sqlite3
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

from loom_nb._args import check_type
from loom_nb.content import ContentRef
from loom_nb.errors import ContentIntegrityError, ContentNotFoundError, StoreError
from loom_nb.store import _local_io
from loom_nb.store._local_io import LocalReader, hashed_copy, hashed_write, write_all
from loom_nb.store._protocol import Progress, StoreEntry, check_address, check_tenant
from loom_nb.store._reader import BlobReader, denied

__all__ = ["LocalContentStore"]

_CHUNK = 1 << 20
_BUSY_TIMEOUT_MS = 60_000
_STALE_TEMP_SECONDS = 24 * 3600


def _m001_initial(db: sqlite3.Connection) -> None:
    db.execute(
        "CREATE TABLE content (address TEXT NOT NULL, tenant TEXT NOT NULL, size INTEGER NOT NULL,"
        " created REAL NOT NULL, last_put REAL NOT NULL, PRIMARY KEY (address, tenant))"
    )


# Schema migrations, applied in order; PRAGMA user_version records how many have run.
_MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (_m001_initial,)


class LocalContentStore:
    """A content store on the local disk: sharded blob files plus a SQLite index (safe across processes).

    ``LocalContentStore(path)`` creates the directory if needed. ``durable=False`` skips the
    fsyncs (a crash may then lose recent puts; never returns wrong bytes): for scratch stores. ``put`` / ``put_file`` return a
    ``ContentRef`` with the size; identical bytes are stored once whoever stores them, and each
    tenant is recorded against the address.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durable: bool = True,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        check_type(
            path, (str, os.PathLike), name="path", where="LocalContentStore()", error=StoreError
        )
        self.path = Path(path)
        self.durable = durable
        """Whether puts reach the disk before returning (fsync); False only for scratch stores."""
        self._clock = clock or (lambda: datetime.now(UTC))
        self._objects = self.path / "objects"
        self._tmp = self.path / "tmp"
        try:
            self._objects.mkdir(parents=True, exist_ok=True)
            self._tmp.mkdir(exist_ok=True)
            self._db = sqlite3.connect(
                self.path / "index.sqlite3", isolation_level=None, check_same_thread=False
            )
            self._db.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute(f"PRAGMA synchronous = {'FULL' if durable else 'NORMAL'}")
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(
                f"cannot open the content store at {self.path}: {exc}. Check that the directory "
                "is writable and not on a network file system that lacks file locks.",
                code="store_unavailable",
            ) from exc
        self._lock = threading.RLock()
        self._remove_stale_temps()
        with self._write() as db:
            version: int = db.execute("PRAGMA user_version").fetchone()[0]
            for migrate in _MIGRATIONS[version:]:
                migrate(db)
            db.execute(f"PRAGMA user_version = {len(_MIGRATIONS)}")
        self._restore_erasures()

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the index connection (the store is unusable afterwards)."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> LocalContentStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LocalContentStore({str(self.path)!r})"

    # -- writing ---------------------------------------------------------------------------------

    def put(self, data: bytes, tenant: str) -> ContentRef:
        """Store ``data`` for ``tenant``; returns ``ContentRef(address, size)``."""
        check_tenant(tenant)
        if not isinstance(data, bytes | bytearray | memoryview):
            raise StoreError(
                f"put() takes bytes, got {type(data).__name__}; use put_file() for a file on disk.",
                code="invalid_data",
            )
        view = memoryview(data).cast("B")
        if view.nbytes >= _local_io.PARALLEL_FROM:
            # Large: hashed while it is written and synced (the fresh copy replaces any old one,
            # so a damaged copy is repaired without comparing the bytes first).
            written: list[Path] = []
            digest = hashed_write(
                view, lambda: written.append(self._write_temp(lambda out: write_all(out, view)))
            )
            return self._commit("sha256:" + digest, view.nbytes, tenant, written[0])
        address = "sha256:" + hashlib.sha256(view).hexdigest()
        if _holds(self._blob(address), view):  # dedupe: a sound copy is there already
            with contextlib.suppress(_BlobVanished):
                return self._commit(address, view.nbytes, tenant, None)
        # Absent, or damaged on disk (even at the same size): the fresh copy replaces it.
        tmp = self._write_temp(lambda out: write_all(out, view))
        return self._commit(address, view.nbytes, tenant, tmp)

    def put_file(
        self, path: str | os.PathLike[str], tenant: str, *, progress: Progress | None = None
    ) -> ContentRef:
        """Store a file's bytes for ``tenant``, streaming: hashed while copied, never read whole.

        Memory stays a few MiB whatever the file's size; a large file is hashed and written in
        parallel (``loom_nb.store._local_io``).
        """
        check_tenant(tenant)
        source = Path(path)
        try:
            src = source.open("rb")
        except OSError as exc:
            raise StoreError(
                f"cannot read {source}: {exc.strerror}. Pass the path of a readable file.",
                code="unreadable_file",
            ) from exc
        copied: list[tuple[str, int]] = []
        with src:
            total = os.fstat(src.fileno()).st_size
            tmp = self._write_temp(
                lambda out: copied.append(
                    hashed_copy(src, out, total, progress, durable=self.durable)
                )
            )
        ((digest, size),) = copied
        return self._commit("sha256:" + digest, size, tenant, tmp)

    def delete(self, address: str, tenant: str) -> bool:
        """Remove ``tenant`` from the address's set; the blob is erased when no tenant is left.

        Returns False when that tenant had not stored the address.
        """
        check_address(address)
        check_tenant(tenant)
        with self._write() as db:
            cur = db.execute(
                "DELETE FROM content WHERE address = ? AND tenant = ?", (address, tenant)
            )
            if cur.rowcount == 0:
                return False
            left = db.execute("SELECT 1 FROM content WHERE address = ? LIMIT 1", (address,))
            if left.fetchone() is None:
                self._blob(address).unlink(missing_ok=True)
            return True

    def purge(
        self,
        address: str,
        *,
        older_than: datetime | None = None,
        keep: Callable[[str], bool] | None = None,
    ) -> bool:
        """Erase the blob and every tenant row; False when there was nothing to erase.

        With ``older_than`` nothing is erased if any tenant put the blob at or after that time.
        With ``keep``, the blob is moved aside first and ``keep(address)`` decides: True (or an
        exception) puts it back and nothing is erased.
        """
        check_address(address)
        with self._write() as db:
            (last_put,) = db.execute(
                "SELECT MAX(last_put) FROM content WHERE address = ?", (address,)
            ).fetchone()
            if (
                last_put is not None
                and older_than is not None
                and last_put >= older_than.timestamp()
            ):
                return False
            blob = self._blob(address)
            aside: Path | None = None
            if keep is not None:
                aside = self._tmp / f"erase-{address[7:]}-{uuid.uuid4().hex[:12]}"
                try:
                    os.replace(blob, aside)  # unreadable from here until keep() answers
                except FileNotFoundError:
                    aside = None
                try:
                    kept = keep(address)
                except BaseException:
                    if aside is not None:
                        os.replace(aside, blob)
                    raise
                if kept:
                    if aside is not None:
                        os.replace(aside, blob)
                    return False
            present = aside is not None or blob.exists()
            rows = db.execute("DELETE FROM content WHERE address = ?", (address,)).rowcount
            (aside or blob).unlink(missing_ok=True)
            return present or rows > 0

    # -- reading ---------------------------------------------------------------------------------

    def get(self, address: str) -> bytes:
        """The bytes at ``address``, re-hashed on every read (corruption raises, never returns).

        A corrupted file is moved aside to ``corrupt/`` so that the next put of the original
        bytes writes a sound copy.
        """
        check_address(address)
        found = self._read(address)
        if found is None:
            # A sweep may hold the blob aside while it decides (purge with keep): its write
            # lock is held until then, so wait for it and look once more.
            with self._write():
                pass
            found = self._read(address)
        if found is None:
            raise ContentNotFoundError(
                f"no blob at {address} in {self.path}. Store it first with put() or "
                "`loom-nb store put`.",
                address=address,
            )
        inode, data = found
        if "sha256:" + hashlib.sha256(data).hexdigest() != address:
            self._quarantine(address, inode)
            raise ContentIntegrityError(
                f"the blob for {address} in {self.path} does not hash to its address (corrupted on "
                "disk); it was moved to corrupt/. Store the original bytes again to repair it.",
                address=address,
            )
        return data

    def open(self, address: str, *, tenant: str) -> BlobReader:
        """The blob as a binary stream, hashed as it is read (``loom_nb.store._reader``).

        Allowed when ``tenant`` stored the blob; an absent and another tenant's blob are refused
        alike (``ContentAccessDeniedError``). Reading the last byte of a blob that does not hash
        to its address raises ``ContentIntegrityError`` (and moves the file to ``corrupt/``).
        """
        check_address(address)
        check_tenant(tenant)
        if tenant not in self.tenants(address):
            raise denied(address, tenant, str(self.path))
        file = self._open_file(address)
        if file is None:
            with self._write():  # a sweep holding it aside decides first (see get())
                pass
            file = self._open_file(address)
        if file is None:
            raise ContentNotFoundError(
                f"no blob at {address} in {self.path} (it was erased). Store it again with put().",
                address=address,
            )
        return LocalReader(
            file, address, str(self.path), lambda inode: self._quarantine(address, inode)
        )

    def has(self, address: str) -> bool:
        """Whether a blob is stored at ``address`` (indexed and present on disk)."""
        check_address(address)
        with self._lock:
            row = self._db.execute(
                "SELECT 1 FROM content WHERE address = ? LIMIT 1", (address,)
            ).fetchone()
        return row is not None and self._blob(address).exists()

    def tenants(self, address: str) -> set[str]:
        """The tenants that stored ``address`` and have not deleted it (empty when none)."""
        check_address(address)
        with self._lock:
            rows = self._db.execute("SELECT tenant FROM content WHERE address = ?", (address,))
            return {tenant for (tenant,) in rows}

    def stat(self, address: str) -> StoreEntry:
        """Size, first and last put time, and tenants of the blob at ``address``."""
        check_address(address)
        entries = self._entries(address)
        if not entries:
            raise ContentNotFoundError(f"no blob at {address} in {self.path}.", address=address)
        return entries[0]

    def list(self) -> builtins.list[StoreEntry]:
        """Every blob in the index, ordered by address."""
        return self._entries(None)

    def __iter__(self) -> Iterator[StoreEntry]:
        return iter(self.list())

    # -- internals -------------------------------------------------------------------------------

    def _blob(self, address: str) -> Path:
        digest = address[7:]
        return self._objects / digest[:2] / digest[2:]

    def _entries(self, address: str | None) -> builtins.list[StoreEntry]:
        """Rows grouped per address in Python (portable SQL: no GROUP_CONCAT / string_agg)."""
        columns = "SELECT address, tenant, size, created, last_put FROM content"
        with self._lock:
            if address is None:
                rows = self._db.execute(f"{columns} ORDER BY address").fetchall()
            else:
                rows = self._db.execute(f"{columns} WHERE address = ?", (address,)).fetchall()
        grouped: dict[str, builtins.list[tuple[str, int, float, float]]] = {}
        for key, tenant, size, created, last_put in rows:
            grouped.setdefault(key, []).append((tenant, size, created, last_put))
        return [
            StoreEntry(
                address=key,
                size=max(r[1] for r in group),
                created=datetime.fromtimestamp(min(r[2] for r in group), UTC),
                last_put=datetime.fromtimestamp(max(r[3] for r in group), UTC),
                tenants=frozenset(r[0] for r in group),
            )
            for key, group in grouped.items()
        ]

    def _read(self, address: str) -> tuple[int, bytes] | None:
        """The blob file's inode and bytes, or None when there is no file."""
        try:
            with self._blob(address).open("rb") as blob:
                return os.fstat(blob.fileno()).st_ino, blob.read()
        except FileNotFoundError:
            return None

    def _open_file(self, address: str) -> io.FileIO | None:
        try:
            return io.FileIO(self._blob(address), "rb")
        except FileNotFoundError:
            return None

    def _restore_erasures(self) -> None:
        """Put back blobs a sweep moved aside and never decided on (its process was killed)."""
        for aside in self._tmp.glob("erase-*"):
            digest = aside.name.split("-")[1]
            address = f"sha256:{digest}"
            with self._write() as db, contextlib.suppress(OSError):
                blob = self._blob(address)
                indexed = db.execute(
                    "SELECT 1 FROM content WHERE address = ? LIMIT 1", (address,)
                ).fetchone()
                if indexed is not None and not blob.exists():
                    blob.parent.mkdir(exist_ok=True)
                    os.replace(aside, blob)
                else:
                    aside.unlink()

    def _quarantine(self, address: str, inode: int) -> None:
        """Move a corrupted blob aside, unless a put replaced it since it was read."""
        blob = self._blob(address)
        aside = self.path / "corrupt" / address[7:]
        with self._write(), contextlib.suppress(OSError):
            if blob.stat().st_ino == inode:
                aside.parent.mkdir(exist_ok=True)
                os.replace(blob, aside)

    def _remove_stale_temps(self) -> None:
        """Delete temp files a crashed put left behind (a day old: no live put is that slow)."""
        cutoff = time.time() - _STALE_TEMP_SECONDS
        for leftover in self._tmp.glob("put-*"):
            with contextlib.suppress(OSError):
                if leftover.stat().st_mtime < cutoff:
                    leftover.unlink()

    def _write_temp(self, fill: Callable[[BinaryIO], object]) -> Path:
        fd, name = tempfile.mkstemp(dir=self._tmp, prefix="put-")
        try:
            with os.fdopen(fd, "wb", buffering=0) as out:
                fill(out)
                if self.durable:
                    _sync = getattr(
                        os, "fdatasync", os.fsync
                    )  # the size is all the metadata we need
                    _sync(out.fileno())
        except BaseException:
            Path(name).unlink(missing_ok=True)
            raise
        return Path(name)

    def _commit(self, address: str, size: int, tenant: str, tmp: Path | None) -> ContentRef:
        """Move the blob into place and record the tenant, in one transaction.

        With ``tmp`` the fresh copy always replaces the file: identical bytes if it was sound, a
        repair if it had been damaged. Without ``tmp`` (dedupe) the file must still be there.
        """
        now = self._clock().timestamp()
        blob = self._blob(address)
        try:
            with self._write() as db:
                if tmp is None:
                    if _size_of(blob) != size:  # deleted or damaged since put() looked
                        raise _BlobVanished
                else:
                    blob.parent.mkdir(exist_ok=True)
                    os.replace(tmp, blob)
                    tmp = None
                    if self.durable:
                        _fsync_dir(blob.parent)
                db.execute(
                    "INSERT INTO content (address, tenant, size, created, last_put)"
                    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (address, tenant)"
                    " DO UPDATE SET last_put = excluded.last_put",
                    (address, tenant, size, now, now),
                )
        finally:
            if tmp is not None:
                tmp.unlink(missing_ok=True)
        return ContentRef(address=address, size=size)

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction holding SQLite's lock (other processes wait up to the busy timeout)."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(
                    f"the content store index at {self.path} is locked or unwritable: {exc}. "
                    "Retry, or check that no process holds it open for long.",
                    code="store_busy",
                ) from exc
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")


class _BlobVanished(Exception):
    """Internal: a blob seen before the lock was deleted by the time the lock was held."""


def _holds(path: Path, data: memoryview) -> bool:
    """Whether the file at ``path`` holds exactly ``data`` (compared chunk by chunk, not hashed).

    Comparing the bytes the caller already has is what lets a put repair a copy damaged in place:
    a size check alone would take a same-size corruption for a sound duplicate.
    """
    try:
        with path.open("rb") as blob:
            if os.fstat(blob.fileno()).st_size != data.nbytes:
                return False
            offset = 0
            while chunk := blob.read(_CHUNK):
                if data[offset : offset + len(chunk)] != chunk:
                    return False
                offset += len(chunk)
            return offset == data.nbytes
    except FileNotFoundError:
        return False


def _size_of(path: Path) -> int | None:
    """The file's size, or None when it does not exist."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None


def _fsync_dir(directory: Path) -> None:
    """Make a rename durable (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
