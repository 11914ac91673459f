"""``Execution``: journaled steps, exact replay, parks and completion (ADR 0120 decisions 9, 10).

``await execution.execute(step_id, fn, input)`` is the one primitive. While the log holds a
completed step at the call's position with the same id, its recorded output is returned and
``fn`` is not called; otherwise ``fn(input)`` runs and its input and output are journaled
before ``execute`` returns. The value returned is the output's JSON round trip in BOTH cases
(pydantic models become their ``model_dump(mode="json")`` dicts, tuples become lists, an
``Untrusted`` its marker object), so code after a step sees the same value live and replayed.

Each live step journals ``step_started`` and then its outcome. When ``fn`` is async (it returns
an awaitable, so it will wait on I/O, where crashes and cancellations happen), the start is
committed before the awaitable runs, and a log cut short shows which step was in flight. A
synchronous ``fn`` cannot be interleaved with anything, so its start and outcome share one
commit: that halves the cost of the cheap steps, and a crash inside one loses nothing replay
needs (an unfinished step is re-run either way).

A step whose ``fn`` raised is journaled as ``step_failed`` and the exception propagates. Replay
does not serve failures: reaching a failed (or interrupted) step runs it again, and from there
the execution is live, superseding whatever the log recorded after that position.

``park(payload)`` suspends the run for a decision from outside (an approval); ``resume(payload)``
records the decision and rewinds the execution so the calling code runs again from the top:
the completed steps replay from the log and the same ``park`` call now returns the decision.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal

from loom_nb.errors import JournalError, ReplayDivergenceError
from loom_nb.journal._claims import payload_text, unclaim
from loom_nb.journal._codec import decode, dumps, encode_value, is_storable_id
from loom_nb.journal._timeline import Entry, ExecutionStatus, Timeline

if TYPE_CHECKING:
    from loom_nb.journal._journal import Journal
    from loom_nb.store import Principal

__all__ = ["Execution", "principal_from_json", "principal_to_json"]

StepFn = Callable[[Any], Any | Awaitable[Any]]


class Execution:
    """One durable run: its steps are journaled, and a recorded run replays from the log.

    Obtain one with ``journal.execution(execution_id)``. Not safe to drive from two processes
    at once; concurrent ``execute`` calls within one event loop are fine (positions are taken
    in call order).
    """

    def __init__(
        self,
        journal: Journal,
        execution_id: str,
        principal: Principal | None,
        timeline: Timeline,
        *,
        divergence: Literal["fail", "warn"] = "fail",
    ) -> None:
        self._journal = journal
        self._id = execution_id
        self._principal = principal
        self._timeline = timeline
        self._divergence = divergence
        self._next = 0
        self._live_from: int | None = None

    @property
    def execution_id(self) -> str:
        """The execution's id."""
        return self._id

    @property
    def principal(self) -> Principal | None:
        """Who the execution runs for (recorded when it started); reads of stored content use it."""
        return self._principal

    @property
    def journal(self) -> Journal:
        """The journal this execution writes to."""
        return self._journal

    @property
    def is_replaying(self) -> bool:
        """True while the next call's position is still served from the recorded log."""
        return self._live_from is None and self._next < len(self._timeline.entries)

    @property
    def status(self) -> ExecutionStatus:
        """``running``, ``parked`` (a park awaits ``resume``) or ``completed``."""
        return self._timeline.status

    @property
    def parked_payload(self) -> Any | None:
        """The payload of the last park not yet resumed, else None."""
        entries = self._timeline.entries
        if entries and entries[-1].kind == "park" and entries[-1].state == "parked":
            return self._field(entries[-1].payload, "payload", len(entries) - 1)
        return None

    @property
    def resumed_payload(self) -> Any | None:
        """The decision passed to the most recent ``resume`` on the timeline, else None."""
        for position in range(len(self._timeline.entries) - 1, -1, -1):
            entry = self._timeline.entries[position]
            if entry.kind == "park" and entry.state == "resumed":
                return self._field(entry.resume_payload, "payload", position)
        return None

    @property
    def output(self) -> Any | None:
        """The output passed to ``complete`` (its JSON round trip), or None while not completed."""
        entries = self._timeline.entries
        if entries and entries[-1].kind == "complete":
            return self._field(entries[-1].payload, "output", len(entries) - 1)
        return None

    def __repr__(self) -> str:
        return f"<Execution {self._id!r} {self.status}, {len(self._timeline.entries)} positions>"

    # -- steps ----------------------------------------------------------------------------

    async def execute(self, step_id: str, fn: StepFn, input: Any = None) -> Any:
        """Run ``fn(input)`` as the journaled step ``step_id``, or serve it from the log.

        Returns the output's JSON round trip (the same value live and replayed). Raises
        ``ReplayDivergenceError`` when replay meets another step id at this position (with
        ``divergence="fail"``), ``StepOutputError`` when the input or output is not JSON, and
        whatever ``fn`` raised (after journaling ``step_failed``).
        """
        if not is_storable_id(step_id):
            raise JournalError(
                f"a step id is a non-empty string of valid Unicode, not {step_id!r}.",
                code="invalid_step_id",
            )
        if not callable(fn):
            raise JournalError(
                f"step {step_id!r}: fn must be a function (sync or async) taking the input, not "
                f"{type(fn).__name__}.",
                code="invalid_step_fn",
            )
        position = self._next
        self._next += 1
        entry = self._recorded(position)
        if entry is not None:
            if entry.kind != "step" or entry.step_id != step_id:
                self._diverge(position, entry, step_id)
            elif entry.state == "completed":
                return self._field(entry.payload, "output", position)
            else:
                self._live_from = position  # failed or interrupted: run it again, live
        return await self._run(position, step_id, fn, input)

    def _recorded(self, position: int) -> Entry | None:
        if self._live_from is None and position < len(self._timeline.entries):
            return self._timeline.entries[position]
        return None

    async def _run(self, position: int, step_id: str, fn: StepFn, input: Any) -> Any:
        try:
            self._check_live(position, step_id)
            input_text, _ = encode_value(input, step_id=step_id, what="input")
        except BaseException:
            self._release(position)
            raise
        # No await between taking the position and journaling the start: concurrent calls
        # journal their steps in position order.
        started = False
        try:
            result = fn(input)
            if inspect.isawaitable(result):
                # The step will suspend (I/O, where crashes and cancellations land): make its
                # start durable first, so a log cut short shows which step was in flight.
                self._write("step_started", step_id, position, "{}")
                started = True
                result = await result
            output_text, output = encode_value(result, step_id=step_id, what="output")
        except BaseException as exc:
            error = {
                "code": getattr(exc, "code", None),
                "message": str(exc),
                "type": type(exc).__qualname__,
            }
            self._settle(started, "step_failed", step_id, position, input_text, error=dumps(error))
            raise
        self._settle(started, "step_completed", step_id, position, input_text, output=output_text)
        return output

    def _settle(
        self, started: bool, kind: str, step_id: str, position: int, input_text: str, **outcome: str
    ) -> None:
        """Journal a step's outcome; a step that never suspended gets its start in the same commit."""
        if started:
            self._write(kind, step_id, position, self._step_payload(input=input_text, **outcome))
            return
        try:
            payload = self._step_payload(input=input_text, **outcome)
            self._journal._append_pair(
                self._id,
                ("step_started", step_id, position, "{}"),
                (kind, step_id, position, payload),
            )
        except BaseException:
            self._release(position)  # nothing suspended since the position was taken
            raise
        self._timeline.apply("step_started", step_id, position, "{}")
        self._timeline.apply(kind, step_id, position, payload)

    def _step_payload(self, **fields: str) -> str:
        return payload_text(
            fields,
            store=self._journal.store,
            tenant=self._principal.tenant if self._principal is not None else None,
            threshold=self._journal.claim_threshold,
        )

    def _release(self, position: int) -> None:
        """Give back a position nothing was journaled at, so the next call takes it (no hole).

        Only called before the call suspended, so no later call can have taken a position yet.
        """
        if self._next == position + 1:
            self._next = position

    def _check_live(self, position: int, label: str) -> None:
        """Refuse to run live past a completion or an unresumed park, or past a hole in the log."""
        entries = self._timeline.entries
        previous = entries[min(position, len(entries)) - 1] if position > 0 and entries else None
        if previous is not None and previous.kind == "complete":
            raise JournalError(
                f"execution {self._id!r} is completed; {label!r} cannot run after it. Open a new "
                "execution id for a new run.",
                code="execution_completed",
                execution_id=self._id,
            )
        if previous is not None and previous.kind == "park" and previous.state == "parked":
            raise JournalError(
                f"execution {self._id!r} is parked; {label!r} cannot run until it is resumed. "
                "Call `await execution.resume(decision)` and run the code again.",
                code="execution_parked",
                execution_id=self._id,
            )
        if position > len(entries):
            raise JournalError(
                f"execution {self._id!r}: {label!r} would be journaled at position {position}, "
                f"but the log ends at position {len(entries)}: an earlier call on this object "
                "failed without being journaled. Open the execution again "
                "(journal.execution(id)) and run the code from the top.",
                code="position_gap",
                execution_id=self._id,
            )

    def _diverge(self, position: int, entry: Entry, actual: str) -> None:
        expected = entry.label
        if self._divergence == "fail":
            raise ReplayDivergenceError(
                f"replay of execution {self._id!r} diverged at position {position}: the log "
                f"recorded {expected!r} but the code asked for {actual!r}. Step ids must come out "
                "the same on every run; if the code changed on purpose, open the execution with "
                "divergence='warn' (the log is superseded from here) or start a new execution id.",
                expected=expected,
                actual=actual,
                position=position,
                execution_id=self._id,
            )
        payload = dumps({"actual": actual, "expected": expected})
        self._journal._append(self._id, "divergence", actual, position, payload)
        self._live_from = position

    def _write(self, kind: str, step_id: str | None, position: int, payload: str) -> None:
        self._journal._append(self._id, kind, step_id, position, payload)
        self._timeline.apply(kind, step_id, position, payload)

    def _field(self, payload: str | None, name: str, position: int) -> Any:
        """One field of a recorded payload, its claim-check resolved (the replay hot path).

        Only the field asked for is read back: serving a step's output never reads its
        claim-checked input (a whole transcript, for a model call) from the store.
        """
        try:
            value = json.loads(payload or "{}")
        except (RecursionError, ValueError):
            value = decode(payload or "{}", where=self._where(position))  # raises with context
        if not isinstance(value, dict):
            return None
        claimed = value.get("claimed")
        if isinstance(claimed, list) and name in claimed:
            where = f"{self._where(position)}.{name}"
            return unclaim(value.get(name), store=self._journal.store, where=where)
        return value.get(name)

    def _where(self, position: int) -> str:
        return f"execution {self._id!r}, position {position}"

    # -- park, resume, complete -------------------------------------------------------------

    async def park(self, payload: Any = None) -> Any | None:
        """Suspend the run for a decision from outside; return the decision once it is resumed.

        Live, the park is journaled and None is returned: the caller should stop and report
        that it is parked. Replayed, the call is served from the log: it returns the payload
        given to ``resume`` (or None while the park still waits), and nothing is journaled.
        """
        position = self._next
        self._next += 1
        entry = self._recorded(position)
        if entry is not None:
            if entry.kind == "park":
                if entry.state == "resumed":
                    return self._field(entry.resume_payload, "payload", position)
                return None
            self._diverge(position, entry, "(park)")
        try:
            self._check_live(position, "(park)")
            text, _ = encode_value(payload, step_id="(park)", what="payload")
            self._write("parked", None, position, "{" + f'"payload":{text}' + "}")
        except BaseException:
            self._release(position)
            raise
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
        self._next = 0
        self._live_from = None

    async def complete(self, output: Any = None) -> None:
        """Record the run's final output; replayed, an already recorded completion is kept as is."""
        position = self._next
        self._next += 1
        entry = self._recorded(position)
        if entry is not None:
            if entry.kind == "complete":
                return
            self._diverge(position, entry, "(complete)")
        try:
            self._check_live(position, "(complete)")
            text, _ = encode_value(output, step_id="(complete)", what="output")
            self._write("completed", None, position, "{" + f'"output":{text}' + "}")
        except BaseException:
            self._release(position)
            raise


def principal_to_json(principal: Principal | None) -> dict[str, Any] | None:
    """The JSON form of a principal journaled in ``execution_started``."""
    if principal is None:
        return None
    tenant = getattr(principal, "tenant", None)
    if not isinstance(tenant, str) or not tenant:
        raise JournalError(
            f"a principal has a non-empty string tenant; got {principal!r}. Pass "
            "Principal(tenant='...').",
            code="invalid_principal",
        )
    return {"subject": getattr(principal, "subject", None), "tenant": tenant}


def principal_from_json(data: Any) -> Principal | None:
    """The principal a journaled ``execution_started`` names (None when it names none)."""
    from loom_nb.store import Principal

    if data is None:
        return None
    if not (isinstance(data, dict) and isinstance(data.get("tenant"), str)):
        raise JournalError(
            f"the journaled principal {data!r} has no tenant; the journal is damaged.",
            code="journal_corrupt",
        )
    subject = data.get("subject")
    return Principal(tenant=data["tenant"], subject=subject if isinstance(subject, str) else None)
