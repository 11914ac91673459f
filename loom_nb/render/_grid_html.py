"""A comparison grid as static HTML: the table a saved notebook, GitHub and nbviewer show.

The same JSON the widget draws (``_grid.grid_view``) written as one ``<table>``: the variants as
column heads, a row per input headed by the input, each cell the reply (``_static`` draws its
items: markdown, fences, tool calls), its stats and, for a failed item, the error in words; the
column totals in the footer. A cell's whole transcript sits in a ``<details>`` under it, so a
click opens it with no kernel and no script (``<details>`` survives JupyterLab's sanitizer).

As everywhere in the static renderer (``_html``): every string is escaped, attributes are
constants, styles inline and limited to what the sanitizer keeps, and no ``id``.
"""

from __future__ import annotations

from collections.abc import Sequence

from loom_nb.render._api import html_of_views
from loom_nb.render._grid import MAX_GRID_ROWS, Grid, grid_view, opened_item
from loom_nb.render._html import DANGER, INK, LINE, STYLE, esc, theme
from loom_nb.render._resolve import ContentReader, Viewer
from loom_nb.render._static import html_of_items
from loom_nb.render._view import RenderContext, View

__all__ = ["GRID_STYLE", "MAX_STATIC_TRANSCRIPTS", "grid_html", "html_of_grid"]

MAX_STATIC_TRANSCRIPTS = 120
"""Cells whose whole transcript the static table carries (row by row): about 2.5 KB each, so a
saved notebook stays small however large the comparison; the live grid opens any cell."""

Opened = tuple[str, list[View]]
"""An item's transcript for its ``<details>``: the header line and the message views."""

GRID_STYLE: dict[str, str] = {
    "table": "border-collapse:collapse;font-size:13px;margin:6px 0",
    "head": f"border-width:1px;border-style:solid;border-color:{LINE};padding:4px 8px;"
    f"text-align:left;vertical-align:bottom;color:{INK};"
    f"background-color:{theme('layout-color2', '#f0f3f8')}",
    "input": f"border-width:1px;border-style:solid;border-color:{LINE};padding:4px 8px;"
    f"text-align:left;vertical-align:top;font-weight:normal;white-space:pre-wrap;"
    f"word-break:break-word;min-width:10em;max-width:24em;color:{INK}",
    "cell": f"border-width:1px;border-style:solid;border-color:{LINE};padding:4px 8px;"
    f"text-align:left;vertical-align:top;min-width:16em;max-width:40em;color:{INK}",
    "failed": f"border-width:2px;border-style:solid;border-color:{DANGER};padding:2px 6px;"
    f"margin:2px 0;white-space:pre-wrap;word-break:break-word;color:{INK}",
    "total": f"border-width:2px 1px 1px 1px;border-style:solid;border-color:{LINE};"
    f"padding:4px 8px;text-align:left;vertical-align:top;font-size:12px;font-weight:bold;"
    f"color:{INK}",
}
"""Inline styles of the table, only properties JupyterLab's sanitizer keeps (``_html.STYLE``)."""


def grid_html(
    grid: Grid,
    *,
    store: ContentReader | None = None,
    principal: Viewer | None = None,
    max_rows: int = MAX_GRID_ROWS,
    max_transcripts: int = MAX_STATIC_TRANSCRIPTS,
) -> str:
    """The static table of ``grid``, each shown cell with its whole transcript in a ``<details>``
    (the first ``max_transcripts`` cells, row by row; a note says so when there are more).

    Refs are shown only when ``principal``'s tenant stored them in ``store``; each transcript is
    drawn in its own context (a call id in one item never names another item's tool).
    """
    view = grid_view(
        grid, RenderContext(store=store, principal=principal, pdf_pages=1), max_rows=max_rows
    )
    width = len(grid.variants)
    opened = [
        [
            opened_item(
                grid, row, col, RenderContext(store=store, principal=principal, pdf_pages=1)
            )
            if row * width + col < max_transcripts
            else None
            for col in range(width)
        ]
        for row in range(len(view["rows"]))
    ]
    return html_of_grid(view, opened)


def html_of_grid(view: View, opened: Sequence[Sequence[Opened | None]] | None = None) -> str:
    """The grid ``view`` as a table; ``opened[row][col]`` adds each cell's transcript below it
    (None: that cell has none, and a note under the table says the live grid opens it)."""
    heads = "".join(
        f'<th class="loom-grid-variant" style="{GRID_STYLE["head"]}">{esc(name)}</th>'
        for name in view["variants"]
    )
    rows = []
    for number, row in enumerate(view["rows"]):
        cells = "".join(
            _cell(cell, opened[number][col] if opened is not None else None)
            for col, cell in enumerate(row["cells"])
        )
        rows.append(
            f'<tr><th class="loom-grid-input" style="{GRID_STYLE["input"]}">'
            f'<div style="{STYLE["meta"]}">input {number + 1}</div>{esc(row["input"])}</th>'
            f"{cells}</tr>"
        )
    totals = "".join(
        f'<td class="loom-grid-total" style="{GRID_STYLE["total"]}">{esc(text)}</td>'
        for text in view["totals"]
    )
    omitted = int(view.get("omitted") or 0)
    more = (
        f'<div class="loom-grid-more" style="{STYLE["meta"]}">… {omitted} more input'
        f"{'s' if omitted != 1 else ''} not shown (comparison.to_pandas() has every row)</div>"
        if omitted
        else ""
    )
    kept = [item is not None for row in (opened or []) for item in row]
    if not all(kept):
        more += (
            f'<div class="loom-grid-more" style="{STYLE["meta"]}">this table keeps the full '
            f"transcripts of its first {sum(kept)} cells; in a running kernel, a click on any "
            "cell of the grid opens its transcript</div>"
        )
    return (
        f'<div class="loom-compare" style="{STYLE["transcript"]};max-width:none">'
        f'<div class="loom-header" style="{STYLE["header"]}">{esc(view["title"])}</div>'
        f'<table class="loom-grid" style="{GRID_STYLE["table"]}">'
        f'<thead><tr><th style="{GRID_STYLE["head"]}">input</th>{heads}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody>"
        f'<tfoot><tr><th style="{GRID_STYLE["total"]}">totals</th>{totals}</tr></tfoot>'
        f"</table>{more}</div>"
    )


def _cell(cell: View, opened: Opened | None) -> str:
    error = cell.get("error")
    failed = (
        f'<div class="loom-grid-error" style="{GRID_STYLE["failed"]}">failed: {esc(error)}</div>'
        if error
        else ""
    )
    stats = cell.get("stats")
    line = f'<div class="loom-stats" style="{STYLE["stats"]}">{esc(stats)}</div>' if stats else ""
    transcript = ""
    if opened is not None:
        header, views = opened
        transcript = (
            f'<details class="loom-grid-transcript"><summary style="{STYLE["meta"]}">'
            f"full transcript</summary>{html_of_views(header, views)}</details>"
        )
    return (
        f'<td class="loom-grid-cell" style="{GRID_STYLE["cell"]}">'
        f"{html_of_items(cell['items'])}{failed}{line}{transcript}</td>"
    )
