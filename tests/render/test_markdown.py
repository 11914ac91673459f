"""Assistant markdown: CommonMark with highlighted code, and hostile markdown stays inert."""

from __future__ import annotations

import re

import pytest

from loom_nb.content import Message, TextPart, ToolResultPart
from loom_nb.render import render_message, render_transcript
from loom_nb.render._markdown import markdown_tree, safe_href
from loom_nb.render._view import RenderContext, message_view
from loom_nb.taint import Untrusted
from tests.fixtures import hostile
from tests.render.safety import tags_of, unsafe_parts


def _assistant(text: str) -> str:
    return render_message(Message(role="assistant", content=text))


def test_bold_lists_headings_tables_render_as_markup() -> None:
    """The usual reply markup becomes tags, not literal asterisks and pipes."""
    html = _assistant(
        "# Plan\n\n**bold** and *em* and ~~old~~\n\n- one\n- two\n\n| a | b |\n|:-|-:|\n| 1 | 2 |"
    )
    assert "<strong>bold</strong>" in html
    assert "<em" in html
    assert "<s>old</s>" in html
    assert re.search(r"<h1[^>]*>Plan</h1>", html)
    assert [t for t in tags_of(html) if t in {"ul", "li", "table", "th", "td"}] == [
        "ul", "li", "li", "table", "th", "th", "td", "td",
    ]  # fmt: skip
    assert "text-align:right" in html
    assert "**" not in html


def test_code_block_is_highlighted_with_theme_colours() -> None:
    """A fenced python block gets Pygments runs coloured by JupyterLab's editor variables."""
    html = _assistant('```python\ndef f(x):\n    return "<s>"  # note\n```')
    assert "var(--jp-mirror-editor-keyword-color" in html
    assert "var(--jp-mirror-editor-string-color" in html
    assert "&quot;&lt;s&gt;&quot;" in html
    assert "python" in html
    assert "<pre" in html
    assert "<code>" in html


def test_unknown_language_is_shown_plain() -> None:
    """A fence with a language Pygments does not know is escaped text, no colour runs."""
    tree = markdown_tree("```nosuchlang\n<b>x</b>\n```")
    assert tree == [{"tag": "pre", "lang": "nosuchlang", "code": "<b>x</b>\n", "hl": None}]


def test_plain_prose_carries_no_tree() -> None:
    """Text without markup is shown as before (no ``md`` in the view, state stays small)."""
    assert markdown_tree("just a sentence, nothing more.") is None
    assert markdown_tree("Done!") is None
    view = message_view(Message(role="assistant", content="plain words"), 0, RenderContext())
    assert "md" not in view["items"][0]


def test_user_and_tool_text_is_never_markdown() -> None:
    """Only assistant text is rendered: a user's or a tool's ``**x**`` stays literal."""
    ctx = RenderContext()
    user = message_view(Message(role="user", content="**x**"), 0, ctx)
    assert "md" not in user["items"][0]
    result = Message(role="user", content=[ToolResultPart(tool_use_id="t", content="**x**")])
    assert "**x**" in render_message(result)


def test_untrusted_assistant_text_stays_literal_in_its_fence() -> None:
    """An Untrusted value in an assistant message, and a guard-fenced span, are not markdown."""
    html = render_transcript(hostile.hostile_markdown_messages()[-2:])
    boxes = re.findall(r"<fieldset.*?</fieldset>", html, re.S)
    assert len(boxes) == 2
    for box in boxes:
        assert "**not bold** [not a link](https://evil.example) &lt;b&gt;x&lt;/b&gt;" in box
        assert "<strong>" not in box
        assert "<a " not in box
    assert "<strong>trusted</strong>" in html  # the trusted part before the fence is rendered


def test_safe_href_allows_only_web_and_mail() -> None:
    """http(s) and mailto pass; every other scheme, relative paths and spaces do not."""
    assert safe_href("https://a.example/x?q=1") == "https://a.example/x?q=1"
    assert safe_href("mailto:someone@example.org") == "mailto:someone@example.org"
    for bad in (
        "javascript:alert(1)",
        "JAVASCRIPT:alert(1)",
        "data:text/html,x",
        "vbscript:x",
        "file:///etc/passwd",
        "/relative",
        "#anchor",
        "https://a b",
        "mailto:x@y/../",
        "https://x\n",
    ):
        assert safe_href(bad) is None, bad


@pytest.fixture(scope="module")
def hostile_html() -> str:
    """The hostile markdown replies rendered once."""
    return render_transcript(hostile.hostile_markdown_messages())


def test_hostile_markdown_has_nothing_that_can_run_or_load(hostile_html: str) -> None:
    """No raw tags, no handlers, no img from markdown, links only to https with rel=noopener."""
    assert unsafe_parts(hostile_html) == []
    assert "<img" not in hostile_html
    assert "<script" not in hostile_html
    assert "onerror=" not in hostile_html.replace("onerror=&quot;", "")
    hrefs = re.findall(r'href="([^"]*)"', hostile_html)
    assert hrefs
    assert all(h.startswith("https://") for h in hrefs), hrefs


def test_hostile_markdown_links_keep_only_safe_targets(hostile_html: str) -> None:
    """javascript:, data:, vbscript:, file: and relative links are text; remote images are text + link."""
    for scheme in ("javascript:", "vbscript:", "data:", "file:"):
        assert f'href="{scheme}' not in hostile_html.lower()
    assert "[image: tracker] · not loaded: " in hostile_html
    assert 'href="https://evil.example/pixel.png"' in hostile_html
    assert "[image: ref] · not loaded: " in hostile_html  # reference-style image too
    assert "onmouseover" not in hostile_html.replace("onmouseover=\\&quot;", "")


def test_nested_fences_stay_code(hostile_html: str) -> None:
    """A fence inside a longer fence is code text; a hostile info string is escaped text."""
    assert "```html\n&lt;script&gt;window.__pwned=11&lt;/script&gt;\n```" in hostile_html
    assert "&quot;&gt;&lt;img" in hostile_html
    assert "&lt;b&gt;code&lt;/b&gt;" in hostile_html


@pytest.mark.parametrize("text", hostile.HOSTILE_MARKDOWN)
def test_each_hostile_reply_alone_is_safe(text: str) -> None:
    """Every hostile markdown string on its own renders with nothing unsafe."""
    assert unsafe_parts(_assistant(text)) == []


def test_markdown_tree_drops_unknown_node_shapes() -> None:
    """The static serializer ignores tags outside its sets (a tampered view cannot add <script>)."""
    from loom_nb.render._static import html_of_markdown

    nodes = [
        {"tag": "script", "children": ["x"]},
        {"tag": "a", "href": "javascript:alert(1)", "children": ["y"]},
        {"tag": "p", "children": ["<b>z</b>"]},
        {"tag": "ol", "start": '1" onclick="x', "children": []},
    ]
    html = html_of_markdown(nodes)
    assert unsafe_parts(html) == []
    assert "script" not in html
    assert "javascript" not in html
    assert "onclick" not in html
    assert "y" in html
    assert "&lt;b&gt;z&lt;/b&gt;" in html


def test_assistant_parts_keep_their_order() -> None:
    """Markdown text and other parts of one assistant message keep their order."""
    message = Message(role="assistant", content=[TextPart(text="**a**"), TextPart(text="b")])
    html = render_message(message)
    assert html.index("<strong>a</strong>") < html.index(">b<")


def test_untrusted_value_object_is_never_parsed() -> None:
    """An Untrusted value, even one that is all markdown, is boxed literal."""
    part = TextPart(text=Untrusted("# title\n\n```py\nx\n```", "mcp:notes"))
    html = render_message(Message(role="assistant", content=[part]))
    assert "<h1" not in html
    assert "# title" in html
