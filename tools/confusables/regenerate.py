"""Regenerate ``loom_nb/guard/_skeleton_data.py`` from the Unicode confusables data (issue 17).

Run ``python tools/confusables/regenerate.py`` after replacing ``confusables.txt`` beside this
script with a newer release of the Unicode Security Mechanisms data (UTS #39,
``security/<version>/confusables.txt`` on the Unicode site; keep its header, which carries the
Unicode copyright and terms of use). ``--check`` exits 1 when the committed module differs from
what this script would write (a test runs the same comparison).

What the table holds. The fence guard looks for ``<untrusted`` / ``</untrusted`` written with
look-alike characters. It compares text on a skeleton: each character is reduced by NFKC
(compatibility decomposition, applied per character so that every reduced character maps back
to the one it came from), then by the confusables prototype of UTS #39, then lower-cased, until
nothing changes. Characters a reader skips (controls, format and bidi controls, combining marks,
default-ignorable code points, whitespace, the Braille blank) reduce to nothing: filler.
Angle brackets the confusables data does not send to ``<`` / ``>`` (U+3008, U+27E8, U+2329,
U+22D6 ...) are added by character name. Only what can take part in a fence tag is kept:
characters whose skeleton is spelt with ``u n t r s e d < > / \\``, and the filler ranges.
U+2039 (the mark the guard writes in place of a defused bracket) is deliberately left out, so
that defusing is idempotent.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import unicodedata
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "confusables.txt"
TARGET = HERE.parent.parent / "loom_nb" / "guard" / "_skeleton_data.py"

ALPHABET = frozenset("untrsed<>/\\")
DEFUSED_MARK = "\u2039"
FILLER_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Mn", "Mc", "Me", "Zs", "Zl", "Zp"})
# Other_Default_Ignorable_Code_Point and variation selectors outside the categories above
# (PropList.txt), the tag block, the reserved specials, and the Braille blank.
EXTRA_FILLER = (
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x2065, 0x2065),
    (0x2800, 0x2800),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
LEFT_NAMES = (
    "LESS-THAN",
    "LEFT ANGLE BRACKET",
    "LEFT-POINTING ANGLE",
    "LEFT DOUBLE ANGLE BRACKET",
    "LEFT-POINTING DOUBLE ANGLE",
    "LEFT ARROWHEAD",
    "LEFT-POINTING CURVED ANGLE",
)
RIGHT_NAMES = tuple(
    name.replace("LESS-THAN", "GREATER-THAN").replace("LEFT", "RIGHT") for name in LEFT_NAMES
)


def read_confusables(path: Path) -> tuple[str, dict[str, str]]:
    """The data version and the prototype of every source character in ``confusables.txt``."""
    version = "unknown"
    table: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8-sig").splitlines():
        if line.startswith("# Version:"):
            version = line.split(":", 1)[1].strip()
        body = line.split("#", 1)[0].strip()
        if not body:
            continue
        source, prototype, *_ = (field.strip() for field in body.split(";"))
        table[chr(int(source, 16))] = "".join(chr(int(cp, 16)) for cp in prototype.split())
    return version, table


_EXTRA = frozenset(cp for low, high in EXTRA_FILLER for cp in range(low, high + 1))
"""Every code point of ``EXTRA_FILLER``."""
_LEFT = re.compile("|".join(map(re.escape, LEFT_NAMES)))
_RIGHT = re.compile("|".join(map(re.escape, RIGHT_NAMES)))
"""Whether a character's name holds one of ``LEFT_NAMES`` / ``RIGHT_NAMES``."""


def is_filler(char: str) -> bool:
    """Whether a reader or a tokenizer may skip ``char`` without noticing."""
    if unicodedata.category(char) in FILLER_CATEGORIES or char.isspace():
        return True
    return ord(char) in _EXTRA


def bracket_by_name(char: str) -> str | None:
    """``<`` or ``>`` for an angle bracket named as one, else None."""
    name = unicodedata.name(char, "")
    if _LEFT.search(name):
        return "<"
    if _RIGHT.search(name):
        return ">"
    return None


def skeleton(char: str, confusables: dict[str, str], depth: int = 0) -> str:
    """The skeleton of one character: NFKD, prototype, lower case, to a fixed point."""
    if depth > 8:
        return char
    if char == DEFUSED_MARK:
        return char
    if is_filler(char):
        return ""
    bracket = bracket_by_name(char)
    if bracket is not None:
        return bracket
    for step in (
        unicodedata.normalize("NFKD", char),
        confusables.get(char, char),
        char.lower(),
    ):
        if step != char:
            return "".join(skeleton(c, confusables, depth + 1) for c in step)
    return char


_OWN_SKELETON = frozenset({"Cn", "Co"})
"""Unassigned and private-use code points: no name, no decomposition, no case, not space."""


def build(confusables: dict[str, str]) -> tuple[dict[str, list[str]], list[tuple[int, int]]]:
    """Characters grouped by the skeleton they reduce to, and the filler ranges.

    Some 87% of code points are unassigned or private use; such a character that is neither a
    listed confusable nor an extra filler is its own skeleton (``skeleton`` returns it unchanged),
    so it is skipped without the name and normalization lookups: the table is the same, built
    in a fifth of the time.
    """
    groups: dict[str, list[str]] = defaultdict(list)
    fillers: list[tuple[int, int]] = []
    category = unicodedata.category
    for cp in range(0x110000):
        char = chr(cp)
        if category(char) in _OWN_SKELETON and cp not in _EXTRA and char not in confusables:
            continue  # its own skeleton: neither a filler nor a look-alike
        reduced = skeleton(char, confusables)
        if reduced == "":
            if fillers and fillers[-1][1] == cp - 1:
                fillers[-1] = (fillers[-1][0], cp)
            else:
                fillers.append((cp, cp))
        elif reduced != char and set(reduced) <= ALPHABET:
            groups[reduced].append(char)
    return dict(sorted(groups.items())), fillers


def _literal(chars: list[str]) -> list[str]:
    """``chars`` as escaped string literals of at most 8 characters each (reviewable, no raw marks)."""
    pieces = []
    for start in range(0, len(chars), 8):
        chunk = chars[start : start + 8]
        body = "".join(
            c
            if c.isascii() and c.isalnum()
            else f"\\u{ord(c):04x}"
            if ord(c) < 0x10000
            else f"\\U{ord(c):08x}"
            for c in chunk
        )
        pieces.append(f'"{body}"')
    return pieces


def render(version: str, groups: dict[str, list[str]], fillers: list[tuple[int, int]]) -> str:
    """The source of the generated module."""
    out = [
        '"""Skeleton data for fence look-alikes: GENERATED by tools/confusables/regenerate.py, do not edit.',
        "",
        f"From Unicode confusables.txt {version} (UTS #39; Unicode, Inc., terms of use in the header",
        "of tools/confusables/confusables.txt) and Python's unicodedata "
        f"{unicodedata.unidata_version} (NFKD,",
        "categories, names). See the script for what is kept and why.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        f'CONFUSABLES_VERSION = "{version}"',
        '"""Version of the Unicode confusables data the table was built from."""',
        f'UNICODE_VERSION = "{unicodedata.unidata_version}"',
        '"""Version of the Unicode character database used for NFKD, categories and names."""',
        "",
        "FILLER_RANGES: tuple[tuple[int, int], ...] = (",
    ]
    out += [f"    (0x{low:04X}, 0x{high:04X})," for low, high in fillers]
    out += [
        ")",
        '"""Inclusive code point ranges whose skeleton is empty (skipped when matching)."""',
        "",
        "BY_SKELETON: dict[str, str] = {",
    ]
    for reduced, chars in groups.items():
        key = reduced.replace("\\", "\\\\")
        out.append(f'    "{key}": (')
        out += [f"        {piece}" for piece in _literal(chars)]
        out.append("    ),")
    out += [
        "}",
        '"""Skeleton -> every character reducing to it (only skeletons spelt with u n t r s e d < > / \\\\)."""',
        "",
    ]
    return "\n".join(out)


def formatted(source: str) -> str:
    """``source`` as ``ruff format`` writes it, so the committed file passes the format check."""
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(TARGET), "-"],
        input=source,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def generate() -> str:
    """The module text this script writes."""
    version, confusables = read_confusables(SOURCE)
    groups, fillers = build(confusables)
    return formatted(render(version, groups, fillers))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the module is stale")
    args = parser.parse_args(argv)
    text = generate()
    if args.check:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != text:
            print(f"{TARGET} is stale: run python tools/confusables/regenerate.py")
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
