"""An independent judge of fence look-alikes, for tests (issue 17).

``exposed(text)`` says whether ``text`` still holds something a model could read as a fence tag.
It shares no code or table with ``loom_nb.guard._skeleton``: it reads the vendored Unicode
``confusables.txt`` itself, decodes escapes over the WHOLE string (not per token), builds the
UTS #39 skeleton (NFKC, then NFD / prototype / NFD) of the decoded text, drops characters by
category, and searches the result with a regex, forwards and backwards. The guard's defusal mark
``‹`` (U+2039) is taken for what the guard writes in place of a bracket: it is hidden from the
confusables mapping (which would otherwise send it to ``<``).
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
import urllib.parse
from pathlib import Path

CONFUSABLES = Path(__file__).resolve().parents[2] / "tools" / "confusables" / "confusables.txt"
DEFUSED = "\u2039"
_SENTINEL = "\ue000"  # private use: no mapping, no category dropped
_DROP = {"Cc", "Cf", "Cs", "Mn", "Mc", "Me", "Zs", "Zl", "Zp"}
_BLANKS = {0x115F, 0x1160, 0x3164, 0xFFA0, 0x2800, 0x034F}
_JSON_ESCAPE = re.compile(r"\\+(?:u\{([0-9a-fA-F]{1,6})\}|u([0-9a-fA-F]{4})|x([0-9a-fA-F]{2}))")
_FORWARD = re.compile(r"<[/\\]*untrusted")
_BACKWARD = re.compile(r"detsurtnu[/\\]*[<>]")


@functools.cache
def prototypes() -> dict[str, str]:
    """Source character -> prototype string, straight from confusables.txt."""
    table: dict[str, str] = {}
    for line in CONFUSABLES.read_text(encoding="utf-8-sig").splitlines():
        body = line.split("#", 1)[0].strip()
        if body:
            source, target, *_ = (field.strip() for field in body.split(";"))
            table[chr(int(source, 16))] = "".join(chr(int(cp, 16)) for cp in target.split())
    return table


def sources_of(target: str) -> list[str]:
    """Every character confusables.txt sends to ``target`` (the data a property test draws from)."""
    return sorted(c for c, proto in prototypes().items() if proto == target)


def _bracket_by_name(char: str) -> str | None:
    name = unicodedata.name(char, "")
    if "ANGLE BRACKET" in name or "ANGLE QUOTATION" in name or "ARROWHEAD" in name:
        return "<" if "LEFT" in name else ">" if "RIGHT" in name else None
    if "LESS-THAN" in name:
        return "<"
    if "GREATER-THAN" in name:
        return ">"
    return None


def _decode(text: str) -> str:
    for _ in range(4):
        before = text
        text = html.unescape(text)
        text = urllib.parse.unquote(text, errors="replace")
        text = _JSON_ESCAPE.sub(lambda m: chr(int(next(g for g in m.groups() if g), 16)), text)
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")  # join pairs
        if text == before:
            break
    return text


def skeleton(text: str) -> str:
    """The decoded, normalized, filler-free, lower-case skeleton of ``text``."""
    text = _decode(text.replace(DEFUSED, _SENTINEL))
    text = unicodedata.normalize("NFKC", text)
    table = prototypes()
    out = []
    for char in unicodedata.normalize("NFD", text):
        bracket = _bracket_by_name(char)
        mapped = bracket if bracket is not None else table.get(char, char)
        lowered = "".join(table.get(c, c) for c in unicodedata.normalize("NFD", mapped).lower())
        for piece in unicodedata.normalize("NFD", lowered):
            cp = ord(piece)
            if unicodedata.category(piece) in _DROP or piece.isspace():
                continue
            if cp in _BLANKS or 0xE0000 <= cp <= 0xE0FFF or 0xFE00 <= cp <= 0xFE0F:
                continue
            out.append(piece)
    return "".join(out)


def exposed(text: str) -> bool:
    """Whether ``text`` holds a fence look-alike that is not defused."""
    reduced = skeleton(text)
    return bool(_FORWARD.search(reduced) or _BACKWARD.search(reduced))
