"""Events, and the fold that turns an execution's events into its timeline of positions.

Every call an execution makes (``execute``, ``park``, ``complete``) takes the next position,
0, 1, 2, ..., and each event carries the position it belongs to. Replay walks positions in
order and compares step ids (ADR 0120 decision 10: ids, not inputs).

The timeline is a fold over the events in ``seq`` order. A ``step_started`` or ``parked`` or
``completed`` event at position ``p`` truncates the timeline to ``p`` entries and appends its
own: when a run goes live again at ``p`` (a failed or interrupted step is re-run, or a
divergence in warn mode), whatever the log recorded from ``p`` on is superseded, never merged.
The log itself stays append-only; only the fold forgets. A fold that meets an event that does
not fit (a completion for a step never started, a position past the end) is a damaged log.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeAlias

from loom_nb.errors import JournalError

__all__ = ["EVENT_KINDS", "Entry", "Event", "EventKind", "ExecutionSummary", "Timeline"]

EventKind: TypeAlias = Literal[
    "execution_started",
    "step_started",
    "step_completed",
    "step_failed",
    "parked",
    "resumed",
    "completed",
    "divergence",
]

EVENT_KINDS: frozenset[str] = frozenset(EventKind.__args__)  # type: ignore[attr-defined]
"""Every event kind the journal writes."""

ExecutionStatus: TypeAlias = Literal["running", "parked", "completed"]


@dataclass(frozen=True)
class Event:
    """One journaled event, as ``journal.events(execution_id)`` returns it."""

    seq: int
    """Order in the journal (global, increasing; gaps are possible)."""
    execution_id: str
    """The execution the event belongs to."""
    kind: EventKind
    """What happened."""
    step_id: str | None
    """The step's id (step events and divergences), else None."""
    position: int | None
    """The call's position in the execution (None for ``execution_started``)."""
    payload: Any
    """The event's JSON payload (step input and output or error, park payload, ...)."""
    created: datetime
    """When the event was written (UTC)."""


@dataclass(frozen=True)
class ExecutionSummary:
    """One line of ``journal.executions()``."""

    execution_id: str
    """The execution's id."""
    status: ExecutionStatus
    """``running``, ``parked`` (waiting for ``resume``) or ``completed``."""
    tenant: str | None
    """The principal's tenant, when the execution was opened with one."""
    steps: int
    """Completed steps on the current timeline."""
    events: int
    """Events journaled (including superseded ones)."""
    started: datetime
    """When the execution was started."""
    updated: datetime
    """When its last event was written."""


@dataclass
class Entry:
    """One position of the timeline: a step, a park or the completion."""

    kind: Literal["step", "park", "complete"]
    step_id: str | None
    state: Literal["started", "completed", "failed", "parked", "resumed", "done"]
    payload: str | None = None
    """The raw JSON payload of the event that settled the entry (decoded on demand)."""
    resume_payload: str | None = None
    """For a resumed park: the raw JSON payload of the ``resumed`` event."""

    @property
    def label(self) -> str:
        """How errors name this position: the step id, ``(park)`` or ``(complete)``."""
        return (
            self.step_id if self.kind == "step" and self.step_id is not None else f"({self.kind})"
        )


@dataclass
class Timeline:
    """The fold of an execution's events: its current entries, by position."""

    execution_id: str
    entries: list[Entry] = field(default_factory=list)

    def apply(self, kind: str, step_id: str | None, position: int | None, payload: str) -> None:
        """Fold one event in; raise ``JournalError`` when it does not fit the timeline."""
        if kind in ("execution_started", "divergence"):
            return
        if position is None or position < 0 or position > len(self.entries):
            self._damaged(kind, position, "its position is outside the timeline")
        assert position is not None
        if kind == "step_started":
            del self.entries[position:]
            self.entries.append(Entry("step", step_id, "started"))
        elif kind in ("step_completed", "step_failed"):
            entry = self._at(kind, position)
            if entry.kind != "step" or entry.step_id != step_id or entry.state != "started":
                self._damaged(kind, position, "no matching step_started precedes it")
            entry.state = "completed" if kind == "step_completed" else "failed"
            entry.payload = payload
        elif kind == "parked":
            del self.entries[position:]
            self.entries.append(Entry("park", None, "parked", payload))
        elif kind == "resumed":
            entry = self._at(kind, position)
            if entry.kind != "park" or entry.state != "parked":
                self._damaged(kind, position, "it does not follow an unresumed park")
            entry.state = "resumed"
            entry.resume_payload = payload
        elif kind == "completed":
            del self.entries[position:]
            self.entries.append(Entry("complete", None, "done", payload))
        else:
            self._damaged(kind, position, "the event kind is unknown")

    def settle_step(self, step_id: str, position: int, kind: str, payload: str) -> None:
        """Fold in a step's ``step_started`` and its outcome ``kind`` (``step_completed`` or
        ``step_failed``) journaled together: ``apply`` of both, in one go."""
        if not 0 <= position <= len(self.entries):
            self._damaged(kind, position, "its position is outside the timeline")
        if kind not in ("step_completed", "step_failed"):
            self._damaged(kind, position, "the event kind is not a step's outcome")
        del self.entries[position:]
        state: Literal["completed", "failed"] = (
            "completed" if kind == "step_completed" else "failed"
        )
        self.entries.append(Entry("step", step_id, state, payload))

    def check_live(self, position: int, label: str, on_gap: Callable[[], None]) -> None:
        """Refuse to run ``label`` live at ``position`` past a completion or an unresumed park,
        or past a hole in the log (``on_gap`` is called first: it may raise a better refusal)."""
        entries = self.entries
        previous = entries[min(position, len(entries)) - 1] if position > 0 and entries else None
        if previous is not None and previous.kind == "complete":
            raise JournalError(
                f"execution {self.execution_id!r} is completed; {label!r} cannot run after it. "
                "Open a new execution id for a new run.",
                code="execution_completed",
                execution_id=self.execution_id,
            )
        if previous is not None and previous.kind == "park" and previous.state == "parked":
            raise JournalError(
                f"execution {self.execution_id!r} is parked; {label!r} cannot run until it is "
                "resumed. Call `await execution.resume(decision)` and run the code again.",
                code="execution_parked",
                execution_id=self.execution_id,
            )
        if position > len(entries):
            on_gap()
            raise JournalError(
                f"execution {self.execution_id!r}: {label!r} would be journaled at position "
                f"{position}, but the log ends at position {len(entries)}: an earlier call on "
                "this object failed without being journaled. Open the execution again "
                "(journal.execution(id)) and run the code from the top.",
                code="position_gap",
                execution_id=self.execution_id,
            )

    def _at(self, kind: str, position: int) -> Entry:
        if position >= len(self.entries):
            self._damaged(kind, position, "nothing was started at that position")
        return self.entries[position]

    def _damaged(self, kind: str, position: int | None, why: str) -> None:
        raise JournalError(
            f"execution {self.execution_id!r}: a {kind} event at position {position} does not fit "
            f"the log ({why}). The journal was edited or written by another program; restore it "
            "from a recording.",
            code="journal_corrupt",
            execution_id=self.execution_id,
        )

    @property
    def status(self) -> ExecutionStatus:
        """``completed`` after a completion, ``parked`` after an unresumed park, else ``running``."""
        if not self.entries:
            return "running"
        last = self.entries[-1]
        if last.kind == "complete":
            return "completed"
        if last.kind == "park" and last.state == "parked":
            return "parked"
        return "running"

    @property
    def completed_steps(self) -> int:
        """How many steps on the timeline completed."""
        return sum(1 for e in self.entries if e.kind == "step" and e.state == "completed")
