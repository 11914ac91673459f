"""What can be shown as a transcript: messages, a request, or a journaled execution.

``transcript_of`` turns any of them into a ``Transcript`` (messages, the system prompt, tool
names, and the final response when there is one). For an ``Execution`` (``loom_nb.journal``) it
reads the journal: the latest completed step whose input is a model request (``{messages,
tools, system}``) gives the messages, and that step's output (an ``LlmResponse``) is shown as the
final assistant turn. A ``Chat``'s journaled undo after it (``#chat:<k>:undo``) cuts the
messages back to where the undone turn started, as the chat's history was. A step started
again at an earlier position (a chat started over) supersedes what the log held from there.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from loom_nb.content import (
    LlmRequest,
    LlmResponse,
    Message,
    assistant_message_of,
    canonical_json,
    content_error,
    parse_request,
)
from loom_nb.content._messages import RequestReader
from loom_nb.errors import ContentValidationError
from loom_nb.taint import Untrusted

__all__ = ["Transcript", "approval_state", "money_stats", "transcript_of", "turn_stats"]

_CHAT_UNDO = re.compile(r"#chat:\d+:undo")


@dataclass
class Transcript:
    """Messages to show, with the request's system prompt and tools when known."""

    messages: list[Message] = field(default_factory=list)
    """The conversation, oldest first (the final response included as its last assistant turn)."""
    system: str | Untrusted | None = None
    """The system prompt, if the source had one."""
    tools: list[str] = field(default_factory=list)
    """Names of the tools offered to the model."""
    approvals: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Call id -> approval state (``approval_state``) for calls that needed a decision."""
    stats: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Message index -> ``{"input_tokens", "output_tokens", "latency_s"}`` for assistant turns
    whose model call reported them (journaled executions; ``TranscriptView.append`` of a response)."""


def approval_state(state: str, by: str | None = None, reason: str | None = None) -> dict[str, Any]:
    """One call's approval for the views: ``awaiting``, ``approved``, ``declined`` or ``undecidable``."""
    if state not in {"awaiting", "approved", "declined", "undecidable"}:
        raise ContentValidationError(
            f"an approval state is awaiting, approved, declined or undecidable, not {state!r}",
            code="invalid_approval_state",
        )
    return {"state": state, "by": by, "reason": reason}


def _decision_state(decision: Any, by: str) -> dict[str, Any]:
    if isinstance(decision, dict) and decision.get("pending") is True:
        return approval_state("awaiting")
    if isinstance(decision, dict) and isinstance(decision.get("approved"), bool):
        reason = decision.get("reason")
        return approval_state(
            "approved" if decision["approved"] else "declined",
            by,
            reason if isinstance(reason, str) else None,
        )
    return approval_state(
        "undecidable", by, "the decision was not True/False; the call was not run"
    )


def transcript_of(source: Any) -> Transcript:
    """A ``Transcript`` from messages (models or dicts), an ``LlmRequest`` (or dict) or an ``Execution``."""
    if isinstance(source, Transcript):
        return source
    if isinstance(source, LlmRequest) or (isinstance(source, dict) and "messages" in source):
        request = parse_request(source)
        return Transcript(
            list(request.messages), request.system, [tool.name for tool in request.tools]
        )
    if isinstance(source, Message):
        return Transcript([source])
    if hasattr(source, "journal") and hasattr(source, "execution_id"):
        return _from_execution(source)
    if isinstance(source, Iterable) and not isinstance(source, str | bytes | dict):
        return Transcript([message_of(item, n) for n, item in enumerate(source)])
    raise ContentValidationError(
        f"cannot show a {type(source).__name__} as a transcript; pass a list of Message (or dicts), "
        "an LlmRequest, or an Execution from loom_nb.journal",
        code="not_a_transcript",
    )


def message_of(item: Any, index: int) -> Message:
    """``item`` as a ``Message`` (dicts are validated; errors name the message index)."""
    if isinstance(item, Message):
        return item
    try:
        return Message.model_validate(item)
    except ValidationError as exc:
        raise content_error(exc, f"message {index}") from exc


def _from_execution(execution: Any) -> Transcript:
    events = execution.journal.events(execution.execution_id)
    read = RequestReader()  # each step's request, its messages shared with the steps before
    last: tuple[LlmRequest, LlmResponse | None] | None = None
    approvals: dict[str, dict[str, Any]] = {}
    started: dict[tuple[int | None, str | None], Any] = {}
    turns: list[tuple[LlmResponse, float | None]] = []
    undone_from: int | None = None  # a chat's undo after the last model step: history cut here
    shown_at = -1  # the position of the step ``last`` came from
    for event in events:
        if event.kind == "step_started":
            started[(event.position, event.step_id)] = event.created
            if event.position is not None and event.position <= shown_at:
                # started again at or before it (a chat started over): that step is superseded
                last, undone_from, turns, shown_at = None, None, [], -1
            continue
        if event.kind == "resumed" and isinstance(event.payload, dict):
            given = event.payload.get("payload", event.payload)  # the journal wraps resume's value
            decisions = given.get("decisions") if isinstance(given, dict) else None
            for call_id, decision in (decisions if isinstance(decisions, dict) else {}).items():
                approvals[str(call_id)] = _decision_state(decision, "the resume call")
            continue
        if event.kind not in {"step_completed", "step_failed"}:
            continue
        payload = event.payload if isinstance(event.payload, dict) else {}
        step_id = event.step_id or ""
        if ":approval:" in step_id and event.kind == "step_completed":
            call_id = step_id.split(":approval:", 1)[1]
            approvals[call_id] = _decision_state(payload.get("output"), "the approver")
            continue
        step_input = payload.get("input")
        if event.kind == "step_completed" and _CHAT_UNDO.fullmatch(step_id):
            output = payload.get("output")
            start = output.get("start") if isinstance(output, dict) else None
            if isinstance(start, int) and not isinstance(start, bool) and start >= 0:
                undone_from = start if undone_from is None else min(undone_from, start)
            continue
        if not (isinstance(step_input, dict) and "messages" in step_input):
            continue
        try:
            request = read(step_input)
        except ValidationError:
            continue
        response = None
        if event.kind == "step_completed":
            try:
                response = LlmResponse.model_validate(payload.get("output"))
            except ValidationError:
                response = None
        if response is not None:
            began = started.get((event.position, event.step_id))
            latency = (event.created - began).total_seconds() if began is not None else None
            turns.append((response, latency))
        last = (request, response)
        shown_at = event.position if event.position is not None else shown_at
        undone_from = None
    if last is None:
        return Transcript(approvals=approvals)
    request, response = last
    messages = list(request.messages)
    if response is not None:
        messages.append(assistant_message_of(response))
    if undone_from is not None:
        del messages[undone_from:]
    return Transcript(
        messages,
        request.system,
        [tool.name for tool in request.tools],
        approvals=approvals,
        stats=_stats_by_message(messages, turns),
    )


def turn_stats(response: LlmResponse, latency_s: float | None = None) -> dict[str, Any] | None:
    """``{"input_tokens", "output_tokens", "latency_s"}`` of a model call, None when nothing was
    reported; plus ``money_stats`` (cached tokens, who answered) where there are any."""
    usage = response.usage
    if not usage.input_tokens and not usage.output_tokens and latency_s is None:
        return None
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "latency_s": latency_s,
        **money_stats(response),
    }


def money_stats(response: LlmResponse | None) -> dict[str, Any]:
    """A turn's stats beyond tokens: ``cache_read_tokens`` / ``cache_write_tokens`` (when not 0)
    and, when a ``FallbackProvider`` chose, the ``provider`` and ``model`` that answered."""
    if response is None:
        return {}
    stats: dict[str, Any] = {}
    if response.usage.cache_read_tokens:
        stats["cache_read_tokens"] = response.usage.cache_read_tokens
    if response.usage.cache_write_tokens:
        stats["cache_write_tokens"] = response.usage.cache_write_tokens
    if response.provider is not None:
        stats["provider"] = response.provider
        if response.model is not None:
            stats["model"] = response.model
    return stats


def _stats_by_message(
    messages: list[Message], turns: list[tuple[LlmResponse, float | None]]
) -> dict[int, dict[str, Any]]:
    """Each journaled response's stats on the assistant message it became (matched by content)."""
    by_content: dict[str, list[dict[str, Any]]] = {}
    for response, latency in turns:
        stats = turn_stats(response, latency)
        if stats is not None:
            by_content.setdefault(canonical_json(assistant_message_of(response)), []).append(stats)
    found: dict[int, dict[str, Any]] = {}
    for index, message in enumerate(messages):
        if message.role != "assistant" or not by_content:
            continue
        queue = by_content.get(canonical_json(message))
        if queue:
            found[index] = queue.pop(0)
    return found
