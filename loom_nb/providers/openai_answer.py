"""OpenAI Chat Completions answers: wire response, error and stream events → canonical.

Pure functions, no HTTP (ADR 0120 decisions 2, 8); the request side is ``openai_wire``. Tool
calls are read from the message (or, streamed, from the deltas ``OpenAIStreamAssembler``
assembles), never inferred from ``finish_reason``: a forced ``tool_choice`` ends with ``"stop"``
while the calls are there. Fields loom_nb does not model (id, created, system_fingerprint,
service_tier, the raw finish_reason, usage details) are kept in ``provider_data``; content it
cannot represent (audio output, legacy ``function_call``, non-function tool calls) fails loudly.
A streamed answer is assembled into the body a non-streamed call would have returned and read by
the same ``openai_response``, so the two give the same response.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loom_nb.content import LlmResponse, ReasoningPart, StopReason, ToolCall, Usage
from loom_nb.errors import ProviderError
from loom_nb.providers._base import LlmStreamChunk, ToolDelta
from loom_nb.providers._wire_util import (
    compact_json,
    parse_tool_arguments,
    shape_checked,
    stop_reason_for,
    unexpected,
)

__all__ = [
    "REASONING_API",
    "REASONING_DETAILS",
    "REASONING_KEYS",
    "TOOL_CALL_FIELDS",
    "OpenAIStreamAssembler",
    "openai_error",
    "openai_error_fields",
    "openai_error_retryable",
    "openai_finish_reason",
    "openai_response",
    "openai_tool_call",
    "openai_usage",
    "synthesized_call_id",
]

_FINISH: dict[str, StopReason] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}


def openai_finish_reason(finish_reason: str | None, *, has_tool_calls: bool) -> StopReason:
    """Our stop reason: ``tool_use`` whenever calls are present (a forced choice says ``stop``)."""
    return stop_reason_for(_FINISH, finish_reason, has_tool_calls=has_tool_calls)


def openai_tool_call(call_id: str, name: str, arguments: str) -> ToolCall:
    """A ``ToolCall`` from the wire's id, name and ``arguments`` JSON string (``""`` means ``{}``).

    Arguments that are not a JSON object follow ``TOOL_ARGUMENTS_POLICY``: refused at once.
    """
    parsed = parse_tool_arguments(arguments, vendor="openai", call_id=call_id, name=name)
    return ToolCall(id=call_id, name=name, input=parsed)


def openai_usage(usage: Mapping[str, Any] | None) -> Usage:
    """Token counts: ``prompt_tokens`` (cached included) in, ``completion_tokens`` out.

    Cache reads are ``prompt_tokens_details.cached_tokens`` (DeepSeek-style compatible servers:
    ``prompt_cache_hit_tokens``); writes ``prompt_tokens_details.cache_write_tokens`` where the
    server reports them (OpenRouter, newer OpenAI models).
    """
    if not usage:
        return Usage()
    details = usage.get("prompt_tokens_details")
    details = details if isinstance(details, Mapping) else {}
    read = details.get("cached_tokens")
    if read is None:
        read = usage.get("prompt_cache_hit_tokens")
    return Usage(
        input_tokens=int(usage.get("prompt_tokens") or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
        cache_read_tokens=int(read or 0),
        cache_write_tokens=int(details.get("cache_write_tokens") or 0),
    )


_KEPT_TOP = ("id", "object", "created", "system_fingerprint", "service_tier")
_MODELED_TOP = {*_KEPT_TOP, "model", "choices", "usage"}
_MODELED_MESSAGE = {"role", "content", "tool_calls", "refusal", "annotations"}
REASONING_KEYS = ("reasoning_content", "reasoning")
"""Thinking text compatible servers return beside the content: DeepSeek and vLLM say
``reasoning_content``; OpenRouter, Groq and Ollama say ``reasoning``."""
REASONING_DETAILS = "reasoning_details"
"""OpenRouter's structured reasoning (text, summaries, encrypted blocks, signatures) it wants back."""
_CONTENT_FIELDS = {"audio": "audio output", "function_call": "a legacy function_call"}
"""Message fields that carry content loom_nb cannot represent: refused, never dropped."""
_MODELED_CALL = {"id", "type", "function", "index"}
_MODELED_CHOICE = {"index", "message", "delta", "finish_reason"}
TOOL_CALL_FIELDS = "openai_tool_call_fields"
"""``ToolCall.provider_data`` key: the JSON of a tool call's fields loom_nb does not model (e.g.
the ``extra_content.google.thought_signature`` of Gemini's OpenAI-compatible endpoint), sent back
on the call unchanged."""
REASONING_API = "chat"
"""``ReasoningPart.provider_data["api"]`` of reasoning this mapper wrote (with vendor ``openai``)."""


def synthesized_call_id(response_id: str | None, position: int) -> str:
    """A deterministic id for a tool call a (compatible) server returned without one."""
    return f"call_{response_id or 'noid'}_{position}"


def openai_response(body: Mapping[str, Any]) -> LlmResponse:
    """The ``LlmResponse`` for a (non-streamed) Chat Completions response body.

    A body that does not have the documented shape raises ``ProviderError``, never a bare
    ``KeyError``/``TypeError``.
    """
    return shape_checked(
        _response,
        body,
        vendor="OpenAI",
        shape="Chat Completions",
        provider="openai",
        remedy="Check base_url points at an OpenAI-compatible /v1 endpoint.",
    )


def _unknown(fields: Mapping[str, Any], known: set[str] | frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if k not in known and v is not None}


def _reasoning_parts(message: Mapping[str, Any]) -> list[ReasoningPart]:
    """The message's thinking as one part, remembering the field it came in (it goes back there)."""
    details = message.get(REASONING_DETAILS)
    for key in REASONING_KEYS:
        text = message.get(key)
        if isinstance(text, str) and (text or details):
            meta: dict[str, Any] = {"vendor": "openai", "api": REASONING_API, "field": key}
            if details:
                meta[REASONING_DETAILS] = details
            return [ReasoningPart(text=text, provider_data=meta)]
    if details:
        meta = {"vendor": "openai", "api": REASONING_API, REASONING_DETAILS: details}
        return [ReasoningPart(text=_details_text(details), provider_data=meta)]
    return []


def _details_text(details: Any) -> str:
    """The readable text of OpenRouter ``reasoning_details`` (text and summary entries)."""
    if not isinstance(details, list):
        return ""
    return "".join(
        str(d.get("text") or d.get("summary") or "") for d in details if isinstance(d, Mapping)
    )


def _response(body: Mapping[str, Any]) -> LlmResponse:
    if "error" in body and "choices" not in body:
        raise openai_error(None, body)
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        raise unexpected("openai", "no choices")
    choice = choices[0]
    message = choice.get("message") or {}
    data: dict[str, Any] = {k: body[k] for k in _KEPT_TOP if k in body}
    for field, what in _CONTENT_FIELDS.items():
        if message.get(field) is not None:
            raise unexpected("openai", what)
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise unexpected("openai", "message content that is not a string")
    calls: list[ToolCall] = []
    for position, raw in enumerate(message.get("tool_calls") or []):
        if raw.get("type", "function") != "function" or "function" not in raw:
            raise unexpected("openai", f"a tool call of type {raw.get('type')!r}")
        fn = raw["function"]
        call_id = raw.get("id") or synthesized_call_id(body.get("id"), position)
        call = openai_tool_call(call_id, fn["name"], fn.get("arguments") or "")
        extras = _unknown(raw, _MODELED_CALL)
        if extras:
            call = call.model_copy(
                update={"provider_data": {TOOL_CALL_FIELDS: compact_json(extras)}}
            )
        calls.append(call)
    finish = choice.get("finish_reason")
    refusal = message.get("refusal")
    stop = openai_finish_reason(finish, has_tool_calls=bool(calls))
    data["finish_reason"] = finish
    if body.get("usage"):
        data["usage"] = body["usage"]
    if message.get("annotations"):
        data["annotations"] = message["annotations"]
    if refusal:
        data["refusal"] = refusal
        stop = "refusal"
    # Metadata loom_nb does not model (Groq's channel, x_groq, vLLM's stop_reason, logprobs ...)
    # is kept: refusing a whole answer over it would lose the answer.
    leftovers = (
        (
            "message_fields",
            _unknown(message, {*_MODELED_MESSAGE, *REASONING_KEYS, REASONING_DETAILS}),
        ),
        ("choice_fields", _unknown(choice, _MODELED_CHOICE)),
        ("response_fields", _unknown(body, _MODELED_TOP | {"error"})),
    )
    for key, fields in leftovers:
        if fields:
            data[key] = fields
    return LlmResponse(
        content=content or refusal or "",
        tool_calls=calls,
        stop_reason=stop,
        usage=openai_usage(body.get("usage")),
        model=body.get("model"),
        provider_data=data,
        reasoning=_reasoning_parts(message),
    )


def openai_error_fields(body: Any) -> tuple[str | None, str, dict[str, Any]]:
    """``(error type, message, details)`` of an error body ``{"error": {message, type, param, code}}``.

    ``details`` holds the vendor's ``code`` (as ``vendor_code``) and ``param`` when present.
    """
    error = body.get("error") if isinstance(body, Mapping) else None
    if not isinstance(error, Mapping):
        return None, "the error body was not OpenAI's error JSON", {}
    error_type = error.get("type") or error.get("code")
    details = {
        k: error[v] for k, v in (("vendor_code", "code"), ("param", "param")) if error.get(v)
    }
    message = str(error.get("message") or "no error message")
    return (str(error_type) if error_type is not None else None), message, details


def openai_error_retryable(status: int | None, body: Any) -> bool:
    """Whether another attempt could succeed (``insufficient_quota`` is a 429 that never will)."""
    error_type, _, details = openai_error_fields(body)
    if details.get("vendor_code") == "insufficient_quota" or error_type == "insufficient_quota":
        return False
    if status is None:  # an error event inside a 200 stream
        return error_type in {None, "server_error", "rate_limit_exceeded"}
    return status in {408, 409, 429} or status >= 500


def openai_error(status: int | None, body: Any) -> ProviderError:
    """A ``ProviderError`` for an error body seen without an HTTP error (e.g. inside a stream)."""
    error_type, message, details = openai_error_fields(body)
    return ProviderError(
        f"OpenAI answered {status or 'mid-stream'} ({error_type or 'error'}): {message}",
        provider="openai",
        status=status,
        error_type=error_type,
        retryable=openai_error_retryable(status, body),
        **details,
    )


# ---------------------------------------------------------------------------------------------
# Streaming


class _PendingCall:
    """A tool call being assembled from stream fragments."""

    def __init__(self, call_id: str, name: str) -> None:
        self.id = call_id
        self.name = name
        self.arguments: list[str] = []
        self.extras: dict[str, Any] = {}


_MODELED_DELTA = {"role", "content", "tool_calls", "refusal", *REASONING_KEYS, REASONING_DETAILS}
_MODELED_FRAGMENT = {"index", "id", "type", "function"}


class OpenAIStreamAssembler:
    """Assembles Chat Completions stream events (already parsed JSON) into chunks and a response.

    ``feed`` returns the text and tool-delta chunks an event yields; ``response`` builds the
    ``LlmResponse`` from everything fed, through the same mapping as a non-streamed body, so a
    streamed and a non-streamed answer give the same response. Tool-call fragments are keyed by
    ``tool_calls[].index``; a fragment with a new id at a used index (seen on some compatible
    servers) starts a new call.
    """

    def __init__(self) -> None:
        self._top: dict[str, Any] = {}
        self._text: list[str] = []
        self._refusal: list[str] = []
        self._reasoning: list[str] = []
        self._reasoning_field: str | None = None
        self._details: list[dict[str, Any]] = []
        self._delta_fields: dict[str, Any] = {}
        self._choice_fields: dict[str, Any] = {}
        self._calls: list[_PendingCall] = []
        self._by_index: dict[int, int] = {}
        self._finish: str | None = None
        self._usage: dict[str, Any] | None = None
        self._done = False

    def feed(self, event: Mapping[str, Any]) -> list[LlmStreamChunk]:
        """Take one parsed ``data:`` event; return the chunks it yields (possibly none)."""
        if "error" in event and not event.get("choices"):
            raise openai_error(None, event)
        for key, value in event.items():
            if key not in {"choices", "usage", "error"} and value is not None:
                self._top[key] = value
        if event.get("usage"):
            self._usage = dict(event["usage"])
        chunks: list[LlmStreamChunk] = []
        for choice in event.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue  # loom_nb asks for one choice; others are not part of the answer
            delta = choice.get("delta") or {}
            for field, what in _CONTENT_FIELDS.items():
                if delta.get(field) is not None:
                    raise unexpected("openai", f"{what} in a stream delta")
            # Metadata (Groq's "channel": "analysis", ...) is kept, the last value of each field.
            self._delta_fields.update(_unknown(delta, _MODELED_DELTA))
            self._choice_fields.update(_unknown(choice, _MODELED_CHOICE))
            if delta.get("content"):
                self._text.append(delta["content"])
                chunks.append(LlmStreamChunk(kind="text", text=delta["content"]))
            if delta.get("refusal"):
                self._refusal.append(delta["refusal"])
            for key in REASONING_KEYS:
                piece = delta.get(key)
                if isinstance(piece, str):
                    self._reasoning_field = self._reasoning_field or key
                    if key == self._reasoning_field:  # servers that send both send the same text
                        self._reasoning.append(piece)
                        if piece:
                            chunks.append(LlmStreamChunk(kind="reasoning", text=piece))
            if isinstance(delta.get(REASONING_DETAILS), list):
                self._merge_details(delta[REASONING_DETAILS])
            for fragment in delta.get("tool_calls") or []:
                chunks.append(self._tool_fragment(fragment))
            if choice.get("finish_reason"):
                self._finish = choice["finish_reason"]
        return chunks

    def _merge_details(self, entries: list[Any]) -> None:
        """Fold streamed ``reasoning_details`` entries: same index, its strings concatenated."""
        for entry in entries:
            if not isinstance(entry, Mapping):
                raise TypeError("a reasoning_details entry is not an object")
            index = entry.get("index")
            target = next(
                (d for d in self._details if index is not None and d.get("index") == index), None
            )
            if target is None:
                self._details.append(dict(entry))
                continue
            for key, value in entry.items():
                if key in {"text", "summary", "data"} and isinstance(value, str):
                    target[key] = str(target.get(key) or "") + value
                elif value is not None:
                    target[key] = value

    def _tool_fragment(self, fragment: Mapping[str, Any]) -> LlmStreamChunk:
        index = fragment.get("index")
        call_id = fragment.get("id")
        fn = fragment.get("function") or {}
        if fragment.get("type", "function") != "function":
            raise unexpected("openai", f"a streamed tool call of type {fragment.get('type')!r}")
        args = fn.get("arguments") or ""
        position = self._by_index.get(index) if index is not None else None
        if position is None and index is None and not call_id and self._calls:
            position = len(self._calls) - 1
        if position is not None and call_id and call_id != self._calls[position].id:
            position = None  # a new call reusing an index
        if position is None:
            position = len(self._calls)
            if index is not None:
                self._by_index[index] = position
            pending = _PendingCall(
                call_id or synthesized_call_id(self._top.get("id"), position), fn.get("name") or ""
            )
            pending.arguments.append(args)
            pending.extras.update(_unknown(fragment, _MODELED_FRAGMENT))
            self._calls.append(pending)
            delta = ToolDelta(index=position, id=pending.id, name=pending.name, input_json=args)
            return LlmStreamChunk(kind="tool_delta", tool_delta=delta)
        self._calls[position].arguments.append(args)
        self._calls[position].extras.update(_unknown(fragment, _MODELED_FRAGMENT))
        return LlmStreamChunk(
            kind="tool_delta", tool_delta=ToolDelta(index=position, input_json=args)
        )

    def mark_done(self) -> None:
        """Record the ``data: [DONE]`` terminator."""
        self._done = True

    def response(self) -> LlmResponse:
        """The assembled response; a stream cut before its end raises ``ProviderError``."""
        if self._finish is None and not self._done:
            raise ProviderError(
                "the OpenAI stream ended before a finish_reason or [DONE]; the connection "
                "dropped mid-answer. Retry the call.",
                code="stream_incomplete",
                provider="openai",
                retryable=True,
            )
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(self._text) or None,
            "refusal": "".join(self._refusal) or None,
        }
        if self._reasoning_field is not None:
            message[self._reasoning_field] = "".join(self._reasoning)
        if self._details:
            message[REASONING_DETAILS] = self._details
        message.update(self._delta_fields)
        if self._calls:
            message["tool_calls"] = [
                {
                    **c.extras,
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": "".join(c.arguments)},
                }
                for c in self._calls
            ]
        choice = {**self._choice_fields, "index": 0, "message": message}
        choice["finish_reason"] = self._finish
        body = {**self._top, "choices": [choice], "usage": self._usage}
        return openai_response(body)
