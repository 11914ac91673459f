"""The hostile transcript against the static HTML: nothing can run, nothing passes as trusted."""

from __future__ import annotations

import re

import pytest

from loom_nb.content import DataSource, ImagePart, LlmRequest, Message, TextPart, ToolUsePart
from loom_nb.render import render_part, render_transcript
from loom_nb.render._media import MAX_IMAGE_PIXELS
from loom_nb.taint import Untrusted
from tests.fixtures import hostile
from tests.render.safety import unsafe_parts


@pytest.fixture(scope="module")
def html() -> str:
    """The hostile transcript rendered once."""
    return render_transcript(hostile.hostile_messages())


def test_hostile_html_has_nothing_that_can_run(html: str) -> None:
    """No script/style/svg tags, no handlers, no ids, no hrefs, only PNG and audio data URLs."""
    assert unsafe_parts(html) == []


@pytest.mark.parametrize("needle", hostile.HOSTILE_STRINGS)
def test_every_hostile_string_appears_only_escaped(html: str, needle: str) -> None:
    """Each hostile string is absent verbatim; its escaped form is present."""
    from loom_nb.render._html import esc

    assert needle not in html
    assert esc(needle) in html


def test_forged_fence_close_inside_untrusted_text_stays_inside(html: str) -> None:
    """A close tag inside an Untrusted value does not end its box: the text after it is still fenced."""
    box = re.search(r"untrusted · tool:web&lt;script&gt;</legend>(.*?)</fieldset>", html, re.S)
    assert box is not None
    assert "now trusted &lt;b&gt;text&lt;/b&gt;" in box.group(1)


def test_forged_open_fence_in_untrusted_part_is_text(html: str) -> None:
    """A fence-open tag inside an untrusted part is shown as text inside that part's box."""
    assert (
        "&lt;untrusted nonce=&quot;0123456789abcdef01234567&quot; origin=&quot;app&quot;&gt;"
        in html
    )
    assert "untrusted · app" not in html


def test_html_in_tool_and_file_names_is_escaped(html: str) -> None:
    """Tool names, call ids and file names with markup appear as escaped text."""
    assert "tool call · &lt;img src=x onerror=window.__pwned=6&gt;" in html
    assert "window.__pwned=6&gt; · t1&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in html
    assert "&lt;img src=x onerror=&quot;window.__pwned=2;alert(2)&quot;&gt;.pdf" in html


def test_media_failures_are_shown_not_raised(html: str) -> None:
    """The bomb PNG, malformed PDF, SVG and bad base64 each show a reason in place."""
    assert "decompression bomb" in html
    assert "not a readable PDF" in html
    assert "SVG is not rendered" in html
    assert "inline data is not valid base64" in html


def test_hostile_media_type_never_reaches_an_attribute(html: str) -> None:
    """An audio media type with quotes gets no player; an image with one is still shown as PNG."""
    srcs = re.findall(r'src="([^"]*)"', html)
    assert srcs
    assert all(s.startswith(("data:image/png;base64,", "data:audio/wav;base64,")) for s in srcs)


def test_ten_megabyte_text_is_cut(html: str) -> None:
    """The 10 MB text is cut to the display cap, keeping the page small."""
    assert len(html) < 400_000
    assert f"{hostile.BIG_TEXT_CHARS - 100_000} more characters not shown" in html


def test_unclosed_forged_fence_is_labelled(html: str) -> None:
    """An unclosed fence in trusted text boxes the rest of its message and says it is not closed."""
    assert "untrusted · x (fence not closed)" in html


def test_image_over_the_pixel_bound_is_refused_before_decoding() -> None:
    """A header claiming more pixels than MAX_IMAGE_PIXELS (below Pillow's own bound) is refused."""
    side = int(MAX_IMAGE_PIXELS**0.5) + 100
    part = ImagePart(
        media_type="image/png", source=DataSource(data=hostile.b64(hostile.bomb_png(side, side)))
    )
    assert "image too large to decode" in render_part(part)


def test_pillow_bomb_warning_is_an_error() -> None:
    """An image between Pillow's warning and error bounds is refused (the warning raised as error)."""
    from PIL import Image

    from loom_nb.render import _media

    old = _media.MAX_IMAGE_PIXELS
    _media.MAX_IMAGE_PIXELS = 10**12  # let Pillow's own check decide
    try:
        side = int((Image.MAX_IMAGE_PIXELS * 1.5) ** 0.5)
        result = _media.image_png(hostile.bomb_png(side, side), 160)
    finally:
        _media.MAX_IMAGE_PIXELS = old
    assert isinstance(result, _media.MediaFailure)
    assert "DecompressionBombWarning" in result.reason


def test_a_truncated_png_is_a_reason_not_a_crash() -> None:
    """A PNG cut in half renders as 'could not be decoded'."""
    half = hostile.png_bytes((200, 200))[:120]
    html = render_transcript(
        [
            Message(
                role="user",
                content=[
                    ImagePart(media_type="image/png", source=DataSource(data=hostile.b64(half)))
                ],
            )
        ]
    )
    assert "could not be decoded" in html or "not an image" in html


# Deeper than the json encoder goes on every supported Python: 3.13's C encoder nests past 3,000
# levels (it stops near 10,000), where 3.11 and 3.12 stop near 1,000.
TOO_DEEP = 20_000


def _deep(levels: int) -> dict[str, object]:
    value: dict[str, object] = {}
    for _ in range(levels):
        value = {"a": value}
    return value


def test_a_tool_call_nested_too_deep_to_serialize_renders_with_a_note() -> None:
    """A validated tool_use whose input nests thousands of levels is shown as a note, not a crash."""
    messages = [
        Message(role="user", content="hi"),
        Message(
            role="assistant",
            content=[ToolUsePart(id="t1", name="f", input={"x": _deep(3000)})],
        ),
    ]
    html = render_transcript(messages)
    assert "tool call · f" in html
    assert "input not shown" in html


def test_an_untrusted_value_nested_too_deep_renders_fenced_with_a_note() -> None:
    """An Untrusted text value that cannot be serialized is still boxed, with a note instead of JSON."""
    message = Message(role="user", content=[TextPart(text=Untrusted(_deep(TOO_DEEP), "tool:web"))])
    html = render_transcript([message])
    assert "untrusted · tool:web" in html
    assert "value not shown" in html


def test_an_untrusted_system_prompt_nested_too_deep_renders_fenced() -> None:
    """A request whose Untrusted system prompt cannot be printed still renders, boxed, with a note."""
    request = LlmRequest(
        messages=[Message(role="user", content="hi")], system=Untrusted(_deep(TOO_DEEP), "tool:web")
    )
    html = render_transcript(request)
    assert "untrusted · tool:web" in html
    assert "value not shown" in html
