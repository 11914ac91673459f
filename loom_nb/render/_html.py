"""Small HTML helpers for the static renderer: escaping, and the inline styles it may use.

The static HTML must survive JupyterLab's sanitizer for untrusted outputs, which strips
``<style>`` blocks, ``id`` attributes, scripts, event handlers and iframe/embed/object, and
filters inline styles property by property. So every style here is an inline ``style=`` made of
common properties (border, margin, padding, color, background-color, font-*, white-space), and
the structure stays readable with all styles gone: a fence is a ``<fieldset>`` whose
``<legend>`` names it, an error says "error" in words, a role is written out.

No attribute value is ever built from content: attributes are constants, or values checked
against a strict pattern here (base64 payloads, allowlisted media types).
"""

from __future__ import annotations

import re

__all__ = [
    "B64_PATTERN",
    "STYLE",
    "data_url",
    "esc",
    "human_size",
]

B64_PATTERN = re.compile(r"[A-Za-z0-9+/]*={0,2}")
"""Standard base64 (what ``base64.b64encode`` produces): the only text put into a ``src``."""

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

STYLE: dict[str, str] = {
    "transcript": "font-family:sans-serif;font-size:13px;line-height:1.4;max-width:60em",
    "header": "color:#555;font-size:12px;margin:2px 0 6px 0",
    "card": "border:1px solid #c8c8c8;border-radius:6px;margin:6px 0;padding:6px 10px",
    "card_user": "background-color:#f7f9fc",
    "card_assistant": "background-color:#fbfbf7",
    "card_system": "background-color:#f3f3f3",
    "role": "font-weight:bold;font-size:12px;color:#444;margin-bottom:4px",
    "text": "white-space:pre-wrap;word-break:break-word;margin:2px 0",
    "fence": "border:2px dashed #b45309;border-radius:4px;margin:4px 0;padding:2px 8px",
    "fence_legend": "color:#b45309;font-weight:bold;font-size:12px;padding:0 4px",
    "tool": "border:1px solid #7a8ca5;border-radius:4px;margin:4px 0;padding:4px 8px",
    "tool_error": "border:2px solid #b91c1c;border-radius:4px;margin:4px 0;padding:4px 8px",
    "reasoning": "border:1px dotted #a3a3a3;border-radius:4px;margin:4px 0;padding:2px 8px",
    "tool_label": "font-size:12px;font-weight:bold;color:#334",
    "error_label": "font-size:12px;font-weight:bold;color:#b91c1c",
    "code": "white-space:pre-wrap;word-break:break-word;font-family:monospace;font-size:12px;"
    "background-color:#f4f4f4;margin:2px 0;padding:4px",
    "media": "margin:4px 0",
    "meta": "font-size:11px;color:#555",
    "unavailable": "font-size:12px;color:#8a4b00;border:1px dotted #8a4b00;padding:2px 6px",
    "thumb": "max-width:160px;max-height:160px;border:1px solid #ddd",
    "page": "max-width:100%;border:1px solid #ddd;margin:2px 0",
}
"""Inline styles, by role; only properties JupyterLab's sanitizer keeps."""


def esc(text: str) -> str:
    """``text`` escaped for an HTML text node or a quoted attribute (``&<>"'``), controls replaced."""
    text = (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&#x27;")
    )
    if _CONTROL.search(text):
        text = _CONTROL.sub("\ufffd", text)
    return text


def data_url(media_type: str, b64: str) -> str:
    """A ``data:`` URL for base64 bytes, refusing anything but a checked type and real base64."""
    if not re.fullmatch(r"[a-z]+/[a-z0-9.+-]+", media_type) or not B64_PATTERN.fullmatch(b64):
        raise ValueError("data_url: media type or payload failed its check")  # programming error
    return f"data:{media_type};base64,{b64}"


def human_size(size: int | None) -> str:
    """``1.2 MB`` style size for people; ``size unknown`` for None."""
    if size is None:
        return "size unknown"
    value = float(size)
    for unit in ("bytes", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{size} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} bytes"
