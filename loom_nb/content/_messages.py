"""Messages, requests and responses, and the functions that read content (ADR 0120 decisions 1, 8).

A message's content is ``str | list[Part]``; ``text_of`` / ``to_parts`` / ``has_structured_parts``
read it without coercing it to ``str``. The response keeps ``content`` (text) and ``tool_calls``;
``assistant_message_of`` builds the assistant turn from it. ``canonical_json`` is the one
serialization that requests are hashed and recorded in.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from operator import is_, is_not
from typing import Any, Literal, TypeAlias

from pydantic import (
    BaseModel,
    Field,
    ValidationError,
    field_validator,
)

from loom_nb._strict import content_error
from loom_nb.content._parts import (
    Part,
    ReasoningPart,
    TextPart,
    ToolResultContent,
    ToolUsePart,
)
from loom_nb.content._sources import _Model, omitted_when_none
from loom_nb.errors import ContentValidationError
from loom_nb.settings import ModelSettings
from loom_nb.taint import Untrusted

__all__ = [
    "LlmRequest",
    "LlmResponse",
    "Message",
    "MessageContent",
    "StopReason",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "assistant_message_of",
    "canonical_json",
    "has_structured_parts",
    "parse_request",
    "text_of",
    "to_parts",
]

MessageContent: TypeAlias = str | list[Part]
"""A message's content: a plain string (first-class) or a list of parts."""


class Message(_Model):
    """One turn of a conversation. There is no tool role: results are parts of a user message."""

    role: Literal["user", "assistant"]
    """Who speaks: ``"user"`` (the application, tool results) or ``"assistant"`` (the model)."""
    content: MessageContent
    """A string, or a list of parts."""


class ToolSpec(_Model):
    """A tool on the menu sent to the model."""

    name: str
    """The tool's name, as the model will call it."""
    description: str
    """What the tool does, for the model."""
    input_schema: dict[str, Any]
    """JSON Schema of the tool's input object."""


class LlmRequest(_Model):
    """What is sent to a model: messages, the tool menu, the system prompt, settings, output schema.

    ``settings`` and ``output_schema`` are left out of the serialized form while None, so a
    request that uses neither serializes (and hashes) exactly as before they existed.
    """

    messages: list[Message]
    """The conversation so far."""
    tools: list[ToolSpec] = Field(default_factory=list)
    """The tools the model may call."""
    system: str | Untrusted | None = None
    """The system prompt (never untrusted: the guard refuses an untrusted one)."""
    settings: ModelSettings | None = omitted_when_none()
    """Generation settings (max tokens, temperature ...); providers merge their own defaults
    under these and a call's ``settings=`` over them. An empty ``ModelSettings()`` becomes None."""
    output_schema: dict[str, Any] | None = omitted_when_none()
    """The JSON Schema the answer must match (set from ``output_type=``); providers send it in
    the vendor's native structured-output mode. Part of the journaled request, so replay is
    exact and a changed schema diverges."""

    @field_validator("settings", mode="after")
    @classmethod
    def _empty_settings_are_none(cls, value: ModelSettings | None) -> ModelSettings | None:
        return None if value is not None and value.is_empty() else value


class Requests:
    """Makes the requests of a conversation whose messages are ``Message`` objects already (a
    chat's turns, an agent loop's): its tool menu, system prompt and settings validated once, each
    turn's messages put beside them.

    The fields are validated into a blank request when first used and again whenever one of them
    is another object (a resume replaces a chat's system prompt and settings, a loop's menu grows
    by its toolsets); each request is that blank copied with the turn's messages and a tools list
    of its own. The messages are not validated again: the caller's are ``Message`` objects (a
    chat's seed, restore and log are validated, a loop's given messages too, and a turn's are
    built), and validating a request only checks that each is one, at 15 us a turn by 1,000
    messages.
    """

    __slots__ = ("_blank", "_of")

    def __init__(self) -> None:
        self._blank: LlmRequest | None = None
        self._of: tuple[object, ...] = ()

    def __call__(
        self,
        messages: list[Message],
        tools: list[ToolSpec],
        system: str | Untrusted | None,
        settings: ModelSettings | None,
    ) -> LlmRequest:
        """The request of ``messages`` (a new list the request keeps) with these fields."""
        of = (tools, system, settings)
        blank = self._blank
        if blank is None or any(map(is_not, of, self._of)):
            blank = LlmRequest(messages=[], tools=tools, system=system, settings=settings)
            self._blank, self._of = blank, of
        return blank.model_copy(update={"messages": messages, "tools": list(blank.tools)})


class ToolCall(_Model):
    """A tool call in a model's response."""

    id: str
    """The call's id (providers synthesize one when the vendor gives none)."""
    name: str
    """The tool called."""
    input: dict[str, Any] = Field(default_factory=dict)
    """The arguments, parsed from the vendor's JSON."""
    provider_data: dict[str, str] | None = omitted_when_none()
    """Opaque vendor data that must travel with the call (e.g. Gemini's thought signature).

    ``assistant_message_of`` copies it onto the ``tool_use``; it is never shown to the model as
    text, and it is left out of the serialized form while None.
    """


def _is_zero(value: object) -> bool:
    return value == 0


def _is_empty(value: object) -> bool:
    return not value


class Usage(_Model):
    """Token counts reported by the vendor (zero when it reported none).

    ``input_tokens`` counts every input token, the cached ones included (as before cache fields
    existed); ``cache_read_tokens`` and ``cache_write_tokens`` say how many of them were read
    from and written to the vendor's prompt cache, which prices them differently. The cache
    fields are left out of the serialized form while 0, so usages without them keep their bytes.
    """

    input_tokens: int = 0
    """Tokens read, including cached ones."""
    output_tokens: int = 0
    """Tokens generated."""
    cache_read_tokens: int = Field(default=0, exclude_if=_is_zero)
    """Input tokens served from the prompt cache (Anthropic ``cache_read_input_tokens``, OpenAI
    ``cached_tokens``, Gemini ``cachedContentTokenCount``); part of ``input_tokens``."""
    cache_write_tokens: int = Field(default=0, exclude_if=_is_zero)
    """Input tokens written to the prompt cache (Anthropic ``cache_creation_input_tokens``);
    part of ``input_tokens``."""

    def __repr_args__(self) -> Any:
        """The fields ``repr`` shows: the cache counts only when not 0 (as the JSON leaves them)."""
        for name, value in super().__repr_args__():
            if name in ("cache_read_tokens", "cache_write_tokens") and not value:
                continue
            yield name, value

    def __add__(self, other: Usage) -> Usage:
        """The field-by-field sum of two usages."""
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )


StopReason: TypeAlias = Literal[
    "end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", "pause_turn", "other"
]
"""Why the model stopped, in one vocabulary across vendors (``"other"`` keeps the raw one in ``provider_data``)."""


class LlmResponse(_Model):
    """A model's answer: its text, its tool calls and its reasoning (decision 8: no derived parts field).

    ``reasoning`` is left out of the serialized form while empty and ``provider`` while None, so
    responses without them keep the bytes (and hashes) they had before the fields existed.
    """

    content: str = ""
    """The text the model produced."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """The tool calls it made, in order."""
    stop_reason: StopReason = "end_turn"
    """Why it stopped."""
    usage: Usage = Field(default_factory=Usage)
    """Token counts."""
    model: str | None = None
    """The model id the vendor reported."""
    provider_data: dict[str, Any] = Field(default_factory=dict)
    """Vendor fields loom_nb does not model (raw stop reason, ids, thought signatures ...), kept rather than lost."""
    output: Any = Field(default=None, exclude=True)
    """The validated structured output (an instance of the ``output_type`` asked for), or None.

    Never serialized: the journal keeps the raw text in ``content`` and a replay validates it
    again, so the recorded response is the same with or without structured output."""
    reasoning: list[ReasoningPart] = Field(default_factory=list, exclude_if=_is_empty)
    """The model's thinking, one part per vendor block, in order (empty when it showed none)."""
    provider: str | None = omitted_when_none()
    """Which provider answered, when a ``FallbackProvider`` chose among several (its label for
    the one that did, e.g. ``"anthropic"``); None otherwise. Journaled, so a replay shows it."""


def text_of(content: MessageContent | ToolResultContent) -> str:
    """The text of a message's (or tool result's) content: the string itself, or its text parts joined.

    Media and tool parts contribute nothing; an ``Untrusted`` text contributes its value.
    """
    if isinstance(content, str):
        return content
    if isinstance(content, Untrusted):
        return str(content.value)
    _check_parts(content, "text_of")
    chunks: list[str] = []
    for part in content:
        if isinstance(part, TextPart):
            chunks.append(part.text if isinstance(part.text, str) else str(part.text.value))
    return "".join(chunks)


def to_parts(content: MessageContent) -> list[Part]:
    """The content as a list of parts: a non-empty string becomes one ``TextPart``, "" none."""
    if isinstance(content, str):
        return [TextPart(text=content)] if content else []
    _check_parts(content, "to_parts")
    return list(content)


def has_structured_parts(content: MessageContent | ToolResultContent) -> bool:
    """Whether the content holds anything but text (media, tool calls or tool results)."""
    if isinstance(content, str | Untrusted):
        return False
    _check_parts(content, "has_structured_parts")
    return any(not isinstance(part, TextPart) for part in content)


def _check_parts(content: object, where: str) -> None:
    """Refuse content that is neither a string nor a list of parts (ContentValidationError)."""
    if isinstance(content, list) and all(isinstance(p, _Model) for p in content):
        return
    raise ContentValidationError(
        f"{where}() takes a message's content: a string or a list of parts, not "
        f"{type(content).__name__} ({content!r:.60}). Pass message.content, or build parts with "
        "TextPart / ImagePart / ...",
        code="invalid_content",
        field="content",
    )


def assistant_message_of(response: LlmResponse) -> Message:
    """The assistant turn for a response: its reasoning, then its text, then one ``tool_use`` per call.

    Reasoning comes first because Anthropic requires thinking blocks at the start of the turn
    (unchanged, with their signatures); text precedes the calls because Anthropic refuses text
    after a ``tool_use`` in the same turn. A response with neither calls nor reasoning keeps the
    plain string form.
    """
    if not isinstance(response, LlmResponse):
        raise ContentValidationError(
            f"assistant_message_of() takes an LlmResponse, not {type(response).__name__}. Pass "
            "what a provider's complete() returned (or LlmResponse.model_validate(a_dict)).",
            code="invalid_content",
            field="response",
        )
    if not response.tool_calls and not response.reasoning:
        return Message(role="assistant", content=response.content)
    parts: list[Part] = list(response.reasoning)
    if response.content:
        parts.append(TextPart(text=response.content))  # raw-content: LlmResponse.content is str
    parts.extend(
        ToolUsePart(id=c.id, name=c.name, input=c.input, provider_data=c.provider_data)
        for c in response.tool_calls
    )
    return Message(role="assistant", content=parts)


def canonical_json(value: Any) -> str:
    """Canonical JSON: sorted keys, compact separators, UTF-8 kept (for hashing and recordings).

    Models are dumped in JSON mode first, so the same request always gives the same string.
    """
    if type(value) is Message:
        # The commonest message, a role and a plain string (every chat turn hashes two), written
        # directly: the same text the dump and the encoder make, without either. Only an exact
        # str role qualifies (a subclass slipped past validation takes the general path).
        role: object = value.role
        if type(role) is str and role in _ROLES and isinstance(value.content, str):
            return '{"content":' + _STRING(value.content) + ',"role":"' + role + '"}'
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    return _CANONICAL.encode(value)


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
"""The encoder ``json.dumps`` would build on every call with these options, built once (the
same output: ``json.dumps`` with options is ``JSONEncoder(**options).encode``)."""
_STRING: Callable[[str], str] = json.encoder.encode_basestring
"""The function ``_CANONICAL`` writes a string with (``ensure_ascii=False``)."""
_ROLES = ("user", "assistant")
"""The roles ``canonical_json`` writes directly (an exact ``str`` found here by ``str.__eq__``)."""


def parse_request(data: Any) -> LlmRequest:
    """Validate a plain dict (or an ``LlmRequest``) as a request.

    A field that does not fit raises ``ContentValidationError`` naming its path
    (``messages.0.content.1.source.kind``), never pydantic's own exception.
    """
    if isinstance(data, LlmRequest):
        return data
    try:
        return LlmRequest.model_validate(data)
    except ValidationError as exc:
        raise content_error(exc, "request") from exc


class RequestReader:
    """Validates the requests of one journal read, each message's dict once.

    A journal writes a model step's messages as a delta of the step before, and reading expands
    every step's input to its whole list by sharing the earlier steps' message dicts
    (``expanded_events``). Validating each step's request on its own would validate message i
    once per later step, so reading a chat's log would cost the square of its length (1,000
    turns: a million messages validated, seconds). Here a dict met again, the very same object,
    gives the ``Message`` it gave before (messages are frozen), and a list that starts with the
    very dicts of the list before (the common case, a conversation growing) reuses those
    messages in one identity compare; the request is then validated with them, which checks the
    rest of it as before. A message that does not validate is left to the whole request's
    validation, so the error names its place as it always did.
    """

    __slots__ = ("_known", "_last")

    def __init__(self) -> None:
        self._known: dict[int, tuple[dict[str, Any], Message]] = {}
        """``id(dict) -> (dict, Message)``; the dict is kept so its id is not reused."""
        self._last: tuple[list[Any], list[Any]] = ([], [])
        """The last list of message dicts read, and what it was read as."""

    def __call__(self, data: Any) -> LlmRequest:
        """``LlmRequest.model_validate(data)``, with the message dicts met before not validated
        again (raises as that does)."""
        messages = data.get("messages") if isinstance(data, dict) else None
        if type(messages) is list:
            try:
                validated = self._messages(messages)
            except ValueError:  # ContentValidationError: the whole request says where
                pass
            else:
                data = {**data, "messages": validated}
        return LlmRequest.model_validate(data)

    def _messages(self, messages: list[Any]) -> list[Any]:
        before, read = self._last
        keep = len(before)
        if keep > len(messages) or not all(map(is_, messages, before)):
            keep = 0
        validated = read[:keep] + [self._message(item) for item in messages[keep:]]
        self._last = (messages, validated)
        return validated

    def _message(self, item: Any) -> Any:
        if type(item) is not dict:
            return item  # the request's validation takes it (or names it)
        known = self._known.get(id(item))
        if known is not None and known[0] is item:
            return known[1]
        message = Message.model_validate(item)
        self._known[id(item)] = (item, message)
        return message
