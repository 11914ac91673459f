"""CompareGrid: a comparison of variants over inputs as one anywidget, with a static table.

A row per input, a column per variant (``loom_nb.render._grid``): each cell the reply (markdown,
fences, tool calls, drawn by TranscriptView's front-end code, which is loaded first into the same
module), its tokens, latency and cost; the column totals below. A click on a cell sets
``selected`` from the front end; the kernel answers by drawing that item's whole transcript into
``opened``, shown in a panel under the grid. Only the opened item's transcript is synced, so the
widget state stays the size of the grid plus one transcript.

``_repr_mimebundle_`` adds the static table (``render._grid_html``): what untrusted JupyterLab
outputs, GitHub and nbval see; there a ``<details>`` under each cell opens its transcript.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import traitlets

from loom_nb.errors import ConfigurationError
from loom_nb.render._grid import MAX_GRID_ROWS, Grid, grid_view, opened_item
from loom_nb.render._grid_html import grid_html
from loom_nb.render._resolve import ContentReader, Viewer
from loom_nb.render._view import RenderContext, View
from loom_nb.widgets._base import STATIC, StaticFallbackWidget, combined_esm, media_reply
from loom_nb.widgets._stream import StreamMessage, stream_messages

__all__ = ["CompareGrid"]

_MISSING = "no such media in this comparison"


class CompareGrid(StaticFallbackWidget):
    """The grid of a ``Grid`` (what ``loom_nb.compare`` returns shows as this).

    ``grid.open_item(row, col)`` opens an item's transcript (what a click on its cell does);
    ``grid.close_item()`` closes it. At most ``max_rows`` inputs are drawn; the rest are counted
    below the table. Refs are shown only when ``principal``'s tenant stored them in ``store``.
    """

    _esm = combined_esm("compare.js")
    _css = (STATIC / "transcript.css").read_text(encoding="utf-8") + (
        STATIC / "compare.css"
    ).read_text(encoding="utf-8")

    title = traitlets.Unicode("").tag(sync=True)
    """The line above the table."""
    variants: traitlets.List[str] = traitlets.List().tag(sync=True)
    """Column names."""
    rows: traitlets.List[View] = traitlets.List().tag(sync=True)
    """One ``{"input", "cells"}`` per shown input; each cell ``{"items", "stats", "error"}``."""
    totals: traitlets.List[str] = traitlets.List().tag(sync=True)
    """Each column's totals in words."""
    omitted = traitlets.Int(0).tag(sync=True)
    """Inputs not drawn (beyond ``max_rows``)."""
    selected: traitlets.Dict[str, Any] = traitlets.Dict().tag(sync=True)
    """``{"row", "col"}`` of the opened item (set by a click), or ``{}``."""
    opened: traitlets.Dict[str, Any] = traitlets.Dict().tag(sync=True)
    """``{"row", "col", "header", "messages"}``: the opened item's transcript views, or ``{}``."""

    def __init__(
        self,
        grid: Grid,
        store: ContentReader | None = None,
        principal: Viewer | None = None,
        *,
        max_rows: int = MAX_GRID_ROWS,
        **kwargs: Any,
    ) -> None:
        if not isinstance(grid, Grid):
            raise ConfigurationError(
                f"CompareGrid() takes a loom_nb.render.Grid (what compare() builds), not "
                f"{type(grid).__name__}.",
                code="invalid_argument",
                argument="grid",
            )
        if isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 1:
            raise ConfigurationError(
                f"CompareGrid(): max_rows is a whole number of at least 1, not {max_rows!r}.",
                code="invalid_argument",
                argument="max_rows",
            )
        self._grid = grid
        self._store, self._principal, self._max_rows = store, principal, max_rows
        self._cells = RenderContext(store=store, principal=principal, pdf_pages=1)
        self._opened: RenderContext | None = None
        view = grid_view(grid, self._cells, max_rows=max_rows)
        super().__init__(
            title=view["title"],
            variants=view["variants"],
            rows=view["rows"],
            totals=view["totals"],
            omitted=view["omitted"],
            **kwargs,
        )
        self.on_msg(self._on_custom_msg)

    @property
    def grid(self) -> Grid:
        """The grid shown."""
        return self._grid

    def open_item(self, row: int, col: int) -> None:
        """Open the transcript of input ``row``'s item for variant ``col`` (both from 0)."""
        self.selected = {"row": row, "col": col}

    def close_item(self) -> None:
        """Close the opened transcript."""
        self.selected = {}

    @traitlets.validate("selected")
    def _check_selected(self, proposal: dict[str, Any]) -> dict[str, Any]:
        value = proposal["value"]
        if not value:
            return {}
        row, col = value.get("row"), value.get("col")
        shown = min(len(self._grid.inputs), self._max_rows)
        if not (_index(row, shown) and _index(col, len(self._grid.variants))):
            raise ConfigurationError(
                f"no item at row {row!r}, column {col!r}: rows go from 0 to {shown - 1}, columns "
                f"from 0 to {len(self._grid.variants) - 1}.",
                code="invalid_argument",
                argument="selected",
            )
        return {"row": row, "col": col}

    @traitlets.observe("selected")
    def _open_selected(self, change: dict[str, Any]) -> None:
        value = change["new"]
        if not value:
            self._opened = None
            self.opened = {}
            return
        row, col = value["row"], value["col"]
        ctx = RenderContext(store=self._store, principal=self._principal, pdf_pages=1)
        header, views = opened_item(self._grid, row, col, ctx)
        self._opened = ctx
        self.opened = {"row": row, "col": col, "header": header, "messages": views}

    # -- on-demand media (TranscriptView's protocol; ``where`` names the cells or the opened item)

    def _context(self, request: dict[str, Any]) -> RenderContext | None:
        return self._opened if request.get("where") == "opened" else self._cells

    def _on_custom_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        if content.get("type") == "stream":
            for reply, buffers in self.stream(content):
                self.send(reply, buffers)
            return
        self.send(self.answer(content))

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """The reply to a front-end request for a full-size image or a PDF page of a cell or the
        opened transcript."""
        return media_reply(request, self._context(request), _MISSING)

    def stream(self, request: dict[str, Any]) -> Iterator[StreamMessage]:
        """The chunked reply to a front-end ``stream`` request (see ``loom_nb.widgets._stream``)."""
        return stream_messages(request, self._context(request), _MISSING)

    # -- static forms ----------------------------------------------------------------------------

    def to_static_html(self) -> str:
        """The static table, each cell's transcript in a ``<details>`` under it."""
        return grid_html(
            self._grid, store=self._store, principal=self._principal, max_rows=self._max_rows
        )

    def __repr__(self) -> str:
        inputs, names = len(self._grid.inputs), ", ".join(self._grid.variants)
        return f"CompareGrid({inputs} input{'s' if inputs != 1 else ''} × {names})"


def _index(value: Any, count: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < count
