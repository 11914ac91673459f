"""Parts and messages turned into render-ready views: plain JSON dicts shared by HTML and widget.

A view holds only what is safe to show: text (to be escaped or set as textContent), re-encoded
PNGs as base64, an allowlisted audio type with its bytes, PDF page images, and reasons where
media is unavailable. Media too large to embed (audio over ``max_audio_bytes``, a blob over the
render limit, an image over the pixel limit) of a type a browser may open from a ``blob:`` URL
carries ``stream`` (``{"media_type", "reason"}``) instead: the static HTML shows a placeholder
and a live widget streams the bytes on demand. The static HTML renderer and the TranscriptView widget both draw from these
views, so the hostile-content tests of one cover the other's input.

View kinds: ``text``, ``fence`` (items inside an untrusted box), ``image``, ``audio``, ``file``,
``tool_use``, ``tool_result``, ``reasoning`` (the model's thinking: ``text``, ``omitted``,
``redacted``; renderers show it collapsed). A message view is ``{"role", "index", "items"}``.
Signatures and opaque payloads of reasoning parts are never part of a view. An assistant's own
text (outside fences) that holds markdown also carries ``md``: its CommonMark tree
(``_markdown.markdown_tree``), drawn instead of the literal text.
"""

from __future__ import annotations

import base64
import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from loom_nb.content import (
    AudioPart,
    FilePart,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolResultPart,
    ToolUsePart,
    to_parts,
)
from loom_nb.render._fence import fence_view, scan_fences
from loom_nb.render._html import human_size
from loom_nb.render._markdown import markdown_tree
from loom_nb.render._media import (
    AUDIO_TYPES,
    STREAM_TYPES,
    TEXT_FILE_TYPES,
    MediaFailure,
    image_png,
    pdf_view,
)
from loom_nb.render._resolve import (
    ContentReader,
    Unavailable,
    Viewer,
    check_viewer,
    fetch_bytes,
)
from loom_nb.taint import Untrusted, contains_untrusted

__all__ = [
    "RenderContext",
    "View",
    "message_view",
    "part_view",
    "prefetch_images",
    "reasoning_view",
]

View = dict[str, Any]


@dataclass
class RenderContext:
    """Who views, with which store, and the size limits of one rendering."""

    store: ContentReader | None = None
    """Where refs are read from; None shows every ref as unavailable."""
    principal: Viewer | None = None
    """The viewer; a ref is shown only when the viewer's tenant stored it."""
    thumb_px: int = 160
    """Longest side of image and first-page thumbnails."""
    full_px: int = 1280
    """Longest side of a full-size image (when embedded)."""
    full_images: bool = False
    """Embed full-size images too (static HTML); the widget fetches them on demand instead."""
    pdf_pages: int = 3
    """How many PDF pages get page images in the view."""
    page_width: int = 560
    """Width of a PDF page image."""
    max_text_chars: int = 100_000
    """Text beyond this many characters is cut, with a count of what was left out."""
    collapse_chars: int = 1500
    """Text longer than this is collapsed behind a summary."""
    max_audio_bytes: int = 4 * 1024 * 1024
    """Largest audio clip embedded as a data URL (larger clips are streamed by a live view)."""
    max_stream_bytes: int = 256 * 1024 * 1024
    """Largest blob a live view streams to the browser on demand (its budget per part)."""
    tool_names: dict[str, str] = field(default_factory=dict)
    """tool_use id -> tool name, so a result can name the call it answers."""
    tool_servers: dict[str, str] = field(default_factory=dict)
    """tool_use id -> MCP server, read from its result's ``mcp:<server>/<tool>`` origin."""
    media: dict[str, ImagePart | AudioPart | FilePart] = field(default_factory=dict)
    """view key -> media part, for the widget's on-demand full-size requests."""
    _cache: dict[tuple[str, str, str], View] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Every view a widget makes goes through here: a store or a viewer the renderer could
        # not use is refused before anything is read (the render functions check it first too,
        # naming themselves).
        check_viewer(self.store, self.principal, "a view")

    def learn_tools(self, messages: list[Message]) -> None:
        """Record the id -> name of every tool_use in ``messages`` (for result labels)."""
        for message in messages:
            if isinstance(message.content, str):
                continue
            for part in message.content:
                if isinstance(part, ToolUsePart):
                    self.tool_names[_plain(part.id)] = _plain(part.name)
                elif isinstance(part, ToolResultPart):
                    server = mcp_server_of(part)
                    if server is not None:
                        self.tool_servers[part.tool_use_id] = server


def mcp_server_of(part: ToolResultPart) -> str | None:
    """The MCP server a result came from, when its mark says so (``mcp:<server>/<tool>``)."""
    origins = [part.origin]
    if isinstance(part.content, Untrusted):
        origins.append(part.content.origin)
    elif isinstance(part.content, list):
        origins.extend(getattr(sub, "origin", None) for sub in part.content)
    for origin in origins:
        found = _MCP_ORIGIN.match(origin) if isinstance(origin, str) else None
        if found is not None:
            return found.group(1)
    return None


_MCP_ORIGIN = re.compile(r"mcp:([A-Za-z0-9_.-]{1,64})/[^/]")
"""An origin an ``MCPToolset`` sets: ``mcp:<server>/<tool>`` with a server name it accepts."""


def plain_text(value: str | Untrusted) -> str:
    """The text of a str or an ``Untrusted`` (its value as JSON when not a string; never raises)."""
    return value if isinstance(value, str) else _as_text(value.value)


_plain = plain_text


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=repr)
    except (ValueError, RecursionError):  # a cycle, or nesting deeper than the encoder goes
        return "(value not shown: it nests too deep to print)"


def text_view(text: str, ctx: RenderContext) -> View:
    """A text view: the text cut to ``max_text_chars``, collapsed when long."""
    omitted = max(0, len(text) - ctx.max_text_chars)
    shown = text[: ctx.max_text_chars] if omitted else text
    return {
        "kind": "text",
        "text": shown,
        "omitted": omitted,
        "collapsed": len(shown) > ctx.collapse_chars or shown.count("\n") > 40,
    }


def message_view(message: Message, index: int, ctx: RenderContext) -> View:
    """The view of one message: its role, its position and its items (fences grouped)."""
    tokens: list[str | View] = []
    for number, part in enumerate(to_parts(message.content)):
        if isinstance(part, TextPart) and isinstance(part.text, str) and part.origin is None:
            tokens.append(part.text)
        else:
            tokens.append(part_view(part, ctx, key=f"{index}.{number}"))
    items = scan_fences(tokens, lambda text: text_view(text, ctx))
    if message.role == "assistant":
        # Only the model's own text outside fences: untrusted spans stay literal in their box.
        for item in items:
            if item["kind"] == "text":
                tree = markdown_tree(item["text"])
                if tree is not None:
                    item["md"] = tree
    return {"role": message.role, "index": index, "items": items}


def part_view(part: Part, ctx: RenderContext, *, key: str = "0") -> View:
    """The view of one part; untrusted parts come back wrapped in a fence view."""
    if isinstance(part, TextPart):
        if isinstance(part.text, Untrusted):
            return fence_view(part.origin or part.text.origin, [text_view(_plain(part.text), ctx)])
        view = text_view(part.text, ctx)
        return fence_view(part.origin, [view]) if part.origin else view
    if isinstance(part, ToolUsePart):
        return _tool_use_view(part, ctx)
    if isinstance(part, ToolResultPart):
        return _tool_result_view(part, ctx, key)
    if isinstance(part, ReasoningPart):
        return reasoning_view(part, ctx)
    view = _media_view(part, ctx, key)
    return fence_view(part.origin, [view]) if part.origin else view


def reasoning_view(part: ReasoningPart, ctx: RenderContext) -> View:
    """The view of a reasoning part: its visible text (cut to ``max_text_chars``), never its signature."""
    text = part.text if isinstance(part.text, str) else ""
    omitted = max(0, len(text) - ctx.max_text_chars)
    return {
        "kind": "reasoning",
        "text": text[: ctx.max_text_chars],
        "omitted": omitted,
        "redacted": bool(part.redacted),
    }


def _tool_use_view(part: ToolUsePart, ctx: RenderContext) -> View:
    try:
        dumped = part.model_dump(mode="json")["input"]
        pretty = json.dumps(dumped, indent=2, ensure_ascii=False, default=repr)
    except (ValueError, RecursionError):  # pydantic's serializer and json stop at some depth
        pretty = "(input not shown: it nests too deep to print)"
    omitted = max(0, len(pretty) - ctx.max_text_chars)
    view: View = {
        "kind": "tool_use",
        "id": _plain(part.id),
        "name": _plain(part.name),
        "input": pretty[: ctx.max_text_chars],
        "omitted": omitted,
    }
    server = ctx.tool_servers.get(view["id"])
    if server is not None:
        view["server"] = server
    marks = [v.origin for v in (part.id, part.name, part.input) if isinstance(v, Untrusted)]
    if marks or contains_untrusted(part.input) is not False:
        origin = marks[0] if marks else "values inside the call's input"
        return fence_view(origin, [view])
    return view


def _tool_result_view(part: ToolResultPart, ctx: RenderContext, key: str) -> View:
    content = part.content
    tokens: list[str | View] = []
    if isinstance(content, str):
        tokens.append(content)
    elif isinstance(content, Untrusted):
        tokens.append(fence_view(content.origin, [text_view(_plain(content), ctx)]))
    else:
        for number, sub in enumerate(content):
            if isinstance(sub, TextPart) and isinstance(sub.text, str) and sub.origin is None:
                tokens.append(sub.text)
            else:
                tokens.append(part_view(sub, ctx, key=f"{key}.{number}"))
    items = scan_fences(tokens, lambda text: text_view(text, ctx))
    if part.origin:
        items = [fence_view(part.origin, items)]
    view: View = {
        "kind": "tool_result",
        "tool_use_id": part.tool_use_id,
        "tool_name": ctx.tool_names.get(part.tool_use_id),
        "is_error": part.is_error,
        "items": items,
    }
    server = ctx.tool_servers.get(part.tool_use_id) or mcp_server_of(part)
    if server is not None:
        view["server"] = server
    return view


def _media_view(part: ImagePart | AudioPart | FilePart, ctx: RenderContext, key: str) -> View:
    ctx.media[key] = part
    view = dict(_media_payload(part, ctx))
    view["key"] = key
    if isinstance(part, FilePart):
        view["name"] = part.name
    return view


def _cache_key(part: ImagePart | AudioPart | FilePart) -> tuple[str, str, str]:
    source = part.source
    where = source.ref.address if source.kind == "ref" else _digest(source.data)
    return (where, part.type, part.media_type)


def _media_payload(part: ImagePart | AudioPart | FilePart, ctx: RenderContext) -> View:
    """The view of a media part without its key and name (cached per source and type)."""
    cache_key = _cache_key(part)
    cached = ctx._cache.get(cache_key)
    if cached is not None:
        return cached
    source = part.source
    view: View = {
        "kind": part.type,
        "media_type": part.media_type,
        "address": source.ref.address if source.kind == "ref" else None,
        "size": source.ref.size if source.kind == "ref" else None,
        "unavailable": None,
    }
    data = fetch_bytes(source, store=ctx.store, principal=ctx.principal)
    if isinstance(data, Unavailable):
        if data.too_large and part.media_type.lower() in STREAM_TYPES:
            view["stream"] = _stream_offer(part.media_type, data.reason)
        else:
            view["unavailable"] = data.describe()
    else:
        view["size"] = len(data)
        if isinstance(part, ImagePart):
            _fill_image(view, data, part.media_type, ctx)
        elif isinstance(part, AudioPart):
            _fill_audio(view, data, part.media_type, ctx)
        else:
            _fill_file(view, data, part.media_type, ctx)
    ctx._cache[cache_key] = view
    return view


def prefetch_images(messages: list[Message], ctx: RenderContext) -> None:
    """Decode and re-encode the transcript's images on a few threads (Pillow releases the GIL).

    Only images: pdfium is not thread-safe, so PDFs are rendered one by one later.
    """
    images: dict[tuple[str, str, str], ImagePart] = {}
    for message in messages:
        for part in to_parts(message.content):
            subs: list[Any] = [part]
            if isinstance(part, ToolResultPart) and isinstance(part.content, list):
                subs = list(part.content)
            for sub in subs:
                if isinstance(sub, ImagePart):
                    images.setdefault(_cache_key(sub), sub)
    if len(images) < 4:
        return
    workers = max(1, min(4, (os.cpu_count() or 1)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(lambda part: _media_payload(part, ctx), images.values()))


def _digest(data: str) -> str:
    import hashlib

    return "inline:" + hashlib.sha256(data.encode("ascii", "replace")).hexdigest()


def _fill_image(view: View, data: bytes, media_type: str, ctx: RenderContext) -> None:
    if media_type.lower().startswith("image/svg"):
        view["svg_source"] = data[:4000].decode("utf-8", "replace")
        view["unavailable"] = (
            "SVG is not rendered (it can carry script); its source is shown as text"
        )
        return
    thumb = image_png(data, ctx.thumb_px)
    if isinstance(thumb, MediaFailure):
        if thumb.reason.startswith("image too large") and media_type.lower() in STREAM_TYPES:
            view["stream"] = _stream_offer(media_type, thumb.reason)
        else:
            view["unavailable"] = thumb.reason
        return
    view["thumb"], view["width"], view["height"] = thumb
    if ctx.full_images and max(thumb[1], thumb[2]) > ctx.thumb_px:
        full = image_png(data, ctx.full_px)
        if not isinstance(full, MediaFailure):
            view["full"] = full[0]


def _fill_audio(view: View, data: bytes, media_type: str, ctx: RenderContext) -> None:
    kind = media_type.lower()
    if kind not in AUDIO_TYPES:
        view["unavailable"] = "no player for this audio type"
    elif len(data) > ctx.max_audio_bytes:
        reason = f"too large to embed ({human_size(len(data))}; the embed limit is "
        view["stream"] = _stream_offer(kind, reason + f"{human_size(ctx.max_audio_bytes)})")
    else:
        view["player_type"] = kind
        view["data"] = base64.b64encode(data).decode("ascii")


def _stream_offer(media_type: str, reason: str) -> View:
    """What a view says about media a live view streams on demand (``view["stream"]``)."""
    return {"media_type": media_type.lower(), "reason": reason}


def _fill_file(view: View, data: bytes, media_type: str, ctx: RenderContext) -> None:
    kind = media_type.lower()
    if kind == "application/pdf":
        pdf = pdf_view(
            data, thumb_side=ctx.thumb_px, page_width=ctx.page_width, max_pages=ctx.pdf_pages
        )
        if isinstance(pdf, MediaFailure):
            view["unavailable"] = pdf.reason
            return
        view["pages"] = pdf.pages
        view["thumb"] = pdf.thumb
        view["page_images"] = list(pdf.page_images)
    elif kind in TEXT_FILE_TYPES or kind.startswith("text/"):
        text = data[: 4 * ctx.collapse_chars * 4].decode("utf-8", "replace")
        view["preview"] = text[: 4 * ctx.collapse_chars]
        view["preview_omitted"] = len(data) > len(view["preview"].encode("utf-8"))
