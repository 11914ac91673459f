"""The example notebooks as cell lists, one module per notebook, so that changes review as code."""

from __future__ import annotations

from cells import agent_tools, mcp_tools, multimodal, replay, tour
from cells.common import Cells

NOTEBOOKS: dict[str, Cells] = {
    "01-tour": tour.CELLS,
    "02-multimodal": multimodal.CELLS,
    "03-agent-tools": agent_tools.CELLS,
    "04-replay": replay.CELLS,
    "05-mcp": mcp_tools.CELLS,
}
"""Notebook name (the ``.ipynb`` file's stem) -> its cells, in build order."""
