"""The notebook layer: widgets over the pure renderer, and the rich display of lower layers' values.

The widgets import ipywidgets and anywidget; their names load on first use, so the display
bundles (``loom_nb.widgets._display``) load without them and fall back to static HTML.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "CompareGrid": "loom_nb.widgets._grid",
    "MCPServerView": "loom_nb.widgets._mcp",
    "MediaUpload": "loom_nb.widgets._upload",
    "PromptPad": "loom_nb.widgets._promptpad",
    "ReplayStepper": "loom_nb.widgets._stepper",
    "TranscriptView": "loom_nb.widgets._transcript",
}

__all__ = [
    "CompareGrid",
    "MCPServerView",
    "MediaUpload",
    "PromptPad",
    "ReplayStepper",
    "TranscriptView",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'loom_nb.widgets' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:
    from loom_nb.widgets._grid import CompareGrid
    from loom_nb.widgets._mcp import MCPServerView
    from loom_nb.widgets._promptpad import PromptPad
    from loom_nb.widgets._stepper import ReplayStepper
    from loom_nb.widgets._transcript import TranscriptView
    from loom_nb.widgets._upload import MediaUpload
