"""The comparison grid as data and as static HTML: cells, totals, transcripts, and nothing that runs."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest

from loom_nb.errors import ConfigurationError
from loom_nb.render import Grid, GridItem, Transcript, column_totals, grid_html
from loom_nb.render._grid import MAX_LABEL_CHARS, grid_view, opened_item
from loom_nb.render._html import esc
from loom_nb.render._view import RenderContext
from tests.fixtures import grids, hostile
from tests.render.safety import unsafe_parts


def test_a_cell_holds_the_reply_its_stats_and_no_error() -> None:
    """A cell carries its reply's items (markdown tree when marked up), tokens, latency and cost."""
    view = grid_view(grids.sample_grid(), RenderContext())
    assert view["variants"] == ["short", "long"]
    assert [row["input"] for row in view["rows"]] == ["What is 2+2?", "Name a colour."]
    first, second = view["rows"][0]["cells"]
    assert first["items"] == [{"kind": "text", "text": "4", "omitted": 0, "collapsed": False}]
    assert first["stats"] == "12 in · 3 out tokens · 0.5 s · $0.001000"
    assert first["error"] is None
    assert second["items"][0]["md"][0]["children"][1] == {"tag": "strong", "children": ["4"]}
    assert second["stats"] == "30 in · 20 out tokens · 2.0 s · $0.003000"


def test_a_failed_cell_carries_its_error_and_no_stats() -> None:
    """An item without an answer has no items and no stats, and its error in words."""
    view = grid_view(grids.sample_grid(), RenderContext())
    failed = view["rows"][1]["cells"][1]
    assert failed == {"items": [], "stats": "", "error": "ProviderError: overloaded"}
    unanswered = GridItem(None)
    lone = grid_view(Grid(["x"], ["q"], [[unanswered]]), RenderContext())
    assert lone["rows"][0]["cells"][0]["error"] == "no answer"


def test_totals_add_up_tokens_mean_latency_and_priced_cost() -> None:
    """Each column's totals: tokens of the answers, the mean measured latency, the priced cost
    with the unpriced answers counted, and the failures."""
    totals = column_totals(grids.sample_grid())
    short, long = totals
    assert (short.items, short.failed, short.input_tokens, short.output_tokens) == (2, 0, 23, 5)
    assert short.mean_latency_s == pytest.approx(1.0)
    assert (short.cost, short.unpriced) == (Decimal("0.0010"), 1)
    assert (long.items, long.failed, long.input_tokens, long.output_tokens) == (2, 1, 30, 20)
    assert (long.cost, long.unpriced, long.timed) == (Decimal("0.0030"), 0, 1)
    assert [t.text() for t in totals] == grids.EXPECTED_TOTALS
    assert grid_view(grids.sample_grid(), RenderContext())["totals"] == grids.EXPECTED_TOTALS


def test_a_column_without_any_price_says_cost_unknown() -> None:
    """Answers none of which has a price: the totals say "cost unknown", not "$0"."""
    grid = Grid(["x"], ["q"], [[grids.item("q", "a", cost=None)]])
    assert column_totals(grid)[0].cost is None
    assert column_totals(grid)[0].text().endswith("cost unknown")


def test_rows_beyond_max_rows_are_counted_not_drawn() -> None:
    """Only ``max_rows`` inputs are drawn; the others are counted; totals still cover every row."""
    rows = [[grids.item(f"q{n}", f"a{n}", tokens=(1, 1))] for n in range(5)]
    grid = Grid(["x"], [f"q{n}" for n in range(5)], rows)
    view = grid_view(grid, RenderContext(), max_rows=2)
    assert len(view["rows"]) == 2
    assert view["omitted"] == 3
    assert view["totals"][0].startswith("5 answered · 5 in · 5 out tokens")
    html = grid_html(grid, max_rows=2)
    assert "… 3 more inputs not shown" in html
    assert html.count('class="loom-grid-cell"') == 2


def test_a_long_input_is_cut_in_its_row_head() -> None:
    """The row head shows the first characters of a long input; its transcript has it all."""
    long = "x" * (MAX_LABEL_CHARS + 50)
    grid = Grid(["v"], [long], [[grids.item(long, "ok")]])
    view = grid_view(grid, RenderContext())
    assert view["rows"][0]["input"] == "x" * MAX_LABEL_CHARS + "…"
    assert opened_item(grid, 0, 0, RenderContext())[1][0]["items"][0]["text"] == long


def test_a_grid_of_the_wrong_shape_is_refused() -> None:
    """Rows must match the inputs and items the variants: a ConfigurationError says so."""
    with pytest.raises(ConfigurationError, match="one row per input"):
        Grid(["a", "b"], ["q"], [[grids.item("q", "x")]])
    with pytest.raises(ConfigurationError, match="one row per input"):
        Grid(["a"], ["q", "r"], [[grids.item("q", "x")]])


def test_an_items_transcript_and_header() -> None:
    """A click opens the item's whole transcript: system prompt first, the question, the answer."""
    grid = grids.sample_grid()
    header, views = opened_item(grid, 0, 0, RenderContext())
    assert [v["role"] for v in views] == ["system", "user", "assistant"]
    assert header == "input 1 · short · transcript · 2 messages"
    assert opened_item(grid, 1, 1, RenderContext())[0] == "input 2 · long · transcript · 1 message"


def test_a_transcript_given_as_a_function_is_read_only_when_opened() -> None:
    """An item whose transcript is a function (read from a journal) is not read to draw the
    grid, and is read once per opening."""
    calls: list[int] = []
    answered = grids.item("q", "a")

    def load() -> Transcript:
        calls.append(1)
        return answered.full_transcript()

    grid = Grid(["v"], ["q"], [[GridItem(answered.response, load)]])
    grid_view(grid, RenderContext())
    assert calls == []
    header, views = opened_item(grid, 0, 0, RenderContext())
    assert calls == [1]
    assert header == "input 1 · v · transcript · 2 messages"
    assert [v["role"] for v in views] == ["user", "assistant"]


def test_static_table_has_heads_cells_totals_and_transcripts() -> None:
    """The static table: a head per variant, a row head per input, a cell per item with its
    stats, the error of a failed one, each transcript in a details, the totals in the footer."""
    html = grid_html(grids.sample_grid())
    assert unsafe_parts(html) == []
    heads = re.findall(r"<th [^>]*>([^<]*)</th>", html.split("<tbody>")[0])
    assert heads == ["input", "short", "long"]
    assert html.count('class="loom-grid-cell"') == 4
    assert html.count('<details class="loom-grid-transcript">') == 4
    assert "failed: ProviderError: overloaded" in html
    assert "30 in · 20 out tokens · 2.0 s · $0.003000" in html
    footer = html.split("<tfoot>")[1]
    for text in grids.EXPECTED_TOTALS:
        assert esc(text) in footer
    assert "<style" not in html
    assert " id=" not in html


def test_hostile_replies_and_names_render_inert_in_the_static_table() -> None:
    """Script in an input, a variant name, a reply or a tool result appears only escaped; a
    ``javascript:`` markdown link is text; the https link keeps rel=noopener; the image is not
    loaded; the untrusted tool result stays boxed in its fence."""
    html = grid_html(grids.hostile_grid())
    assert unsafe_parts(html) == []
    for needle in (hostile.SCRIPT, hostile.ONERROR, grids.ONERROR_REPLY, "b<script>"):
        assert needle not in html
        assert esc(needle) in html
    assert 'href="javascript' not in html
    assert "[a bad link](javascript:window.__pwned=3)" in html  # literal text, no link
    assert (
        '<a href="https://example.com/page" rel="noopener noreferrer nofollow" target="_blank"'
        in html
    )
    assert "[image: pic]" in html
    assert "<img" not in html
    assert "untrusted · tool:fetch</legend>" in html
    assert "<pre " in html
    assert "<strong>Bold</strong>" in html


def test_the_static_table_keeps_the_first_transcripts_only() -> None:
    """Beyond ``max_transcripts`` cells (row by row) a cell has no transcript details, and a
    note says how many the table keeps; every cell is still drawn."""
    rows = [[grids.item(f"q{n}", f"a{n}"), grids.item(f"q{n}", f"b{n}")] for n in range(3)]
    grid = Grid(["x", "y"], [f"q{n}" for n in range(3)], rows)
    html = grid_html(grid, max_transcripts=3)
    assert html.count('class="loom-grid-cell"') == 6
    assert html.count('<details class="loom-grid-transcript">') == 3
    assert "keeps the full transcripts of its first 3 cells" in html
    assert "keeps the full" not in grid_html(grid)
