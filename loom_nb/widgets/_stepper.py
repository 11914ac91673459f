"""ReplayStepper: step through a recorded run turn by turn, as one anywidget.

The turns come from the journal alone (``loom_nb.render._turns``), so a run imported from a
committed JSON Lines recording steps with no provider and no API key. Only the current turn's
view is synced (``current``), never every turn at once, so the widget state stays the size of
one transcript however long the run. The front end reuses TranscriptView's DOM code (the
transcript module is loaded first into the same ESM) and builds everything with textContent and
setAttribute. ``_repr_mimebundle_`` adds the static fallback: the final transcript and a table
of turns.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import traitlets

from loom_nb._args import check_type
from loom_nb.errors import ConfigurationError, ContentValidationError, LoomError
from loom_nb.render._replay import replay_html, replay_title, turn_view
from loom_nb.render._resolve import ContentReader, Viewer
from loom_nb.render._turns import TurnRecord, turns_of
from loom_nb.render._view import RenderContext, View
from loom_nb.widgets._base import STATIC, StaticFallbackWidget, combined_esm, media_reply
from loom_nb.widgets._stream import StreamMessage, stream_messages

__all__ = ["ReplayStepper", "combined_esm"]


class ReplayStepper(StaticFallbackWidget):
    """Previous / next buttons and a slider over the model turns of ``execution_id``.

    ``stepper.turn`` is the shown turn's index (settable); ``stepper.turns`` the turn records;
    ``next()`` / ``previous()`` step. Refs are shown when ``principal``'s tenant stored them in
    ``store``.
    """

    _esm = combined_esm("stepper.js")
    _css = (STATIC / "transcript.css").read_text(encoding="utf-8") + (
        STATIC / "stepper.css"
    ).read_text(encoding="utf-8")

    turn = traitlets.Int(0).tag(sync=True)
    """Index of the shown turn (0 = first)."""
    count = traitlets.Int(0).tag(sync=True)
    """How many turns the run has."""
    title = traitlets.Unicode("").tag(sync=True)
    """The one-line title (execution and turn count)."""
    current: traitlets.Dict[str, Any] = traitlets.Dict().tag(sync=True)
    """The render-ready view of the shown turn."""
    forked = traitlets.Unicode("").tag(sync=True)
    """What the last "fork here" made (the new execution id and how to go on), or its error."""
    following = traitlets.Bool(False).tag(sync=True)
    """Whether new turns of a live run are shown as they are journaled (``follow=True``)."""

    def __init__(
        self,
        journal: Any,
        execution_id: str,
        *,
        store: ContentReader | None = None,
        principal: Viewer | None = None,
        follow: bool = False,
        poll: float = 0.25,
        **kwargs: Any,
    ) -> None:
        if not callable(getattr(journal, "events", None)):
            raise ConfigurationError(
                f"ReplayStepper() takes a Journal, not {type(journal).__name__}.",
                code="invalid_argument",
                argument="journal",
            )
        check_type(
            execution_id,
            str,
            name="execution_id",
            where="ReplayStepper()",
            error=ConfigurationError,
        )
        check_type(follow, bool, name="follow", where="ReplayStepper()", error=ConfigurationError)
        self._records = turns_of(journal, execution_id)
        self._journal = journal
        self._execution_id = execution_id
        self._watch: Any = None
        self._lock = threading.Lock()
        self._store = store
        self._principal = principal
        self._contexts: dict[int, RenderContext] = {}
        self._views: dict[int, View] = {}
        super().__init__(
            count=len(self._records),
            title=replay_title(execution_id, self._records),
            current=self._view(0) if self._records else {},
            **kwargs,
        )
        self.on_msg(self._on_custom_msg)
        if follow:
            self.follow(poll=poll)

    # -- Python API ------------------------------------------------------------------------------

    @property
    def turns(self) -> list[TurnRecord]:
        """Every turn of the run, oldest first (``record.summary()`` gives a table row)."""
        return list(self._records)

    @property
    def record(self) -> TurnRecord | None:
        """The shown turn (None for a run without model calls)."""
        return self._records[self.turn] if self._records else None

    def next(self) -> int:
        """Show the next turn (stays on the last); return the shown index."""
        self.turn = min(self.turn + 1, max(self.count - 1, 0))
        return self.turn

    def previous(self) -> int:
        """Show the previous turn (stays on the first); return the shown index."""
        self.turn = max(self.turn - 1, 0)
        return self.turn

    # -- fork and follow ------------------------------------------------------------------------

    def fork_here(self, new_id: str | None = None) -> str:
        """Fork the run at the shown turn: a new execution with every step BEFORE it; its id.

        Edit turn N and go on: open the new execution (``journal.execution(new_id)``) and run
        the same code with the changed prompt; the steps before turn N replay from the journal
        and turn N runs live. Without ``new_id`` the id is ``<execution>-fork-<N>`` (with a
        number added when that is taken). Raises ``JournalError`` (``execution_exists``, ...).
        """
        record = self.record
        if record is None:
            raise ContentValidationError(
                "this run has no model turns to fork at", code="invalid_turn"
            )
        if new_id is None:
            new_id = self._free_id(f"{self._execution_id}-fork-{record.index + 1}")
        check_type(new_id, str, name="new_id", where="fork_here()", error=ConfigurationError)
        self._journal.execution(self._execution_id).fork(record.step_id, new_id)
        self.forked = (
            f"forked at turn {record.index + 1} as {new_id!r}: journal.execution({new_id!r}) "
            "replays the turns before it and runs this turn live"
        )
        return new_id

    def _free_id(self, base: str) -> str:
        taken = {summary.execution_id for summary in self._journal.executions()}
        if base not in taken:
            return base
        return next(f"{base}-{n}" for n in range(2, len(taken) + 3) if f"{base}-{n}" not in taken)

    def follow(self, *, poll: float | None = None) -> None:
        """Show new turns as the run journals them (``journal.watch``: LISTEN/NOTIFY or polling;
        ``poll`` seconds between looks, by default the journal's: 0.25 on SQLite, 1 on
        PostgreSQL, where a notification usually ends the wait first).

        Called with an event loop running (a notebook cell), the redraws run on that loop, not
        on the watch's thread; without one, on the watch's thread (under the view's lock).
        """
        if self._watch is not None and self._watch.running:
            return
        watch = getattr(self._journal, "watch", None)
        if not callable(watch):
            raise ConfigurationError(
                "follow needs a Journal with watch(); open the run's journal with Journal(...)",
                code="invalid_argument",
                argument="journal",
            )
        try:  # in a kernel: redraw on its event loop, where the widget's comm is used
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None

        def on_event(_event: Any) -> None:
            if loop is not None and not loop.is_closed():
                try:
                    loop.call_soon_threadsafe(self.refresh)
                    return
                except RuntimeError:  # the loop closed meanwhile: redraw from here
                    pass
            self.refresh()

        self._watch = watch(self._execution_id, on_event, poll=poll)
        self.following = True

    def stop_following(self) -> None:
        """Stop following the run (the turns shown so far stay)."""
        watch = getattr(self, "_watch", None)
        if watch is not None:
            watch.stop()
            self._watch = None
        if getattr(self, "following", False):
            self.following = False

    def refresh(self) -> int:
        """Re-read the run's turns from the journal; return how many there are now.

        A turn that was in flight is redrawn; the view moves to the newest turn when it showed
        the last one.
        """
        with self._lock:
            records = turns_of(self._journal, self._execution_id)
            old = len(self._records)
            if records == self._records:
                return old
            on_last = self.turn >= old - 1
            for index in range(max(old - 1, 0), max(old, len(records))):
                self._views.pop(index, None)
                self._contexts.pop(index, None)
            self._records = records
            self.count = len(records)
            self.title = replay_title(self._execution_id, records)
            target = len(records) - 1 if on_last else min(self.turn, len(records) - 1)
            if records and target == self.turn:
                self.current = self._view(target)
            elif records:
                self.turn = max(target, 0)
            return len(records)

    def close(self) -> None:
        """Stop following and close the widget."""
        self.stop_following()
        super().close()

    @traitlets.validate("turn")
    def _check_turn(self, proposal: dict[str, Any]) -> int:
        value = proposal["value"]
        count = len(getattr(self, "_records", []))
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < max(count, 1):
            raise ContentValidationError(
                f"turn must be an index from 0 to {max(count - 1, 0)}, not {value!r}; "
                f"the run has {count} turn{'s' if count != 1 else ''}.",
                code="invalid_turn",
            )
        return value

    @traitlets.observe("turn")
    def _show_turn(self, change: dict[str, Any]) -> None:
        if self._records:
            self.current = self._view(change["new"])

    def _view(self, index: int) -> View:
        view = self._views.get(index)
        if view is None:
            ctx = RenderContext(store=self._store, principal=self._principal)
            self._contexts[index] = ctx
            view = turn_view(self._records[index], len(self._records), ctx)
            self._views[index] = view
        return view

    # -- on-demand media (same protocol as TranscriptView, plus the turn) --------------------------

    def _on_custom_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        if content.get("type") == "fork":
            try:
                self.fork_here()
            except LoomError as exc:
                self.forked = f"could not fork: {exc.message}"
            return
        if content.get("type") == "stream":
            for reply, buffers in self.stream(content):
                self.send(reply, buffers)
            return
        self.send(self.answer(content))

    def stream(self, request: dict[str, Any]) -> Iterator[StreamMessage]:
        """The chunked reply to a front-end ``stream`` request for media of a turn it showed."""
        turn = request.get("turn") if isinstance(request, dict) else None
        ctx = self._contexts.get(turn) if isinstance(turn, int) else None
        return stream_messages(request, ctx, "no such media in this turn")

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """The reply to a front-end request for a full-size image or a PDF page of a turn."""
        turn = request.get("turn")
        ctx = self._contexts.get(turn) if isinstance(turn, int) else None
        return media_reply(request, ctx, "no such media in this turn")

    # -- static forms ----------------------------------------------------------------------------

    def to_static_html(self) -> str:
        """The static fallback: the final transcript and a table of turns (sanitizer-safe)."""
        ctx = RenderContext(store=self._store, principal=self._principal)
        return replay_html(self._execution_id, self._records, ctx)

    def __repr__(self) -> str:
        shown = f", showing turn {self.turn + 1}" if self._records else ""
        return f"ReplayStepper({self._execution_id!r}, {self.count} turns{shown})"
