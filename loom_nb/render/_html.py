"""Small HTML helpers for the static renderer: escaping, and the inline styles it may use.

The static HTML must survive JupyterLab's sanitizer for untrusted outputs, which strips
``<style>`` blocks, ``id`` attributes, scripts, event handlers and iframe/embed/object, and
filters inline styles property by property. So every style here is an inline ``style=`` made of
common properties (border, margin, padding, color, background-color, font-*, white-space), and
the structure stays readable with all styles gone: a fence is a ``<fieldset>`` whose
``<legend>`` names it, an error says "error" in words, a role is written out.

No attribute value is ever built from content: attributes are constants, or values checked
against a strict pattern (base64 payloads, allowlisted media types, markdown link targets that
passed ``_markdown.safe_href``), and escaped.
"""

from __future__ import annotations

import re

__all__ = [
    "B64_PATTERN",
    "DANGER",
    "INK",
    "LINE",
    "LINK",
    "STYLE",
    "TOOL",
    "WARN",
    "data_url",
    "esc",
    "human_size",
    "kept",
    "theme",
]

B64_PATTERN = re.compile(r"[A-Za-z0-9+/]*={0,2}")
"""Standard base64 (what ``base64.b64encode`` produces): the only text put into a ``src``."""

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def theme(name: str, fallback: str) -> str:
    """``var(--jp-<name>, <fallback>)``: a JupyterLab theme colour, with a light fallback elsewhere."""
    return f"var(--jp-{name},{fallback})"


def kept(prop: str, name: str, fallback: str) -> str:
    """``prop`` set twice: to ``fallback`` (a hex colour), then to the theme's ``--jp-<name>``.

    JupyterLab's sanitizer filters an untrusted output's inline style declaration by declaration
    and refuses ``var()`` colours, so there only the hex declaration stays; everywhere else the
    later one wins and the colour follows the theme. For colours that carry meaning in a saved
    notebook (highlighted code), where ``theme`` alone would leave none.
    """
    return f"{prop}:{fallback};{prop}:{theme(name, fallback)}"


INK = theme("content-font-color1", "#1f1f1f")
"""Body text: the theme's strongest text colour (light: near-black, dark: white)."""
LINE = theme("border-color1", "#b0b0b0")
"""Card and table borders."""
WARN = theme("warn-color0", "#b45309")
"""The dashed border of an untrusted fence (the legend's words stay in ``INK``)."""
DANGER = theme("error-color1", "#b91c1c")
"""The border of a failed tool result."""
TOOL = theme("brand-color1", "#5b7bb5")
"""The border of tool calls and results."""
LINK = theme("content-link-color", "#0d47a1")
"""Links in rendered markdown."""


def _box(width: str, kind: str, color: str) -> str:
    # Longhands, so JupyterLab's sanitizer (which refuses var() colours) keeps width and style.
    return f"border-width:{width};border-style:{kind};border-color:{color}"


STYLE: dict[str, str] = {
    "transcript": f"font-family:sans-serif;font-size:13px;line-height:1.4;max-width:60em;color:{INK}",
    "header": f"color:{INK};font-size:12px;margin:2px 0 6px 0",
    "card": f"{_box('1px', 'solid', LINE)};border-radius:6px;margin:6px 0;padding:6px 10px;"
    f"color:{INK}",
    "card_user": f"background-color:{theme('layout-color2', '#f0f3f8')}",
    "card_assistant": f"background-color:{theme('layout-color1', '#ffffff')}",
    "card_system": f"background-color:{theme('layout-color2', '#f0f0f0')}",
    "role": f"font-weight:bold;font-size:12px;color:{INK};margin-bottom:4px",
    "text": "white-space:pre-wrap;word-break:break-word;margin:2px 0",
    "md": "word-break:break-word;margin:2px 0",
    "fence": f"{_box('2px', 'dashed', WARN)};border-radius:4px;margin:4px 0;padding:2px 8px",
    "fence_legend": f"color:{INK};font-weight:bold;font-size:12px;padding:0 4px",
    "tool": f"{_box('1px', 'solid', TOOL)};border-radius:4px;margin:4px 0;padding:4px 8px",
    "tool_error": f"{_box('2px', 'solid', DANGER)};border-radius:4px;margin:4px 0;padding:4px 8px",
    "reasoning": f"{_box('1px', 'dotted', LINE)};border-radius:4px;margin:4px 0;padding:2px 8px",
    "tool_label": f"font-size:12px;font-weight:bold;color:{INK}",
    "error_label": f"font-size:12px;font-weight:bold;color:{INK}",
    "code": "white-space:pre-wrap;word-break:break-word;font-family:monospace;font-size:12px;"
    f"color:{INK};background-color:{theme('cell-editor-background', '#f4f4f4')};"
    "margin:2px 0;padding:4px",
    # A highlighted code block keeps its colours where the sanitizer strips var(): a light box
    # with dark ink (``kept``), so its coloured runs stay readable in a dark theme too.
    "code_block": "white-space:pre-wrap;word-break:break-word;font-family:monospace;"
    f"font-size:12px;{kept('color', 'content-font-color1', '#1f1f1f')};"
    f"{kept('background-color', 'cell-editor-background', '#f4f4f4')};margin:2px 0;padding:4px",
    "badge": "font-weight:bold;border-width:1px;border-style:solid;border-radius:8px;padding:0 5px",
    "code_inline": f"font-family:monospace;font-size:12px;color:{INK};"
    f"background-color:{theme('cell-editor-background', '#f0f0f0')};padding:0 3px",
    "link": f"color:{LINK};text-decoration:underline",
    "media": "margin:4px 0",
    "meta": f"font-size:11px;color:{INK}",
    "unavailable": f"font-size:12px;color:{INK};{_box('1px', 'dotted', WARN)};padding:2px 6px",
    "thumb": f"max-width:160px;max-height:160px;{_box('1px', 'solid', LINE)}",
    "page": f"max-width:100%;{_box('1px', 'solid', LINE)};margin:2px 0",
    "cell": f"{_box('1px', 'solid', LINE)};padding:2px 6px;text-align:left;vertical-align:top",
    "quote": f"{_box('0 0 0 3px', 'solid', LINE)};margin:4px 0;padding:0 8px",
    "stats": f"font-size:11px;color:{INK};margin-top:4px",
}
"""Inline styles, by role; only properties JupyterLab's sanitizer keeps.

Every colour is a theme variable with a light fallback (``theme``), so live outputs follow
"JupyterLab Dark". Untrusted outputs lose the var() colours to the sanitizer (its colour
pattern has no var()), and then inherit the theme's own text and background: still readable in
both themes, because no background is ever kept without its text colour.
"""


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
