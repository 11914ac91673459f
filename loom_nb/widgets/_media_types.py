"""Which uploads MediaUpload accepts, and checking the bytes agree with the claimed type.

A browser's ``file.type`` comes from the file name; the kernel sniffs the first bytes before
anything is stored, so a script renamed ``cat.png`` is refused rather than stored as an image.
SVG is refused outright (it can carry script; convert it to PNG).
"""

from __future__ import annotations

import mimetypes
from pathlib import Path

__all__ = ["ACCEPT", "SUPPORTED", "check_bytes", "guess_type", "modality", "refusal"]

SUPPORTED: dict[str, str] = {
    "image/png": "image",
    "image/jpeg": "image",
    "image/gif": "image",
    "image/webp": "image",
    "audio/wav": "audio",
    "audio/x-wav": "audio",
    "audio/mpeg": "audio",
    "audio/ogg": "audio",
    "audio/flac": "audio",
    "application/pdf": "file",
    "text/plain": "file",
    "text/markdown": "file",
    "text/csv": "file",
    "application/json": "file",
}
"""Accepted media types and the part each becomes (image, audio or file)."""

ACCEPT = ",".join(sorted(SUPPORTED)) + ",.md,.csv,.json,.txt,.mp3,.wav"
"""The file chooser's ``accept`` list."""

_EXTRA_TYPES = {
    ".md": "text/markdown",
    ".mp3": "audio/mpeg",
    ".wav": "audio/wav",
    ".webp": "image/webp",
}


def modality(media_type: str) -> str | None:
    """``image``, ``audio`` or ``file`` for a supported type, else None."""
    return SUPPORTED.get(media_type.lower())


def guess_type(name: str, claimed: str = "") -> str:
    """The media type of an upload: the claimed one when given, else from the file name."""
    claimed = claimed.strip().lower()
    if claimed and claimed != "application/octet-stream":
        return "audio/wav" if claimed == "audio/wave" else claimed
    suffix = Path(name).suffix.lower()
    return _EXTRA_TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"


def refusal(media_type: str) -> str | None:
    """Why a media type is refused (a sentence with the remedy), or None when it is accepted."""
    if media_type.startswith("image/svg"):
        return "SVG is not accepted: it can carry script. Convert it to PNG and upload that."
    if modality(media_type) is None:
        return (
            f"{media_type} is not supported. Upload an image (PNG, JPEG, GIF, WebP), audio "
            "(WAV, MP3, OGG, FLAC), a PDF, or a text file (txt, md, csv, json)."
        )
    return None


def check_bytes(media_type: str, head: bytes) -> str | None:
    """Why ``head`` (the first bytes) does not look like ``media_type``, or None when it does."""
    signatures: dict[str, tuple[bytes, ...]] = {
        "image/png": (b"\x89PNG\r\n\x1a\n",),
        "image/jpeg": (b"\xff\xd8\xff",),
        "image/gif": (b"GIF87a", b"GIF89a"),
        "application/pdf": (b"%PDF-",),
        "audio/ogg": (b"OggS",),
        "audio/flac": (b"fLaC",),
        "audio/mpeg": (b"ID3", b"\xff\xfb", b"\xff\xf3", b"\xff\xf2", b"\xff\xfa"),
    }
    ok: bool
    if media_type in signatures:
        ok = head.startswith(signatures[media_type])
    elif media_type == "image/webp":
        ok = head[:4] == b"RIFF" and head[8:12] == b"WEBP"
    elif media_type in {"audio/wav", "audio/x-wav"}:
        ok = head[:4] == b"RIFF" and head[8:12] == b"WAVE"
    else:  # text types: must be UTF-8 (a cut multi-byte character at the end is fine)
        try:
            head.decode("utf-8")
            ok = b"\x00" not in head
        except UnicodeDecodeError as exc:
            ok = exc.start >= len(head) - 3 and b"\x00" not in head
    return None if ok else f"the bytes do not look like {media_type}; the file was not stored"
