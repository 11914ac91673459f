"""A comparison grid as data: a row per input, a column per variant, each cell one answer.

What ``loom_nb.compare`` shows (issue 32), built here from plain values so the rendering stays
pure and below the conversation layer: a ``Grid`` holds, for every input and variant, a
``GridItem`` (the response or the error, the call's latency and price, and the item's whole
transcript). ``grid_view`` turns it into render-ready JSON for the widget's front end and the
static table (``_grid_html``): each cell's reply is the same message view a transcript card
draws (markdown through ``_markdown``'s safe tree, untrusted spans in their fences), its tokens,
latency and cost in words, and a failed item's error; each column gets its totals.

Totals add up what the cells show: tokens of every answered item, the mean latency of the items
that have one, and the cost of the priced ones. A column with answers whose price is unknown
says how many, so a sum is never presented as the whole when it is not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from loom_nb.content import LlmResponse, assistant_message_of
from loom_nb.errors import ConfigurationError
from loom_nb.render._api import transcript_header, transcript_views
from loom_nb.render._source import Transcript, turn_stats
from loom_nb.render._static import stats_text
from loom_nb.render._view import RenderContext, View, message_view
from loom_nb.spending import format_cost

__all__ = [
    "MAX_GRID_ROWS",
    "MAX_LABEL_CHARS",
    "ColumnTotals",
    "Grid",
    "GridItem",
    "column_totals",
    "grid_view",
    "opened_item",
]

MAX_GRID_ROWS = 200
"""Inputs shown in a grid by default; the rest are counted below it (``to_pandas`` has them all)."""

MAX_LABEL_CHARS = 300
"""Characters of an input shown at the head of its row (its transcript has the whole input)."""


@dataclass(frozen=True)
class GridItem:
    """One cell: what one variant answered for one input."""

    response: LlmResponse | None
    """The answer, or None when the item failed (or did not run)."""
    transcript: Transcript | Callable[[], Transcript] = field(default_factory=Transcript)
    """The item's whole exchange: system prompt, seeded history, the input, the answer; or a
    function that reads it (from a journal), called only when the transcript is shown."""
    error: str | None = None
    """Why the item has no answer, in words (None when it has one)."""
    latency_s: float | None = None
    """Seconds the item's model call took (None when not measured)."""
    cost: Decimal | None = None
    """USD price of the answer (None: unknown, or no answer)."""

    def full_transcript(self) -> Transcript:
        """The item's transcript (read now when it was given as a function)."""
        source = self.transcript
        return source if isinstance(source, Transcript) else source()


@dataclass(frozen=True)
class Grid:
    """The inputs, the variants, and ``items[row][column]``: a ``GridItem`` for each pair."""

    variants: Sequence[str]
    """Column names, in the order the user gave them."""
    inputs: Sequence[str]
    """Row labels (each input as text), in input order."""
    items: Sequence[Sequence[GridItem]]
    """One row per input, each with one item per variant."""
    title: str = ""
    """The line above the table (default: its size)."""

    def __post_init__(self) -> None:
        if len(self.items) != len(self.inputs) or any(
            len(row) != len(self.variants) for row in self.items
        ):
            raise ConfigurationError(
                f"a comparison grid needs one row per input ({len(self.inputs)}) and one item per "
                f"variant ({len(self.variants)}) in every row; build it with loom_nb.compare.",
                code="invalid_argument",
                argument="items",
            )


@dataclass
class ColumnTotals:
    """What one variant's column adds up to."""

    items: int = 0
    """Inputs in the column."""
    failed: int = 0
    """Items without an answer."""
    input_tokens: int = 0
    """Input tokens of every answer (cached ones included)."""
    output_tokens: int = 0
    """Output tokens of every answer."""
    latency_s: float = 0.0
    """Seconds of every answer with a measured latency, added up (not wall time: items run
    concurrently)."""
    timed: int = 0
    """Answers with a measured latency."""
    cost: Decimal | None = None
    """USD of the priced answers (None when no answer has a price)."""
    unpriced: int = 0
    """Answers whose price is unknown (not in ``cost``)."""

    @property
    def mean_latency_s(self) -> float | None:
        """Mean seconds per measured answer (None when none was measured)."""
        return self.latency_s / self.timed if self.timed else None

    def text(self) -> str:
        """The totals in words: ``2 answered · 1 failed · 1,200 in · 300 out tokens · avg 1.2 s · $0.0040``."""
        answered = self.items - self.failed
        bits = [f"{answered} answered"]
        if self.failed:
            bits.append(f"{self.failed} failed")
        bits.append(f"{self.input_tokens:,} in · {self.output_tokens:,} out tokens")
        mean = self.mean_latency_s
        if mean is not None:
            bits.append("avg " + (f"{mean:.1f} s" if mean >= 0.1 else f"{mean * 1000:.0f} ms"))
        if self.cost is not None:
            bits.append(
                format_cost(self.cost) + (f" ({self.unpriced} unpriced)" if self.unpriced else "")
            )
        elif answered:
            bits.append("cost unknown")
        return " · ".join(bits)


def column_totals(grid: Grid) -> list[ColumnTotals]:
    """The totals of each variant's column, in column order."""
    totals = [ColumnTotals() for _ in grid.variants]
    for row in grid.items:
        for total, item in zip(totals, row, strict=True):
            total.items += 1
            response = item.response
            if response is None:
                total.failed += 1
                continue
            if item.latency_s is not None:
                total.latency_s += item.latency_s
                total.timed += 1
            total.input_tokens += response.usage.input_tokens
            total.output_tokens += response.usage.output_tokens
            if item.cost is None:
                total.unpriced += 1
            else:
                total.cost = item.cost + (total.cost or Decimal(0))
    return totals


def cell_view(item: GridItem, number: int, ctx: RenderContext) -> View:
    """One cell as JSON: the reply's items, its stats in words, and its error (if any).

    ``number`` makes the media keys of this cell's parts unique in the grid's ``ctx``.
    """
    view: View = {"items": [], "stats": "", "error": item.error}
    response = item.response
    if response is not None:
        reply = assistant_message_of(response)
        ctx.learn_tools([reply])
        view["items"] = message_view(reply, number, ctx)["items"]
        stats = stats_text(turn_stats(response, item.latency_s))
        if item.cost is not None:
            stats = f"{stats} · {format_cost(item.cost)}" if stats else format_cost(item.cost)
        view["stats"] = stats
    elif item.error is None:
        view["error"] = "no answer"
    return view


def grid_view(grid: Grid, ctx: RenderContext, *, max_rows: int = MAX_GRID_ROWS) -> View:
    """The grid as JSON: title, variants, the first ``max_rows`` rows, totals, rows not shown."""
    rows: list[View] = []
    width = len(grid.variants)
    for number, (label, row) in enumerate(zip(grid.inputs, grid.items, strict=True)):
        if number >= max_rows:
            break
        cells = [cell_view(item, number * width + col, ctx) for col, item in enumerate(row)]
        rows.append({"input": _label(label), "cells": cells})
    return {
        "title": grid.title or _title(grid),
        "variants": list(grid.variants),
        "rows": rows,
        "totals": [total.text() for total in column_totals(grid)],
        "omitted": max(0, len(grid.inputs) - max_rows),
    }


def opened_item(grid: Grid, row: int, col: int, ctx: RenderContext) -> tuple[str, list[View]]:
    """What a click on a cell opens: a header line (which input, which variant, the transcript's
    summary) and the message views of the item's whole transcript (read once)."""
    transcript = grid.items[row][col].full_transcript()
    header = f"input {row + 1} · {grid.variants[col]} · {transcript_header(transcript)}"
    return header, transcript_views(transcript, ctx)


def _label(text: str) -> str:
    return text if len(text) <= MAX_LABEL_CHARS else text[:MAX_LABEL_CHARS] + "…"


def _title(grid: Grid) -> str:
    inputs, variants = len(grid.inputs), len(grid.variants)
    return (
        f"comparison · {inputs} input{'s' if inputs != 1 else ''} × {variants} "
        f"variant{'s' if variants != 1 else ''}"
    )
