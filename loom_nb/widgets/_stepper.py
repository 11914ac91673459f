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

from pathlib import Path
from typing import Any

import traitlets

from loom_nb._args import check_type
from loom_nb.errors import ConfigurationError, ContentValidationError
from loom_nb.render._replay import replay_html, replay_title, turn_view
from loom_nb.render._resolve import ContentReader, Viewer
from loom_nb.render._turns import TurnRecord, turns_of
from loom_nb.render._view import RenderContext, View
from loom_nb.widgets._base import StaticFallbackWidget, media_reply
from loom_nb.widgets._stream import StreamMessage, stream_messages

__all__ = ["ReplayStepper", "combined_esm"]

_STATIC = Path(__file__).parent / "static"
_EXPORT = "export default {"


def combined_esm(name: str) -> str:
    """TranscriptView's front-end module followed by ``static/<name>`` (which may use its classes)."""
    transcript = (_STATIC / "transcript.js").read_text(encoding="utf-8")
    if transcript.count(_EXPORT) != 1:
        raise RuntimeError("transcript.js must end with one `export default {` block")
    own = (_STATIC / name).read_text(encoding="utf-8")
    return transcript.replace(_EXPORT, "const transcriptWidget = {", 1) + "\n" + own


class ReplayStepper(StaticFallbackWidget):
    """Previous / next buttons and a slider over the model turns of ``execution_id``.

    ``stepper.turn`` is the shown turn's index (settable); ``stepper.turns`` the turn records;
    ``next()`` / ``previous()`` step. Refs are shown when ``principal``'s tenant stored them in
    ``store``.
    """

    _esm = combined_esm("stepper.js")
    _css = (_STATIC / "transcript.css").read_text(encoding="utf-8") + (
        _STATIC / "stepper.css"
    ).read_text(encoding="utf-8")

    turn = traitlets.Int(0).tag(sync=True)
    """Index of the shown turn (0 = first)."""
    count = traitlets.Int(0).tag(sync=True)
    """How many turns the run has."""
    title = traitlets.Unicode("").tag(sync=True)
    """The one-line title (execution and turn count)."""
    current: traitlets.Dict[str, Any] = traitlets.Dict().tag(sync=True)
    """The render-ready view of the shown turn."""

    def __init__(
        self,
        journal: Any,
        execution_id: str,
        *,
        store: ContentReader | None = None,
        principal: Viewer | None = None,
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
        self._records = turns_of(journal, execution_id)
        self._execution_id = execution_id
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
        if content.get("type") == "stream":
            for reply, buffers in self.stream(content):
                self.send(reply, buffers)
            return
        self.send(self.answer(content))

    def stream(self, request: dict[str, Any]) -> list[StreamMessage]:
        """The chunked reply to a front-end ``stream`` request for media of a turn it showed."""
        turn = request.get("turn")
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
