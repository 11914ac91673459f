"""Which characters need an emoji font: the test of "no glyph depends on one".

A character is counted as emoji when it lies in the ranges below: every code point Unicode marks
``Extended_Pictographic`` or ``Emoji_Presentation`` (``emoji-data.txt``), written as the blocks
and runs that hold them, plus the joiner, the variation selector and the keycap and tag marks
that build emoji sequences. Machines without an emoji font (most Linux installs, a headless
Chromium) draw these as empty boxes. Text symbols every common font has (``·`` ``…`` ``×``
``✓`` ``✗`` ``►`` ``◄`` ``■`` ``●``) are not in the ranges.
"""

from __future__ import annotations

EMOJI_RANGES: tuple[tuple[int, int], ...] = (
    (0x00A9, 0x00A9), (0x00AE, 0x00AE), (0x200D, 0x200D), (0x203C, 0x203C), (0x2049, 0x2049),
    (0x20E3, 0x20E3), (0x2122, 0x2122), (0x2139, 0x2139), (0x2194, 0x2199), (0x21A9, 0x21AA),
    (0x231A, 0x231B), (0x2328, 0x2328), (0x2388, 0x2388), (0x23CF, 0x23CF), (0x23E9, 0x23F3),
    (0x23F8, 0x23FA), (0x24C2, 0x24C2), (0x25AA, 0x25AB), (0x25B6, 0x25B6), (0x25C0, 0x25C0),
    (0x25FB, 0x25FE), (0x2600, 0x26FF), (0x2702, 0x2702), (0x2705, 0x2705), (0x2708, 0x270D),
    (0x270F, 0x270F), (0x2712, 0x2712), (0x2714, 0x2714), (0x2716, 0x2716), (0x271D, 0x271D),
    (0x2721, 0x2721), (0x2728, 0x2728), (0x2733, 0x2734), (0x2744, 0x2744), (0x2747, 0x2747),
    (0x274C, 0x274C), (0x274E, 0x274E), (0x2753, 0x2755), (0x2757, 0x2757), (0x2763, 0x2767),
    (0x2795, 0x2797), (0x27A1, 0x27A1), (0x27B0, 0x27B0), (0x27BF, 0x27BF), (0x2934, 0x2935),
    (0x2B05, 0x2B07), (0x2B1B, 0x2B1C), (0x2B50, 0x2B50), (0x2B55, 0x2B55), (0x3030, 0x3030),
    (0x303D, 0x303D), (0x3297, 0x3297), (0x3299, 0x3299), (0xFE0F, 0xFE0F),
    (0x1F000, 0x1FAFF), (0x1FC00, 0x1FFFD), (0xE0020, 0xE007F),
)  # fmt: skip
"""Inclusive code point ranges of emoji (see the module docstring)."""


def is_emoji(char: str) -> bool:
    """Whether ``char`` is in ``EMOJI_RANGES``."""
    point = ord(char)
    return any(low <= point <= high for low, high in EMOJI_RANGES)


def emoji_in(text: str) -> list[str]:
    """Each emoji character of ``text`` with its code point (``U+23F8 ⏸``), in order, once."""
    seen: dict[str, None] = {}
    for char in text:
        if char not in seen and is_emoji(char):
            seen[char] = None
    return [f"U+{ord(c):04X} {c}" for c in seen]
