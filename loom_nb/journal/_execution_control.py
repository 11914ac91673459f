"""``Execution``'s park, resume, rewind, seek and complete: the run's course, past its steps.

``park(payload)`` suspends the run for a decision from outside (an approval); ``resume(payload)``
records the decision and rewinds the execution so the calling code runs again from the top: the
completed steps replay from the log and the same ``park`` call now returns the decision.
``complete(output)`` records the run's final output. ``ExecutionControl`` is a part of
``Execution`` (``class Execution(ExecutionControl)``); the state it shares is declared below for
the type checker.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from loom_nb.errors import JournalError
from loom_nb.journal._codec import encode_value

if TYPE_CHECKING:
    from loom_nb.journal._content_pins import Pins
    from loom_nb.journal._requests import ModelBase
    from loom_nb.journal._timeline import Entry, ExecutionStatus, Timeline
    from loom_nb.journal._writer import Owner

__all__ = ["ExecutionControl"]


class ExecutionControl:
    """Parking, resuming, rewinding, seeking and completing a run (part of ``Execution``)."""

    if TYPE_CHECKING:  # the Execution state this part uses (defined in _execution.py)
        _id: str
        _next: int
        _positions: threading.Lock
        _timeline: Timeline
        _live_from: int | None
        model_base: ModelBase | None

        @property
        def status(self) -> ExecutionStatus: ...

        def _recorded(self, position: int) -> Entry | None: ...

        def _field(self, payload: str | None, name: str, position: int) -> Any: ...

        def _diverge(self, position: int, entry: Entry, actual: str) -> None: ...

        def _check_live(self, position: int, label: str, owner: Owner | None = None) -> None: ...

        def _release(self, position: int) -> None: ...

        def _write(
            self,
            kind: str,
            step_id: str | None,
            position: int,
            payload: str,
            *,
            release: bool = False,
            pins: Pins = (),
            unpin: int | None = None,
        ) -> None: ...

    async def park(self, payload: Any = None) -> Any | None:
        """Suspend the run for a decision from outside; return the decision once it is resumed.

        Live, the park is journaled and None is returned: the caller should stop and report
        that it is parked. Replayed, the call is served from the log: it returns the payload
        given to ``resume`` (or None while the park still waits), and nothing is journaled.
        """
        position, entry = self._take_position()
        if entry is not None:
            if entry.kind == "park":
                if entry.state == "resumed":
                    return self._field(entry.resume_payload, "payload", position)
                return None
            self._diverge(position, entry, "(park)")
        # A parked run waits for a decision from anyone: the lease is given back.
        self._write_closing(position, "(park)", "parked", "payload", payload)
        return None

    async def resume(self, payload: Any = None) -> None:
        """Record the decision for the waiting park and rewind, so the code can run again.

        After ``resume``, run the same code on this execution once more: completed steps are
        served from the log and the ``park`` call returns ``payload``.
        """
        entries = self._timeline.entries
        if not (entries and entries[-1].kind == "park" and entries[-1].state == "parked"):
            raise JournalError(
                f"execution {self._id!r} is {self.status}, not parked; only a parked execution "
                "can be resumed.",
                code="execution_not_parked",
                execution_id=self._id,
            )
        text, _ = encode_value(payload, step_id="(resume)", what="payload")
        self._write("resumed", None, len(entries) - 1, "{" + f'"payload":{text}' + "}")
        self.rewind()

    def rewind(self) -> None:
        """Start the next call again at the first position (so the whole run replays)."""
        self.seek(0)

    def seek(self, position: int, *, supersede: bool = False) -> None:
        """Take the recorded positions before ``position`` as replayed; the next call takes it.

        It is served from the log while the log holds it (with ``supersede``: it runs live,
        superseding the log from there on, a start over), and runs live past the log's end.
        ``Chat.resume`` seeks past a chat's log instead of re-running its turns.
        """
        length = len(self._timeline.entries)
        if type(position) is not int or not 0 <= position <= length:
            message = f"seek: execution {self._id!r} has positions 0 to {length}, not {position!r}."
            raise JournalError(message, code="invalid_argument")
        self._next = position
        self._live_from = position if supersede and position < length else None
        self.model_base = None

    async def complete(self, output: Any = None) -> None:
        """Record the run's final output; replayed, an already recorded completion is kept as is."""
        position, entry = self._take_position()
        if entry is not None:
            if entry.kind == "complete":
                return
            self._diverge(position, entry, "(complete)")
        self._write_closing(position, "(complete)", "completed", "output", output)

    def _take_position(self) -> tuple[int, Entry | None]:
        """The next position, taken (threads sharing this object take distinct ones), and what
        the log recorded there when it is served from the log (None: it runs live)."""
        with self._positions:
            position = self._next
            self._next += 1
        return position, self._recorded(position)

    def _write_closing(self, position: int, label: str, kind: str, name: str, value: Any) -> None:
        """Journal a live ``park`` or ``complete`` at ``position``: the event ``kind`` with ``value``
        under ``name``, giving the lease back; on any error the position is released."""
        try:
            self._check_live(position, label)
            text, _ = encode_value(value, step_id=label, what=name)
            self._write(kind, None, position, "{" + f'"{name}":{text}' + "}", release=True)
        except BaseException:
            self._release(position)
            raise
