"""Transcripts as HTML: pure functions from parts, messages and transcripts to safe HTML strings.

Also the comparison grid of ``loom_nb.compare`` (``Grid``: a row per input, a column per variant).

The static form of every transcript view (DESIGN.md "Notebook layer"): saved notebooks, GitHub,
nbviewer, Binder before a run and exported pages show this HTML. No ipywidgets or IPython here.
"""

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
