"""Reading guard fences back out of text, so a guarded request shows its untrusted spans boxed.

``guard_request`` brackets untrusted text as ``<untrusted nonce="N" origin="O">`` … ``</untrusted
nonce="N">``, and untrusted media as a fence-open text part, the media part, and a fence-close
text part. ``scan_fences`` walks a message's items in order (text to scan, and views already
built) and groups what lies between a matching open and close into a fence view.

Only the closing tag with the SAME nonce ends a fence; any other tag inside is shown as text.
A fence never closed runs to the end of the message and is labelled so (fail closed: text after
a forged or missing close is never shown as trusted). Text that was ``Untrusted`` before the
guard is never scanned: it is boxed whole, whatever fence look-alikes it holds.
"""

from __future__ import annotations

import html
import re
from typing import Any

__all__ = ["CLOSE_TAG", "OPEN_TAG", "fence_view", "scan_fences"]

OPEN_TAG = re.compile(r'<untrusted nonce="([0-9a-f]{8,64})" origin="([^"<>]*)">')
"""A fence-open tag as the guard writes it."""
CLOSE_TAG = re.compile(r'</untrusted nonce="([0-9a-f]{8,64})">')
"""A fence-close tag as the guard writes it."""

View = dict[str, Any]


def fence_view(origin: str, items: list[View], *, closed: bool = True) -> View:
    """A fence box holding ``items``, labelled with ``origin``."""
    return {"kind": "fence", "origin": origin, "closed": closed, "items": items}


def scan_fences(tokens: list[str | View], text_view: Any) -> list[View]:
    """Views for ``tokens`` with fenced spans grouped; ``text_view(str)`` builds a text view.

    A token is a string of trusted text (scanned for fence tags) or a view (kept as it is).
    """
    out: list[View] = []
    open_fence: tuple[str, View] | None = None  # (nonce, fence view)

    def emit(view: View) -> None:
        (open_fence[1]["items"] if open_fence else out).append(view)

    def emit_text(text: str) -> None:
        if text:
            emit(text_view(text))

    for token in tokens:
        if not isinstance(token, str):
            emit(token)
            continue
        pos = 0
        while pos <= len(token):
            if open_fence is None:
                match = OPEN_TAG.search(token, pos)
                if match is None:
                    emit_text(token[pos:])
                    break
                emit_text(token[pos : match.start()])
                fence = fence_view(html.unescape(match.group(2)), [], closed=False)
                out.append(fence)
                open_fence = (match.group(1), fence)
                pos = match.end()
                if token.startswith("\n", pos):
                    pos += 1
            else:
                nonce, fence = open_fence
                close = re.compile(re.escape(f'</untrusted nonce="{nonce}">'))
                found = close.search(token, pos)
                if found is None:
                    emit_text(token[pos:])
                    break
                end = found.start()
                if end > pos and token[end - 1] == "\n":
                    end -= 1
                emit_text(token[pos:end])
                fence["closed"] = True
                open_fence = None
                pos = found.end()
    return out
