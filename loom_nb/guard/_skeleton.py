"""Fence look-alikes: the entry point, which builds the skeleton tables only when a text needs them.

``lookalike_brackets`` answers ASCII text with none of the characters that can begin a look-alike
(``<``, ``>``, ``&``, ``%``, a backslash) at once, as the matcher itself would; any other text goes
to ``_skeleton_match``, imported on that first use. Building its per-character tables and regexes
from ``_skeleton_data`` takes tens of milliseconds, which a process that never fences such a text
(most first turns) no longer pays at import.
"""

from __future__ import annotations

__all__ = ["ASCII_STARTS", "DEFUSED_BRACKET", "lookalike_brackets"]

DEFUSED_BRACKET = "\u2039"
"""What a defused bracket becomes (``‹``); the table leaves it out, so defusing is idempotent."""

ASCII_STARTS = "<>&%\\"
"""The ASCII characters a look-alike can begin with (a bracket or the start of an escape)."""


def lookalike_brackets(text: str) -> list[tuple[int, int]]:
    """Spans ``(start, end)`` of ``text`` holding the bracket of a fence look-alike, in order."""
    if text.isascii() and not any(c in text for c in ASCII_STARTS):
        return []  # fast path: nothing can begin a look-alike
    from loom_nb.guard._skeleton_match import lookalike_brackets as find

    return find(text)
