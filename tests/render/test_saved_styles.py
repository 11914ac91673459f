"""What a saved (untrusted) output keeps of the static HTML: code colours, and no emoji glyph."""

from __future__ import annotations

import base64
import html as html_lib
import re

from loom_nb.content import (
    AudioPart,
    ContentRef,
    DataSource,
    FilePart,
    ImagePart,
    Message,
    ReasoningPart,
    RefSource,
    TextPart,
    ToolResultPart,
    ToolUsePart,
)
from loom_nb.render import render_message
from loom_nb.render._api import html_of_views, transcript_views
from loom_nb.render._source import Transcript, approval_state
from loom_nb.render._view import RenderContext
from loom_nb.taint import Untrusted
from tests.glyphs import emoji_in
from tests.render.media import pdf, png, wav
from tests.render.sanitizer import effective, kept_styles

CODE = '```python\n@cache\ndef total(xs: list[int]) -> int:\n    """Sum."""\n    return sum(xs) + 1  # add one\n```'


def _spans(html: str) -> list[tuple[str, str]]:
    """(style, text) of each highlighted run inside the code block."""
    block = html[html.index("<pre") : html.index("</pre>")]
    return [
        (style, html_lib.unescape(text))
        for style, text in re.findall(r'<span style="([^"]*)">([^<]*)</span>', block)
    ]


def _luminance(hex_colour: str) -> float:
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(a: str, b: str) -> float:
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_highlighted_runs_keep_a_colour_the_sanitizer_allows() -> None:
    """Every coloured run of a code block keeps a hex colour after JupyterLab's style filter."""
    html = render_message(Message(role="assistant", content=CODE))
    spans = _spans(html)
    assert len(spans) >= 8
    kept = {text: effective(style, "color") for style, text in spans}
    assert all(colour is not None and colour.startswith("#") for colour in kept.values()), kept
    assert kept["def"] != kept['"""Sum."""'] != kept["# add one"]  # runs still tell kinds apart
    assert effective(spans[[t for _, t in spans].index("def")][0], "font-weight") == "bold"
    # Live (trusted), the theme's colour is declared last, so it wins over the fallback.
    keyword_style = spans[[t for _, t in spans].index("def")][0]
    assert keyword_style.index("#007020") < keyword_style.index("var(--jp-mirror-editor-keyword")


def test_a_highlighted_block_keeps_dark_ink_on_a_light_box() -> None:
    """Sanitized, the block keeps its own ink and background, and every run is readable on it."""
    html = render_message(Message(role="assistant", content=CODE))
    style = re.search(r'<pre style="([^"]*)">', html).group(1)  # type: ignore[union-attr]
    background, ink = effective(style, "background-color"), effective(style, "color")
    assert background is not None
    assert ink is not None
    assert _contrast(ink, background) >= 7
    for run_style, text in _spans(html):
        assert _contrast(effective(run_style, "color") or ink, background) >= 4.5, text


def test_plain_code_and_tool_input_keep_the_theme_only() -> None:
    """Unhighlighted code keeps following the theme alone (no fixed colour), as before."""
    html = render_message(Message(role="assistant", content="```\nplain\n```"))
    style = re.search(r'<pre style="([^"]*)">', html).group(1)  # type: ignore[union-attr]
    assert kept_styles(style) == []
    assert "var(--jp-content-font-color1" in style


def _every_kind_of_card() -> list[Message]:
    image = base64.b64encode(png()).decode()
    return [
        Message(
            role="user",
            content=[
                TextPart(text="look"),
                ImagePart(media_type="image/png", source=DataSource(data=image)),
                ImagePart(
                    media_type="image/svg+xml",
                    source=DataSource(data=base64.b64encode(b"<svg/>").decode()),
                ),
                ImagePart(
                    media_type="image/png",
                    source=RefSource(ref=ContentRef(address="sha256:" + "a" * 64, size=9)),
                ),
                AudioPart(
                    media_type="audio/wav", source=DataSource(data=base64.b64encode(wav()).decode())
                ),
                AudioPart(
                    media_type="audio/wav",
                    source=DataSource(data=base64.b64encode(wav(2.0)).decode()),
                ),
                FilePart(
                    media_type="application/pdf",
                    source=DataSource(data=base64.b64encode(pdf(2)).decode()),
                ),
                FilePart(
                    media_type="text/plain",
                    name="notes.txt",
                    source=DataSource(data=base64.b64encode(b"a note").decode()),
                ),
                TextPart(text="scraped", origin="tool:web_fetch"),
            ],
        ),
        Message(
            role="assistant",
            content=[
                ReasoningPart(text="thinking", signature="s"),
                TextPart(text="Sure:\n\n" + CODE),
                ToolUsePart(id="c1", name="send", input={"to": "a"}),
                ToolUsePart(id="c2", name="send", input={"to": "b"}),
                ToolUsePart(id="c3", name="send", input={"to": "c"}),
                ToolUsePart(id="c4", name="send", input={"to": Untrusted("d", "tool:x")}),
            ],
        ),
        Message(
            role="user",
            content=[
                ToolResultPart(tool_use_id="c1", content="ok"),
                ToolResultPart(tool_use_id="c2", content="refused", is_error=True),
                ToolResultPart(tool_use_id="c3", content=Untrusted("page", "mcp:web/get")),
                ToolResultPart(tool_use_id="c4", content="ok"),
            ],
        ),
    ]


def test_static_html_uses_no_emoji_glyph() -> None:
    """Fences, approvals in every state, media of every kind: no character needs an emoji font."""
    transcript = Transcript(
        _every_kind_of_card(),
        Untrusted("system words", "config"),
        ["send"],
        approvals={
            "c1": approval_state("approved", "you"),
            "c2": approval_state("declined", "you", "no"),
            "c3": approval_state("undecidable"),
            "c4": approval_state("awaiting"),
        },
        stats={1: {"input_tokens": 3, "output_tokens": 4, "latency_s": 0.5, "status": "stopped"}},
    )
    ctx = RenderContext(full_images=True, max_audio_bytes=10_000)
    html = html_of_views("chat · 1 turn", transcript_views(transcript, ctx))
    for needle in ("untrusted · tool:web_fetch", "awaiting approval", "approved by you",
                   "declined by you", "not decided", "audio not embedded", "notes.txt",
                   "SVG source", "unavailable", "reasoning"):  # fmt: skip
        assert needle in html, needle  # every card kind is drawn, so its chrome is scanned
    assert emoji_in(html) == []
