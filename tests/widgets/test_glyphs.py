"""The widgets' front ends draw no character that needs an emoji font (icons are inline SVG)."""

from __future__ import annotations

import pytest

from loom_nb.widgets._base import STATIC
from loom_nb.widgets._grid import CompareGrid
from loom_nb.widgets._mcp import MCPServerView
from loom_nb.widgets._promptpad import PromptPad
from loom_nb.widgets._stepper import ReplayStepper
from loom_nb.widgets._transcript import TranscriptView
from loom_nb.widgets._upload import MediaUpload
from tests.glyphs import emoji_in, is_emoji


@pytest.mark.parametrize(
    "widget", [TranscriptView, ReplayStepper, MediaUpload, PromptPad, MCPServerView, CompareGrid]
)
def test_front_end_modules_hold_no_emoji(widget: type) -> None:
    """Each widget's shipped module and styles (what the browser runs) are free of emoji."""
    assert emoji_in(widget._esm) == []  # type: ignore[attr-defined]
    assert emoji_in(widget._css) == []  # type: ignore[attr-defined]


def test_every_static_file_is_free_of_emoji() -> None:
    """No file of the front end, shipped or not, carries one either."""
    found = {p.name: emoji_in(p.read_text(encoding="utf-8")) for p in sorted(STATIC.iterdir())}
    assert {name: chars for name, chars in found.items() if chars} == {}


def test_the_icons_replace_the_glyphs_that_showed_as_boxes() -> None:
    """The upload's speaker and page and the approval's pause sign are SVG icons now."""
    assert 'icon(String(item.media_type).startsWith("audio/") ? "speaker"' in MediaUpload._esm
    assert 'icon("pause")' in TranscriptView._esm
    assert all(is_emoji(c) for c in "\U0001f50a\U0001f4c4\u23f8\u26a0\u25b6")  # the old glyphs
    assert not any(is_emoji(c) for c in "·…×✓✗►◄■●")  # text symbols every font has
