"""MapProgressBar: a running ``chat.map``'s bar (done, failed), its progress line, and Stop.

``chat.map`` in a notebook displays its ``MapProgress`` (plain data on the chat layer);
``import loom_nb`` registered ``display_map_progress`` for that class with IPython, so the display
lands here: a bar that attaches itself to the progress, redraws on each update the map sends
(at most five a second) and calls ``progress.stop()`` from its Stop button. The output is
displayed under a display id and republished once the map ends, so a saved notebook shows the
final line (static HTML, escaped) rather than the first. Without anywidget the output is that
static HTML alone, updated the same way.
"""

from __future__ import annotations

import uuid
from typing import Any

import traitlets

from loom_nb.render._html import esc
from loom_nb.widgets._base import STATIC, StaticFallbackWidget

__all__ = ["MapProgressBar", "display_map_progress", "progress_html"]


def progress_html(progress: Any) -> str:
    """The progress as static HTML: a bar of settled items and the escaped line."""
    total = max(1, int(progress.total))
    done = 100 * int(progress.done) / total
    failed = 100 * int(progress.failed) / total
    return (
        '<div class="loom-map-progress" style="font-family:sans-serif;font-size:13px">'
        '<div style="display:flex;height:8px;border-radius:4px;overflow:hidden;background:#eee">'
        f'<div style="width:{done:.2f}%;background:#1976d2"></div>'
        f'<div style="width:{failed:.2f}%;background:#d32f2f"></div></div>'
        f"<div>{esc(progress.line())}</div></div>"
    )


class MapProgressBar(StaticFallbackWidget):
    """The live view of a ``MapProgress``: ``show(progress)`` redraws it; Stop stops the map."""

    _esm = (STATIC / "map_progress.js").read_text(encoding="utf-8")
    _css = (STATIC / "map_progress.css").read_text(encoding="utf-8")

    total = traitlets.Int(0).tag(sync=True)
    done = traitlets.Int(0).tag(sync=True)
    failed = traitlets.Int(0).tag(sync=True)
    line = traitlets.Unicode("").tag(sync=True)
    finished = traitlets.Bool(False).tag(sync=True)

    def __init__(self, progress: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._progress = progress
        self._handle: Any = None
        self.on_msg(self._on_message)
        self.show(progress)

    def show(self, progress: Any) -> None:
        """Draw ``progress`` now (the map calls this as items settle)."""
        ended = bool(progress.finished) and not self.finished
        self.total, self.done, self.failed = progress.total, progress.done, progress.failed
        self.line = progress.line()
        self.finished = bool(progress.finished)
        if ended and self._handle is not None:
            self._handle.update(self)  # the saved output shows the final line

    def stop(self) -> bool:
        """What the Stop button does: ``progress.stop()``."""
        return bool(self._progress.stop())

    def _on_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "stop":
            self.stop()

    def __repr__(self) -> str:
        return str(self.line)

    def to_static_html(self) -> str:
        """The bar and line as escaped static HTML."""
        return progress_html(self._progress)


class _StaticProgress:
    """Without anywidget: the static HTML under a display id, updated as the map goes."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle

    def show(self, progress: Any) -> None:
        self._handle.update(
            {"text/plain": progress.line(), "text/html": progress_html(progress)}, raw=True
        )


def display_map_progress(progress: Any) -> None:
    """Show a running map's progress (what IPython calls for ``display(progress)``)."""
    from IPython.display import display

    try:
        bar = MapProgressBar(progress)
    except Exception:  # no widget front end here: the static form, kept current
        handle = display(
            {"text/plain": progress.line(), "text/html": progress_html(progress)},
            raw=True,
            display_id=uuid.uuid4().hex,
        )
        progress.attach(_StaticProgress(handle))
        return
    bar._handle = display(bar, display_id=uuid.uuid4().hex)
    progress.attach(bar)
