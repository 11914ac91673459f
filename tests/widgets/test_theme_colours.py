"""Every widget colour follows the JupyterLab theme: a var(--jp-..., fallback), never a bare colour."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from loom_nb.providers import ScriptedProvider
from loom_nb.widgets._promptpad import PromptPad

STATIC = Path(__file__).resolve().parents[2] / "loom_nb" / "widgets" / "static"
THEMED = re.compile(r"var\(--[\w-]+,\s*#[0-9a-fA-F]{3,8}\)")
BARE = re.compile(r"#[0-9a-fA-F]{3,8}\b|\brgba?\(")


def bare_colours(text: str) -> list[str]:
    """Colours left once every ``var(--name, #fallback)`` is taken out."""
    return BARE.findall(THEMED.sub("", text))


@pytest.mark.parametrize("name", sorted(p.name for p in STATIC.glob("*.css")))
def test_widget_css_uses_theme_variables(name: str) -> None:
    """No fixed colour in a widget's CSS: each is a theme variable with a light fallback."""
    assert bare_colours((STATIC / name).read_text(encoding="utf-8")) == []


def test_promptpad_static_html_uses_theme_variables() -> None:
    """The prompt pad's status line in its static fallback follows the theme too (it was #555)."""
    pad = PromptPad(ScriptedProvider([{"text": "hi"}]))
    html = pad.to_static_html()
    assert "#555" not in html
    assert "var(--jp-content-font-color1" in html.split("prompt pad")[0]
