"""Media parts from files, bytes and PIL images: the type is sniffed from the bytes, never the name.

``ImagePart.from_path`` / ``from_bytes`` / ``from_pil``, ``AudioPart.from_path`` and
``FilePart.from_path`` check their bytes here (the parts themselves are built in ``_parts``). A file called ``cat.png`` that holds a script is refused
(``MediaError``, code ``unknown_media_type``), because what a model is sent must be what the part
claims (ADR 0120 decision 6 checks the claim against the provider's capabilities; this module makes
the claim true). Images are recognised by Pillow (which parses the header and verifies the file
structure), PDF and the audio formats by their magic numbers, text by decoding it as UTF-8 with no
control characters.

Placement follows decision 5: bytes up to ``MAX_INLINE_BYTES`` travel inline as base64; larger ones
go into ``store`` and travel by ref (decision 4). With no store, oversized bytes are refused with
``OversizedInlinePartError`` rather than building a part the guard would refuse later.

Pillow is imported only when an image is asked for, so importing the core stays cheap.
"""

from __future__ import annotations

import base64
import io
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from loom_nb.content._sources import ContentRef, DataSource, MediaSource, RefSource
from loom_nb.errors import MediaError, OversizedInlinePartError
from loom_nb.limits import MAX_INLINE_BYTES

if TYPE_CHECKING:
    from loom_nb.store import ContentStore

__all__ = [
    "DEFAULT_TENANT",
    "Modality",
    "checked_media",
    "encode_pil",
    "media_source",
    "read_path",
    "sniff_media_type",
]

Modality = Literal["image", "audio", "file"]

DEFAULT_TENANT = "notebook"
"""The tenant media is stored for when the caller names none (the PromptPad's default too)."""

_TEXT_CONTROLS = frozenset(range(32)) - {9, 10, 12, 13}
_M4A_BRANDS = (b"M4A ", b"M4B ", b"M4P ", b"F4A ", b"F4B ")


def sniff_media_type(data: bytes, *, prefer: Modality | None = None) -> str | None:
    """The media type the bytes are, or None when they match no format loom_nb knows.

    ``prefer`` breaks the one real ambiguity: a WebM/Matroska container is ``audio/webm`` when
    audio is asked for, ``video/webm`` otherwise.
    """
    head = data[:64]
    if head.startswith(b"%PDF-") or b"%PDF-" in data[:1024]:
        return "application/pdf"
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "audio/wav"
    if head.startswith(b"fLaC"):
        return "audio/flac"
    if head.startswith(b"OggS"):
        return "audio/ogg"
    if head.startswith(b"ID3"):
        return "audio/mpeg"
    if len(head) >= 3 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0:
        layer = (head[1] >> 1) & 0x03
        if layer == 0 and head[1] & 0xF6 == 0xF0:
            return "audio/aac"  # ADTS
        # An MPEG audio frame header: a layer, a bitrate index that is not "bad" (15) and a
        # sample-rate index that is not "reserved" (3).
        if layer != 0 and head[2] >> 4 != 0x0F and (head[2] >> 2) & 0x03 != 0x03:
            return "audio/mpeg"
    if head[4:8] == b"ftyp":
        return "audio/mp4" if head[8:12] in _M4A_BRANDS or prefer == "audio" else "video/mp4"
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        if b"webm" in data[:64]:
            return "audio/webm" if prefer == "audio" else "video/webm"
        return "audio/x-matroska" if prefer == "audio" else "video/x-matroska"
    image = _pillow_type(data)
    if image is not None:
        return image
    if _is_text(data):
        return "text/plain"
    return None


def _pillow_type(data: bytes) -> str | None:
    """The image type Pillow reads the bytes as (header parsed, structure verified), or None."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            kind = image.format
            image.verify()
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Image.DecompressionBombError):
        return None
    except Exception:  # Pillow's plugins raise assorted errors on hostile bytes; none is an image
        return None
    return Image.MIME.get(kind or "")


def _is_text(data: bytes) -> bool:
    if not data:
        return False
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return not any(ord(ch) in _TEXT_CONTROLS for ch in text[:65536])


def read_path(path: Any) -> tuple[bytes, str]:
    """The bytes of the file at ``path`` and its name; ``MediaError(unreadable_path)`` otherwise.

    Only a regular file is read: a folder, a pipe, a device (``/dev/zero`` would never end) or a
    socket is refused by name, and the file is opened without blocking, so a pipe swapped in for
    the file meanwhile cannot stall the call either. A name the OS cannot take (a NUL, a bad
    ``__fspath__``) is refused the same way.
    """
    if not isinstance(path, str | os.PathLike):
        raise MediaError(
            f"a path is a str or os.PathLike, not {type(path).__name__}; for bytes use "
            "ImagePart.from_bytes(data) (or pass the bytes to Chat directly).",
            code="unreadable_path",
        )
    try:
        target = Path(path).expanduser()
        fd = os.open(target, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError as exc:
        raise MediaError(
            f"no file at {os.fspath(target)!r}; check the path (relative paths start at the "
            f"working directory, {os.getcwd()!r}).",
            code="unreadable_path",
            path=os.fspath(target),
        ) from exc
    except (OSError, ValueError, TypeError, RuntimeError) as exc:
        shown = repr(path)[:200]
        raise MediaError(
            f"cannot read {shown}: {getattr(exc, 'strerror', None) or exc}. Check the name and "
            "its permissions (the kernel's user must be able to read it).",
            code="unreadable_path",
            path=shown,
        ) from exc
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        what = (
            "a folder, not a file; name one file inside it"
            if stat.S_ISDIR(mode)
            else ("not a regular file (a pipe, a device or a socket); name a file")
        )
        raise MediaError(
            f"{os.fspath(target)!r} is {what}.", code="unreadable_path", path=os.fspath(target)
        )
    with os.fdopen(fd, "rb") as handle:
        try:
            data = handle.read()
        except OSError as exc:
            raise MediaError(
                f"cannot read {os.fspath(target)!r}: {exc.strerror or exc}.",
                code="unreadable_path",
                path=os.fspath(target),
            ) from exc
    return data, target.name


def media_source(
    data: bytes, *, store: ContentStore | None, tenant: str, what: str
) -> tuple[MediaSource, ContentRef | None]:
    """Inline base64 up to the cap; above it a ref through ``store`` (refused without one)."""
    if len(data) <= MAX_INLINE_BYTES:
        return DataSource(data=base64.b64encode(data).decode("ascii")), None
    if store is None:
        raise OversizedInlinePartError(
            f"{what} is {len(data):,} bytes, over the {MAX_INLINE_BYTES:,}-byte inline cap. "
            "Pass store=LocalContentStore('.loom/store') (or any content store) so it travels "
            "by ref, or make it smaller.",
            code="oversized_inline",
            size=len(data),
            limit=MAX_INLINE_BYTES,
        )
    put = getattr(store, "put", None)
    if not callable(put):
        raise MediaError(
            f"store must be a content store with put(data, tenant), not {type(store).__name__}.",
            code="invalid_media",
        )
    ref = put(data, tenant)
    if not isinstance(ref, ContentRef):
        raise MediaError(
            f"{type(store).__name__}.put returned {type(ref).__name__}, not a ContentRef.",
            code="invalid_media",
        )
    return RefSource(ref=ref), ref


def checked_media(
    data: Any,
    modality: Modality,
    *,
    media_type: str | None = None,
    tenant: str = DEFAULT_TENANT,
    origin: str | None = None,
    what: str = "the media",
) -> tuple[bytes, str]:
    """The bytes and their sniffed media type, checked for ``modality`` (and a declared type).

    ``modality`` ``"file"`` takes any sniffed type. Raises ``MediaError`` with code
    ``invalid_media``, ``unknown_media_type``, ``wrong_modality`` or ``media_type_mismatch``.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise MediaError(
            f"{what}: media bytes are bytes, not {type(data).__name__}.", code="invalid_media"
        )
    data = bytes(data)
    if not isinstance(tenant, str) or not tenant.strip():
        raise MediaError(
            f"tenant must be a non-empty string, not {tenant!r}.", code="invalid_media"
        )
    if origin is not None and not isinstance(origin, str):
        raise MediaError(f"origin must be a string or None, not {origin!r}.", code="invalid_media")
    sniffed = sniff_media_type(data, prefer=modality)
    if sniffed is None:
        raise MediaError(
            f"{what} ({len(data):,} bytes, starting {data[:8]!r}) is no format loom_nb knows: "
            "images Pillow reads (PNG, JPEG, GIF, WebP ...), PDF, WAV, MP3, AAC, OGG, FLAC, M4A, "
            "WebM, or UTF-8 text. Convert it to one of these.",
            code="unknown_media_type",
        )
    if media_type is not None:
        declared = media_type.split(";")[0].strip().lower() if isinstance(media_type, str) else ""
        if _canonical(declared) != _canonical(sniffed):
            raise MediaError(
                f"{what} was declared {media_type!r} but its bytes are {sniffed}; drop "
                "media_type= to use what the bytes are, or pass the right file.",
                code="media_type_mismatch",
                declared=str(media_type),
                sniffed=sniffed,
            )
    found = sniffed.split("/")[0]
    if modality in ("image", "audio") and found != modality:
        helper = {"image": "ImagePart.from_path / from_bytes", "audio": "AudioPart.from_path"}
        raise MediaError(
            f"{what} is {sniffed}, not {'an image' if modality == 'image' else 'audio'}; use "
            f"{helper.get(found, 'FilePart.from_path')} for it.",
            code="wrong_modality",
            sniffed=sniffed,
        )
    return data, sniffed


def _canonical(media_type: str) -> str:
    aliases = {
        "image/jpg": "image/jpeg",
        "audio/x-wav": "audio/wav",
        "audio/wave": "audio/wav",
        "audio/mp3": "audio/mpeg",
        "audio/x-flac": "audio/flac",
        "audio/m4a": "audio/mp4",
        "audio/x-m4a": "audio/mp4",
    }
    return aliases.get(media_type, media_type)


def encode_pil(image: Any, format: str = "PNG") -> bytes:
    """A ``PIL.Image.Image`` encoded as ``format`` (PNG by default: lossless)."""
    from PIL import Image

    if not isinstance(image, Image.Image):
        raise MediaError(
            f"from_pil takes a PIL.Image.Image, not {type(image).__name__}; for a file use "
            "ImagePart.from_path(path).",
            code="invalid_media",
        )
    if not isinstance(format, str) or format.upper() not in Image.SAVE:
        raise MediaError(
            f"Pillow cannot save the format {format!r}; use 'PNG', 'JPEG' or 'WEBP'.",
            code="invalid_media",
        )
    buffer = io.BytesIO()
    picture = image
    if format.upper() == "JPEG" and image.mode not in ("RGB", "L", "CMYK"):
        picture = image.convert("RGB")  # JPEG has no alpha channel or palette
    try:
        picture.save(buffer, format=format.upper())
    except (OSError, ValueError) as exc:
        raise MediaError(
            f"Pillow could not encode the image as {format}: {exc}. Try format='PNG'.",
            code="invalid_media",
        ) from exc
    return buffer.getvalue()
