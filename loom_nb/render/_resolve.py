"""Fetching a media part's bytes for display, with the viewer's principal (never someone else's bytes).

The renderer reads the content store through a two-method protocol, ``ContentReader`` (``get``
and ``tenants``), which every ``loom_nb.store`` content store satisfies; ``open_media`` streams
a blob instead of reading it whole when the store has ``open`` (every content store does), for
media passed on in chunks (the widgets' streaming to the browser). A ref is shown only when
the viewer's tenant is among the tenants that stored the blob (the rule of ``StoreResolver``,
"Authorizing under dedupe"). Anything else is an ``Unavailable`` with a reason that is shown in
place of the media: no store, no principal, not available to this viewer, corrupted, size
mismatch, too large, bad base64. Fetch failures are display facts, not exceptions: a transcript
with one broken ref still renders.

Another tenant's blob and an absent blob read exactly alike (``NOT_AVAILABLE``, no tenant named),
as they do in ``StoreResolver``: a viewer must not learn from a transcript which blobs other
tenants hold. Reasons that need the bytes (corruption, size) are given only after that check.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
from dataclasses import dataclass
from typing import IO, Protocol

from loom_nb.content import DataSource, MediaSource, RefSource
from loom_nb.errors import (
    ConfigurationError,
    ContentAccessDeniedError,
    ContentNotFoundError,
    LoomError,
)

__all__ = [
    "MAX_RENDER_BYTES",
    "NOT_AVAILABLE",
    "ContentReader",
    "OpenedMedia",
    "Unavailable",
    "Viewer",
    "check_viewer",
    "fetch_bytes",
    "open_media",
]

MAX_RENDER_BYTES = 64 * 1024 * 1024
"""Largest blob the renderer reads to display (a 50 MiB PDF fits)."""

NOT_AVAILABLE = "not available to this viewer (absent, or not stored for this viewer)"
"""The one reason for an absent blob and for another tenant's blob: the two must look alike."""


class ContentReader(Protocol):
    """What the renderer needs from a content store."""

    def get(self, address: str) -> bytes:
        """The bytes stored at ``address`` (raises a ``StoreError`` when absent or corrupted)."""
        ...

    def tenants(self, address: str) -> set[str]:
        """The tenants that stored ``address``."""
        ...


class Viewer(Protocol):
    """Who looks at the transcript: anything with a ``tenant`` (``loom_nb.store.Principal``)."""

    @property
    def tenant(self) -> str:
        """The viewer's tenant."""
        ...


def check_viewer(store: object, principal: object, where: str) -> None:
    """Refuse (``invalid_argument``) a store without ``get`` / ``tenants`` or a principal without
    a string ``tenant``, naming ``where`` (the renderer's entry point, or ``RenderContext``)."""
    if store is not None and not (
        callable(getattr(store, "get", None)) and callable(getattr(store, "tenants", None))
    ):
        raise ConfigurationError(
            f"{where}: store must be a content store (get and tenants), not "
            f"{type(store).__name__}; pass loom_nb.LocalContentStore(path) or "
            "loom_nb.open_store(url), or None to show every ref as unavailable.",
            code="invalid_argument",
            argument="store",
        )
    if principal is not None and not isinstance(getattr(principal, "tenant", None), str):
        raise ConfigurationError(
            f"{where}: principal must have a tenant (loom_nb.Principal), not "
            f"{type(principal).__name__}; pass loom_nb.Principal(tenant=...), or None to show "
            "every ref as unavailable.",
            code="invalid_argument",
            argument="principal",
        )


@dataclass(frozen=True)
class Unavailable:
    """Why media cannot be shown, and which address (if any) it named."""

    reason: str
    """Short reason for people: ``NOT_AVAILABLE``, ``size mismatch`` ..."""
    address: str | None = None
    """The ref's address, shown next to the reason."""
    too_large: bool = False
    """Whether the only thing wrong is the size (the viewer may read it; it is over the limit)."""

    def describe(self) -> str:
        """``unavailable: <reason> <address>`` as shown in place of the media."""
        return f"unavailable: {self.reason}" + (f" {self.address}" if self.address else "")


def fetch_bytes(
    source: MediaSource,
    *,
    store: ContentReader | None,
    principal: Viewer | None,
    limit: int = MAX_RENDER_BYTES,
) -> bytes | Unavailable:
    """The bytes of ``source`` if this viewer may see them, else an ``Unavailable``.

    ``limit`` is the largest blob read (``MAX_RENDER_BYTES`` to display; the widgets stream up
    to their own budget). A size over it is reported only after the tenancy check.
    """
    if isinstance(source, DataSource):
        if len(source.data) > limit * 4 // 3 + 4:
            return Unavailable("inline data too large to display", too_large=True)
        try:
            return base64.b64decode(source.data, validate=True)
        except (binascii.Error, ValueError):
            return Unavailable("inline data is not valid base64")
    assert isinstance(source, RefSource)
    address = source.ref.address
    if store is None:
        return Unavailable("no content store given to the viewer", address)
    if principal is None:
        return Unavailable("no principal given to the viewer", address)
    try:
        tenants = store.tenants(address)
    except LoomError as exc:
        return Unavailable(f"store error ({exc.code})", address)
    if principal.tenant not in tenants:  # absent and foreign look alike
        return Unavailable(NOT_AVAILABLE, address)
    size = source.ref.size
    if size is not None and size > limit:
        return Unavailable(f"too large to display ({size} bytes)", address, too_large=True)
    try:
        data = store.get(address)
    except (ContentNotFoundError, ContentAccessDeniedError):
        return Unavailable(NOT_AVAILABLE, address)
    except LoomError as exc:
        return Unavailable(f"store error ({exc.code})", address)
    if size is not None and len(data) != size:
        return Unavailable(f"size mismatch (ref says {size}, store has {len(data)})", address)
    if len(data) > limit:
        return Unavailable(f"too large to display ({len(data)} bytes)", address, too_large=True)
    return data


@dataclass(frozen=True)
class OpenedMedia:
    """A media part's bytes as a stream (close it), with its size and SHA-256 known up front.

    A stored blob's stream verifies the hash as it is read: the read that would complete a
    corrupted blob raises ``content_corrupted`` instead (``loom_nb.store.BlobReader``).
    """

    stream: IO[bytes]
    """The bytes, read in chunks."""
    size: int
    """Their length."""
    sha256: str
    """Their SHA-256 in hex (the address's digest for a stored blob)."""


def open_media(
    source: MediaSource,
    *,
    store: ContentReader | None,
    principal: Viewer | None,
    limit: int = MAX_RENDER_BYTES,
) -> OpenedMedia | Unavailable:
    """``source``'s bytes as a stream if this viewer may read them, else an ``Unavailable``.

    The same rules and reasons as ``fetch_bytes`` (tenancy first, then the size against
    ``limit`` and the ref's declared size, both before any byte is read), without holding a
    stored blob in memory: the store's ``open`` streams it (a store without ``open`` is read
    with ``get``).
    """
    if isinstance(source, DataSource):
        data = fetch_bytes(source, store=store, principal=principal, limit=limit)
        if isinstance(data, Unavailable):
            return data
        return OpenedMedia(io.BytesIO(data), len(data), hashlib.sha256(data).hexdigest())
    assert isinstance(source, RefSource)
    address = source.ref.address
    opener = getattr(store, "open", None)
    if store is None or principal is None or not callable(opener):
        found = fetch_bytes(source, store=store, principal=principal, limit=limit)
        if isinstance(found, Unavailable):
            return found
        return OpenedMedia(io.BytesIO(found), len(found), address.removeprefix("sha256:"))
    size = source.ref.size
    if size is not None and size > limit:
        try:  # the tenancy check comes first, as in fetch_bytes: a size tells nothing otherwise
            allowed = principal.tenant in store.tenants(address)
        except LoomError as exc:
            return Unavailable(f"store error ({exc.code})", address)
        if not allowed:
            return Unavailable(NOT_AVAILABLE, address)
        return Unavailable(f"too large to display ({size} bytes)", address, too_large=True)
    try:
        stream = opener(address, tenant=principal.tenant)
    except (ContentNotFoundError, ContentAccessDeniedError):
        return Unavailable(NOT_AVAILABLE, address)
    except LoomError as exc:
        return Unavailable(f"store error ({exc.code})", address)
    stored: int = stream.size
    failure = None
    if size is not None and stored != size:
        failure = Unavailable(f"size mismatch (ref says {size}, store has {stored})", address)
    elif stored > limit:
        failure = Unavailable(f"too large to display ({stored} bytes)", address, too_large=True)
    if failure is not None:
        stream.close()
        return failure
    return OpenedMedia(stream, stored, address.removeprefix("sha256:"))
