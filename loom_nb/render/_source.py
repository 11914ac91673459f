"""What can be shown as a transcript: messages, a request, or a journaled execution.

``transcript_of`` turns any of them into a ``Transcript`` (messages, the system prompt, tool
names, and the final response when there is one). For an ``Execution`` (``loom_nb.journal``) it
reads the journal: the latest completed step whose input is a model request (``{messages,
tools, system}``) gives the messages, and that step's output (an ``LlmResponse``) is shown as the
final assistant turn.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from loom_nb.content import (
    LlmRequest,
    LlmResponse,
    Message,
    assistant_message_of,
    content_error,
    parse_request,
)
from loom_nb.errors import ContentValidationError
from loom_nb.taint import Untrusted

__all__ = ["Transcript", "transcript_of"]


@dataclass
class Transcript:
    """Messages to show, with the request's system prompt and tools when known."""

    messages: list[Message] = field(default_factory=list)
    """The conversation, oldest first (the final response included as its last assistant turn)."""
    system: str | Untrusted | None = None
    """The system prompt, if the source had one."""
    tools: list[str] = field(default_factory=list)
    """Names of the tools offered to the model."""


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
    last: tuple[LlmRequest, LlmResponse | None] | None = None
    for event in events:
        if event.kind not in {"step_completed", "step_failed"}:
            continue
        payload = event.payload if isinstance(event.payload, dict) else {}
        step_input = payload.get("input")
        if not (isinstance(step_input, dict) and "messages" in step_input):
            continue
        try:
            request = LlmRequest.model_validate(step_input)
        except ValidationError:
            continue
        response = None
        if event.kind == "step_completed":
            try:
                response = LlmResponse.model_validate(payload.get("output"))
            except ValidationError:
                response = None
        last = (request, response)
    if last is None:
        return Transcript()
    request, response = last
    messages = list(request.messages)
    if response is not None:
        messages.append(assistant_message_of(response))
    return Transcript(messages, request.system, [tool.name for tool in request.tools])
