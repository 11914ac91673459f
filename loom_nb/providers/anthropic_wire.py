"""Anthropic Messages mapping: canonical request → wire body, wire response/stream → ``LlmResponse``.

Pure functions, no HTTP (ADR 0120 decisions 2, 7, 8). The canonical shape IS the Anthropic
shape for tools (``tool_use`` in the assistant turn, ``tool_result`` parts in ONE user message), so
the mapping is mostly one block per part, with the API's ordering rules applied:

- an assistant turn sends its thinking first, its text next and its ``tool_use`` blocks last (the
  API refuses text after a ``tool_use``: fixture ``anthropic/error-400-tool-use-without-result.json``,
  and with extended thinking on, an assistant turn with a ``tool_use`` must start with the
  thinking blocks that preceded it, unchanged, or the next call is a 400);
- a user turn sends its ``tool_result`` blocks first, other content after them;
- media is base64: ``image`` blocks, ``document`` blocks for PDF (and ``text/plain`` as a text
  document source); media inside a tool result stays inside its ``tool_result`` content, which
  the API accepts. There is no audio block in the Messages API, so audio is refused
  (``UnsupportedModalityError``), never dropped or converted;
- untrusted media (``origin`` set after the guard) is bracketed by the guard's fence text blocks
  right where it sits, inside a tool result as well; an untrusted file never gets a ``title``.

Thinking. A ``thinking`` block becomes a ``ReasoningPart`` (its text, its ``signature``) and a
``redacted_thinking`` block one with ``redacted=True`` and the opaque ``data``, both marked
``provider_data={"vendor": "anthropic"}``; mapping an assistant turn back, exactly those parts
become ``thinking`` / ``redacted_thinking`` blocks again, byte for byte, before everything else.
Reasoning another vendor wrote is left out (its signature means nothing here).

Responses keep what loom_nb does not model in ``provider_data`` (id, the raw stop reason, stop
sequence, the raw usage with cache fields, citations, and any field of a text or tool_use block
loom_nb does not know, under ``block_fields``). A content block of a type loom_nb cannot represent
fails loudly: that would lose content; an unknown metadata field never does. ``AnthropicStreamAssembler`` folds the SSE events of a
streamed call into chunks and the same final response.
"""

from __future__ import annotations

import base64
import binascii
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
    Part,
    ReasoningPart,
    StopReason,
    TextPart,
    ToolCall,
    ToolResultPart,
    ToolSpec,
    ToolUsePart,
    Usage,
)
from loom_nb.errors import ContentValidationError, ProviderError, UnsupportedModalityError
from loom_nb.providers._base import LlmStreamChunk, ToolDelta
from loom_nb.providers._wire_util import (
    MediaFencer,
    inline_data,
    parse_tool_arguments,
    plain_text,
    shape_checked,
    unexpected,
    wire_media_type,
)

__all__ = [
    "ANTHROPIC_IMAGE_TYPES",
    "AnthropicStreamAssembler",
    "anthropic_error_fields",
    "anthropic_request_body",
    "anthropic_response",
    "anthropic_stop_reason",
    "anthropic_usage",
]

VENDOR = "Anthropic"

REASONING_VENDOR = "anthropic"
"""``ReasoningPart.provider_data["vendor"]`` of thinking this mapper wrote (the only kind sent back)."""

_TEXT_FIELDS = frozenset({"type", "text", "citations"})
_TOOL_USE_FIELDS = frozenset({"type", "id", "name", "input"})

ANTHROPIC_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
"""Image media types the Messages API accepts in a base64 source."""

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "refusal": "refusal",
    "pause_turn": "pause_turn",
}

RETRYABLE_ERROR_TYPES = frozenset(
    {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}
)
"""Error types (in an ``error`` body or stream event) worth another attempt."""


def anthropic_request_body(
    request: LlmRequest, *, model: str, max_tokens: int, stream: bool = False
) -> dict[str, Any]:
    """The Messages API body for a guarded request.

    The request must have been through ``guard_request``: refs resolved, untrusted text fenced.
    An unresolved ref or unfenced untrusted text is refused, never sent.
    """
    fencer = MediaFencer(request)
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
    if request.system is not None:
        body["system"] = plain_text(request.system, vendor=VENDOR, where="system")
    body["messages"] = [
        _message(message, f"messages[{i}]", fencer) for i, message in enumerate(request.messages)
    ]
    if request.tools:
        body["tools"] = [_tool(spec) for spec in request.tools]
    body["stream"] = stream
    return body


def _tool(spec: ToolSpec) -> dict[str, Any]:
    return {"name": spec.name, "description": spec.description, "input_schema": spec.input_schema}


def _message(message: Message, where: str, fencer: MediaFencer) -> dict[str, Any]:
    content = message.content
    if isinstance(content, str):
        # Decision 1: the string form passes through unchanged.
        return {"role": message.role, "content": content}
    blocks: list[dict[str, Any]] = []
    last: list[dict[str, Any]] = []  # tool_use blocks go after the text (assistant)
    first: list[dict[str, Any]] = []  # tool_result (user) or thinking (assistant) blocks lead
    for j, part in enumerate(content):
        at = f"{where}.content[{j}]"
        if isinstance(part, ToolUsePart):
            last.append(_tool_use(part, at))
        elif isinstance(part, ToolResultPart):
            first.append(_tool_result(part, at, fencer))
        elif isinstance(part, ReasoningPart):
            thinking = _thinking_block(part, at)
            if thinking is not None:
                first.append(thinking)
        else:
            blocks.extend(_content_blocks(part, at, fencer))
    return {"role": message.role, "content": first + blocks + last}


def _thinking_block(part: ReasoningPart, where: str) -> dict[str, Any] | None:
    """The block Anthropic sent for this part, rebuilt unchanged; None for another vendor's reasoning."""
    if (part.provider_data or {}).get("vendor") != REASONING_VENDOR:
        return None
    if part.redacted:
        if not isinstance(part.data, str) or not part.data:
            raise ContentValidationError(
                f"{where}: a redacted thinking part without its data; Anthropic's "
                "redacted_thinking block is that encrypted data, and an empty one would be a "
                "forgery. Keep the part as assistant_message_of built it, or drop it.",
                field=f"{where}.data",
            )
        return {"type": "redacted_thinking", "data": part.data}
    block: dict[str, Any] = {"type": "thinking", "thinking": part.text}
    if part.signature is not None:
        block["signature"] = part.signature
    return block


def _tool_use(part: ToolUsePart, where: str) -> dict[str, Any]:
    if not isinstance(part.input, dict):
        raise ContentValidationError(
            f"{where}: a tool_use input must be a JSON object; an untrusted value cannot stand "
            "for a whole tool call (guard_request refuses it).",
            field=where,
        )
    return {
        "type": "tool_use",
        "id": plain_text(part.id, vendor=VENDOR, where=f"{where}.id"),
        "name": plain_text(part.name, vendor=VENDOR, where=f"{where}.name"),
        "input": part.input,
    }


def _tool_result(part: ToolResultPart, where: str, fencer: MediaFencer) -> dict[str, Any]:
    raw = part.content
    content: str | list[dict[str, Any]]
    if isinstance(raw, list):
        content = []
        for k, item in enumerate(raw):
            if part.origin is not None and not isinstance(item, TextPart) and item.origin is None:
                # A result marked untrusted as a whole: its media is untrusted too.
                item = item.model_copy(update={"origin": part.origin})
            content.extend(_content_blocks(item, f"{where}.content[{k}]", fencer))
    else:
        content = plain_text(raw, vendor=VENDOR, where=f"{where}.content")
    return {
        "type": "tool_result",
        "tool_use_id": part.tool_use_id,
        "content": content,
        "is_error": part.is_error,
    }


def _content_blocks(part: Part, where: str, fencer: MediaFencer) -> list[dict[str, Any]]:
    if isinstance(part, TextPart):
        return [{"type": "text", "text": plain_text(part.text, vendor=VENDOR, where=where)}]
    if isinstance(part, ImagePart | AudioPart | FilePart):
        return fencer.blocks(
            part,
            vendor=VENDOR,
            where=where,
            text=lambda text: {"type": "text", "text": text},
            media=lambda media: _media(media, where),
        )
    raise ContentValidationError(
        f"{where}: a {part.type} part cannot sit here (tool_use belongs to an assistant turn, "
        "tool_result to a user turn, neither inside a tool result). Run guard_request first.",
        field=where,
    )


def _media(part: MediaPart, where: str) -> dict[str, Any]:
    if isinstance(part, AudioPart):
        raise UnsupportedModalityError(
            f"{where}: the Anthropic Messages API has no audio input ({part.media_type}). "
            "Use a provider that declares audio (Gemini, an OpenAI audio model), or transcribe first.",
            modality="audio",
            media_type=part.media_type,
            where=where,
        )
    data = inline_data(part, vendor=VENDOR, where=where)
    media_type = wire_media_type(part)
    if isinstance(part, ImagePart):
        if media_type not in ANTHROPIC_IMAGE_TYPES:
            raise UnsupportedModalityError(
                f"{where}: Anthropic takes images as {', '.join(sorted(ANTHROPIC_IMAGE_TYPES))}, "
                f"not {part.media_type}. Convert the image (e.g. to PNG) first.",
                modality="image",
                media_type=part.media_type,
                where=where,
            )
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }
    block: dict[str, Any]
    if media_type == "application/pdf":
        block = {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": data},
        }
    elif media_type == "text/plain":
        block = {
            "type": "document",
            "source": {
                "type": "text",
                "media_type": "text/plain",
                "data": _decode_text(data, where),
            },
        }
    else:
        raise UnsupportedModalityError(
            f"{where}: Anthropic takes documents as application/pdf or text/plain, not "
            f"{part.media_type}. Convert the file first.",
            modality="file",
            media_type=part.media_type,
            where=where,
        )
    if part.name is not None and part.origin is None:
        block["title"] = part.name
    return block


def _decode_text(data: str, where: str) -> str:
    try:
        return base64.b64decode(data, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise ContentValidationError(
            f"{where}: a text/plain file must be base64 of UTF-8 text ({exc}). "
            "Re-encode the file as UTF-8.",
            field=where,
        ) from exc


def anthropic_stop_reason(raw: str | None) -> StopReason:
    """Our stop reason for Anthropic's (``"other"`` for one we do not model; the raw one is kept)."""
    return _STOP_REASONS.get(raw or "end_turn", "other")


def anthropic_usage(usage: Mapping[str, Any] | None) -> Usage:
    """Token counts; input includes cache writes and reads (Anthropic reports them apart).

    ``input_tokens`` on the wire excludes the cache: the total is input + cache_creation +
    cache_read, and the two cache counts are kept as ``cache_write_tokens`` / ``cache_read_tokens``.
    """
    if not usage:
        return Usage()
    written = int(usage.get("cache_creation_input_tokens") or 0)
    read = int(usage.get("cache_read_input_tokens") or 0)
    return Usage(
        input_tokens=int(usage.get("input_tokens") or 0) + written + read,
        output_tokens=int(usage.get("output_tokens") or 0),
        cache_read_tokens=read,
        cache_write_tokens=written,
    )


def anthropic_response(body: Mapping[str, Any]) -> LlmResponse:
    """The ``LlmResponse`` for a Messages API response body (or an assembled stream)."""
    return shape_checked(
        _response,
        body,
        vendor=VENDOR,
        shape="Messages",
        provider=VENDOR,
        remedy="Check base_url points at an Anthropic-compatible endpoint.",
    )


def _response(body: Mapping[str, Any]) -> LlmResponse:
    texts: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[ReasoningPart] = []
    extra: dict[str, Any] = {k: v for k, v in body.items() if k not in {"content", "type", "role"}}
    for index, block in enumerate(body["content"]):
        kind = block["type"]
        known = _TOOL_USE_FIELDS
        if kind == "text":
            known = _TEXT_FIELDS
            texts.append(block["text"])
            if block.get("citations"):
                extra.setdefault("citations", []).append(block["citations"])
        elif kind == "tool_use":
            calls.append(
                ToolCall(id=block["id"], name=block["name"], input=dict(block["input"] or {}))
            )
        elif kind == "thinking":
            reasoning.append(
                ReasoningPart(
                    text=block["thinking"],
                    signature=block.get("signature"),
                    provider_data={"vendor": REASONING_VENDOR},
                )
            )
            continue
        elif kind == "redacted_thinking":
            reasoning.append(
                ReasoningPart(
                    redacted=True, data=block["data"], provider_data={"vendor": REASONING_VENDOR}
                )
            )
            continue
        else:
            raise unexpected(VENDOR, f"a {kind!r} content block")
        unknown = {k: v for k, v in block.items() if k not in known}
        if unknown:  # metadata loom_nb does not model: kept, never a reason to refuse
            extra.setdefault("block_fields", []).append({"index": index, **unknown})
    return LlmResponse(
        content="".join(texts),
        tool_calls=calls,
        stop_reason=anthropic_stop_reason(body.get("stop_reason")),
        usage=anthropic_usage(body.get("usage")),
        model=body.get("model"),
        provider_data=extra,
        reasoning=reasoning,
    )


def anthropic_error_fields(body: Any) -> tuple[str | None, str]:
    """The vendor error type and message of an error body ``{"type":"error","error":{...}}``."""
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        error = body["error"]
        return error.get("type"), str(error.get("message", "no message"))
    return None, "the error body was not Anthropic's error JSON"


class AnthropicStreamAssembler:
    """Turns the events of a streamed Messages call into chunks, then the final response.

    Feed each event's name and parsed data to ``feed``; it returns the chunks to yield. The
    ``message_stop`` event yields the terminal ``done`` chunk, built by ``anthropic_response`` from
    the blocks assembled so far, so a streamed and a non-streamed call parse identically.
    """

    def __init__(self) -> None:
        self._message: dict[str, Any] = {}
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, list[str]] = {}
        self._call_index: dict[int, int] = {}

    def feed(self, data: Mapping[str, Any]) -> list[LlmStreamChunk]:
        """The chunks for one event (by its ``type``); raises ``ProviderError`` for an ``error`` event."""
        kind = data.get("type")
        if kind == "message_start":
            self._message = dict(data["message"])
            self._message["usage"] = dict(self._message.get("usage") or {})
        elif kind == "content_block_start":
            return self._start(int(data["index"]), dict(data["content_block"]))
        elif kind == "content_block_delta":
            return self._delta(int(data["index"]), data["delta"])
        elif kind == "content_block_stop":
            self._stop(int(data["index"]))
        elif kind == "message_delta":
            self._message.update(data.get("delta") or {})
            self._message.setdefault("usage", {}).update(data.get("usage") or {})
        elif kind == "message_stop":
            return [LlmStreamChunk(kind="done", response=self.response())]
        elif kind == "error":
            error_type, message = anthropic_error_fields(data)
            raise ProviderError(
                f"Anthropic reported an error mid-stream ({error_type}): {message}.",
                code="stream_error",
                provider=VENDOR,
                error_type=error_type,
                retryable=error_type in RETRYABLE_ERROR_TYPES,
            )
        # ping and event types added later carry nothing we model
        return []

    def _start(self, index: int, block: dict[str, Any]) -> list[LlmStreamChunk]:
        self._blocks[index] = block
        if block.get("type") == "tool_use":
            self._json[index] = []
            self._call_index[index] = len(self._call_index)
            delta = ToolDelta(index=self._call_index[index], id=block["id"], name=block["name"])
            return [LlmStreamChunk(kind="tool_delta", tool_delta=delta)]
        if block.get("type") == "text" and block.get("text"):
            return [LlmStreamChunk(kind="text", text=block["text"])]
        if block.get("type") == "thinking" and block.get("thinking"):
            return [LlmStreamChunk(kind="reasoning", text=block["thinking"])]
        if block.get("type") not in {"text", "thinking", "redacted_thinking"}:
            raise unexpected(VENDOR, f"a {block.get('type')!r} content block")
        return []

    def _delta(self, index: int, delta: Mapping[str, Any]) -> list[LlmStreamChunk]:
        block = self._blocks[index]
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta["text"]
            return [LlmStreamChunk(kind="text", text=delta["text"])] if delta["text"] else []
        if kind == "input_json_delta":
            fragment = delta.get("partial_json") or ""
            self._json[index].append(fragment)
            if not fragment:
                return []
            tool = ToolDelta(index=self._call_index[index], input_json=fragment)
            return [LlmStreamChunk(kind="tool_delta", tool_delta=tool)]
        if kind == "thinking_delta":
            piece = delta.get("thinking") or ""
            block["thinking"] = block.get("thinking", "") + piece
            return [LlmStreamChunk(kind="reasoning", text=piece)] if piece else []
        if kind == "signature_delta":
            block["signature"] = delta.get("signature")
        elif kind == "citations_delta":
            block.setdefault("citations", []).append(delta.get("citation"))
        return []

    def _stop(self, index: int) -> None:
        if index not in self._json:
            return
        block = self._blocks[index]
        # A tool without arguments streams a single "" fragment: that is {}. Broken JSON follows
        # TOOL_ARGUMENTS_POLICY: refused at once, never retried silently.
        block["input"] = parse_tool_arguments(
            "".join(self._json[index]),
            vendor=VENDOR,
            call_id=str(block.get("id")),
            name=str(block.get("name")),
        )

    def response(self) -> LlmResponse:
        """The response assembled from the events so far."""
        message = dict(self._message)
        message["content"] = [self._blocks[i] for i in sorted(self._blocks)]
        return anthropic_response(message)
