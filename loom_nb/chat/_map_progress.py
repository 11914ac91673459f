"""A running map's progress: the state the notebook's bar and the terminal line show, and Stop.

``MapProgress`` is plain data on this layer: items done and failed (served from the journal
included), tokens and cost so far, the rate of the items run now, the pacer's limit, and a
``stop()`` that stops the map. What shows it is above: in a notebook, ``display(progress)``
reaches the notebook layer's bar (``loom_nb.widgets._map_progress``, registered with IPython by
class name when ``loom_nb`` is imported, as a ``Chat`` is), which keeps a reference to the
progress, redraws on ``update`` and calls ``stop()`` from its Stop button. Views are duck-typed:
anything with ``show(progress)`` attached with ``attach``. In a terminal, ``TextProgress`` prints
a line to stderr at most once a second and when the map ends.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any, TextIO

from loom_nb.chat._cost import format_cost
from loom_nb.chat._money import tokens_text
from loom_nb.content import LlmResponse, Usage
from loom_nb.errors import ConfigurationError

__all__ = ["MapProgress", "TextProgress", "show_progress"]

_EVERY = 0.2  # seconds between redraws of a displayed bar


class MapProgress:
    """The state of one running map (see the module docstring); ``stop()`` stops it."""

    def __init__(
        self,
        map_id: str,
        total: int,
        on_stop: Callable[[], bool],
        *,
        price: Callable[[LlmResponse], Decimal | None] | None = None,
    ) -> None:
        self.map_id = map_id
        """The map's execution id."""
        self.total = total
        """How many items the map has."""
        self.done = 0
        """Items answered (served from the journal or run now)."""
        self.failed = 0
        """Items that failed (or were served as failed)."""
        self.served = 0
        """Items served from the journal."""
        self.usage = Usage()
        """Tokens of the answered items so far."""
        self.cost: Decimal | None = Decimal(0)
        """USD so far (None once an answer's price is unknown), as of the last redraw."""
        self.limit = 0
        """How many calls may be in flight now (the pacer's limit)."""
        self.in_flight = 0
        """How many calls are in flight."""
        self.finished = False
        """Whether the map ended (all items, or stopped)."""
        self.stopped = False
        """Whether the map was stopped."""
        self._on_stop = on_stop
        self._price = price
        self._unpriced: list[LlmResponse] = []  # priced when drawn (pricing is not free)
        self._started = time.monotonic()
        self._ran = 0
        self._views: list[Any] = []  # held while the map runs (the progress ends with it)
        self._last = 0.0
        self._trailing: asyncio.TimerHandle | None = None  # a redraw due (see ``update``)

    @property
    def rate(self) -> float:
        """Items per second run now (served items excluded)."""
        elapsed = time.monotonic() - self._started
        return self._ran / elapsed if elapsed > 0 else 0.0

    def line(self) -> str:
        """``map <id>: 600/1,000 · 3 failed · 12,345 in · 678 out · $0.0123 · 45.1/s``."""
        settled = self.done + self.failed
        parts = [
            f"map {self.map_id}: {settled:,}/{self.total:,}",
            f"{self.failed:,} failed",
            tokens_text(self.usage),
            format_cost(self.cost),
            f"{self.rate:.1f}/s",
        ]
        if self.served:
            parts.append(f"{self.served:,} from the journal")
        if self.in_flight or not self.finished:
            parts.append(f"{self.in_flight} in flight (limit {self.limit})")
        if self.stopped:
            parts.append("stopped")
        elif self.finished:
            parts.append("done")
        return " · ".join(parts)

    def __repr__(self) -> str:
        return f"MapProgress({self.line()})"

    def stop(self) -> bool:
        """Stop the map: no item starts, those in flight are cancelled; True if it was running."""
        if self.finished:
            return False
        return self._on_stop()

    def attach(self, view: Any) -> None:
        """Keep ``view`` (its ``show(progress)`` is called on every update)."""
        self._views.append(view)

    def record(self, response: LlmResponse | None, *, live: bool) -> None:
        """Count one settled item: its answer, or None when it failed."""
        if response is not None:
            self.done += 1
            self.usage = self.usage + response.usage
            self._unpriced.append(response)
        else:
            self.failed += 1
        if live:
            self._ran += 1
        else:
            self.served += 1

    def _settle_cost(self) -> None:
        pending, self._unpriced = self._unpriced, []
        for response in pending:
            price = self._price(response) if self._price is not None else None
            self.cost = None if price is None or self.cost is None else self.cost + price

    def update(self, *, force: bool = False) -> None:
        """Redraw the views (at most every 0.2 s unless ``force``).

        An update that comes too soon is not lost: on an event loop, a redraw is due when the
        0.2 s are over, so the views end on the latest counts even when no update follows (other
        processes' items counted just before this process's calls went quiet).
        """
        now = time.monotonic()
        if not force and now - self._last < _EVERY:
            if self._trailing is None:
                try:
                    loop = asyncio.get_running_loop()
                except RuntimeError:  # no loop here: the next update redraws
                    return
                self._trailing = loop.call_later(self._last + _EVERY - now, self._redraw_due)
            return
        if self._trailing is not None:
            self._trailing.cancel()
            self._trailing = None
        self._last = now
        if self._views:
            self._settle_cost()
        for view in list(self._views):
            try:
                view.show(self)
            except Exception:  # a broken view must not fail the map; it stops being drawn
                self._views.remove(view)

    def _redraw_due(self) -> None:
        self._trailing = None
        if not self.finished:  # the map's end was drawn already
            self.update()


class TextProgress:
    """A progress view for a terminal: a line to ``stream`` at most once a second, and at the end."""

    def __init__(self, stream: TextIO | None = None, every: float = 1.0) -> None:
        self._stream = stream
        self._every = every
        self._last = 0.0

    def show(self, progress: MapProgress) -> None:
        """Print the progress line when due."""
        now = time.monotonic()
        if not progress.finished and now - self._last < self._every:
            return
        self._last = now
        stream = self._stream or sys.stderr
        print(progress.line(), file=stream, flush=True)


def show_progress(progress: MapProgress, mode: Any) -> None:
    """Attach a view to ``progress``: the notebook's bar in a kernel, else a terminal line.

    ``mode`` None shows the bar in a notebook and the line when stderr is a terminal; True shows
    one of them always; False none; any other object is the view (its ``show(progress)`` is
    called on every update, and it may call ``progress.stop()``).
    """
    if mode is False:
        return
    if mode is not None and mode is not True:
        if not callable(getattr(mode, "show", None)):
            raise ConfigurationError(
                "chat.map: progress is True, False, None (automatic) or a view with a "
                f"show(progress) method, not {type(mode).__name__}.",
                code="invalid_argument",
            )
        progress.attach(mode)
        return
    ipython = sys.modules.get("IPython")  # loaded in any running shell; never imported here
    shell = getattr(ipython, "get_ipython", lambda: None)()
    if shell is not None and getattr(shell, "kernel", None) is not None:
        display = importlib.import_module("IPython.display").display
        display(progress)  # the notebook layer's bar, registered by class name
        return
    if mode is True or sys.stderr.isatty():
        progress.attach(TextProgress())
