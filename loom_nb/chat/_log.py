"""A chat's own log: the steps ``Chat`` journals in its execution, and their fold back into turns.

A chat is the execution ``<id>``; position ``k`` holds one of its steps, ``#chat:<k>:<kind>``:

- ``model``: a ``chat(...)`` turn (the model call; input the request, output the response);
- ``undo``: ``chat.undo()`` (which turn was dropped);
- ``run``: a ``chat.run(...)``; input the user message, output the run's execution id and
  ``max_turns`` (the agent loop runs in that execution, ``<id>/run-<n>``);
- ``seed``: the messages ``Chat(..., history=[...])`` started from (input ``{"messages"}``);
- ``provider``: the provider answering from here on, when it is not the one the chat started
  with (which its ``execution_started`` records as ``meta``); input ``{}``, so a replay serves it;
- ``stop``: the partial text of the turn just before it, stopped while streaming;
- ``restart``: ``Chat(..., restart=True)`` starting over (output: where the old turns went).

Marks (``provider``, ``stop``, ``restart``) are journaled by the chat of its own accord: a replay
serves them where the log has them, and code never asks for them by name, so a log written
before they existed replays as before. A run took no position before ``run`` marks existed;
such a log's runs are not found again by ``Chat.resume`` (its plain turns are).

``fold`` reads an execution's events back into its current steps, position by position (a
step started again at a position supersedes the log from there, as the journal's own timeline
does). ``walk`` rebuilds a chat's history, turns and positions from them, as the live chat
built them: ``Chat.resume`` replays each run's agent loop from its log to get its result,
``chats()`` and the CLI read each run's transcript instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from loom_nb.chat._cost import Priced, answered, run_usage
from loom_nb.chat._records import ChatTurn, Parked, Position, TurnStatus, UndoMark
from loom_nb.content import LlmRequest, LlmResponse, Message, assistant_message_of
from loom_nb.journal import Event, Journal

__all__ = [
    "ChatLog",
    "LogStep",
    "Mark",
    "Outline",
    "Target",
    "fold",
    "halt_run",
    "run_status",
    "started_identity",
    "step_kind",
    "walk",
]

_STEP = re.compile(r"#chat:(\d+):([a-z]+)")
KINDS = frozenset({"model", "undo", "run", "seed", "provider", "stop", "restart"})
MARKS = frozenset({"provider", "stop", "restart"})


@dataclass(frozen=True)
class Mark:
    """A journaled chat step that is not a model turn or an undo (``seed``, ``run``, a mark).

    ``data`` is what the chat keeps of it: the provider identity of a ``provider`` mark, the run
    id of a ``run`` step.
    """

    step_id: str
    kind: str
    data: Any = None


@dataclass
class LogStep:
    """One position of a chat's execution as the log holds it now."""

    position: int
    step_id: str
    state: Literal["started", "completed", "failed"]
    payload: dict[str, Any] = field(default_factory=dict)
    created: datetime | None = None

    @property
    def kind(self) -> str | None:
        """The chat step's kind (``model``, ``run`` ...), None when it is not a chat step."""
        return step_kind(self.step_id)

    @property
    def input(self) -> Any:
        """The step's journaled input (a model step's request, expanded whole)."""
        return self.payload.get("input")

    @property
    def output(self) -> Any:
        """The step's output (None unless completed)."""
        return self.payload.get("output") if self.state == "completed" else None

    @property
    def error(self) -> dict[str, Any]:
        """A failed step's error (``code``, ``message``, ``type``), else ``{}``."""
        error = self.payload.get("error") if self.state == "failed" else None
        if isinstance(error, str):  # kept as JSON text by some writers
            try:
                error = json.loads(error)
            except ValueError:
                return {}
        return error if isinstance(error, dict) else {}


@dataclass
class ChatLog:
    """An execution's current steps, with its start and the time of its last event."""

    journal: Journal
    execution_id: str
    start: dict[str, Any]
    steps: list[LogStep]
    updated: datetime | None
    other: int = 0
    """Positions that are not chat steps (an agent run's steps, a park): not a chat when > 0."""

    @property
    def is_chat(self) -> bool:
        """Whether the execution is a chat's (every position a chat step; a new chat has none)."""
        if self.other:
            return False
        return bool(self.steps) or "chat" in (self.start.get("meta") or {})


def step_kind(step_id: str | None) -> str | None:
    """``model`` for ``#chat:3:model`` ...; None for a step id that is not a chat step."""
    match = _STEP.fullmatch(step_id or "")
    return match.group(2) if match and match.group(2) in KINDS else None


def fold(journal: Journal, execution_id: str, events: list[Event] | None = None) -> ChatLog:
    """The current steps of ``execution_id`` (``events``: its events when already read)."""
    if events is None:
        events = journal.events(execution_id)
    start: dict[str, Any] = {}
    steps: list[LogStep] = []
    other: list[int] = []  # positions of entries that are not steps (parks, a completion)
    for event in events:
        position = event.position
        if event.kind == "execution_started":
            start = event.payload if isinstance(event.payload, dict) else {}
            continue
        if position is None or event.kind == "divergence":
            continue
        if event.kind in ("step_started", "parked", "completed"):
            del steps[position:]
            other = [p for p in other if p < position]
            if event.kind == "step_started":
                steps.append(LogStep(position, event.step_id or "", "started"))
            else:
                other.append(position)
                steps.append(LogStep(position, f"({event.kind})", "completed"))
        elif event.kind in ("step_completed", "step_failed") and position < len(steps):
            step = steps[position]
            step.state = "completed" if event.kind == "step_completed" else "failed"
            step.payload = event.payload if isinstance(event.payload, dict) else {}
            step.created = event.created
    foreign = len(other) + sum(1 for s in steps if s.kind is None and s.position not in other)
    return ChatLog(
        journal,
        execution_id,
        start,
        steps,
        events[-1].created if events else None,
        other=foreign,
    )


def started_identity(journal: Journal, start: dict[str, Any]) -> dict[str, Any] | None:
    """The provider a chat started with: its start's ``meta``, or (a fork, an archive) its source's.

    A fork's ``execution_started`` names where it came from and records no meta of its own; the
    provider marks before the fork point were copied with the log.
    """
    seen: set[str] = set()
    while True:
        meta = start.get("meta")
        if isinstance(meta, dict) and isinstance(meta.get("chat"), dict):
            return dict(meta["chat"])
        source = start.get("forked_from")
        parent = source.get("execution_id") if isinstance(source, dict) else None
        if not isinstance(parent, str) or parent in seen:
            return None
        seen.add(parent)
        start = journal.start_of(parent) or {}


class Target(Protocol):
    """What a walk rebuilds: a ``Chat`` (for a resume) or an ``Outline`` (for a listing)."""

    _history: list[Message]
    _turns: list[ChatTurn]
    _positions: list[Position | UndoMark | Mark]
    _identity: dict[str, Any] | None
    _parked: Parked | None
    _halted: Parked | None
    _runs: int


@dataclass
class Outline:
    """A chat's state rebuilt from its log without replaying its runs (``chats()``, the CLI)."""

    _history: list[Message] = field(default_factory=list)
    _turns: list[ChatTurn] = field(default_factory=list)
    _positions: list[Position | UndoMark | Mark] = field(default_factory=list)
    _identity: dict[str, Any] | None = None
    _parked: Parked | None = None
    _halted: Parked | None = None
    _runs: int = 0


RunHandler = Callable[[Target, Parked], Awaitable[None]]


async def walk(target: Target, log: ChatLog, identity: dict[str, Any], on_run: RunHandler) -> None:
    """Rebuild ``target``'s history, turns and positions from ``log``, as the live chat built them.

    A run step whose run parked or completed is handed to ``on_run`` (with ``target._parked``
    set), which records its turn; a run that failed, or was cut short, left no turn, as live.
    """
    target._identity = identity
    stopped: tuple[Message, int] | None = None  # the last failed model turn, for a stop mark
    for step in log.steps:
        kind, step_id = step.kind, step.step_id
        given = step.input if isinstance(step.input, dict) else {}
        if kind == "seed":
            target._history[:] = [Message.model_validate(m) for m in given.get("messages", [])]
            target._positions.append(Mark(step_id, "seed"))
        elif kind in ("provider", "restart"):
            if kind == "provider" and isinstance(step.output, dict):
                target._identity = identity = dict(step.output)
            target._positions.append(Mark(step_id, kind, step.output))
        elif kind == "model":
            request = _turn_request(step.input)
            response = LlmResponse.model_validate(step.output) if step.output else None
            target._positions.append(Position(step_id))
            stopped = (request.messages[-1], step.position) if response is None else None
            if response is not None:
                _turn(target, request.messages[-1], response, step.position, identity, "completed")
        elif kind == "stop" and stopped is not None:
            partial = LlmResponse(content=str(given.get("text", "")), stop_reason="other")
            _turn(target, stopped[0], partial, stopped[1], identity, "stopped")
            target._positions.append(Mark(step_id, "stop"))
        elif kind == "undo" and target._turns:
            turn = target._turns.pop()
            del target._history[turn.start :]
            if target._parked is not None and target._parked.turn == turn.index:
                target._parked = None
            if target._halted is not None and target._halted.turn == turn.index:
                target._halted = None
            target._positions.append(UndoMark(step_id, dict(given)))
        elif kind == "run":
            output = step.output if isinstance(step.output, dict) else {}
            run_id, max_turns = output.get("run_id"), output.get("max_turns")
            target._positions.append(Mark(step_id, "run", run_id))
            target._runs += 1
            target._halted = None  # a new run leaves one a limit stopped behind, as live
            status = run_status(log.journal, run_id) if isinstance(run_id, str) else None
            if status is None:
                continue
            assert isinstance(run_id, str)
            message = Message.model_validate(given.get("message"))
            parked = Parked(
                run_id,
                [*target._history, message],
                max_turns if isinstance(max_turns, int) and max_turns > 0 else 10,
                len(target._turns),
                step.position,
                identity,
            )
            if status == "halted":  # stopped by a spending limit: resumable, nothing to replay
                halt_run(target, parked, log.journal)
                continue
            target._parked = parked
            await on_run(target, parked)


def _turn_request(value: Any) -> LlmRequest:
    """A model step's journaled request, validated with only its last message: the turn's own.

    The earlier messages are the history this walk rebuilds from the steps before (each one's
    last message and response), so validating each step's whole list again made resuming a
    chat cost the square of its length (a 1,000-turn chat: 1M messages validated, 3.3 s and
    500 MiB). Its other fields (system, tools, settings) are still validated, and a value that is
    not a request fails as it did.
    """
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        value = {**value, "messages": value["messages"][-1:]}
    return LlmRequest.model_validate(value)


def _turn(
    target: Target,
    message: Message,
    response: LlmResponse,
    position: int,
    identity: dict[str, Any],
    status: TurnStatus,
) -> None:
    """Record a plain turn as ``Chat.__call__`` does (a stopped one keeps its partial text)."""
    target._halted = None  # a plain turn leaves a run a limit stopped behind
    start = len(target._history)
    if status == "completed" or response.content:
        target._history.extend([message, assistant_message_of(response)])
    target._turns.append(
        ChatTurn(
            index=len(target._turns),
            kind="chat",
            start=start,
            status=status,
            response=response,
            usage=response.usage,
            cost=Priced(identity, response) if status == "completed" else None,
            position=position,
            **answered(identity, response),
        )
    )


def run_status(journal: Journal, run_id: str) -> str | None:
    """``parked``, ``completed`` or ``halted`` (a spending limit refused its next model call) for
    a run that left a turn; None for a failed, cut short or missing one."""
    if journal.start_of(run_id) is None:
        return None
    status = journal.execution(run_id).status
    if status in ("parked", "completed"):
        return status
    steps = fold(journal, run_id).steps
    if steps and steps[-1].error.get("code") == "budget_exceeded":
        return "halted"
    return None


def halt_run(target: Target, parked: Parked, journal: Journal) -> None:
    """A run a spending limit stopped: its turn, ``halted``, with what it spent; ``chat.run()``
    with no text resumes it once the limit is raised."""
    usage, cost = run_usage(journal, parked.run_id, parked.identity)
    turn = ChatTurn(
        index=parked.turn,
        kind="run",
        start=len(parked.messages) - 1,
        status="halted",
        response=None,
        usage=usage,
        cost=cost,
        position=parked.position,
        run_id=parked.run_id,
        **answered(parked.identity, None),
    )
    del target._turns[parked.turn :]
    target._turns.append(turn)
    target._parked, target._halted = None, parked
