"""CompareGrid: the synced grid, a click opening an item's transcript, media by cell, the static table."""

from __future__ import annotations

import json
from typing import Any

import pytest

from loom_nb.content import DataSource, ImagePart, LlmResponse, Message, Usage
from loom_nb.errors import ConfigurationError
from loom_nb.render import Grid, GridItem, Transcript
from loom_nb.widgets import CompareGrid
from tests.fixtures import grids, hostile
from tests.render.safety import unsafe_parts


def test_the_grid_syncs_variants_rows_and_totals() -> None:
    """The synced state is the grid's JSON: variants, one row per input, the totals in words."""
    view = CompareGrid(grids.sample_grid())
    state = view.get_state()
    assert state["variants"] == ["short", "long"]
    assert [row["input"] for row in state["rows"]] == ["What is 2+2?", "Name a colour."]
    assert state["rows"][1]["cells"][1]["error"] == "ProviderError: overloaded"
    assert state["totals"] == grids.EXPECTED_TOTALS
    assert state["title"] == "comparison · 2 inputs × 2 variants"
    assert state["opened"] == {}
    assert state["selected"] == {}
    json.dumps(state["rows"])  # plain JSON, nothing else


def test_a_click_opens_the_items_transcript() -> None:
    """The front end's click (a ``selected`` state update) makes the kernel draw that item's
    whole transcript into ``opened``; closing empties it."""
    view = CompareGrid(grids.sample_grid())
    view.set_state({"selected": {"row": 0, "col": 0}})
    opened = view.opened
    assert (opened["row"], opened["col"]) == (0, 0)
    assert opened["header"] == "input 1 · short · transcript · 2 messages"
    assert [m["role"] for m in opened["messages"]] == ["system", "user", "assistant"]
    view.open_item(1, 1)
    assert view.opened["header"] == "input 2 · long · transcript · 1 message"
    view.close_item()
    assert view.opened == {}
    assert view.selected == {}


@pytest.mark.parametrize(
    "where", [{"row": 2, "col": 0}, {"row": 0, "col": 5}, {"row": "0", "col": 0}]
)
def test_an_item_outside_the_grid_is_refused(where: dict[str, Any]) -> None:
    """Opening a row or column the grid does not have is a ConfigurationError naming the ranges."""
    view = CompareGrid(grids.sample_grid())
    with pytest.raises(ConfigurationError, match="rows go from 0 to 1"):
        view.selected = where
    assert view.opened == {}


def test_rows_beyond_max_rows_cannot_be_opened() -> None:
    """A row not drawn (beyond ``max_rows``) is not selectable; the count of the rest is synced."""
    view = CompareGrid(grids.sample_grid(), max_rows=1)
    assert view.omitted == 1
    assert len(view.rows) == 1
    with pytest.raises(ConfigurationError):
        view.open_item(1, 0)


@pytest.mark.parametrize("bad", [0, -1, True, "3"])
def test_max_rows_must_be_a_positive_whole_number(bad: Any) -> None:
    """``max_rows`` of 0, a negative, a bool or a string is refused."""
    with pytest.raises(ConfigurationError, match="max_rows"):
        CompareGrid(grids.sample_grid(), max_rows=bad)


def test_only_a_grid_is_accepted() -> None:
    """Anything but a ``Grid`` is refused with the way to build one."""
    with pytest.raises(ConfigurationError, match="compare"):
        CompareGrid([["a"]])  # type: ignore[arg-type]


def _image_grid() -> Grid:
    image = ImagePart(
        media_type="image/png", source=DataSource(data=hostile.b64(hostile.png_bytes()))
    )
    answer = LlmResponse(
        content="a blue box", stop_reason="end_turn", usage=Usage(input_tokens=1, output_tokens=1)
    )
    transcript = Transcript(
        [Message(role="user", content=[image]), Message(role="assistant", content="a blue box")]
    )
    return Grid(["v"], ["what is this?"], [[GridItem(answer, transcript)]])


def test_media_requests_are_answered_from_the_opened_item() -> None:
    """A full-size request from the opened transcript is answered from that item's render
    context; before it is opened, or asked as a cell's, the key names nothing."""
    view = CompareGrid(_image_grid())
    request = {"type": "full", "key": "0.0", "ticket": "1", "where": "opened"}
    assert view.answer(request)["unavailable"] == "no such media in this comparison"
    view.open_item(0, 0)
    assert view.opened["messages"][0]["items"][0]["kind"] == "image"
    cells = view.answer({**request, "where": "cells"})
    assert cells["unavailable"] == "no such media in this comparison"
    sent: list[Any] = []
    view.send = sent.append  # type: ignore[method-assign]
    view._handle_custom_msg({**request, "ticket": "3"}, [])
    assert sent[0]["ticket"] == "3"
    assert "data" in sent[0]
    view.close_item()
    assert "unavailable" in view.answer(request)


def test_hostile_content_only_reaches_text_fields_and_the_static_table_escaped() -> None:
    """Script-like replies, inputs and variant names are plain strings in the synced JSON (the
    front end sets them as text) and escaped in the static table, which has nothing that runs."""
    view = CompareGrid(grids.hostile_grid())
    payload = json.dumps(view.get_state(["rows", "variants"]))
    assert "onerror" in payload  # present as text, for textContent...
    html = view.to_static_html()
    assert unsafe_parts(html) == []  # ...and never as markup
    assert grids.ONERROR_REPLY not in html
    bundle, _ = view._repr_mimebundle_()
    assert bundle["text/html"] == html
    assert bundle["text/plain"] == "CompareGrid(1 input × a, b<script>)"
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_the_esm_reuses_the_transcript_front_end() -> None:
    """The grid's front end carries TranscriptDom once, exports only its own widget, and never
    parses HTML."""
    esm = CompareGrid._esm
    assert esm.count("class TranscriptDom") == 1
    assert esm.count("export default") == 1
    assert "innerHTML" not in esm
    assert "insertAdjacentHTML" not in esm
