"""Turns of a journaled run: what the model saw, said and caused, one model call at a time.

A pure reading of the journal (no widgets): ``turns_of(journal, execution_id)`` folds the
execution's events into its current timeline (a step re-run at a position supersedes what was
recorded after it, as in ``loom_nb.journal``) and makes one ``TurnRecord`` per model-call step.
A model-call step is one whose input is a request ``{messages, tools, system}`` and whose output
is an ``LlmResponse`` (``create_llm_effect`` journals exactly that). The agent loop names its
steps ``#turn:<t>:model``, ``#turn:<t>:tool:<id>``, ``#turn:<t>:approval:<id>`` and
``#turn:<t>:compact``: a compaction call is not a turn, it marks the next turn as compacted, and
the tool and approval steps of turn ``t`` fill in what happened to that turn's calls.

Each call's result is taken as the model later saw it (the ``tool_result`` part in the next
turn's request); when no later request carries it (the last turn, a parked run), the tool step's
journaled outcome is shown instead. Replaying needs no provider, no key and no blobs.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from loom_nb.content import (
    AudioPart,
    FilePart,
    ImagePart,
    LlmRequest,
    LlmResponse,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolResultPart,
    ToolUsePart,
    canonical_json,
    content_error,
    to_parts,
)
from loom_nb.content._messages import RequestReader
from loom_nb.errors import JournalError

__all__ = ["ToolExchange", "TurnRecord", "describe_message", "new_messages", "turns_of"]

_AGENT_STEP = re.compile(r"#turn:(\d+):(model|compact|tool|approval)(?::(.*))?\Z", re.S)


@dataclass(frozen=True)
class ToolExchange:
    """One tool call of a turn and what became of it."""

    id: str
    """The call's id."""
    name: str
    """The tool called."""
    input: dict[str, Any]
    """The call's input as the model sent it."""
    result: ToolResultPart | None = None
    """The result as the next request carried it to the model (None when none did)."""
    outcome: Any = None
    """The tool step's journaled outcome (``{"ok": ...}`` / ``{"error": ...}``), when it ran."""
    approval: Any = None
    """The journaled approval decision, for a call that needed one."""

    @property
    def status(self) -> str:
        """In words: ``answered``, ``error``, ``ran``, ``awaiting approval`` or ``not run``."""
        if self.result is not None:
            return "error" if self.result.is_error else "answered"
        if isinstance(self.approval, dict) and self.approval.get("pending") is True:
            return "awaiting approval"
        if self.outcome is not None:
            return "error" if isinstance(self.outcome, dict) and "error" in self.outcome else "ran"
        return "not run"


@dataclass(frozen=True)
class TurnRecord:
    """One model call of a run: its request, its response, its tool calls and what was new."""

    index: int
    """Position among the run's turns, from 0."""
    step_id: str
    """The journaled step id (``#turn:<t>:model`` for the agent loop)."""
    request: LlmRequest
    """The request exactly as journaled (refs as addresses, untrusted marks kept)."""
    response: LlmResponse | None
    """The model's answer (None when the step failed or is still in flight)."""
    error: dict[str, Any] | None = None
    """The journaled error of a failed step (``code``, ``message``, ``type``)."""
    tools: list[ToolExchange] = field(default_factory=list)
    """The response's tool calls, in order, with their results."""
    added: list[Message] = field(default_factory=list)
    """Messages new since the previous turn's request (all of them for the first turn)."""
    compacted: bool = False
    """Whether the transcript was folded (compaction) since the previous turn's request."""
    latency_s: float | None = None
    """Seconds from the step's start to its outcome, from the journal's timestamps (None: unknown)."""

    @property
    def stop_reason(self) -> str:
        """Why the model stopped, or ``failed`` / ``in flight`` when there is no response."""
        if self.response is not None:
            return self.response.stop_reason
        return "failed" if self.error is not None else "in flight"

    @property
    def usage(self) -> tuple[int, int]:
        """(input tokens, output tokens); zeros without a response."""
        if self.response is None:
            return (0, 0)
        return (self.response.usage.input_tokens, self.response.usage.output_tokens)

    @property
    def changes(self) -> str:
        """What changed since the previous turn, e.g. ``+2 messages: assistant tool_use t1, user tool_result t1``."""
        head = "transcript compacted; " if self.compacted else ""
        count = len(self.added)
        if not count:
            return head + "no new messages"
        listing = ", ".join(describe_message(m) for m in self.added)
        return f"{head}+{count} message{'s' if count != 1 else ''}: {listing}"

    def summary(self) -> dict[str, Any]:
        """A JSON row for tables: turn, step id, stop reason, tool calls, usage, changes."""
        return {
            "turn": self.index + 1,
            "step_id": self.step_id,
            "stop_reason": self.stop_reason,
            "tool_calls": [f"{t.name} {t.id}" for t in self.tools],
            "input_tokens": self.usage[0],
            "output_tokens": self.usage[1],
            "changes": self.changes,
        }


def describe_message(message: Message) -> str:
    """A message in a few words: its role and its part kinds (``assistant text + tool_use t1``)."""
    kinds = [_describe_part(part) for part in to_parts(message.content)]
    return f"{message.role} {' + '.join(kinds) if kinds else 'empty'}"


def _describe_part(part: Part) -> str:
    if isinstance(part, TextPart):
        return "untrusted text" if part.origin or not isinstance(part.text, str) else "text"
    if isinstance(part, ToolUsePart):
        return f"tool_use {part.id if isinstance(part.id, str) else part.id.value}"
    if isinstance(part, ToolResultPart):
        return f"tool_result {part.tool_use_id}" + (" (error)" if part.is_error else "")
    if isinstance(part, FilePart):
        return f"file {part.media_type}"
    if isinstance(part, ReasoningPart):
        return "reasoning (redacted)" if part.redacted else "reasoning"
    kind = "image" if isinstance(part, ImagePart) else "audio"
    assert isinstance(part, ImagePart | AudioPart)
    return f"{kind} {part.media_type}"


def new_messages(before: list[Message], after: list[Message]) -> tuple[list[Message], bool]:
    """The messages ``after`` adds to ``before``, and whether ``before`` is not a prefix (compaction)."""
    if len(before) <= len(after) and all(
        _same(a, b) for a, b in zip(before, after[: len(before)], strict=True)
    ):
        return list(after[len(before) :]), False
    seen = {_key(m) for m in before}
    return [m for m in after if _key(m) not in seen], True


def _key(message: Message) -> str:
    return canonical_json(message)


def _same(a: Message, b: Message) -> bool:
    return a is b or a.model_dump(mode="json") == b.model_dump(mode="json")


# -- reading the journal ------------------------------------------------------------------------


@dataclass
class _Step:
    step_id: str
    state: str = "started"
    payload: Any = None
    started: Any = None  # datetime of step_started
    latency_s: float | None = None  # seconds from step_started to its outcome


def _timeline(events: list[Any]) -> list[_Step | None]:
    """The current entries by position (steps; parks and completions as None)."""
    entries: list[_Step | None] = []
    for event in events:
        position = event.position
        if event.kind in {"execution_started", "divergence", "resumed"} or position is None:
            continue
        if event.kind in {"step_started", "parked", "completed"}:
            del entries[position:]
            entries.append(
                _Step(event.step_id or "", started=getattr(event, "created", None))
                if event.kind == "step_started"
                else None
            )
        elif event.kind in {"step_completed", "step_failed"} and position < len(entries):
            step = entries[position]
            if step is not None and step.step_id == event.step_id:
                step.state = "completed" if event.kind == "step_completed" else "failed"
                step.payload = event.payload
                step.latency_s = _seconds(step.started, getattr(event, "created", None))
    return entries


def _seconds(start: Any, end: Any) -> float | None:
    """``end - start`` in seconds (None when either is missing or the order is wrong)."""
    try:
        seconds = (end - start).total_seconds()
    except (TypeError, AttributeError):
        return None
    return seconds if seconds >= 0 else None


def turns_of(journal: Any, execution_id: str) -> list[TurnRecord]:
    """The model-call turns of ``execution_id`` in ``journal``, oldest first."""
    events = journal.events(execution_id)
    if not events:
        raise JournalError(
            f"the journal has no execution {execution_id!r}; list the recorded ones with "
            "journal.executions() (or import a recording with journal.import_jsonl(path)).",
            code="unknown_execution",
            execution_id=execution_id,
        )
    steps = [s for s in _timeline(events) if s is not None]
    outcomes: dict[str, Any] = {}
    for step in steps:
        if step.state == "completed" and isinstance(step.payload, dict):
            outcomes[step.step_id] = step.payload.get("output")
    calls: list[tuple[_Step, LlmRequest, LlmResponse | None, int | None]] = []
    read = RequestReader()  # the turns' requests share their earlier messages
    compacted_turns: set[int] = set()
    for step in steps:
        match = _AGENT_STEP.match(step.step_id)
        if match and match.group(2) == "compact":
            compacted_turns.add(int(match.group(1)))
            continue
        if match and match.group(2) in {"tool", "approval"}:
            continue
        parsed = _model_call(step, read, strict=bool(match))
        if parsed is not None:
            calls.append((step, *parsed, int(match.group(1)) if match else None))
    records: list[TurnRecord] = []
    previous: list[Message] = []
    for index, (step, request, response, agent_turn) in enumerate(calls):
        added, folded = new_messages(previous, list(request.messages))
        later = [c[1] for c in calls[index + 1 :]]
        tools = [_exchange(call, agent_turn, later, outcomes) for call in _calls_of(response)]
        error = step.payload.get("error") if isinstance(step.payload, dict) else None
        records.append(
            TurnRecord(
                index=index,
                step_id=step.step_id,
                request=request,
                response=response,
                error=error if isinstance(error, dict) and step.state == "failed" else None,
                tools=tools,
                added=added,
                compacted=folded or (agent_turn is not None and agent_turn in compacted_turns),
                latency_s=step.latency_s,
            )
        )
        previous = list(request.messages)
    return records


def _model_call(
    step: _Step, read: RequestReader, *, strict: bool
) -> tuple[LlmRequest, LlmResponse | None] | None:
    """(request, response) of a model-call step, its request validated by ``read``; None for a
    step that is not one."""
    payload = step.payload if isinstance(step.payload, dict) else {}
    step_input = payload.get("input")
    if not (isinstance(step_input, dict) and "messages" in step_input):
        if strict and step.state != "started":
            raise JournalError(
                f"step {step.step_id!r} is a model call but its journaled input is not a request; "
                "the journal was edited or written by another program.",
                code="journal_corrupt",
            )
        return None
    try:
        request = read(step_input)
    except ValidationError as exc:
        if strict:
            raise content_error(exc, f"the request journaled by step {step.step_id!r}") from exc
        return None
    response: LlmResponse | None = None
    if step.state == "completed":
        try:
            response = LlmResponse.model_validate(payload.get("output"))
        except ValidationError as exc:
            if strict:
                raise content_error(
                    exc, f"the response journaled by step {step.step_id!r}"
                ) from exc
            return None
    return request, response


def _calls_of(response: LlmResponse | None) -> list[tuple[str, str, dict[str, Any]]]:
    if response is None:
        return []
    return [(c.id, c.name, c.input) for c in response.tool_calls]


def _exchange(
    call: tuple[str, str, dict[str, Any]],
    agent_turn: int | None,
    later: list[LlmRequest],
    outcomes: dict[str, Any],
) -> ToolExchange:
    call_id, name, call_input = call
    result: ToolResultPart | None = None
    for request in later:
        for message in request.messages:
            for part in to_parts(message.content):
                if isinstance(part, ToolResultPart) and part.tool_use_id == call_id:
                    result = part
        if result is not None:
            break
    prefix = f"#turn:{agent_turn}:" if agent_turn is not None else None
    return ToolExchange(
        id=call_id,
        name=name,
        input=call_input,
        result=result,
        outcome=outcomes.get(f"{prefix}tool:{call_id}") if prefix else None,
        approval=outcomes.get(f"{prefix}approval:{call_id}") if prefix else None,
    )


def outcome_text(value: Any) -> str:
    """A journaled tool outcome as readable JSON (for calls no later request carried)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=repr)
