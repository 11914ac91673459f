"""The local store's byte paths: a verified reader over a blob file, and writes hashed in parallel.

``LocalReader`` is the ``BlobReader`` of a blob file (its size from the open file, so a file
replaced by a put after the open is read whole from the inode that was opened).

A put's cost is hashing the bytes and writing them durably (write + fsync). Both release the
GIL, so for blobs of ``PARALLEL_FROM`` bytes and more they run side by side: ``hashed_write``
hashes in a second thread while the caller writes and syncs; ``hashed_copy`` (``put_file``)
reads a file a chunk at a time into a small ring of buffers and hashes each chunk while a
writing thread writes it (one hand-off per chunk; a third thread for the hash was slower on two
busy cores). Memory is the ring (``RING`` x ``COPY_CHUNK`` bytes),
whatever the file's size; smaller blobs take the plain sequential path (a thread costs more than
it saves there).
"""

from __future__ import annotations

import hashlib
import io
import os
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import BinaryIO

from loom_nb.store._protocol import Progress
from loom_nb.store._reader import CHUNK_SIZE, BlobReader

__all__ = [
    "COPY_CHUNK",
    "PARALLEL_FROM",
    "RING",
    "SYNC_EVERY",
    "LocalReader",
    "hashed_copy",
    "hashed_write",
    "write_all",
]

PARALLEL_FROM = 4 << 20
"""Blobs at least this large are hashed in parallel with their write."""

COPY_CHUNK = 4 << 20
"""Bytes ``put_file`` reads at a time on the parallel path."""

RING = 4
"""Buffers of ``COPY_CHUNK`` bytes in flight on that path (its whole memory)."""

SYNC_EVERY = 16 << 20
"""A durable ``put_file`` syncs what it wrote every this many bytes (the disk works meanwhile)."""

_datasync = getattr(os, "fdatasync", os.fsync)  # the size is all the metadata a blob needs


class LocalReader(BlobReader):
    """A blob file read through a ``BlobReader`` (see ``loom_nb.store._reader``)."""

    def __init__(
        self, file: io.FileIO, address: str, where: str, on_corrupt: Callable[[int], None]
    ) -> None:
        stat = os.fstat(file.fileno())
        self._file = file
        self.inode = stat.st_ino
        """The inode read (a quarantine moves the file aside only if it is still this one)."""
        super().__init__(
            address, stat.st_size, where, chunk_size=CHUNK_SIZE, on_corrupt=self._corrupt
        )
        self._quarantine = on_corrupt

    def _corrupt(self) -> None:
        self._quarantine(self.inode)

    def _fill(self, view: memoryview) -> int:
        return self._file.readinto(view) or 0

    def _take(self, size: int) -> bytes:
        data = self._file.read(size) or b""
        if 0 < len(data) < size:  # a file read may stop short: gather the rest
            parts, got = [data], len(data)
            while got < size and (more := self._file.read(size - got)):
                parts.append(more)
                got += len(more)
            data = b"".join(parts)
        return data

    def _release(self) -> None:
        self._file.close()


def write_all(out: BinaryIO, view: memoryview) -> None:
    """Write every byte of ``view`` (a raw file may take fewer per call)."""
    while view:
        written = out.write(view)
        view = view[written or 0 :]


def hashed_write(view: memoryview, write: Callable[[], object]) -> str:
    """``write()`` (the caller's write + fsync of ``view``) with ``view`` hashed meanwhile; the hex digest."""
    if view.nbytes < PARALLEL_FROM:
        digest = hashlib.sha256(view).hexdigest()
        write()
        return digest
    result: list[str] = []
    hasher = threading.Thread(
        target=lambda: result.append(hashlib.sha256(view).hexdigest()),
        name="loom-store-hash",
        daemon=True,
    )
    hasher.start()
    try:
        write()
    finally:
        hasher.join()
    return result[0]


def hashed_copy(
    src: io.BufferedIOBase,
    out: BinaryIO,
    total: int,
    progress: Progress | None,
    *,
    durable: bool = False,
) -> tuple[str, int]:
    """Copy ``src`` into ``out`` while hashing it; the hex digest and the byte count.

    From ``PARALLEL_FROM`` bytes on, a second thread writes each chunk while this one hashes it
    and reads the next; the bytes hashed are exactly the bytes written. ``durable``: the writer
    also syncs every ``SYNC_EVERY`` bytes, so the disk flushes while the hash goes on and the
    caller's final sync has only the tail left.
    """
    digest = hashlib.sha256()
    size = 0
    if total < PARALLEL_FROM:
        view = memoryview(bytearray(min(CHUNK_SIZE, max(total, 1))))
        while n := src.readinto(view):
            digest.update(view[:n])
            write_all(out, view[:n])
            size += n
            if progress is not None:
                progress(size, total)
        return digest.hexdigest(), size
    ring = [memoryview(bytearray(COPY_CHUNK)) for _ in range(RING)]
    pending: deque[tuple[int, Future[None]]] = deque()
    unsynced = 0

    def write(chunk: memoryview) -> None:
        nonlocal unsynced  # only the writer thread touches it
        write_all(out, chunk)
        unsynced += len(chunk)
        if durable and unsynced >= SYNC_EVERY:
            _datasync(out.fileno())
            unsynced = 0

    with ThreadPoolExecutor(1, thread_name_prefix="loom-store-write") as writer:

        def retire() -> None:
            nonlocal size
            n, written = pending.popleft()
            written.result()
            size += n
            if progress is not None:
                progress(size, total)

        try:
            slot = 0
            while True:
                if len(pending) == RING:
                    retire()  # the oldest buffer is free again once written
                view = ring[slot]
                slot = (slot + 1) % RING
                n = src.readinto(view)
                if not n:
                    break
                chunk = view[:n]
                pending.append((n, writer.submit(write, chunk)))
                digest.update(chunk)  # while the writer writes it
            while pending:
                retire()
        except BaseException:
            for _, written in pending:
                written.cancel()
            raise
    return digest.hexdigest(), size
