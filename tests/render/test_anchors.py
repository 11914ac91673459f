"""Exported pages link each tool result to its call (and back) with ids made of numbers only."""

from __future__ import annotations

import re
from pathlib import Path

from loom_nb.content import Message, ToolResultPart, ToolUsePart
from loom_nb.render import render_transcript, to_html
from tests.fixtures import hostile
from tests.render.safety import unsafe_parts


def _pair(call_id: str = "call_1", name: str = "chart") -> list[Message]:
    return [
        Message(role="assistant", content=[ToolUsePart(id=call_id, name=name, input={"x": 1})]),
        Message(role="user", content=[ToolResultPart(tool_use_id=call_id, content="done")]),
    ]


def test_exported_page_links_result_and_call(tmp_path: Path) -> None:
    """The result reads 'result of chart · call_1' with call_1 linking to the call's id, and back."""
    page = to_html(_pair(), tmp_path / "t.html").read_text(encoding="utf-8")
    assert re.search(r'<div class="loom-tool-use" id="loom-call-1"', page)
    assert re.search(r'<div class="loom-tool-result" id="loom-result-1"', page)
    assert re.search(r'result of chart · <a href="#loom-call-1"[^>]*>call_1</a>', page)
    assert re.search(r'<a href="#loom-result-1"[^>]*>its result</a>', page)
    ids = set(re.findall(r'id="([^"]+)"', page))
    targets = {h[1:] for h in re.findall(r'href="(#[^"]+)"', page)}
    assert targets <= ids  # every anchor link lands on an element of the page


def test_notebook_output_has_no_ids() -> None:
    """render_transcript without anchors (notebook outputs: the sanitizer strips ids) has none."""
    html = render_transcript(_pair())
    assert " id=" not in html
    assert "result of chart · call_1" in html
    assert "href=" not in html


def test_hostile_call_ids_never_reach_an_attribute(tmp_path: Path) -> None:
    """Ids are numbers; a call id full of markup stays escaped text beside them."""
    page = to_html(hostile.hostile_messages(), tmp_path / "h.html").read_text(encoding="utf-8")
    assert set(re.findall(r'id="([^"]+)"', page)) == {"loom-call-1", "loom-result-1"}
    assert 'href="#loom-call-1"' in page
    body = page.split("<body", 1)[1]
    assert (
        unsafe_parts(
            re.sub(r' (id="loom-(call|result)-\d+"|href="#loom-(call|result)-\d+")', "", body)
        )
        == []
    )


def test_result_without_its_call_is_not_linked(tmp_path: Path) -> None:
    """A result whose call is not on the page names the call in words, with no dangling link."""
    page = to_html(_pair()[1:], tmp_path / "r.html").read_text(encoding="utf-8")
    assert "result of call call_1" in page
    assert "#loom-call" not in page


def test_repeated_results_link_back_but_only_the_first_gets_the_id(tmp_path: Path) -> None:
    """Two results for one call (a replay of the journal, say) keep ids unique."""
    messages = [*_pair(), _pair()[1]]
    page = to_html(messages, tmp_path / "d.html").read_text(encoding="utf-8")
    assert page.count('id="loom-result-1"') == 1
    assert page.count('href="#loom-call-1"') == 2
