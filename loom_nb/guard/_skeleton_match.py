"""Finding fence look-alikes on a normalized skeleton (ADR 0120 decision 7; issue 17).

A model reads ``＜/ｕｎｔｒｕｓｔｅｄ``, ``<∕սntrսsted``, ``〈/untrusted``, ``&amp;lt;/untrusted``,
``%3C/untrusted``, ``\\u003c/untrusted``, ``<\\x00/untrusted`` or a tag written backwards under a
right-to-left override as a closing fence. Listing such spellings one by one always misses the
next one, so the text is compared on a skeleton instead:

- escapes are decoded for matching, nested ones too: HTML character references (named, decimal,
  hex, with or without ``;``, ``&amp;`` chains), percent-encoded UTF-8 (``%253C`` included),
  JSON / Python escapes (``\\u003c``, ``\\x3c``, ``\\U0000003c``, ``\\u{3c}``, any number of
  backslashes);
- each character is reduced by NFKC, the Unicode confusables prototype (UTS #39 skeleton) and
  lower case, to a fixed point; controls, format and bidi controls, combining marks,
  default-ignorable code points and whitespace reduce to nothing (filler); angle brackets are
  recognised by name as well (U+3008, U+27E8, U+2329, U+22D6 ...). The per-character table is
  generated from the Unicode data by ``tools/confusables/regenerate.py`` into
  ``_guard_skeleton_data``;
- a look-alike is a bracket reducing to ``<``, then any ``/`` or ``\\`` look-alikes, then the
  letters of ``untrusted``; or, read backwards from a ``<`` / ``>`` look-alike (what a
  right-to-left override displays as a tag), the same sequence.

Only brackets are reported (as spans of the original text, an escape counted whole), so the
caller can defuse exactly them. Text with none of the characters that can begin a look-alike
(any ``<`` / ``>`` look-alike, ``&``, ``%``, a backslash) is answered by one regex search: the
common case costs what the old check did.

The tables are built when this module is imported, which ``_skeleton`` puts off until a text
needs more than that fast path (building them costs tens of milliseconds, on the first turn).
"""

from __future__ import annotations

import html.entities
import re
from collections.abc import Callable

from loom_nb.guard._skeleton_data import BY_SKELETON, FILLER_RANGES

__all__ = ["lookalike_brackets"]

_WORD = "untrusted"
_WORD_LENGTH = len(_WORD)
_SLASHES = frozenset("/\\")
_BRACKETS = frozenset("<>")

_SKELETON: dict[str, str] = {
    char: reduced for reduced, chars in BY_SKELETON.items() for char in chars
}
for _low, _high in FILLER_RANGES:
    _SKELETON.update(dict.fromkeys(map(chr, range(_low, _high + 1)), ""))

_ESCAPE_STARTS = "&%\\"


def _ranges(points: list[int]) -> str:
    """A regex character class for the sorted code ``points``, consecutive ones as ranges."""
    out: list[str] = []
    index = 0
    while index < len(points):
        low = high = points[index]
        while index + 1 < len(points) and points[index + 1] == high + 1:
            index += 1
            high = points[index]
        out.append(re.escape(chr(low)) + ("-" + re.escape(chr(high)) if high > low else ""))
        index += 1
    return "[" + "".join(out) + "]"


def _chars(test: Callable[[str], bool]) -> set[str]:
    """Every character whose skeleton passes ``test`` (ASCII letters and symbols included)."""
    return {char for char, reduced in _SKELETON.items() if test(reduced)} | {
        c for c in "<>/\\untrsed" if test(c)
    }


_FILL = _chars(lambda r: r == "")
_SLASHY = _chars(lambda r: r != "" and set(r) <= _SLASHES)
_LT = _chars(lambda r: r.startswith("<"))
_BRACKETISH = _chars(lambda r: r != "" and set(r) <= _BRACKETS)
_U_START = _chars(lambda r: r.startswith("u"))
_U_END = _chars(lambda r: r.endswith("u"))
_ESCAPE = re.compile(
    r"&\#(?:[0-9]{1,8}|[xX][0-9a-fA-F]{1,6});?"
    r"|&(?P<name>[A-Za-z][A-Za-z0-9]{0,31})(?P<semi>;?)"
    r"|%(?:[0-7][0-9a-fA-F]|[cdCD][0-9a-fA-F]%[89abAB][0-9a-fA-F]"
    r"|[eE][0-9a-fA-F](?:%[89abAB][0-9a-fA-F]){2}|[fF][0-7](?:%[89abAB][0-9a-fA-F]){3})"
    r"|\\+(?:u[0-9a-fA-F]{4}|u\{[0-9a-fA-F]{1,6}\}|x[0-9a-fA-F]{2}|U[0-9a-fA-F]{8})"
)
_LOW_SURROGATE = re.compile(r"\\+u([dD][c-fC-F][0-9a-fA-F]{2})")
_ENTITIES = html.entities.html5
_NESTING = 8  # &amp;amp;amp;lt; and the like: more layers than any real double-escape
_WINDOW = 48  # characters decoded ahead when an escape decodes to the start of another
_NESTING_VALUES = ("&", "%", "\\")
_ENTITY_NAMES = sorted(
    {
        name.rstrip(";")
        for name, value in _ENTITIES.items()
        if value in _NESTING_VALUES or "".join(_SKELETON.get(c, c) for c in value).startswith("<")
    },
    key=lambda name: (-len(name), name),
)
# Where a look-alike may begin: one character class, searched at C speed. Each hit is then
# screened by its neighbours (a bracket must be followed by filler, a slash or a "u", or preceded
# by one for a backwards tag; an escape must be one that can stand for a bracket or nest one)
# before the full check, so text full of ordinary "<", "&" and "%" stays cheap.
_TRIGGER = re.compile(_ranges(sorted(map(ord, _LT | _BRACKETISH | set(_ESCAPE_STARTS)))))
_ESCAPE_CANDIDATE = re.compile(
    "&(?:\\#|"
    + "|".join(map(re.escape, _ENTITY_NAMES))
    + ")|%(?:3[cC]|2[56]|5[cC]|[c-fC-F][0-9a-fA-F])|\\\\+[uxU]"
)
_GAP = frozenset((_FILL | _SLASHY) - set(_ESCAPE_STARTS))
_WORD_START = frozenset(_U_START | set(_ESCAPE_STARTS))
_WORD_END = frozenset(_U_END)
_LT_SET = frozenset(_LT)
_BRACKETISH_SET = frozenset(_BRACKETISH)
_BACK_GAP = frozenset(_FILL | _SLASHY)
_PLAIN = re.compile(r"<[\s/\\]*untrusted", re.IGNORECASE)


def _reduce(text: str) -> str:
    """The skeleton of ``text``, character by character."""
    return "".join(_SKELETON.get(c, c) for c in text)


def _decode_one(text: str, pos: int) -> tuple[str, int] | None:
    """The characters one escape at ``pos`` stands for and where it ends, or None."""
    match = _ESCAPE.match(text, pos)
    if match is None:
        return None
    token = match.group(0)
    name = match.group("name")
    if name is not None:  # a named reference: the longest known name that prefixes the letters
        for size in range(len(name), 0, -1):
            key = name[:size]
            exact = size == len(name) and match.group("semi")
            if key + ";" in _ENTITIES:
                end = pos + 1 + size + (1 if exact else 0)
                return _ENTITIES[key + ";"], end
            if key in _ENTITIES:
                return _ENTITIES[key], pos + 1 + size
        return None
    if token[0] == "&":
        digits = token[2:].rstrip(";")
        value = int(digits[1:], 16) if digits[:1] in "xX" else int(digits)
        return (chr(value) if value <= 0x10FFFF else "\ufffd"), match.end()
    if token[0] == "%":
        raw = bytes.fromhex(token.replace("%", ""))
        return raw.decode("utf-8", "replace"), match.end()
    hexdigits = token.lstrip("\\")[1:].strip("{}")
    value = int(hexdigits, 16)
    if 0xD800 <= value < 0xDC00:  # a JSON surrogate pair stands for one astral character
        low = _LOW_SURROGATE.match(text, match.end())
        if low is not None:
            pair = 0x10000 + ((value - 0xD800) << 10) + (int(low.group(1), 16) - 0xDC00)
            return chr(pair), low.end()
    return (chr(value) if value <= 0x10FFFF else "\ufffd"), match.end()


def _layer(text: str, start: int) -> tuple[str, list[int]]:
    """One layer of escapes decoded from ``start`` on (a short window), and where each decoded character ends in ``text``."""
    out: list[str] = []
    ends: list[int] = []
    pos = start
    while pos < min(len(text), start + _WINDOW):
        decoded = _decode_one(text, pos) if text[pos] in _ESCAPE_STARTS else None
        chars, pos = decoded if decoded is not None else (text[pos], pos + 1)
        out.append(chars)
        ends += [pos] * len(chars)
    return "".join(out), ends


def _token(text: str, pos: int) -> tuple[str, int]:
    """The skeleton of the character or escape at ``pos`` (nested escapes decoded) and its end."""
    if text[pos] not in _ESCAPE_STARTS:
        return _SKELETON.get(text[pos], text[pos]), pos + 1
    decoded = _decode_one(text, pos)
    if decoded is None:
        return text[pos], pos + 1
    value, end = decoded
    for _ in range(_NESTING):  # "&amp;" + "lt;" is "&lt;" once the rest is decoded a layer
        if value not in _NESTING_VALUES or end >= len(text):
            break
        layer, ends = _layer(text, end)
        again = _decode_one(value + layer, 0)
        if again is None or again[1] <= 1:
            break
        value, end = again[0], ends[again[1] - 2]
    return _reduce(value), end


class _Matcher:
    """The look-alike grammar fed one skeleton character at a time: ``<*`` ``[/\\]*`` ``untrusted``."""

    __slots__ = ("letters", "stage")

    def __init__(self) -> None:
        self.stage = 0  # 0: brackets, 1: slashes, 2: letters
        self.letters = 0

    def feed(self, chars: str) -> bool | None:
        """True once the word is complete, False when the text cannot be a look-alike, else None."""
        for char in chars:
            if self.stage == 0 and char == "<":
                continue
            if self.stage <= 1 and char in _SLASHES:
                self.stage = 1
                continue
            self.stage = 2
            if char != _WORD[self.letters]:
                return False
            self.letters += 1
            if self.letters == _WORD_LENGTH:
                return True
        return None


def _forward(text: str, pos: int) -> int | None:
    """End of the bracket at ``pos`` when a look-alike starts there, else None."""
    if _PLAIN.match(text, pos):  # the usual forgery, spelt in ASCII: no need to decode
        return pos + 1
    reduced, bracket_end = _token(text, pos)
    if not reduced.startswith("<"):
        return None
    matcher = _Matcher()
    verdict = matcher.feed(reduced[1:])
    end = bracket_end
    while verdict is None and end < len(text):
        reduced, end = _token(text, end)
        verdict = matcher.feed(reduced)
    return bracket_end if verdict else None


def _backward(text: str, pos: int) -> bool:
    """Whether the bracket at ``pos`` ends a look-alike written backwards (``<detsurtnu/>``)."""
    reduced = _SKELETON.get(text[pos], text[pos])
    if not reduced or not set(reduced) <= _BRACKETS:
        return False
    matcher = _Matcher()
    matcher.stage = 1
    index = pos - 1
    while index >= 0:
        verdict = matcher.feed(_SKELETON.get(text[index], text[index])[::-1])
        if verdict is not None:
            return verdict
        index -= 1
    return False


def _plausible(text: str, pos: int) -> bool:
    """Whether the trigger at ``pos`` has neighbours a look-alike could have (cheap screen).

    Past fillers and slashes (never past another bracket, so the scans add up to one pass), a
    bracket must reach a "u" or an escape; backwards, a "u"; an escape must be one that can
    stand for a bracket or nest one.
    """
    char = text[pos]
    if char in _ESCAPE_STARTS:
        return _ESCAPE_CANDIDATE.match(text, pos) is not None
    if char in _LT_SET:
        index = pos + 1
        while index < len(text) and text[index] in _GAP:
            index += 1
        if index < len(text) and text[index] in _WORD_START:
            return True
    if char in _BRACKETISH_SET:
        index = pos - 1
        while index >= 0 and text[index] in _BACK_GAP:
            index -= 1
        return index >= 0 and text[index] in _WORD_END
    return False


def lookalike_brackets(text: str) -> list[tuple[int, int]]:
    """Spans ``(start, end)`` of ``text`` holding the bracket of a fence look-alike, in order.

    ``_skeleton.lookalike_brackets`` answers the text that cannot hold one before calling this.
    """
    spans: list[tuple[int, int]] = []
    for trigger in _TRIGGER.finditer(text):
        pos = trigger.start()
        if (spans and pos < spans[-1][1]) or not _plausible(text, pos):
            continue
        end = _forward(text, pos)
        if end is None and _backward(text, pos):
            end = pos + 1
        if end is not None:
            spans.append((pos, end))
    return spans
