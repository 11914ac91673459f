"""Transcripts as Markdown: literal text stays literal, untrusted text stays fenced, nothing is markup.

Each page is read back with markdown-it in its most permissive setting (raw HTML on, as many
Markdown viewers are), so what a renderer would make of it is checked, not the string's shape.
"""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token

from loom_nb.content import Message, TextPart, ToolResultPart, ToolUsePart
from loom_nb.render._markdown import markdown_tree
from loom_nb.render._source import Transcript
from loom_nb.render._to_markdown import fenced, literal, markdown_of_tree, transcript_markdown
from loom_nb.taint import Untrusted
from tests.fixtures import hostile

PERMISSIVE = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def _flat(tokens: list[Token]) -> list[Token]:
    out: list[Token] = []
    for token in tokens:
        out.append(token)
        out.extend(_flat(token.children or []))
    return out


def _shown_text(markdown: str) -> str:
    """The words a viewer shows for ``markdown`` that is one paragraph per blank-line block."""
    paragraphs = []
    tokens = PERMISSIVE.parse(markdown)
    for token in tokens:
        if token.type == "inline":
            words = []
            for child in token.children or []:
                if child.type in {"text", "code_inline"}:
                    words.append(child.content)
                elif child.type in {"softbreak", "hardbreak"}:
                    words.append("\n")
                else:
                    words.append(f"<{child.type}>")  # anything else is markup: a failure
            paragraphs.append("".join(words))
        elif token.type not in {"paragraph_open", "paragraph_close"}:
            paragraphs.append(f"<{token.type}>")
    return "\n\n".join(paragraphs)


def _expected(text: str) -> str:
    """``text`` as ``literal`` promises to show it: leading spaces kept (as no-break spaces), blank
    lines as paragraph breaks, trailing spaces and blank runs dropped."""
    paragraphs: list[list[str]] = [[]]
    for line in text.split("\n"):
        if line.strip():
            body = line.lstrip()
            paragraphs[-1].append("\xa0" * (len(line) - len(body)) + body.rstrip())
        elif paragraphs[-1]:
            paragraphs.append([])
    return "\n\n".join("\n".join(p) for p in paragraphs if p)


MARKUP_HEAVY = st.lists(
    st.sampled_from(list("ab 1.-+*_#>`~|[]()<>!&;=:/\\$^{}\"'\t\n"))
    | st.sampled_from(["http://x.org", "&amp;", "<b>", "```", "    ", "1. ", "- [ ] ", "***"])
    | st.sampled_from(["é", "\xa0", "\u2003", "\u200b", "\u202e", "日本"]),
    max_size=40,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(MARKUP_HEAVY)
def test_literal_text_shows_exactly_its_words(text: str) -> None:
    """Whatever markup characters a line holds, a viewer shows the words, as text, line by line."""
    shown = _shown_text(literal(text))
    assert shown == _expected(text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80) | MARKUP_HEAVY)
def test_fenced_text_is_one_code_block_with_that_text(text: str) -> None:
    """No line can close the fence early: the page is one code block holding the text."""
    tokens = PERMISSIVE.parse(fenced(text, "untrusted", "origin=tool:x y"))
    assert [t.type for t in tokens] == ["fence"]
    clean = re.sub(
        r"[\x00-\x08\x0b-\x1f\x7f]", "\ufffd", text.replace("\r\n", "\n").replace("\r", "\n")
    )
    assert tokens[0].content == (clean + "\n" if clean and not clean.endswith("\n") else clean)
    assert tokens[0].info == "untrusted origin=tool:x%20y"


def _page(messages: list[Message], **kwargs: Any) -> str:
    def media(_part: Any, label: str) -> list[str]:
        return [f"*{label}*\n"]

    return "".join(
        transcript_markdown(Transcript(messages, **kwargs), header="chat t", media=media)
    )


def _check_inert(page: str) -> list[Token]:
    """No raw HTML, no link but http(s)/mailto, and every untrusted block's text in a code block."""
    tokens = _flat(PERMISSIVE.parse(page))
    assert [t.type for t in tokens if t.type in {"html_block", "html_inline", "image"}] == []
    for link in (t for t in tokens if t.type == "link_open"):
        assert re.match(r"(https?://|mailto:)", str(link.attrGet("href"))), link.attrGet("href")
    return tokens


def test_hostile_transcript_is_inert_and_fenced() -> None:
    """The hostile fixtures (scripts, handlers, forged fences, bombs) export as inert Markdown."""
    page = _page(hostile.hostile_messages() + hostile.hostile_markdown_messages())
    tokens = _check_inert(page)
    fences = [t for t in tokens if t.type == "fence" and t.info.startswith("untrusted")]
    assert fences
    for text in hostile.HOSTILE_STRINGS:
        for fence in fences:
            if text in fence.content:
                break
        else:  # not untrusted anywhere: then it is only ever text, never markup
            assert all(text not in t.content for t in tokens if t.type.startswith("html")), text


def test_untrusted_text_is_quoted_in_a_code_block_marked_with_its_origin() -> None:
    """An untrusted part: a quote headed by its origin, its text (blank lines too) in the quote."""
    evil = "ok\n\n# Heading\n<script>x()</script>\n\n```\n[link](https://evil.example)"
    page = _page([Message(role="user", content=[TextPart(text=evil, origin="tool:web_fetch")])])
    tokens = PERMISSIVE.parse(page)
    types = [t.type for t in tokens]
    start, end = types.index("blockquote_open"), types.index("blockquote_close")
    fence = next(t for t in tokens[start:end] if t.type == "fence")
    assert fence.info == "untrusted origin=tool:web_fetch"
    assert fence.content == evil + "\n"
    assert "**untrusted** · tool:web\\_fetch" in page
    assert [
        t
        for t in tokens
        if t.type in {"heading_open", "html_block"} and t.tag != "h1" and t.tag != "h2"
    ] == []


def test_untrusted_values_and_fence_tags_are_fenced_too() -> None:
    """Untrusted(...) values, a tool result's untrusted content and guard fence tags are quoted."""
    nonce = "0123456789abcdef"
    guarded = f'see <untrusted nonce="{nonce}" origin="tool:rss">**bold?**</untrusted nonce="{nonce}"> end'
    messages = [
        Message(role="user", content=[TextPart(text=Untrusted("**v**", "peer:agent"))]),
        Message(role="assistant", content=[ToolUsePart(id="c1", name="get", input={"q": "x"})]),
        Message(
            role="user",
            content=[ToolResultPart(tool_use_id="c1", content=Untrusted("*r*", "mcp:web/get"))],
        ),
        Message(role="assistant", content=guarded),
    ]
    tokens = PERMISSIVE.parse(_page(messages))
    infos = [t.info for t in tokens if t.type == "fence"]
    assert "untrusted origin=peer:agent" in infos
    assert "untrusted origin=mcp:web/get" in infos
    assert "untrusted origin=tool:rss" in infos
    assert [t.content for t in tokens if t.type == "fence" and t.info.endswith("tool:rss")] == [
        "**bold?**\n"
    ]
    flat = _flat(tokens)
    marked = {
        flat[i + 1].content for i, t in enumerate(flat) if t.type in {"strong_open", "em_open"}
    }
    assert not marked & {"v", "bold?", "r"}  # no untrusted text became bold or emphasis


def test_the_models_markdown_stays_markdown_without_raw_html() -> None:
    """The model's own reply keeps its markup; its raw HTML and script links come out as text."""
    reply = "# Plan\n\n**bold** <b>raw</b> [ok](https://ok.example/x(1)) [no](javascript:alert(1))\n\n- a\n- b\n\n```py\nx = 1\n```"
    page = _page([Message(role="assistant", content=reply)])
    tokens = _check_inert(page)
    assert [t.tag for t in tokens if t.type == "heading_open"] == ["h1", "h2", "h3"]  # shifted
    assert any(t.type == "strong_open" for t in tokens)
    assert [t.attrGet("href") for t in tokens if t.type == "link_open"] == [
        "https://ok.example/x%281%29"
    ]
    assert any(t.type == "fence" and t.info == "py" and t.content == "x = 1\n" for t in tokens)
    assert "<b>raw</b>" in "".join(t.content for t in tokens if t.type == "text")


def test_tree_round_trip_keeps_lists_tables_and_quotes() -> None:
    """A reply written back from its tree parses to the same tree."""
    reply = "> quoted *em*\n\n1. one\n2. two\n   - inner\n\n| a | b |\n|:-|-:|\n| 1 | 2 |\n\n---\n\n~~gone~~ `code`"
    tree = markdown_tree(reply)
    assert tree is not None
    assert markdown_tree(markdown_of_tree(tree)) == tree
