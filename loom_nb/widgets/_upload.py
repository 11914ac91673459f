"""MediaUpload: browser files into the content store in chunks, handed back as ready parts.

The stock FileUpload sends a whole file in one websocket message and silently loses anything
over Tornado's 10 MiB message limit. Here the front end sends ``begin``, then 1 MiB ``chunk``
messages (binary buffers), each acknowledged before the next is sent, then ``end``. The kernel
writes chunks to a temporary file, checks the size and the first bytes against the media type,
and stores the file for ``tenant``; ``upload.parts`` then holds an ImagePart / AudioPart /
FilePart with a RefSource (address and size). ``add_path`` does the same for a file already on
the server. Unsupported types are refused with a message that says what is accepted.

An upload's temporary file is named after its kernel's process id (``loom-upload-<pid>-...``).
A kernel killed mid-upload (``kill -9``, the out-of-memory killer, a crash) cannot remove its
file, of up to ``MAX_UPLOAD_BYTES``; the first ``MediaUpload`` of a later kernel removes every
such file whose process is gone and that nothing wrote to for ``STALE_UPLOAD_SECONDS``
(``sweep_stale_uploads``).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import re
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import traitlets

from loom_nb.content import AudioPart, ContentRef, FilePart, ImagePart, RefSource
from loom_nb.errors import ContentValidationError, LoomError, StoreError
from loom_nb.render._html import B64_PATTERN, STYLE, data_url, esc, human_size
from loom_nb.render._media import MediaFailure, image_png, pdf_view
from loom_nb.widgets._base import StaticFallbackWidget, esm_of
from loom_nb.widgets._media_types import ACCEPT, check_bytes, guess_type, modality, refusal

__all__ = [
    "CHUNK_BYTES",
    "MAX_UPLOAD_BYTES",
    "STALE_UPLOAD_SECONDS",
    "MediaUpload",
    "sweep_stale_uploads",
]

_STATIC = Path(__file__).parent / "static"

CHUNK_BYTES = 1024 * 1024
"""Bytes per chunk message (well under the server's 10 MiB websocket message limit)."""

MAX_UPLOAD_BYTES = 512 * 1024 * 1024
"""Largest file accepted (a declared size above it is refused before any chunk is sent)."""

STALE_UPLOAD_SECONDS = 10 * 60
"""A temporary upload file nothing wrote to for this long, whose kernel is gone, is removed by
``sweep_stale_uploads`` (an upload in flight writes a chunk every few milliseconds)."""

_PREFIX = "loom-upload-"
_OWNED = re.compile(re.escape(_PREFIX) + r"(\d+)-")
"""A temporary file of this version: the pid of the kernel that wrote it comes first."""
_ORPHAN_SECONDS = 24 * 60 * 60
"""An older version's file (no pid in its name) is removed when untouched for a day."""

UploadPart = ImagePart | AudioPart | FilePart


@dataclass
class _Incoming:
    name: str
    media_type: str
    size: int
    file: BinaryIO
    path: str
    received: int = 0
    next_index: int = 0


def _discard(incoming: _Incoming) -> None:
    """Close an unfinished upload's temporary file and remove it."""
    incoming.file.close()
    Path(incoming.path).unlink(missing_ok=True)


def _discard_all(incoming: dict[str, _Incoming]) -> None:
    """Discard every unfinished upload in ``incoming`` (emptying it)."""
    while incoming:
        _discard(incoming.popitem()[1])


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (another user's counts: it may not be signalled)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):  # OverflowError: not a pid this system can have
        return True
    return True


def sweep_stale_uploads(folder: str | os.PathLike[str] | None = None) -> list[str]:
    """Remove the temporary files of uploads whose kernel died mid-upload; return their paths.

    ``folder`` is the temporary folder (default: ``tempfile.gettempdir()``, where uploads are
    written). A file is removed when its kernel's process is gone and nothing wrote to it for
    ``STALE_UPLOAD_SECONDS``: a live kernel's uploads, another user's and one still being
    written by a process this system cannot see (another container sharing the folder) are
    left alone. A file of an older version, with no pid in its name, is removed once untouched
    for a day. Where processes cannot be asked about (not POSIX), the day's rule applies to
    every file. Files that cannot be read or removed are skipped.
    """
    where = os.fspath(folder) if folder is not None else tempfile.gettempdir()
    now = time.time()
    removed: list[str] = []
    try:
        entries = list(os.scandir(where))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(_PREFIX):
            continue
        owned = _OWNED.match(entry.name)
        pid = int(owned.group(1)) if owned is not None and os.name == "posix" else None
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            idle = now - entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        if pid is None:
            stale = idle > _ORPHAN_SECONDS
        else:
            stale = pid != os.getpid() and idle > STALE_UPLOAD_SECONDS and not _alive(pid)
        if stale:
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
                removed.append(entry.path)
    return removed


_SWEPT: set[str] = set()
_SWEPT_LOCK = threading.Lock()


def _sweep_once() -> None:
    """``sweep_stale_uploads`` of the temporary folder, once per process and folder."""
    folder = tempfile.gettempdir()
    with _SWEPT_LOCK:
        if folder in _SWEPT:
            return
        _SWEPT.add(folder)
    sweep_stale_uploads(folder)


class MediaUpload(StaticFallbackWidget):
    """Upload images, audio, PDFs and text files into ``store`` for ``tenant``.

    ``upload.parts`` lists the parts made so far, ready to put in a ``Message``. Saved outputs
    (and GitHub) show the static fallback: each upload's name, type, size, ref address and
    thumbnail, and the last refusal.
    """

    _esm = esm_of(("icons.js", "upload.js"))
    _css = (_STATIC / "upload.css").read_text(encoding="utf-8")

    accept = traitlets.Unicode(ACCEPT).tag(sync=True)
    """The file chooser's accepted types."""
    chunk_size = traitlets.Int(CHUNK_BYTES).tag(sync=True)
    """Bytes per chunk the front end sends."""
    uploads: traitlets.List[dict[str, Any]] = traitlets.List().tag(sync=True)
    """One display dict per stored upload: name, media type, size, address, thumbnail."""
    error = traitlets.Unicode("").tag(sync=True)
    """The last refusal, for people ("" when the last upload succeeded)."""

    def __init__(self, store: Any, tenant: str, **kwargs: Any) -> None:
        if not hasattr(store, "put"):
            raise ContentValidationError(
                f"MediaUpload needs a content store with put(), got {type(store).__name__}; "
                "pass loom_nb.LocalContentStore(path).",
                code="invalid_store",
            )
        super().__init__(**kwargs)
        self._store = store
        self._tenant = tenant
        self._parts: list[UploadPart] = []
        self._incoming: dict[str, _Incoming] = {}
        # An upload the browser never ended (the page reloaded or closed mid-file) has an open
        # temporary file of up to MAX_UPLOAD_BYTES: removed by close(), when the widget is
        # collected, or when the kernel exits.
        weakref.finalize(self, _discard_all, self._incoming)
        # One a killed kernel could not remove is removed by the next kernel's first upload.
        _sweep_once()
        self.on_msg(self._on_custom_msg)

    def close(self) -> None:
        """Close the widget, removing the temporary files of uploads still in flight."""
        incoming = getattr(self, "_incoming", None)  # None: the constructor refused its input
        if incoming is not None:
            _discard_all(incoming)
        super().close()

    @property
    def parts(self) -> list[UploadPart]:
        """The uploaded files as parts with ref sources, oldest first."""
        return list(self._parts)

    def __repr__(self) -> str:
        count = len(self._parts)
        return f"MediaUpload({count} upload{'s' if count != 1 else ''}, tenant={self._tenant!r})"

    def to_static_html(self) -> str:
        """The uploads as sanitizer-safe HTML: a list of name, type, size, ref and thumbnail."""
        count = len(self.uploads)
        head = (
            f"media upload · {count} upload{'s' if count != 1 else ''} · tenant {self._tenant}"
            + ("" if count else " · nothing uploaded yet (run the cell to choose files)")
        )
        rows = "".join(_static_row(item) for item in self.uploads)
        error = (
            f'<div class="loom-up-error" style="{STYLE["error_label"]}">refused: {esc(self.error)}</div>'
            if self.error
            else ""
        )
        listing = f'<ul style="margin:4px 0;padding-left:1.4em">{rows}</ul>' if rows else ""
        return (
            f'<div class="loom-upload" style="{STYLE["transcript"]}">'
            f'<div class="loom-header" style="{STYLE["role"]}">{esc(head)}</div>{listing}{error}</div>'
        )

    # -- server files ----------------------------------------------------------------------------

    def add_path(self, path: str | os.PathLike[str], media_type: str | None = None) -> UploadPart:
        """Store a file from the server's disk and add its part (refusing unsupported types)."""
        source = Path(path)
        kind = guess_type(source.name, media_type or "")
        why = refusal(kind)
        try:
            with source.open("rb") as handle:
                head = handle.read(64)
        except OSError as exc:
            raise StoreError(
                f"cannot read {source}: {exc.strerror}. Pass the path of a readable file.",
                code="unreadable_file",
            ) from exc
        why = why or check_bytes(kind, head)
        if why:
            self.error = f"{source.name}: {why}"
            raise ContentValidationError(self.error, code="unsupported_upload", path=str(source))
        return self._store_file(source, source.name, kind)

    # -- chunked browser uploads -----------------------------------------------------------------

    def _on_custom_msg(self, _widget: Any, content: Any, buffers: Any) -> None:
        if isinstance(content, dict):
            self.send(self.handle(content, list(buffers or [])))

    def handle(self, msg: dict[str, Any], buffers: list[Any] | None = None) -> dict[str, Any]:
        """Answer one front-end message (``begin`` / ``chunk`` / ``end`` / ``cancel``)."""
        kind, uid = msg.get("type"), str(msg.get("upload", ""))
        try:
            if kind == "begin":
                return self._begin(uid, msg)
            if kind == "chunk":
                return self._chunk(uid, msg, buffers or [])
            if kind == "end":
                return self._end(uid)
            if kind == "cancel":
                self._drop(uid)
                return {"type": "cancelled", "upload": uid}
        except LoomError as exc:
            self._drop(uid)
            return self._refuse(uid, exc.message)
        return self._refuse(uid, f"unknown message type {kind!r}")

    def _refuse(self, uid: str, reason: str) -> dict[str, Any]:
        self.error = reason
        return {"type": "refused", "upload": uid, "reason": reason}

    def _begin(self, uid: str, msg: dict[str, Any]) -> dict[str, Any]:
        name = str(msg.get("name", "upload"))[:255]
        size = msg.get("size")
        kind = guess_type(name, str(msg.get("media_type", "")))
        why = refusal(kind)
        if why:
            return self._refuse(uid, f"{name}: {why}")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            return self._refuse(uid, f"{name}: the size must be a non-negative integer")
        if size > MAX_UPLOAD_BYTES:
            return self._refuse(
                uid, f"{name}: {size} bytes is over the {MAX_UPLOAD_BYTES}-byte limit"
            )
        self._drop(uid)
        handle, path = tempfile.mkstemp(prefix=f"{_PREFIX}{os.getpid()}-")
        self._incoming[uid] = _Incoming(name, kind, size, os.fdopen(handle, "w+b"), path)
        return {"type": "ack", "upload": uid, "received": 0, "size": size}

    def _chunk(self, uid: str, msg: dict[str, Any], buffers: list[Any]) -> dict[str, Any]:
        incoming = self._incoming.get(uid)
        if incoming is None:
            return self._refuse(uid, "a chunk arrived for an upload that was not begun")
        if msg.get("index") != incoming.next_index:
            self._drop(uid)
            return self._refuse(
                uid, f"{incoming.name}: chunk {msg.get('index')} arrived out of order"
            )
        if buffers:
            data = bytes(buffers[0])
        else:
            try:
                data = base64.b64decode(str(msg.get("data", "")), validate=True)
            except (binascii.Error, ValueError):
                self._drop(uid)
                return self._refuse(uid, f"{incoming.name}: a chunk was not valid base64")
        if incoming.received + len(data) > incoming.size:
            self._drop(uid)
            return self._refuse(uid, f"{incoming.name}: more bytes arrived than the declared size")
        if incoming.received == 0 and data:
            why = check_bytes(incoming.media_type, data[:64])
            if why:
                self._drop(uid)
                return self._refuse(uid, f"{incoming.name}: {why}")
        incoming.file.write(data)
        incoming.received += len(data)
        incoming.next_index += 1
        return {"type": "ack", "upload": uid, "received": incoming.received, "size": incoming.size}

    def _end(self, uid: str) -> dict[str, Any]:
        incoming = self._incoming.get(uid)
        if incoming is None:
            return self._refuse(uid, "an upload ended that was not begun")
        if incoming.received != incoming.size:
            self._drop(uid)
            return self._refuse(
                uid,
                f"{incoming.name}: {incoming.received} of {incoming.size} bytes arrived; try again",
            )
        incoming.file.close()
        try:
            part = self._store_file(Path(incoming.path), incoming.name, incoming.media_type)
        finally:
            self._drop(uid)
        address = part.source.ref.address if isinstance(part.source, RefSource) else ""
        return {"type": "done", "upload": uid, "address": address}

    def _drop(self, uid: str) -> None:
        incoming = self._incoming.pop(uid, None)
        if incoming is not None:
            _discard(incoming)

    # -- storing ---------------------------------------------------------------------------------

    def _store_file(self, path: Path, name: str, media_type: str) -> UploadPart:
        if hasattr(self._store, "put_file"):
            ref: ContentRef = self._store.put_file(path, self._tenant)
        else:
            ref = self._store.put(path.read_bytes(), self._tenant)
        source = RefSource(ref=ContentRef(address=ref.address, size=ref.size))
        part: UploadPart
        kind = modality(media_type)
        if kind == "image":
            part = ImagePart(media_type=media_type, source=source)
        elif kind == "audio":
            part = AudioPart(media_type=media_type, source=source)
        else:
            part = FilePart(media_type=media_type, source=source, name=name)
        self._parts.append(part)
        self.uploads = [*self.uploads, _display(path, name, media_type, ref)]
        self.error = ""
        return part


def _display(path: Path, name: str, media_type: str, ref: ContentRef) -> dict[str, Any]:
    thumb: str | None = None
    if media_type.startswith("image/") and (ref.size or 0) <= 64 * 1024 * 1024:
        made = image_png(path.read_bytes(), 96)
        thumb = None if isinstance(made, MediaFailure) else made[0]
    elif media_type == "application/pdf":
        pdf = pdf_view(path.read_bytes(), thumb_side=96, page_width=96, max_pages=0)
        thumb = None if isinstance(pdf, MediaFailure) else pdf.thumb
    return {
        "name": name,
        "media_type": media_type,
        "size": ref.size,
        "address": ref.address,
        "thumb": thumb,
    }


def _static_row(item: dict[str, Any]) -> str:
    thumb = item.get("thumb")
    image = ""
    if isinstance(thumb, str) and B64_PATTERN.fullmatch(thumb):
        alt = esc(f"thumbnail of {item.get('name', '')}")
        image = (
            f'<img alt="{alt}" style="max-width:96px;max-height:96px;display:block" '
            f'src="{data_url("image/png", thumb)}">'
        )
    facts = " · ".join(
        [
            str(item.get("media_type", "")),
            human_size(item.get("size")),
            f"ref {item.get('address', '')}",
        ]
    )
    return (
        f'<li style="margin:4px 0">{image}<span style="font-weight:bold">{esc(str(item.get("name", "")))}</span>'
        f'<div style="{STYLE["meta"]}">{esc(facts)}</div></li>'
    )
