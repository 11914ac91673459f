"""``BlobReader``: what ``store.open(address, tenant=...)`` returns, a blob streamed and verified as it is read.

A reader is a binary file object (``io.RawIOBase``: ``read(n)``, ``readinto``, ``readall``, a
context manager) over one blob. Every byte it hands out goes through SHA-256 on the way; when the
last byte of the blob has been read the digest is compared with the address, and a mismatch
raises ``ContentIntegrityError`` (code ``content_corrupted``) from that same read, so the bytes
that complete a damaged blob are never returned: a caller that read to the end without an error
has the blob's true bytes, and ``verified`` says so. A stream that ends before the blob's size
(the file was truncated under the reader) raises the same error. Bytes handed out before the end
are unverified until then: a consumer that passes them on (a file being written, chunks sent to
a browser) must treat the whole as good only when the reader reached the end without raising.

Unlike a buffered file, ``read(n)`` returns exactly ``n`` bytes until the end of the blob (never
a short read in between), so fixed-size chunks (base64 in multiples of 3) line up; iterating
over a reader yields chunks of ``chunk_size`` bytes, not lines.

Memory is one chunk whatever the blob's size. The backends supply ``_fill`` (the next bytes from
the file or the HTTP body) and ``_release``; the verification is here, shared.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable

from loom_nb.errors import ContentAccessDeniedError, ContentIntegrityError

__all__ = ["CHUNK_SIZE", "BlobReader", "denied"]

CHUNK_SIZE = 1 << 20
"""Bytes a reader yields per chunk when iterated (and the backends read at a time)."""


class BlobReader(io.RawIOBase):
    """A blob's bytes as a binary stream, hashed as read; ``content_corrupted`` at the end on a mismatch.

    ``address`` and ``size`` say which blob and how long it is; ``verified`` turns True once the
    last byte has been read and matched the address. ``chunk_size`` is what iteration yields.
    """

    def __init__(
        self,
        address: str,
        size: int,
        where: str,
        *,
        chunk_size: int = CHUNK_SIZE,
        on_corrupt: Callable[[], None] | None = None,
    ) -> None:
        super().__init__()
        self.address = address
        """The blob's ``sha256:<hex>`` address."""
        self.size = size
        """The blob's length in bytes (what the store holds)."""
        self.chunk_size = chunk_size
        """Bytes per chunk when the reader is iterated."""
        self.verified = False
        """Whether every byte was read and the whole hashed to ``address``."""
        self._where = where
        self._on_corrupt = on_corrupt
        self._hash = hashlib.sha256()
        self._position = 0
        self._failed = False

    # -- what a backend supplies -----------------------------------------------------------------

    def _fill(self, view: memoryview) -> int:
        """Copy the next bytes of the blob into ``view``; how many (0 at the end of the source)."""
        raise NotImplementedError

    def _take(self, size: int) -> bytes:
        """The next ``size`` bytes as ``bytes`` (fewer only at the end of the source).

        A backend that can hand out ``bytes`` without an extra copy overrides this.
        """
        buffer = bytearray(size)
        view = memoryview(buffer)
        done = 0
        while done < size and (got := self._fill(view[done:])):
            done += got
        return bytes(buffer) if done == size else bytes(view[:done])

    def _release(self) -> None:
        """Let go of the file or the response body."""

    # -- io.RawIOBase ----------------------------------------------------------------------------

    def readable(self) -> bool:
        """Always True: a reader is for reading."""
        return True

    def tell(self) -> int:
        """How many bytes have been read so far."""
        return self._position

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        """Fill ``buffer`` with the next bytes (all of it unless the blob ends); 0 at the end.

        Raises ``ContentIntegrityError`` instead of returning the bytes that complete a blob
        which does not hash to its address, or when the source ends early.
        """
        view = memoryview(buffer).cast("B")
        wanted = self._wanted(len(view))
        done = 0
        while done < wanted:
            got = self._fill(view[done:wanted])
            if got == 0:
                break
            done += got
        try:
            self._advance(view[:done], wanted)
        except ContentIntegrityError:
            view[:done] = bytes(done)  # the failed read leaves none of its bytes behind
            raise
        return done

    def read(self, size: int | None = -1) -> bytes:
        """Up to ``size`` bytes (exactly ``size`` until the end); all that is left when negative."""
        if size is None or size < 0:
            return self.readall()
        wanted = self._wanted(size)
        data = self._take(wanted) if wanted else b""
        self._advance(memoryview(data), wanted)
        return data

    def readall(self) -> bytes:
        """Every byte not read yet, verified."""
        return self.read(self.size - self._position)

    def __iter__(self) -> BlobReader:
        """The reader itself: iterating yields chunks of ``chunk_size`` bytes, not lines."""
        if self.closed:
            raise ValueError("I/O operation on a closed blob reader")
        return self

    def __next__(self) -> bytes:
        """The next chunk of ``chunk_size`` bytes (the last may be shorter), verified at the end."""
        chunk = self.read(self.chunk_size)  # at the end: verifies (an empty blob too), then b""
        if not chunk:
            raise StopIteration
        return chunk

    def close(self) -> None:
        """Release the file or the connection (reading before the end verified nothing)."""
        if not self.closed:
            try:
                self._release()
            finally:
                super().close()

    def __repr__(self) -> str:
        state = "verified" if self.verified else f"{self._position} of {self.size} bytes read"
        return f"<BlobReader {self.address} ({state}){' closed' if self.closed else ''}>"

    # -- verification ----------------------------------------------------------------------------

    def _wanted(self, size: int) -> int:
        if self.closed:
            raise ValueError("I/O operation on a closed blob reader")
        return min(size, self.size - self._position)

    def _advance(self, data: memoryview, wanted: int) -> None:
        """Hash the bytes just read; verify at the end of the blob, or fail on a short read."""
        if data:
            self._hash.update(data)
            self._position += len(data)
        if self._position == self.size and not self.verified:
            self._verify()
        elif len(data) < wanted:
            self._fail(
                f"it ended after {self._position} of its {self.size} bytes (truncated while read)",
                quarantine=False,
            )

    def _verify(self) -> None:
        if "sha256:" + self._hash.hexdigest() == self.address:
            self.verified = True
            return
        self._fail("its bytes do not hash to its address (corrupted)", quarantine=True)

    def _fail(self, problem: str, *, quarantine: bool) -> None:
        quarantine = quarantine and self._on_corrupt is not None
        if quarantine and not self._failed and self._on_corrupt is not None:
            self._on_corrupt()
        self._failed = True
        moved = " It was moved to corrupt/." if quarantine else ""
        raise ContentIntegrityError(
            f"the blob for {self.address} in {self._where} was not returned whole: {problem}."
            f"{moved} Store the original bytes again to repair it; the bytes read so far are "
            "not to be used.",
            address=self.address,
        )


def denied(address: str, tenant: str, where: str) -> ContentAccessDeniedError:
    """The refusal of ``open`` for a tenant that did not store the blob (or an absent blob: alike)."""
    return ContentAccessDeniedError(
        f"open of {address} in {where} denied: tenant {tenant!r} has not stored it (or it is "
        "absent). Store the bytes as that tenant first.",
        address=address,
        tenant=tenant,
    )
