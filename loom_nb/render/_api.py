"""The public renderer: part, message and transcript to HTML strings, and a standalone page.

Pure functions: the same input, store contents and principal give the same string. The string is
the static form of a transcript (what saved notebooks, GitHub, nbviewer and exports show); the
TranscriptView widget draws the same views live.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from loom_nb._args import check_type
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
)
from loom_nb.errors import ConfigurationError, ContentValidationError
from loom_nb.render._html import STYLE, esc
from loom_nb.render._resolve import ContentReader, Viewer, check_viewer
from loom_nb.render._source import Transcript, transcript_of
from loom_nb.render._static import anchored, html_of_message, html_of_view
from loom_nb.render._view import (
    RenderContext,
    View,
    message_view,
    part_view,
    plain_text,
    prefetch_images,
    text_view,
)
from loom_nb.taint import Untrusted

__all__ = [
    "render_message",
    "render_part",
    "render_transcript",
    "to_html",
    "transcript_header",
    "transcript_views",
    "with_approvals",
]


def render_part(
    part: Part, *, store: ContentReader | None = None, principal: Viewer | None = None
) -> str:
    """One part as HTML: text escaped, media re-encoded or marked unavailable, untrusted boxed."""
    check_viewer(store, principal, "render_part()")
    check_type(part, _PART_TYPES, name="part", where="render_part()", error=ContentValidationError)
    return html_of_view(part_view(part, RenderContext(store=store, principal=principal)))


def render_message(
    message: Message,
    index: int = 0,
    *,
    store: ContentReader | None = None,
    principal: Viewer | None = None,
    context: RenderContext | None = None,
) -> str:
    """One message as a card headed by its role and position (``index`` counts from 0)."""
    check_viewer(store, principal, "render_message()")
    message = _as_message(message)
    check_type(
        message, Message, name="message", where="render_message()", error=ContentValidationError
    )
    check_type(index, int, name="index", where="render_message()", error=ConfigurationError)
    check_type(
        context,
        RenderContext,
        name="context",
        where="render_message()",
        error=ConfigurationError,
        optional=True,
    )
    ctx = context or RenderContext(store=store, principal=principal)
    if context is None:
        ctx.learn_tools([message])
    return html_of_message(message_view(message, index, ctx))


def transcript_views(transcript: Transcript, ctx: RenderContext) -> list[View]:
    """The message views of ``transcript`` (a system card first when it has a system prompt)."""
    ctx.learn_tools(transcript.messages)
    prefetch_images(transcript.messages, ctx)
    views: list[View] = []
    if transcript.system is not None:
        system = transcript.system
        item = (
            {
                "kind": "fence",
                "origin": system.origin,
                "closed": True,
                "items": [text_view(plain_text(system), ctx)],
            }
            if isinstance(system, Untrusted)
            else text_view(system, ctx)
        )
        views.append({"role": "system", "index": -1, "items": [item]})
    for number, message in enumerate(transcript.messages):
        view = message_view(message, number, ctx)
        if number in transcript.stats:
            view["stats"] = dict(transcript.stats[number])
        views.append(view)
    return with_approvals(views, transcript.approvals) if transcript.approvals else views


def with_approvals(views: list[View], approvals: dict[str, dict[str, Any]]) -> list[View]:
    """``views`` with each tool call's ``approval`` set from ``approvals`` (call id -> state).

    Returns new dicts along every changed path (the old views are left as they were), so a
    widget that reassigns the result redraws only the cards whose approval changed.
    """

    def item(view: View) -> View:
        kind = view.get("kind")
        if kind == "tool_use":
            state = approvals.get(str(view.get("id")))
            if state == view.get("approval"):
                return view
            changed = {k: v for k, v in view.items() if k != "approval"}
            if state is not None:
                changed["approval"] = dict(state)
            return changed
        inner = view.get("items")
        if isinstance(inner, list) and kind in {"fence", None}:
            new = [item(v) for v in inner]
            if any(a is not b for a, b in zip(new, inner, strict=True)):
                return {**view, "items": new}
        return view

    return [item(view) for view in views]


def transcript_header(transcript: Transcript) -> str:
    """The one-line summary above a transcript: message count, roles and tools."""
    count = len(transcript.messages)
    head = f"transcript · {count} message{'s' if count != 1 else ''}"
    if transcript.tools:
        head += " · tools: " + ", ".join(transcript.tools)
    return head


def render_transcript(
    messages_or_request: Any,
    *,
    store: ContentReader | None = None,
    principal: Viewer | None = None,
    full_images: bool = False,
    pdf_pages: int = 3,
    anchors: bool = False,
    header: str | None = None,
) -> str:
    """A whole transcript as HTML (messages, an ``LlmRequest`` or an ``Execution``).

    ``full_images`` also embeds each image at reading size (behind "full size"); ``pdf_pages``
    caps the page images embedded per PDF. ``anchors`` gives tool calls and results ids and links
    to each other: only for pages that keep ids (``to_html`` sets it; JupyterLab strips ids from
    saved outputs, so notebook output goes without). ``header`` replaces the line above the
    transcript (default: its message count and tools).
    """
    check_viewer(store, principal, "render_transcript()")
    transcript = transcript_of(messages_or_request)
    ctx = RenderContext(
        store=store, principal=principal, full_images=full_images, pdf_pages=pdf_pages
    )
    check_type(
        header,
        str,
        name="header",
        where="render_transcript()",
        error=ConfigurationError,
        optional=True,
    )
    views = transcript_views(transcript, ctx)
    head = header if header is not None else transcript_header(transcript)
    return html_of_views(head, views, anchors=anchors)


def html_of_views(header: str, views: list[View], *, anchors: bool = False) -> str:
    """The transcript container around message views (shared with the widget's fallback)."""
    if anchors:
        with anchored(views):
            body = "".join(html_of_message(v) for v in views)
    else:
        body = "".join(html_of_message(v) for v in views)
    return (
        f'<div class="loom-transcript" style="{STYLE["transcript"]}">'
        f'<div class="loom-header" style="{STYLE["header"]}">{esc(header)}</div>{body}</div>'
    )


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; media-src data:; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title></head>
<body style="margin:16px">{body}</body></html>
"""


def to_html(
    transcript: Any,
    path: str | os.PathLike[str],
    *,
    store: ContentReader | None = None,
    principal: Viewer | None = None,
    title: str = "loom_nb transcript",
    full_images: bool = True,
    pdf_pages: int = 10,
    header: str | None = None,
) -> Path:
    """Write ``transcript`` as a standalone HTML page at ``path`` and return the path.

    The page uses the same renderer as the notebook output, embeds media as re-encoded images
    and PDF page images, links each tool result to its call (anchors), and carries a
    Content-Security-Policy that forbids every script. ``header`` is the line above the
    transcript (default: its message count and tools).
    """
    check_viewer(store, principal, "to_html()")
    check_type(path, (str, os.PathLike), name="path", where="to_html()", error=ConfigurationError)
    check_type(title, str, name="title", where="to_html()", error=ConfigurationError)
    body = render_transcript(
        transcript,
        store=store,
        principal=principal,
        full_images=full_images,
        pdf_pages=pdf_pages,
        anchors=True,
        header=header,
    )
    out = Path(path)
    out.write_text(_PAGE.format(title=esc(title), body=body), encoding="utf-8")
    return out


def _as_message(value: object) -> Message:
    """A message, or a dict validated as one."""
    return Message.model_validate(value) if isinstance(value, dict) else value  # type: ignore[return-value]


_PART_TYPES = (
    TextPart,
    ImagePart,
    AudioPart,
    FilePart,
    ToolUsePart,
    ToolResultPart,
    ReasoningPart,
)
