"""Streaming a media part's bytes to the front end on demand, in chunks over the widget's comm.

Media too large to embed in a view (audio over ``max_audio_bytes``, anything over the render
limit) and the original bytes of a PDF (for the browser's own viewer) reach the browser only
when a person asks: the front end sends ``{"type": "stream", "key", "ticket"}`` (the key of a
media part *in this view*), and the kernel answers with

- ``{"state": "start", "media_type", "size", "chunks", "chunk_bytes", "sha256"}``, then
- ``chunks`` messages ``{"state": "chunk", "seq", "offset", "length"}``, each with one binary
  buffer of ``length`` bytes (``seq`` from 0, ``offset = seq * chunk_bytes``), or
- one ``{"state": "error", "code", "error"}``: ``missing`` (no such part in this view: the front
  end cannot name any other blob), ``refused`` (the viewer's tenant may not read it; an absent
  and a foreign blob read alike), ``too_large`` (over the view's ``max_stream_bytes`` budget),
  ``bad_type`` (a media type the browser may not open from a ``blob:`` URL: no HTML, no SVG),
  ``bad_bytes`` (the bytes do not look like the part's media type) or ``unreadable`` (a store
  error, a size mismatch, bad base64).

Every message echoes ``ticket`` and ``type: "stream"``. The bytes are read with the same
tenancy rule as the rest of the renderer, a chunk at a time (``loom_nb.render._resolve.open_media``:
the store's ``open``, which verifies the blob's hash as it reads). A stored blob found corrupted
(or cut short) at its end sends ``{"state": "error", "code": "unreadable"}`` in place of its last
chunk, after the chunks before it: the front end drops what it received.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

from loom_nb.errors import LoomError
from loom_nb.render._media import STREAM_TYPES
from loom_nb.render._resolve import NOT_AVAILABLE, Unavailable, open_media
from loom_nb.render._view import RenderContext
from loom_nb.widgets._media_types import check_bytes

__all__ = ["CHUNK_BYTES", "StreamMessage", "looks_like", "stream_messages"]

CHUNK_BYTES = 512 * 1024
"""Bytes per chunk message (well under Tornado's 10 MiB websocket message limit)."""

StreamMessage = tuple[dict[str, Any], list[memoryview]]
"""One comm message: its JSON content and its binary buffers."""

_SIGNATURES: dict[str, tuple[bytes, ...]] = {
    "audio/ogg": (b"OggS",),
    "audio/webm": (b"\x1a\x45\xdf\xa3",),
    "audio/flac": (b"fLaC",),
}


def looks_like(media_type: str, head: bytes) -> bool:
    """Whether ``head`` (the first bytes) looks like ``media_type``, one of ``STREAM_TYPES``."""
    kind = media_type.lower()
    if kind in {"audio/wav", "audio/x-wav", "audio/wave"}:
        return head[:4] == b"RIFF" and head[8:12] == b"WAVE"
    if kind in {"audio/mpeg", "audio/mp3"}:
        return head.startswith(b"ID3") or (len(head) > 1 and head[0] == 0xFF and head[1] >= 0xE0)
    if kind == "audio/aac":
        adts = len(head) > 1 and head[0] == 0xFF and head[1] & 0xF6 == 0xF0
        return adts or head.startswith((b"ID3", b"ADIF"))
    if kind == "audio/mp4":
        return head[4:8] == b"ftyp"
    if kind == "application/pdf":
        return b"%PDF-" in head[:1024]
    if kind in _SIGNATURES:
        return head.startswith(_SIGNATURES[kind])
    if kind in {"image/png", "image/jpeg", "image/gif", "image/webp"}:
        return check_bytes(kind, head) is None
    return False


def _error(reply: dict[str, Any], code: str, message: str) -> Iterator[StreamMessage]:
    yield {**reply, "state": "error", "code": code, "error": message}, []


def stream_messages(
    request: Any,
    ctx: RenderContext | None,
    missing: str,
    *,
    chunk_bytes: int = CHUNK_BYTES,
) -> Iterator[StreamMessage]:
    """The messages answering a front-end ``stream`` request (a dict) for a media part of ``ctx``.

    ``missing`` is the reason given when the view has no part with the request's key. A request
    that also names an ``address`` must name the address of that part. The messages are made as
    they are taken: a stored blob is read a chunk at a time (``open_media``), never whole.
    """
    if not isinstance(request, dict):
        yield from _error({"ticket": "", "type": "stream"}, "missing", missing)
        return
    reply: dict[str, Any] = {"ticket": str(request.get("ticket", "")), "type": "stream"}
    key = request.get("key")
    part = ctx.media.get(key) if ctx is not None and isinstance(key, str) else None
    if ctx is None or part is None:
        yield from _error(reply, "missing", missing)
        return
    address = part.source.ref.address if part.source.kind == "ref" else None
    if "address" in request and request["address"] != address:
        yield from _error(reply, "missing", missing)
        return
    media_type = part.media_type.lower()
    if media_type not in STREAM_TYPES:
        yield from _error(
            reply,
            "bad_type",
            f"{part.media_type} is not opened in the browser (only audio, PDF and raster images "
            "are; never HTML or SVG)",
        )
        return
    opened = open_media(
        part.source, store=ctx.store, principal=ctx.principal, limit=ctx.max_stream_bytes
    )
    if isinstance(opened, Unavailable):
        if opened.too_large:
            yield from _error(
                reply,
                "too_large",
                f"{opened.describe()}; this view streams up to {ctx.max_stream_bytes} bytes",
            )
            return
        yield from _error(reply, _refusal_code(opened), opened.describe())
        return
    with opened.stream as stream:
        try:
            # The last chunk is only handed out once the whole blob hashed to its address (the
            # store's reader raises instead); earlier chunks are sent as they are read, and a
            # failure at the end is an error message the front end drops the chunks on.
            head = stream.read(max(chunk_bytes, 1024))
            if not looks_like(media_type, head[:1024]):
                yield from _error(
                    reply, "bad_bytes", f"the bytes do not look like {part.media_type}; not opened"
                )
                return
            yield (
                {
                    **reply,
                    "state": "start",
                    "key": key,
                    "media_type": media_type,
                    "size": opened.size,
                    "chunks": -(-opened.size // chunk_bytes),
                    "chunk_bytes": chunk_bytes,
                    "sha256": opened.sha256,
                },
                [],
            )
            yield from _chunks(reply, stream, head, chunk_bytes)
        except (LoomError, OSError) as exc:
            code = exc.code if isinstance(exc, LoomError) else "read_failed"
            failure = Unavailable(f"store error ({code})", address)
            yield from _error(reply, "unreadable", failure.describe())


def _refusal_code(failure: Unavailable) -> str:
    """``refused`` when this viewer may not read it (absent and foreign alike), else ``unreadable``."""
    if failure.reason == NOT_AVAILABLE or failure.reason.startswith("no "):
        return "refused"
    return "unreadable"


def _chunks(
    reply: dict[str, Any], stream: IO[bytes], head: bytes, chunk_bytes: int
) -> Iterator[StreamMessage]:
    """``chunk_bytes`` pieces of ``head`` and then of the rest of ``stream``, numbered."""
    pending = memoryview(head)
    seq = offset = 0
    while True:
        if len(pending) < chunk_bytes:
            more = stream.read(chunk_bytes)
            if more:
                pending = memoryview(bytes(pending) + more) if pending else memoryview(more)
                continue
        if not pending:
            return
        piece = pending[:chunk_bytes]
        pending = pending[chunk_bytes:]
        content = {**reply, "state": "chunk", "seq": seq, "offset": offset, "length": len(piece)}
        yield content, [piece]
        seq += 1
        offset += len(piece)
