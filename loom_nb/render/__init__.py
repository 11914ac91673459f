"""Transcripts as HTML: pure functions from parts, messages and transcripts to safe HTML strings.

Also the comparison grid of ``loom_nb.compare`` (``Grid``: a row per input, a column per variant).

The static form of every transcript view (DESIGN.md "Notebook layer"): saved notebooks, GitHub,
nbviewer, Binder before a run and exported pages show this HTML. No ipywidgets or IPython here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loom_nb._lazy import exports

# name -> module that defines it, imported when the name is first read (loom_nb._lazy);
# a Chat turn reads `_source` alone, not the HTML renderer and Pillow.
_EXPORTS: dict[str, str] = {
    "render_message": "loom_nb.render._api",
    "render_part": "loom_nb.render._api",
    "render_transcript": "loom_nb.render._api",
    "to_html": "loom_nb.render._api",
    "transcript_views": "loom_nb.render._api",
    "ColumnTotals": "loom_nb.render._grid",
    "Grid": "loom_nb.render._grid",
    "GridItem": "loom_nb.render._grid",
    "column_totals": "loom_nb.render._grid",
    "grid_html": "loom_nb.render._grid_html",
    "AUDIO_TYPES": "loom_nb.render._media",
    "MAX_IMAGE_PIXELS": "loom_nb.render._media",
    "ContentReader": "loom_nb.render._resolve",
    "MAX_RENDER_BYTES": "loom_nb.render._resolve",
    "Unavailable": "loom_nb.render._resolve",
    "Viewer": "loom_nb.render._resolve",
    "Transcript": "loom_nb.render._source",
    "transcript_of": "loom_nb.render._source",
    "RenderContext": "loom_nb.render._view",
}

__all__ = [
    "AUDIO_TYPES",
    "MAX_IMAGE_PIXELS",
    "MAX_RENDER_BYTES",
    "ColumnTotals",
    "ContentReader",
    "Grid",
    "GridItem",
    "RenderContext",
    "Transcript",
    "Unavailable",
    "Viewer",
    "column_totals",
    "grid_html",
    "render_message",
    "render_part",
    "render_transcript",
    "to_html",
    "transcript_of",
    "transcript_views",
]

__getattr__, __dir__ = exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # type checkers and IDEs see the real definitions
    from loom_nb.render._api import (
        render_message,
        render_part,
        render_transcript,
        to_html,
        transcript_views,
    )
    from loom_nb.render._grid import ColumnTotals, Grid, GridItem, column_totals
    from loom_nb.render._grid_html import grid_html
    from loom_nb.render._media import AUDIO_TYPES, MAX_IMAGE_PIXELS
    from loom_nb.render._resolve import MAX_RENDER_BYTES, ContentReader, Unavailable, Viewer
    from loom_nb.render._source import Transcript, transcript_of
    from loom_nb.render._view import RenderContext
