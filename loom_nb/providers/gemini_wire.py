"""Gemini generateContent mapping: canonical request → wire body, wire response → ``LlmResponse``.

Pure functions, no HTTP (ADR 0120 decisions 2, 7, 8, 11).

- Roles are ``user`` and ``model``; the system prompt is ``systemInstruction``.
- Tools are ``functionDeclarations`` whose schema goes in ``parametersJsonSchema``, not
  ``parameters``: ``parameters`` takes an OpenAPI-3.0 subset that rejects ordinary JSON Schema
  (``additionalProperties``, ``$ref``/``$defs``, ``anyOf`` with ``null``, type arrays) and would
  need a lossy rewrite of every ``ToolSpec.input_schema``; ``parametersJsonSchema`` takes the
  schema as written (recorded 200s with it: fixtures gemini/tool-roundtrip-nonstream.yaml).
- A ``tool_use`` becomes ``functionCall{id, name, args}``; a ``tool_result`` becomes
  ``functionResponse{id, name, response}`` where ``name`` is looked up from the earlier
  ``tool_use`` with that id and ``response`` is ``{"output": text}`` or, for ``is_error``,
  ``{"error": text}`` (the keys the API reference gives). Media of a tool result cannot ride in
  the response object: it follows as extra ``inlineData`` parts in the same user turn, after the
  function responses, each call's media headed by a text part naming the call id and the tool
  (``moved_media_header``), with its fence open and close around it when it is untrusted.
- Gemini may return a ``functionCall`` with no id. The call then gets a deterministic one from its
  position: ``gemini_<responseId>_<n>`` (n counts calls in the response), so the pairing holds
  and a replayed response gives the same ids.

Thought signatures. Gemini attaches an opaque ``thoughtSignature`` (about 2 KB on Gemini 3) to a
``functionCall`` part and requires it back, unchanged, on that part in later turns (Gemini 3
refuses function-calling history without it). A signature kept only beside the response would be
lost on the next turn or after a restart, so it rides on the call itself:
``ToolCall.provider_data = {"thought_signature": <signature>}``, which ``assistant_message_of``
copies onto the ``tool_use`` part the agent journals. The call id stays the plain wire id (or the
synthesized one). Mapping an assistant turn back, the ``functionCall`` part gets the
``thoughtSignature`` from ``ToolUsePart.provider_data`` — byte for byte what Gemini sent, whoever
rebuilt the transcript and in whichever process. The other vendors' mappers never read
``provider_data``. Signatures on text parts are kept in the response's
``provider_data["text_thought_signatures"]`` only (the API does not require them back).

Thoughts. A part with ``"thought": true`` is the model's thinking (a summary when
``includeThoughts`` is on): it becomes a ``ReasoningPart`` (text, its ``thoughtSignature``,
``provider_data={"vendor": "gemini"}``), and mapping the turn back it becomes the same thought
part again, first in the turn. Reasoning another vendor wrote is left out.

Unknown fields. A part whose content kind loom_nb knows (text, functionCall) keeps any other field
it carries in ``provider_data["part_fields"]``; a part holding no content loom_nb knows is refused
(``unsupported_response_content``): that would be content lost, a metadata field never is.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from loom_nb.content import (
    AudioPart,
    FilePart,
    ImagePart,
    LlmRequest,
    LlmResponse,
    MediaPart,
    Message,
    ReasoningPart,
    StopReason,
    TextPart,
    ToolCall,
    ToolResultPart,
    ToolUsePart,
    Usage,
    canonical_json,
    text_of,
)
from loom_nb.errors import ContentValidationError, ProviderError
from loom_nb.providers._base import LlmStreamChunk, ToolDelta
from loom_nb.providers._wire_util import (
    MediaFencer,
    compact_json,
    inline_data,
    invalid_tool_arguments,
    misplaced_in_assistant_turn,
    misplaced_in_user_turn,
    moved_media_header,
    plain_text,
    shape_checked,
    stop_reason_for,
    unexpected,
    wire_media_type,
)

__all__ = [
    "THOUGHT_SIGNATURE",
    "GeminiStreamAssembler",
    "gemini_error",
    "gemini_error_fields",
    "gemini_finish_reason",
    "gemini_request_body",
    "gemini_response",
    "gemini_usage",
]

VENDOR = "Gemini"

REASONING_VENDOR = "gemini"
"""``ReasoningPart.provider_data["vendor"]`` of thoughts this mapper wrote (the only kind sent back)."""

THOUGHT_SIGNATURE = "thought_signature"
"""The ``provider_data`` key of a tool call's Gemini thought signature."""

_FINISH: dict[str, StopReason] = {
    "STOP": "end_turn",
    "MAX_TOKENS": "max_tokens",
    "SAFETY": "refusal",
    "RECITATION": "refusal",
    "BLOCKLIST": "refusal",
    "PROHIBITED_CONTENT": "refusal",
    "SPII": "refusal",
    "IMAGE_SAFETY": "refusal",
}


def gemini_request_body(request: LlmRequest) -> dict[str, Any]:
    """The generateContent body for a guarded request (the model goes in the URL, not here)."""
    fencer = MediaFencer(request)
    names: dict[str, str] = {}
    contents: list[dict[str, Any]] = []
    for index, message in enumerate(request.messages):
        where = f"messages[{index}]"
        if message.role == "assistant":
            contents.append({"role": "model", "parts": _model_parts(message, where, names)})
        else:
            contents.append({"role": "user", "parts": _user_parts(message, where, names, fencer)})
    body: dict[str, Any] = {"contents": contents}
    if request.system is not None:
        system = plain_text(request.system, vendor=VENDOR, where="system")
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
    if request.tools:
        body["tools"] = [
            {
                "functionDeclarations": [
                    {
                        "name": spec.name,
                        "description": spec.description,
                        "parametersJsonSchema": spec.input_schema,
                    }
                    for spec in request.tools
                ]
            }
        ]
    return body


def _model_parts(message: Message, where: str, names: dict[str, str]) -> list[dict[str, Any]]:
    if isinstance(message.content, str):
        return [{"text": message.content}]
    parts: list[dict[str, Any]] = []
    thoughts: list[dict[str, Any]] = []
    for j, part in enumerate(message.content):
        at = f"{where}.content[{j}]"
        if isinstance(part, TextPart):
            parts.append({"text": plain_text(part.text, vendor=VENDOR, where=at)})
        elif isinstance(part, ToolUsePart):
            call_id = plain_text(part.id, vendor=VENDOR, where=at + ".id")
            name = plain_text(part.name, vendor=VENDOR, where=at + ".name")
            if not isinstance(part.input, dict):
                plain_text(part.input, vendor=VENDOR, where=at + ".input")  # raises
            args = part.input if isinstance(part.input, dict) else {}
            names[call_id] = name
            wire: dict[str, Any] = {"functionCall": {"id": call_id, "name": name, "args": args}}
            signature = (part.provider_data or {}).get(THOUGHT_SIGNATURE)
            if signature:
                wire["thoughtSignature"] = signature
            parts.append(wire)
        elif isinstance(part, ReasoningPart):
            if (part.provider_data or {}).get("vendor") == REASONING_VENDOR:
                thought: dict[str, Any] = {"text": part.text, "thought": True}
                if part.signature is not None:
                    thought["thoughtSignature"] = part.signature
                thoughts.append(thought)
        else:
            raise misplaced_in_assistant_turn(part, at)
    return thoughts + parts


def _user_parts(
    message: Message, where: str, names: dict[str, str], fencer: MediaFencer
) -> list[dict[str, Any]]:
    if isinstance(message.content, str):
        return [{"text": message.content}]
    responses: list[dict[str, Any]] = []
    moved: list[dict[str, Any]] = []
    own: list[dict[str, Any]] = []
    for j, part in enumerate(message.content):
        at = f"{where}.content[{j}]"
        if isinstance(part, ToolResultPart):
            responses.append(_function_response(part, at, names, fencer, moved))
        elif isinstance(part, TextPart):
            own.append({"text": plain_text(part.text, vendor=VENDOR, where=at)})
        elif isinstance(part, ImagePart | AudioPart | FilePart):
            own.extend(_fenced_media(part, at, fencer))
        else:
            raise misplaced_in_user_turn(at)
    return responses + moved + own


def _function_response(
    part: ToolResultPart,
    where: str,
    names: dict[str, str],
    fencer: MediaFencer,
    moved: list[dict[str, Any]],
) -> dict[str, Any]:
    name = names.get(part.tool_use_id)
    if name is None:
        raise ContentValidationError(
            f"{where}: tool_result for {part.tool_use_id!r} answers no tool_use of an earlier "
            "assistant turn, and Gemini needs that call's name. Keep the assistant turn that made "
            "the call in the conversation (guard_request refuses such orphans too).",
            field=where,
            tool_use_id=part.tool_use_id,
        )
    if isinstance(part.content, list):
        header = False
        for k, item in enumerate(part.content):
            at = f"{where}.content[{k}]"
            if isinstance(item, TextPart):
                plain_text(item.text, vendor=VENDOR, where=at)
            else:
                if not header:  # one header per call, before its first moved item
                    moved.append({"text": moved_media_header(part.tool_use_id, name)})
                    header = True
                moved.extend(_fenced_media(item, at, fencer))
    else:
        plain_text(part.content, vendor=VENDOR, where=where + ".content")
    text = text_of(part.content)
    response = {"error": text} if part.is_error else {"output": text}
    return {"functionResponse": {"id": part.tool_use_id, "name": name, "response": response}}


def _fenced_media(part: MediaPart, where: str, fencer: MediaFencer) -> list[dict[str, Any]]:
    return fencer.blocks(
        part,
        vendor=VENDOR,
        where=where,
        text=lambda text: {"text": text},
        media=lambda media: {
            "inlineData": {
                "mimeType": wire_media_type(media),
                "data": inline_data(media, vendor=VENDOR, where=where),
            }
        },
    )


# ---------------------------------------------------------------------------------------------
# Responses


def gemini_finish_reason(finish_reason: str | None, *, has_tool_calls: bool) -> StopReason:
    """Our stop reason: ``tool_use`` when calls are present (Gemini says ``STOP`` for them)."""
    return stop_reason_for(_FINISH, finish_reason, has_tool_calls=has_tool_calls)


def gemini_usage(usage: Mapping[str, Any] | None) -> Usage:
    """Token counts: the prompt in; candidates plus thoughts out (both are generated and billed).

    ``promptTokenCount`` includes the cached part; ``cachedContentTokenCount`` is that part
    (implicit caching on Gemini 2.5 and later, or an explicit cached content).
    """
    if not usage:
        return Usage()
    generated = int(usage.get("candidatesTokenCount") or 0)
    generated += int(usage.get("thoughtsTokenCount") or 0)
    return Usage(
        input_tokens=int(usage.get("promptTokenCount") or 0),
        output_tokens=generated,
        cache_read_tokens=int(usage.get("cachedContentTokenCount") or 0),
    )


def _synthesized_id(response_id: Any, call: Mapping[str, Any], position: int) -> str:
    """``gemini_<responseId>_<n>``; without a responseId, a digest of the call stands in for it."""
    if not isinstance(response_id, str) or not response_id:
        response_id = hashlib.sha256(canonical_json(dict(call)).encode()).hexdigest()[:16]
    return f"gemini_{response_id}_{position}"


_PART_META = {"thought", "thoughtSignature", "partMetadata"}
_CONTENT_KINDS = frozenset(
    {
        "text",
        "functionCall",
        "functionResponse",
        "inlineData",
        "fileData",
        "executableCode",
        "codeExecutionResult",
        "toolCall",
        "toolResponse",
    }
)
"""Part fields that ARE content; any other field is metadata (kept, never refused)."""


def gemini_response(body: Mapping[str, Any]) -> LlmResponse:
    """The ``LlmResponse`` for a generateContent response body.

    A body that does not have the documented shape raises ``ProviderError``, never a bare
    ``KeyError``/``TypeError``.
    """
    return shape_checked(
        _response, body, vendor="Gemini", shape="generateContent", provider="gemini"
    )


def _response(body: Mapping[str, Any]) -> LlmResponse:
    if "error" in body and "candidates" not in body:
        raise gemini_error(None, body)
    data: dict[str, Any] = {}
    for key, name in (("responseId", "response_id"), ("usageMetadata", "usage_metadata")):
        if key in body:
            data[name] = body[key]
    if body.get("promptFeedback"):
        data["prompt_feedback"] = body["promptFeedback"]
    candidates = body.get("candidates") or []
    if not candidates:
        if "promptFeedback" not in body:
            raise unexpected("gemini", "no candidates and no promptFeedback")
        return LlmResponse(
            stop_reason="refusal",
            usage=gemini_usage(body.get("usageMetadata")),
            model=body.get("modelVersion"),
            provider_data=data,
        )
    candidate = candidates[0]
    texts: list[str] = []
    reasoning: list[ReasoningPart] = []
    text_signatures: list[str] = []
    calls: list[ToolCall] = []
    merge_thought = False
    for index, part in enumerate((candidate.get("content") or {}).get("parts") or []):
        kinds = sorted(k for k in part if k in _CONTENT_KINDS)
        unknown = {k: v for k, v in part.items() if k not in _CONTENT_KINDS and k not in _PART_META}
        if unknown and not kinds:
            raise unexpected("gemini", f"a part of kind {sorted(unknown)}")
        if unknown:
            data.setdefault("part_fields", []).append({"index": index, **unknown})
        signature = part.get("thoughtSignature")
        if kinds == ["text"] and part.get("thought"):
            text = part["text"]
            if merge_thought and reasoning and reasoning[-1].signature is None:
                # a streamed thought arrives in pieces: one part, as the unstreamed answer has
                text = reasoning.pop().text + text
            reasoning.append(
                ReasoningPart(
                    text=text, signature=signature, provider_data={"vendor": REASONING_VENDOR}
                )
            )
            merge_thought = True
            continue
        merge_thought = False
        if kinds == ["functionCall"]:
            call = part["functionCall"]
            args = call.get("args") or {}
            call_id = call.get("id") or _synthesized_id(body.get("responseId"), call, len(calls))
            if not isinstance(args, dict):  # TOOL_ARGUMENTS_POLICY: refused, as on every vendor
                raise invalid_tool_arguments(
                    "gemini", call_id, str(call.get("name")), "are not a JSON object"
                )
            signed = {THOUGHT_SIGNATURE: signature} if signature else None
            calls.append(ToolCall(id=call_id, name=call["name"], input=args, provider_data=signed))
        elif kinds == ["text"]:
            texts.append(part["text"])
            if signature:
                text_signatures.append(signature)
        elif kinds or not signature:
            raise unexpected("gemini", f"a part of kind {kinds or 'empty'}")
        else:
            text_signatures.append(signature)  # a signature-only part
    finish = candidate.get("finishReason")
    data["finish_reason"] = finish
    meta = {k: v for k, v in candidate.items() if k not in {"content", "finishReason", "index"}}
    if meta:
        data["candidate"] = meta
    if text_signatures:
        data["text_thought_signatures"] = text_signatures
    return LlmResponse(
        content="".join(texts),
        tool_calls=calls,
        stop_reason=gemini_finish_reason(finish, has_tool_calls=bool(calls)),
        usage=gemini_usage(body.get("usageMetadata")),
        model=body.get("modelVersion"),
        provider_data=data,
        reasoning=reasoning,
    )


def gemini_error_fields(body: Any) -> tuple[str | None, str]:
    """``(status name, message)`` of an error body ``{"error": {code, message, status}}``."""
    error = body.get("error") if isinstance(body, Mapping) else None
    if not isinstance(error, Mapping):
        return None, "the error body was not Gemini's error JSON"
    status = error.get("status")
    return (str(status) if status is not None else None), str(error.get("message") or "no message")


def gemini_error(status: int | None, body: Any) -> ProviderError:
    """A ``ProviderError`` for an error body seen without an HTTP error (e.g. inside a stream)."""
    error_type, message = gemini_error_fields(body)
    error = body.get("error") if isinstance(body, Mapping) else None
    code = error.get("code") if isinstance(error, Mapping) else None
    http = status if status is not None else (code if isinstance(code, int) else None)
    return ProviderError(
        f"Gemini answered {http or 'mid-stream'} ({error_type or 'error'}): {message}",
        provider="gemini",
        status=http,
        error_type=error_type,
        retryable=http is None or http in {408, 429} or http >= 500,
    )


# ---------------------------------------------------------------------------------------------
# Streaming (streamGenerateContent?alt=sse)


class GeminiStreamAssembler:
    """Assembles streamGenerateContent events into chunks and one response.

    Each event is a partial response; text parts are deltas and a ``functionCall`` arrives whole,
    so its tool deltas are synthetic: the id and name, then the whole args JSON as one fragment.
    The final response is the concatenation of every event's parts run through
    ``gemini_response``, so ids and stop reasons match a non-streamed answer.
    """

    def __init__(self) -> None:
        self._parts: list[dict[str, Any]] = []
        self._candidate: dict[str, Any] = {}
        self._top: dict[str, Any] = {}
        self._calls = 0
        self._events = 0

    def feed(self, event: Mapping[str, Any]) -> list[LlmStreamChunk]:
        """Take one parsed ``data:`` event; return the chunks it yields."""
        if "error" in event and "candidates" not in event:
            raise gemini_error(None, event)
        self._events += 1
        for key in ("responseId", "modelVersion", "usageMetadata", "promptFeedback"):
            if key in event:
                self._top[key] = event[key]
        chunks: list[LlmStreamChunk] = []
        for candidate in event.get("candidates") or []:
            if candidate.get("index", 0) != 0:
                continue
            for key, value in candidate.items():
                if key != "content":
                    self._candidate[key] = value
            for part in (candidate.get("content") or {}).get("parts") or []:
                self._parts.append(dict(part))
                chunks.extend(self._chunks_for(part, event))
        return chunks

    def _chunks_for(
        self, part: Mapping[str, Any], event: Mapping[str, Any]
    ) -> list[LlmStreamChunk]:
        if isinstance(part.get("text"), str) and part["text"]:
            kind = "reasoning" if part.get("thought") else "text"
            return [LlmStreamChunk(kind=kind, text=part["text"])]
        call = part.get("functionCall")
        if not isinstance(call, Mapping):
            return []
        position = self._calls
        self._calls += 1
        response_id = event.get("responseId") or self._top.get("responseId")
        call_id = call.get("id") or _synthesized_id(response_id, call, position)
        first = ToolDelta(index=position, id=call_id, name=call.get("name"), input_json="")
        rest = ToolDelta(index=position, input_json=compact_json(call.get("args") or {}))
        return [
            LlmStreamChunk(kind="tool_delta", tool_delta=first),
            LlmStreamChunk(kind="tool_delta", tool_delta=rest),
        ]

    def response(self) -> LlmResponse:
        """The assembled response; a stream with no events or no finishReason raises."""
        if not self._events or ("finishReason" not in self._candidate and self._parts):
            raise ProviderError(
                "the Gemini stream ended before its finishReason; the connection dropped "
                "mid-answer. Retry the call.",
                code="stream_incomplete",
                provider="gemini",
                retryable=True,
            )
        body: dict[str, Any] = dict(self._top)
        if self._candidate or self._parts:
            candidate = dict(self._candidate)
            candidate["content"] = {"role": "model", "parts": self._parts}
            body["candidates"] = [candidate]
        return gemini_response(body)
