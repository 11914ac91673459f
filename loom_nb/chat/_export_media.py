"""Media in a Markdown export: files beside the page, data URIs, or a description.

``MediaOut`` is the ``media(part, label)`` callback of ``render._to_markdown``. Each media part of
the transcript becomes, by mode:

- ``folder`` given (``chat.export("x.md")``): a file in ``x_files/`` beside the page, copied in
  chunks from the content store (never read whole: ``store.open``, which checks the hash as it
  reads and raises at the end of a damaged blob, so the partial file is removed)
  or decoded from the part's inline data, byte for byte, and an image link to it (PNG, JPEG, GIF,
  WebP) or a plain link (audio, PDFs, other files). The same bytes twice make one file, named by
  their hash, so exporting again rewrites the same names.
- ``inline=True``: web images as ``data:`` URIs, base64-encoded chunk by chunk as they are read;
  other media are described (a page that must stand alone carries no players or documents).
- neither (``chat.to_markdown()``): every part described: kind, type, size, address.

A file's type decides its extension from a fixed table, never from the part: SVG is written as
``.svg.txt`` and linked (opened as an image file it could run script), HTML and any unknown type
as ``.txt`` or ``.bin``, so nothing beside the page opens as an active document. A ref is read
only when the chat's tenant stored it (the renderer's rule); what cannot be read (no store,
another tenant's blob, corrupted bytes, a size that does not match the ref) is described with
the reason, in place of the media, and no partial file is left behind.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import io
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO
from urllib.parse import quote

from loom_nb.content import AudioPart, DataSource, FilePart, ImagePart, RefSource
from loom_nb.errors import ContentAccessDeniedError, ContentNotFoundError, LoomError
from loom_nb.render._html import human_size
from loom_nb.render._resolve import NOT_AVAILABLE
from loom_nb.render._to_markdown import inline_literal
from loom_nb.store import ContentStore

__all__ = ["CHUNK_BYTES", "WEB_IMAGES", "MediaOut", "extension_of", "folder_for"]

CHUNK_BYTES = 3 * 256 * 1024
"""Bytes copied or encoded at a time (a multiple of 3, so base64 chunks join without padding)."""

WEB_IMAGES = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}
"""Image types shown as images (``![...](...)``); other media are linked."""

_EXTENSIONS = {
    **WEB_IMAGES,
    "image/svg+xml": "svg.txt",
    "application/pdf": "pdf",
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
    "audio/ogg": "ogg",
    "audio/webm": "webm",
    "audio/flac": "flac",
    "audio/aac": "aac",
    "audio/mp4": "m4a",
    "text/plain": "txt",
    "text/csv": "csv",
    "application/json": "json",
}

MediaPart = ImagePart | AudioPart | FilePart


def extension_of(media_type: str) -> str:
    """The extension a file of ``media_type`` is written with (``txt`` for other text, else ``bin``)."""
    kind = media_type.lower()
    return _EXTENSIONS.get(kind) or ("txt" if kind.startswith("text/") else "bin")


class _Unreadable(Exception):
    """The bytes of a part cannot be read for this export (the reason is the message)."""


class MediaOut:
    """What stands for each media part of a Markdown export (see the module docstring)."""

    def __init__(
        self,
        store: Callable[[], ContentStore | None],
        tenant: str,
        *,
        folder: Path | None = None,
        inline: bool = False,
    ) -> None:
        self._store = store
        self._tenant = tenant
        self._folder = folder
        self._inline = inline
        self._written: dict[str, str] = {}  # source key -> file name in the folder
        self.files: list[Path] = []
        """The files written so far (each once)."""

    def __call__(self, part: MediaPart, label: str) -> Iterator[str]:
        """The Markdown chunks for ``part`` (``label``: its escaped description)."""
        kind = part.media_type.lower()
        label = f"{label} · {inline_literal(human_size(_size_of(part)))}"
        where = f" · {part.source.ref.address}" if isinstance(part.source, RefSource) else ""
        if self._folder is not None:
            try:
                name = self._file(part)
            except _Unreadable as exc:
                yield f"*{label} · {inline_literal(f'not exported: {exc}{where}')}*\n"
                return
            target = quote(f"{self._folder.name}/{name}")
            bang = "!" if kind in WEB_IMAGES else ""
            yield f"{bang}[{label}]({target})\n"
        elif self._inline and kind in WEB_IMAGES:
            try:
                stream = self._open(part)
            except _Unreadable as exc:
                yield f"*{label} · {inline_literal(f'not embedded: {exc}{where}')}*\n"
                return
            with stream:  # a stream that finds its bytes corrupted at the end raises: no page
                yield f"![{label}](data:{kind};base64,"
                while chunk := stream.read(CHUNK_BYTES):
                    yield base64.b64encode(chunk).decode("ascii")
            yield ")\n"
        else:
            yield f"*{label}{inline_literal(where)}*\n"

    # -- reading ---------------------------------------------------------------------------------

    def _open(self, part: MediaPart) -> IO[bytes]:
        """A binary stream of the part's bytes, or ``_Unreadable`` with the reason."""
        source = part.source
        if isinstance(source, DataSource):
            try:
                return io.BytesIO(base64.b64decode(source.data, validate=True))
            except (binascii.Error, ValueError):
                raise _Unreadable("its inline data is not valid base64") from None
        assert isinstance(source, RefSource)
        address = source.ref.address
        store = self._store()
        if store is None:
            raise _Unreadable("no content store holds it")
        try:
            if self._tenant not in store.tenants(address):  # absent and foreign look alike
                raise _Unreadable(NOT_AVAILABLE)
            opener = getattr(store, "open", None)
            if callable(opener):  # every content store: streams, checking the hash as it reads
                stream: IO[bytes] = opener(address, tenant=self._tenant)
                return stream
            return io.BytesIO(store.get(address))  # a store of another make, without open
        except (ContentNotFoundError, ContentAccessDeniedError):  # erased since tenants() said
            raise _Unreadable(NOT_AVAILABLE) from None
        except LoomError as exc:
            raise _Unreadable(f"store error ({exc.code})") from None

    # -- writing ---------------------------------------------------------------------------------

    def _file(self, part: MediaPart) -> str:
        """Write the part's bytes into the folder (once per source); the file's name."""
        assert self._folder is not None
        source = part.source
        if isinstance(source, RefSource):
            key, digest = source.ref.address, source.ref.address.removeprefix("sha256:")
        else:
            digest = hashlib.sha256(source.data.encode("ascii", "replace")).hexdigest()
            key = "inline:" + digest
        name = f"{part.type}-{digest[:16]}.{extension_of(part.media_type)}"
        if self._written.get(key) == name:
            return name
        expected = source.ref.size if isinstance(source, RefSource) else None
        target = self._folder / name
        temp = target.with_name(f".{name}.partial")
        stream = self._open(part)  # before the folder is made: an unreadable part makes none
        try:
            with stream:
                self._folder.mkdir(exist_ok=True)
                with temp.open("wb") as out:
                    shutil.copyfileobj(stream, out, CHUNK_BYTES)
                    written = out.tell()
            if expected is not None and written != expected:
                raise _Unreadable(
                    f"size mismatch (the ref says {expected}, the store has {written})"
                )
            os.replace(temp, target)
        except LoomError as exc:  # e.g. content_corrupted, raised by a stream at its end
            raise _Unreadable(f"store error ({exc.code})") from None
        finally:
            with contextlib.suppress(FileNotFoundError):
                temp.unlink()
        self._written[key] = name
        self.files.append(target)
        return name


def _size_of(part: MediaPart) -> int | None:
    """The part's size in bytes: the ref's, or the inline data's decoded length."""
    source = part.source
    if isinstance(source, RefSource):
        return source.ref.size
    data = source.data
    return len(data) * 3 // 4 - (len(data) - len(data.rstrip("="))) if data else 0


_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def folder_for(page: Path) -> Path:
    """The folder a Markdown page's media files go in: ``<stem>_files`` beside it."""
    stem = _SAFE_NAME.sub("-", page.stem).strip("-") or "export"
    return page.with_name(f"{stem}_files")
