"""Media parts from files, bytes and PIL images: the plain-function faces of the part classmethods.

``image_from_path`` / ``image_from_bytes`` / ``image_from_pil``, ``audio_from_path`` and
``file_from_path`` call ``ImagePart.from_path`` and friends, and ``part_of_bytes`` picks the part
an attachment of any kind calls for. How the type is sniffed from the bytes (never the name), what
is refused, and when bytes go inline or into the store is said once, in ``loom_nb.content._media``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loom_nb.content import AudioPart, FilePart, ImagePart
from loom_nb.content._media import DEFAULT_TENANT, Modality, read_path, sniff_media_type
from loom_nb.content._parts import media_part

if TYPE_CHECKING:
    from loom_nb.store import ContentStore

__all__ = [
    "DEFAULT_TENANT",
    "audio_from_path",
    "file_from_path",
    "image_from_bytes",
    "image_from_path",
    "image_from_pil",
    "media_part",
    "part_of_bytes",
    "read_path",
    "sniff_media_type",
]


def image_from_path(
    path: Any,
    *,
    store: ContentStore | None = None,
    tenant: str = DEFAULT_TENANT,
    origin: str | None = None,
) -> ImagePart:
    """An ``ImagePart`` for the image file at ``path`` (type from the bytes)."""
    return ImagePart.from_path(path, store=store, tenant=tenant, origin=origin)


def image_from_bytes(
    data: bytes,
    media_type: str | None = None,
    *,
    store: ContentStore | None = None,
    tenant: str = DEFAULT_TENANT,
    origin: str | None = None,
) -> ImagePart:
    """An ``ImagePart`` for image bytes; a ``media_type`` given must agree with the bytes."""
    return ImagePart.from_bytes(data, media_type, store=store, tenant=tenant, origin=origin)


def image_from_pil(
    image: Any,
    *,
    format: str = "PNG",
    store: ContentStore | None = None,
    tenant: str = DEFAULT_TENANT,
    origin: str | None = None,
) -> ImagePart:
    """An ``ImagePart`` for a PIL image, encoded as ``format`` (PNG by default: lossless)."""
    return ImagePart.from_pil(image, format=format, store=store, tenant=tenant, origin=origin)


def audio_from_path(
    path: Any,
    *,
    store: ContentStore | None = None,
    tenant: str = DEFAULT_TENANT,
    origin: str | None = None,
) -> AudioPart:
    """An ``AudioPart`` for the audio file at ``path`` (type from the bytes)."""
    return AudioPart.from_path(path, store=store, tenant=tenant, origin=origin)


def file_from_path(
    path: Any,
    *,
    store: ContentStore | None = None,
    tenant: str = DEFAULT_TENANT,
    origin: str | None = None,
    name: str | None = None,
) -> FilePart:
    """A ``FilePart`` for the document at ``path`` (PDF, text ...), named after the file."""
    return FilePart.from_path(path, store=store, tenant=tenant, origin=origin, name=name)


def part_of_bytes(
    data: bytes,
    *,
    name: str | None = None,
    store: ContentStore | None = None,
    tenant: str = DEFAULT_TENANT,
    origin: str | None = None,
) -> ImagePart | AudioPart | FilePart:
    """The part the bytes call for: an image, an audio clip, or else a file (PDF, text ...)."""
    sniffed = sniff_media_type(bytes(data)) if isinstance(data, bytes | bytearray) else None
    kind = (sniffed or "").split("/")[0]
    modality: Modality = "image" if kind == "image" else "audio" if kind == "audio" else "file"
    what = repr(name) if name else "the attachment"
    return media_part(
        data, modality, store=store, tenant=tenant, origin=origin, name=name, what=what
    )
