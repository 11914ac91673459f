"""``Execution``: journaled steps, exact replay, parks and completion (ADR 0120 decisions 9, 10).

``await execution.execute(step_id, fn, input)`` is the one primitive. While the log holds a
completed step at the call's position with the same id, its recorded output is returned and
``fn`` is not called; otherwise ``fn(input)`` runs and its input and output are journaled
before ``execute`` returns. The value returned is the output's JSON round trip in BOTH cases
(pydantic models become their ``model_dump(mode="json")`` dicts, tuples become lists, an
``Untrusted`` its marker object), so code after a step sees the same value live and replayed.

Each live step journals ``step_started`` and then its outcome. When ``fn`` is async and its
awaitable suspends (it waits on I/O, where crashes, cancellations and other tasks happen), the
start is committed just before the first suspension, and a log cut short shows which step was in
flight. A synchronous ``fn``, or an awaitable that finishes without ever suspending (a scripted
provider, a cached answer), cannot be interleaved with anything, so its start and outcome share
one commit: that halves the cost of the cheap steps, and a crash inside one loses nothing replay
needs (an unfinished step is re-run either way, and no row of it was written). ``_suspend``
tells the two apart. A step whose input cites stored content (media refs) journals its start,
with pins on that content, before its function runs, so the content sweep keeps what it is
about to read (``_content_pins``).

A step whose ``fn`` raised is journaled as ``step_failed`` and the exception propagates. Replay
does not serve failures: reaching a failed (or interrupted) step runs it again, and from there
the execution is live, superseding whatever the log recorded after that position.

Replay matches steps by id (ADR 0120 decision 10) and a completed step by its ``input_hash``
too (the ``sha256:`` of its input's canonical JSON; a disagreement is ``_divergence``'s, serving
an exact match ``_served``'s). One writer: a live step first makes sure this process holds the
lease and nobody wrote since the log was read (``_writer``), else ``ExecutionBusyError``.

``fork(at_step, new_id)`` copies the timeline before ``at_step`` into a new execution (``_fork``).
``park(payload)`` suspends the run for a decision from outside (an approval); ``resume(payload)``
records the decision and rewinds the execution so the calling code runs again from the top:
the completed steps replay from the log and the same ``park`` call now returns the decision
(those, ``seek`` and ``complete`` are ``_execution_control``'s).
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from loom_nb.journal._claims import claimed_field, payload_text, recorded_fields
from loom_nb.journal._codec import (
    check_step,
    dumps,
    encode_text,
    encode_value,
    storable_text,
    text_hash,
)
from loom_nb.journal._content_pins import MediaOnce, Pins, input_pins, request_pins_later
from loom_nb.journal._divergence import (
    Divergence,
    changed_input,
    changed_input_payload,
    diverged,
    diverged_payload,
)
from loom_nb.journal._execution_control import ExecutionControl
from loom_nb.journal._fork import fork_rows
from loom_nb.journal._requests import (
    EncodedInput,
    ModelBase,
    ModelStepInput,
    model_input,
    model_output,
)
from loom_nb.journal._served import NOT_SERVED, serve_exact
from loom_nb.journal._suspend import StartOnSuspend
from loom_nb.journal._timeline import Entry, ExecutionStatus, Timeline

if TYPE_CHECKING:
    from loom_nb.journal._journal import Journal
    from loom_nb.journal._writer import Owner
    from loom_nb.store import Principal

__all__ = ["Execution"]

StepFn = Callable[[Any], Any | Awaitable[Any]]
Encoder = Callable[..., tuple[str, Any]]
"""How a live step's output is journaled: ``(text, value returned)`` (``encode_value``'s shape)."""
PLAIN = frozenset({dict, list, str, int, float, bool, type(None), tuple})
"""Types a step's function returns that are never awaitable (no need to ask ``inspect``)."""


class Execution(ExecutionControl):
    """One durable run: its steps are journaled, and a recorded run replays from the log.

    Obtain one with ``journal.execution(execution_id)``. One writer at a time: a second
    process (or a second ``Execution`` object of the same id that read the log before the first
    wrote) gets ``ExecutionBusyError`` when it tries to run a step live. Concurrent ``execute``
    calls within one event loop are fine (positions are taken in call order).
    """

    def __init__(
        self,
        journal: Journal,
        execution_id: str,
        principal: Principal | None,
        timeline: Timeline,
        *,
        divergence: Divergence = "fail",
        ordinal: int = 0,
        start: dict[str, Any] | None = None,
    ) -> None:
        self._journal = journal
        self._start = start  # what it was started with, when the opener read it (else asked)
        self._id = execution_id
        self._principal = principal
        self._timeline = timeline
        self._divergence = divergence
        self._ordinal = ordinal
        self._next = 0
        self._positions = threading.Lock()  # taking a position is one step for every thread
        self._live_from: int | None = None
        self._exact = True
        self._token = object()  # this object, as a claimant of the execution within the process
        self.model_base: ModelBase | None = None
        """The last model request seen on this object (``_requests`` journals the next as a delta)."""

    @property
    def execution_id(self) -> str:
        """The execution's id."""
        return self._id

    @property
    def principal(self) -> Principal | None:
        """Who the execution runs for (recorded when it started); reads of stored content use it."""
        return self._principal

    @property
    def start(self) -> dict[str, Any]:
        """What the execution was started with, as ``journal.start_of(execution_id)`` reads it (its
        ``execution_started`` payload: ``principal``, and ``meta`` or ``forked_from`` when it has
        them), kept from opening it: a copy, read without a query."""
        if self._start is None:
            self._start = self._journal.start_of(self._id) or {}
        copied: dict[str, Any] = _json_copy(self._start)
        return copied

    @property
    def journal(self) -> Journal:
        """The journal this execution writes to."""
        return self._journal

    @property
    def is_replaying(self) -> bool:
        """True while the next call's position is still served from the recorded log."""
        return self._live_from is None and self._next < len(self._timeline.entries)

    @property
    def next_recorded(self) -> str | None:
        """While replaying, what the log holds at the next position (a step id, ``(park)``,
        ``(complete)``), else None: code journaling steps of its own (a chat's marks) serves them."""
        entry = self._recorded(self._next)
        return entry.label if entry is not None else None

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
        ``ReplayDivergenceError`` when replay meets another step id at this position, or the
        same step with another input (code ``input_changed``; see ``divergence`` on
        ``journal.execution``), ``ExecutionBusyError`` when another writer holds the execution
        (before ``fn`` runs), ``StepOutputError`` when the input or output is not JSON, and
        whatever ``fn`` raised (after journaling ``step_failed``).
        """
        check_step(step_id, fn)
        if isinstance(input, ModelStepInput):  # a model call handed through a wrapper
            return await self._model_step(
                step_id, fn, input.request, input.capabilities, reads_input=True
            )
        return await self._execute(step_id, fn, lambda: input, None)

    async def _model_step(
        self,
        step_id: str,
        fn: StepFn,
        request: Any,
        capabilities: Any,
        *,
        reads_input: bool = False,
        media: MediaOnce | None = None,
    ) -> Any:
        """A model call: its messages journaled as a delta, its hash over the whole request.

        ``fn`` gets the journaled input when ``reads_input`` (a caller's function through
        ``execute``); the effect's own function reads nothing, so the input is journaled
        straight from the canonical JSON the hashing made and ``fn`` gets None. ``media``: the
        request's media parts, walked when asked (live only), for its pins and the effect's
        checks; told there are none when the hashing saw none (default: the request's refs,
        ``request_pins_later(request)``).
        """
        check_step(step_id, fn)
        prepared = model_input(request, self.model_base, self._next, capabilities)
        make_input = prepared.journaled if reads_input else lambda: prepared.journaled_text(step_id)
        pins: Callable[[], Pins]
        if media is None:
            pins = request_pins_later(request)  # its refs, earlier turns' too: read if run live
        else:
            if not prepared.base.media:
                media.none()
            pins = media.pins
        try:
            output = await self._execute(
                step_id,
                fn,
                make_input,
                lambda: prepared.input_hash,
                pins,
                prepared.assembled,
                encode=encode_value if reads_input else model_output,
            )
        except BaseException:
            self.model_base = None  # the next call journals its messages in full
            raise
        self.model_base = prepared.base if self._exact else None
        return output

    async def _execute(
        self,
        step_id: str,
        fn: StepFn,
        make_input: Callable[[], Any],
        input_hash: Callable[[], str] | None,
        pins: Pins | Callable[[], Pins] | None = None,
        input_text: Callable[[], str | None] | None = None,
        *,
        encode: Encoder = encode_value,
    ) -> Any:
        """``execute`` with the input made on demand and, optionally, its hash given.

        ``make_input`` is called only when the step runs live (a model call builds its journaled
        delta only then); ``input_hash`` (default: the hash of the input's canonical JSON) is
        what replay compares with the recorded hash; ``pins`` (default: what the input cites;
        a function: asked only live) is the stored content the step reads (``_content_pins``).
        ``input_text`` (with ``input_hash``): the input's canonical JSON as journaled, or None,
        for replay's exact match (``_served``). ``encode``: how a live output is journaled and
        what the step returns (``encode_value``; a model call's own function: ``model_output``).
        """
        position, entry = self._take_position()
        self._exact = True
        if entry is not None:
            if entry.kind != "step" or entry.step_id != step_id:
                self._diverge(position, entry, step_id)
            elif entry.state == "completed":
                digest = None
                if self._divergence != "ignore_inputs":  # else served, its input not looked at
                    try:
                        output, digest = serve_exact(
                            entry.payload, step_id, make_input, input_hash, input_text
                        )
                    except BaseException:
                        self._release(position)
                        raise
                    if output is not NOT_SERVED:
                        return output
                recorded = recorded_fields(entry.payload, self._where(position))
                if self._input_changed(recorded, step_id, make_input, digest, position):
                    return await self._run(
                        position, step_id, fn, make_input(), input_hash, pins, encode
                    )
                return self._claimed(recorded, "output", position)
            else:
                self._live_from = position  # failed or interrupted: run it again, live
        try:
            value = make_input()
        except BaseException:
            self._release(position)
            raise
        return await self._run(position, step_id, fn, value, input_hash, pins, encode)

    def _input_changed(
        self,
        recorded: dict[str, Any],
        step_id: str,
        make_input: Callable[[], Any],
        digest: str | None,
        position: int,
    ) -> bool:
        """Whether the recorded step must not be served because its input changed.

        Raises ``ReplayDivergenceError('input_changed')`` with ``divergence="fail"``; with
        ``"warn"`` journals a divergence and returns True (the step runs live); with
        ``"ignore_inputs"``, or for a step recorded without a hash, returns False. ``digest``:
        the input's hash when already known.
        """
        expected = recorded.get("input_hash")
        if not isinstance(expected, str) or self._divergence == "ignore_inputs":
            self._exact = False  # served without knowing that the input is the recorded one
            return False
        try:
            if digest is not None:
                actual = digest
            else:
                actual = text_hash(encode_text(make_input(), step_id=step_id, what="input"))
        except BaseException:
            self._release(position)
            raise
        if actual == expected:
            return False
        if self._divergence == "fail":
            self._release(position)
            raise changed_input(self._id, step_id, position, expected, actual)
        payload = changed_input_payload(step_id, expected, actual)
        self._append([("divergence", step_id, position, payload)])
        self._live_from = position
        return True

    def _recorded(self, position: int) -> Entry | None:
        if self._live_from is None and position < len(self._timeline.entries):
            return self._timeline.entries[position]
        return None

    async def _run(
        self,
        position: int,
        step_id: str,
        fn: StepFn,
        input: Any,
        input_hash: Callable[[], str] | None,
        pins: Pins | Callable[[], Pins] | None,
        encode: Encoder,
    ) -> Any:
        owner = self._owner()
        try:
            self._check_live(position, step_id, owner)
            if type(input) is EncodedInput:  # a model step's input, already canonical JSON
                input_text = storable_text(input.text, input.value)
                input = None  # the effect's function never reads it (the request is beside it)
            else:
                input_text = encode_text(input, step_id=step_id, what="input")
            digest = input_hash() if input_hash is not None else text_hash(input_text)
            if pins is None or callable(pins):
                pins = input_pins(input_text) if pins is None else pins()
            # One writer: refused here, before fn does anything, when another holds the run
            # (another process, or another thread or Execution object of this one).
            self._journal._hold(self._id, self._ordinal, owner)
        except BaseException:
            self._release(position)
            raise
        try:
            return await self._run_held(
                position, step_id, fn, input, input_text, digest, pins, encode
            )
        finally:
            self._journal._let_go(self._id, owner)

    async def _run_held(
        self,
        position: int,
        step_id: str,
        fn: StepFn,
        input: Any,
        input_text: str,
        digest: str,
        pins: Pins,
        encode: Encoder,
    ) -> Any:
        """Run the step and journal its outcome, holding the execution's claim (``_run``).

        A step with ``pins`` journals its start (and the pins) before ``fn`` runs, so the
        content it reads is pinned before the store is read (``_content_pins``); its outcome unpins.
        """
        # No await between taking the position and journaling the start: concurrent calls
        # journal their steps in position order.
        started = False
        fields = {"input": input_text, "input_hash": dumps(digest)}

        def start() -> None:
            nonlocal started
            self._write("step_started", step_id, position, "{}", pins=pins)
            started = True

        try:
            if pins:
                start()
            result = fn(input)
            if type(result) not in PLAIN and inspect.isawaitable(result):
                # When the step suspends (I/O, where crashes, cancellations and other tasks
                # land), its start is made durable first, so a log cut short shows which step
                # was in flight; one that never suspends is journaled in one commit below.
                result = await (result if started else StartOnSuspend(result, start))
            output_text, output = encode(result, step_id=step_id, what="output")
        except BaseException as exc:
            error = {
                "code": getattr(exc, "code", None),
                "message": str(exc),
                "type": type(exc).__qualname__,
            }
            error_text = dumps(error)
            self._settle(
                started, "step_failed", step_id, position, fields, bool(pins), error=error_text
            )
            raise
        self._settle(
            started, "step_completed", step_id, position, fields, bool(pins), output=output_text
        )
        return output

    def _settle(
        self,
        started: bool,
        kind: str,
        step_id: str,
        position: int,
        fields: dict[str, str],
        pinned: bool,
        **outcome: str,
    ) -> None:
        """Journal a step's outcome (removing its pins, if it ``pinned``); a step that never
        suspended gets its start in the same commit."""
        if started:
            payload = self._step_payload({**fields, **outcome})
            self._write(kind, step_id, position, payload, unpin=position if pinned else None)
            return
        try:
            payload = self._step_payload({**fields, **outcome})
            self._append(
                [("step_started", step_id, position, "{}"), (kind, step_id, position, payload)]
            )
        except BaseException:
            self._release(position)  # nothing suspended since the position was taken
            raise
        self._timeline.settle_step(step_id, position, kind, payload)

    def _step_payload(self, fields: dict[str, str]) -> str:
        return payload_text(
            fields,
            store=self._journal.store,
            tenant=self._principal.tenant if self._principal is not None else None,
            threshold=self._journal.claim_threshold,
        )

    def _append(
        self,
        rows: list[tuple[str, str | None, int | None, str]],
        *,
        release: bool = False,
        pins: Pins = (),
        unpin: int | None = None,
    ) -> None:
        """Append rows at this execution's next ordinal (the journal checks the lease)."""
        owner = self._owner()
        self._journal._append(
            self._id, self._ordinal, rows, release=release, owner=owner, pins=pins, unpin=unpin
        )
        self._ordinal += len(rows)

    def _owner(self) -> Owner:
        """This object on the calling thread, as the journal's in-process claimant."""
        return (self._token, threading.get_ident())

    def _release(self, position: int) -> None:
        """Give back a position nothing was journaled at, so the next call takes it (no hole).

        Only called before the call suspended, so no later call can have taken a position yet.
        """
        if self._next == position + 1:
            self._next = position

    def _check_live(self, position: int, label: str, owner: Owner | None = None) -> None:
        """Refuse to run live past a completion or an unresumed park, or past a hole in the log.

        A hole while another thread runs a step of this execution is that thread's step, not
        yet journaled: the call is refused as ``execution_busy`` (``owner`` is this call's).
        """
        self._timeline.check_live(
            position, label, lambda: self._journal._check_busy(self._id, owner)
        )

    def _diverge(self, position: int, entry: Entry, actual: str) -> None:
        expected = entry.label
        if self._divergence != "warn":
            raise diverged(self._id, position, expected, actual)
        payload = diverged_payload(expected, actual)
        self._append([("divergence", actual, position, payload)])
        self._live_from = position

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
    ) -> None:
        self._append([(kind, step_id, position, payload)], release=release, pins=pins, unpin=unpin)
        self._timeline.apply(kind, step_id, position, payload)

    def _field(self, payload: str | None, name: str, position: int) -> Any:
        """One field of a recorded payload, its claim-check resolved (only that field is read)."""
        return self._claimed(recorded_fields(payload, self._where(position)), name, position)

    def _claimed(self, fields: dict[str, Any], name: str, position: int) -> Any:
        return claimed_field(fields, name, store=self._journal.store, where=self._where(position))

    def _where(self, position: int) -> str:
        return f"execution {self._id!r}, position {position}"

    # -- fork ---------------------------------------------------------------------------------

    def fork(self, at_step: str | int, new_id: str) -> Execution:
        """A new execution ``new_id`` holding this one's timeline BEFORE ``at_step``, opened for replay.

        ``at_step`` is a step id on the timeline (its first occurrence) or a position (0 up to
        the timeline's length). The new execution serves the copied steps from the log and runs
        live from ``at_step`` on, so code that now asks something else there (an edited prompt,
        another tool answer) goes on from the recorded prefix without touching this execution.
        Its ``execution_started`` names where it came from (``forked_from``), it keeps this
        execution's principal and divergence setting, and it exports and imports like any
        other (the copied rows are its own). Raises ``JournalError`` with code ``unknown_step``
        (no such step), ``execution_exists`` (``new_id`` is taken) or ``invalid_execution_id``.
        """
        rows = fork_rows(self._timeline.entries, self._id, self._principal, at_step, new_id)
        self._journal._insert_execution(new_id, rows)
        return self._journal.execution(new_id, divergence=self._divergence)


def _json_copy(value: Any) -> Any:
    """A copy of decoded JSON (dicts and lists of immutable leaves): what ``copy.deepcopy`` gives
    for such a value, at a fifth of its cost (no memo, no dispatch on every leaf)."""
    if type(value) is dict:
        return {key: _json_copy(item) for key, item in value.items()}
    if type(value) is list:
        return [_json_copy(item) for item in value]
    return value
