"""JupyterLab's inline-style filter for untrusted outputs, for the properties the renderer colours.

Transcribed from JupyterLab 4.6's HTML sanitizer (``@jupyterlab/apputils``, sanitize-html's
``allowedStyles``): a ``style`` attribute is split into declarations, and each is kept only when
its property is allowed and its whole value matches that property's pattern (case-insensitive);
the rest are dropped one by one. A ``var()`` colour matches no colour pattern, so it is dropped.
Only the properties below are modelled; ``kept_styles`` ignores the others.
"""

from __future__ import annotations

import re

_BYTE = r"\s*(\d{1,3})\s*"
_COLOUR = (
    r"\#(0x)?[0-9a-f]+"
    rf"|rgb\({_BYTE},{_BYTE},{_BYTE}\)"
    rf"|rgba\({_BYTE},{_BYTE},{_BYTE},\s*([0-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|25[0-5]|"
    r"(0?\.[0-9]+|[01])|([0-9]{1,2}%|100%))\s*\)"
    r"|black|white|gray|grey|red|green|blue|transparent"  # a few of its 148 names
)
PATTERNS: dict[str, re.Pattern[str]] = {
    "color": re.compile(rf"^({_COLOUR})$", re.I),
    "background-color": re.compile(rf"^({_COLOUR})$", re.I),
    "font-weight": re.compile(r"^(normal|bold|bolder|lighter|[1-9]00)$", re.I),
    "font-style": re.compile(r"^(normal|italic|oblique)$", re.I),
}
"""Property -> the value pattern JupyterLab's sanitizer keeps (for the modelled properties)."""


def kept_styles(style: str) -> list[tuple[str, str]]:
    """The declarations of ``style`` (modelled properties only) an untrusted output keeps, in order."""
    out = []
    for declaration in style.split(";"):
        prop, _, value = declaration.partition(":")
        prop, value = prop.strip().lower(), value.strip()
        pattern = PATTERNS.get(prop)
        if pattern is not None and pattern.match(value):
            out.append((prop, value))
    return out


def effective(style: str, prop: str) -> str | None:
    """The value of ``prop`` a sanitized ``style`` ends with (the last kept declaration), if any."""
    values = [value for name, value in kept_styles(style) if name == prop]
    return values[-1] if values else None
