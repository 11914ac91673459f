"""OpenAI Responses API mapping: canonical request → ``POST /v1/responses`` body, and back.

Pure functions, no HTTP (ADR 0120 decisions 2, 7, 8). The Responses API takes a flat list of
input items rather than role-tagged messages with nested tool calls, so:

- ``system`` goes in ``instructions``; a user message becomes ``{"role": "user", "content": ...}``
  (a string passes through unchanged; parts become ``input_text`` / ``input_image`` (data URL,
  ``detail: "auto"``, which the API requires there) / ``input_file`` (``file_data`` data URL and a
  file name)). The Responses API takes no audio
  input, so an audio part is refused (``UnsupportedModalityError``), never dropped.
- each ``tool_result`` becomes a ``function_call_output`` item paired with its call by
  ``call_id``; its media rides inside the output (a list of ``input_*`` items, untrusted media
  fenced), and a failed call's text is prefixed with ``"Error: "`` (there is no error flag).
- an assistant turn becomes, in order, its reasoning items (only those this API wrote:
  ``provider_data`` says ``vendor: openai, api: responses``; their ``encrypted_content`` travels
  in ``ReasoningPart.data`` and goes back unchanged), its text as an assistant message, and one
  ``function_call`` item per ``tool_use`` (``call_id``, ``name``, ``arguments`` as compact JSON,
  and the item id when the call came from this API).
- every body says ``store: false``: loom_nb keeps the conversation itself (the journal), so
  nothing needs to live on OpenAI's side, and reasoning models get
  ``include: ["reasoning.encrypted_content"]`` so their reasoning can be sent back. Function
  tools go with ``strict: false`` (the API's default is strict, which refuses ordinary schemas).

Responses: ``output`` items are read in order: ``message`` (``output_text`` joined,
``refusal`` kept), ``function_call`` (a ``ToolCall`` whose id is the ``call_id``), ``reasoning``
(a ``ReasoningPart``: the summary texts, the encrypted content, the item id). An item type loom_nb
does not model (a hosted tool's call, an image generation) is refused rather than lost. The
status maps to the stop reason (``incomplete`` at ``max_output_tokens`` is ``max_tokens``).
Streams are typed SSE events; ``ResponsesStreamAssembler`` turns the deltas into chunks and takes
the final response from ``response.completed`` (or ``response.incomplete``) through the same
parser, so a streamed and a non-streamed answer are the same response.
"""

from __future__ import annotations

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
    ToolSpec,
    ToolUsePart,
    Usage,
)
from loom_nb.errors import ContentValidationError, ProviderError, UnsupportedModalityError
from loom_nb.providers._base import LlmStreamChunk, ToolDelta
from loom_nb.providers._settings_wire import is_openai_reasoning_model
from loom_nb.providers._wire_util import (
    MediaFencer,
    compact_json,
    inline_data,
    misplaced_in_assistant_turn,
    misplaced_in_user_turn,
    plain_text,
    shape_checked,
    unexpected,
    wire_media_type,
)
from loom_nb.providers.openai_answer import openai_error, openai_tool_call
from loom_nb.providers.openai_wire import ERROR_PREFIX, default_file_name

__all__ = [
    "REASONING_API",
    "ResponsesStreamAssembler",
    "responses_error_event",
    "responses_request_body",
    "responses_response",
]

VENDOR = "OpenAI Responses"
REASONING_API = "responses"
"""``ReasoningPart.provider_data["api"]`` of reasoning this API wrote (the only kind sent back)."""

_STATUS_STOP: dict[str, StopReason] = {"completed": "end_turn"}
_INCOMPLETE_STOP: dict[str, StopReason] = {
    "max_output_tokens": "max_tokens",
    "content_filter": "refusal",
}


def responses_request_body(
    request: LlmRequest, *, model: str, stream: bool = False
) -> dict[str, Any]:
    """The ``/v1/responses`` body for a guarded request (before settings and ``extra_body``)."""
    fencer = MediaFencer(request)
    body: dict[str, Any] = {"model": model}
    if request.system is not None:
        system = plain_text(request.system, vendor=VENDOR, where="system")
        if system:
            body["instructions"] = system
    items: list[dict[str, Any]] = []
    for index, message in enumerate(request.messages):
        where = f"messages[{index}]"
        if message.role == "assistant":
            items.extend(_assistant_items(message, where))
        else:
            items.extend(_user_items(message, where, fencer))
    body["input"] = items
    if request.tools:
        body["tools"] = [_tool(spec) for spec in request.tools]
    body["store"] = False
    if is_openai_reasoning_model(model):
        body["include"] = ["reasoning.encrypted_content"]
    if stream:
        body["stream"] = True
    return body


def _tool(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "name": spec.name,
        "description": spec.description,
        "parameters": spec.input_schema,
        "strict": False,
    }


def _assistant_items(message: Message, where: str) -> list[dict[str, Any]]:
    if isinstance(message.content, str):
        return [{"role": "assistant", "content": message.content}] if message.content else []
    reasoning: list[dict[str, Any]] = []
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for j, part in enumerate(message.content):
        at = f"{where}.content[{j}]"
        if isinstance(part, TextPart):
            texts.append(plain_text(part.text, vendor=VENDOR, where=at))
        elif isinstance(part, ToolUsePart):
            calls.append(_function_call(part, at))
        elif isinstance(part, ReasoningPart):
            item = _reasoning_item(part, at)
            if item is not None:
                reasoning.append(item)
        else:
            raise misplaced_in_assistant_turn(part, at)
    items = list(reasoning)
    if any(texts):
        items.append({"role": "assistant", "content": "".join(texts)})
    items.extend(calls)
    return items


def _function_call(part: ToolUsePart, at: str) -> dict[str, Any]:
    if not isinstance(part.input, dict):
        plain_text(part.input, vendor=VENDOR, where=at + ".input")  # raises: untrusted input
    arguments = part.input if isinstance(part.input, dict) else {}
    item: dict[str, Any] = {
        "type": "function_call",
        "call_id": plain_text(part.id, vendor=VENDOR, where=at + ".id"),
        "name": plain_text(part.name, vendor=VENDOR, where=at + ".name"),
        "arguments": compact_json(arguments),
    }
    item_id = (part.provider_data or {}).get("item_id")
    if item_id:
        item["id"] = item_id
    return item


def _reasoning_item(part: ReasoningPart, where: str) -> dict[str, Any] | None:
    """The reasoning input item for a part this API wrote; None for another vendor's reasoning."""
    meta = part.provider_data or {}
    if meta.get("vendor") != "openai" or meta.get("api") != REASONING_API:
        return None  # a signature or payload from elsewhere means nothing here
    summary = meta.get("summary", [part.text] if part.text else [])
    if not (isinstance(summary, list) and all(type(t) is str for t in summary)):
        raise ContentValidationError(
            f"{where}.provider_data.summary: not a list of strings, as the Responses API wrote "
            "it; the reasoning part was changed since the model sent it. Keep it as "
            "assistant_message_of built it, or drop the part.",
            field=f"{where}.provider_data",
        )
    item: dict[str, Any] = {
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": t} for t in summary],
    }
    if meta.get("id"):
        item["id"] = meta["id"]
    if part.data is not None:
        item["encrypted_content"] = part.data
    return item


def _user_items(message: Message, where: str, fencer: MediaFencer) -> list[dict[str, Any]]:
    if isinstance(message.content, str):
        return [{"role": "user", "content": message.content}]
    outputs: list[dict[str, Any]] = []
    own: list[dict[str, Any]] = []
    for j, part in enumerate(message.content):
        at = f"{where}.content[{j}]"
        if isinstance(part, ToolResultPart):
            outputs.append(_function_call_output(part, at, fencer))
        elif isinstance(part, TextPart):
            own.append(
                {"type": "input_text", "text": plain_text(part.text, vendor=VENDOR, where=at)}
            )
        elif isinstance(part, ImagePart | AudioPart | FilePart):
            own.extend(_with_detail(_fenced_media(part, at, fencer)))
        else:
            raise misplaced_in_user_turn(at)
    if own:
        outputs.append({"role": "user", "content": own})
    return outputs


IMAGE_DETAIL = "auto"
"""The ``detail`` of an image in a user message: the API requires it there (the SDK's
``ResponseInputImageParam``), while inside a ``function_call_output`` it is optional and omitted."""


def _with_detail(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for block in blocks:
        if block.get("type") == "input_image":
            block["detail"] = IMAGE_DETAIL
    return blocks


def _function_call_output(part: ToolResultPart, where: str, fencer: MediaFencer) -> dict[str, Any]:
    output: Any
    if isinstance(part.content, list):
        items: list[dict[str, Any]] = []
        for k, item in enumerate(part.content):
            at = f"{where}.content[{k}]"
            if isinstance(item, TextPart):
                text = plain_text(item.text, vendor=VENDOR, where=at)
                items.append({"type": "input_text", "text": text})
            else:
                items.extend(_fenced_media(item, at, fencer))
        if part.is_error:
            items.insert(0, {"type": "input_text", "text": ERROR_PREFIX.strip()})
        has_media = any(i["type"] != "input_text" for i in items)
        output = items if has_media else "".join(i["text"] for i in items)
    else:
        text = plain_text(part.content, vendor=VENDOR, where=where + ".content")
        output = ERROR_PREFIX + text if part.is_error else text
    return {"type": "function_call_output", "call_id": part.tool_use_id, "output": output}


def _fenced_media(part: MediaPart, where: str, fencer: MediaFencer) -> list[dict[str, Any]]:
    return fencer.blocks(
        part,
        vendor=VENDOR,
        where=where,
        text=lambda text: {"type": "input_text", "text": text},
        media=lambda media: _media(media, where),
    )


def _media(part: MediaPart, where: str) -> dict[str, Any]:
    if isinstance(part, AudioPart):
        raise UnsupportedModalityError(
            f"{where}: the OpenAI Responses API takes no audio input ({part.media_type}). Use "
            "OpenAIProvider (Chat Completions) with an audio model such as gpt-4o-audio-preview.",
            modality="audio",
            media_type=part.media_type,
            where=where,
        )
    data = inline_data(part, vendor=VENDOR, where=where)
    media_type = wire_media_type(part)
    if isinstance(part, ImagePart):
        return {"type": "input_image", "image_url": f"data:{media_type};base64,{data}"}
    name = part.name if part.name and part.origin is None else None
    return {
        "type": "input_file",
        "filename": name or default_file_name(media_type),
        "file_data": f"data:{media_type};base64,{data}",
    }


# ---------------------------------------------------------------------------------------------
# Responses


_KEPT_TOP = ("id", "object", "created_at", "status", "service_tier", "incomplete_details")


def responses_response(body: Mapping[str, Any]) -> LlmResponse:
    """The ``LlmResponse`` for a Responses API response object (non-streamed, or a stream's final).

    A body without the documented shape raises ``ProviderError(malformed_response)``; a failed
    response raises the ``ProviderError`` its ``error`` describes.
    """
    return shape_checked(
        _response,
        body,
        vendor="OpenAI",
        shape="Responses",
        provider="openai",
        remedy="Check base_url points at an OpenAI-compatible /v1 endpoint with /responses.",
    )


def _response(body: Mapping[str, Any]) -> LlmResponse:
    status = body.get("status")
    if body.get("error") or status == "failed":
        raise openai_error(None, {"error": body.get("error") or {"message": "response failed"}})
    output = body.get("output")
    if not isinstance(output, list):
        raise unexpected("openai", "a response without an output list")
    texts: list[str] = []
    refusals: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[ReasoningPart] = []
    annotations: list[Any] = []
    for position, item in enumerate(output):
        kind = item.get("type")
        if kind == "message":
            for piece in item.get("content") or []:
                piece_type = piece.get("type")
                if piece_type == "output_text":
                    texts.append(piece["text"])
                    annotations.extend(piece.get("annotations") or [])
                elif piece_type == "refusal":
                    refusals.append(piece["refusal"])
                else:
                    raise unexpected("openai", f"message content of type {piece_type!r}")
        elif kind == "function_call":
            call = openai_tool_call(
                item.get("call_id") or f"call_{body.get('id') or 'noid'}_{position}",
                item["name"],
                item.get("arguments") or "",
            )
            if item.get("id"):
                call = call.model_copy(update={"provider_data": {"item_id": str(item["id"])}})
            calls.append(call)
        elif kind == "reasoning":
            reasoning.append(_reasoning_part(item))
        else:
            raise unexpected("openai", f"an output item of type {kind!r}")
    data: dict[str, Any] = {k: body[k] for k in _KEPT_TOP if body.get(k) is not None}
    if body.get("usage"):
        data["usage"] = body["usage"]
    if annotations:
        data["annotations"] = annotations
    stop = _stop_reason(body, has_calls=bool(calls))
    if refusals:
        data["refusal"] = "".join(refusals)
        stop = "refusal"
    return LlmResponse(
        content="".join(texts) or "".join(refusals),
        tool_calls=calls,
        stop_reason=stop,
        usage=_usage(body.get("usage")),
        model=body.get("model"),
        provider_data=data,
        reasoning=reasoning,
    )


def _reasoning_part(item: Mapping[str, Any]) -> ReasoningPart:
    summary = [s["text"] for s in item.get("summary") or [] if s.get("type") == "summary_text"]
    # Open-weight models served over the Responses API return the reasoning itself as content.
    content = [c["text"] for c in item.get("content") or [] if c.get("type") == "reasoning_text"]
    meta: dict[str, Any] = {"vendor": "openai", "api": REASONING_API}
    if item.get("id"):
        meta["id"] = item["id"]
    if summary:
        meta["summary"] = summary
    encrypted = item.get("encrypted_content")
    return ReasoningPart(
        text="\n\n".join(summary or content),
        data=encrypted if isinstance(encrypted, str) else None,
        provider_data=meta,
    )


def _stop_reason(body: Mapping[str, Any], *, has_calls: bool) -> StopReason:
    if has_calls:
        return "tool_use"
    status = body.get("status")
    if status == "incomplete":
        details = body.get("incomplete_details") or {}
        return _INCOMPLETE_STOP.get(str(details.get("reason")), "other")
    return _STATUS_STOP.get(str(status), "other") if status is not None else "end_turn"


def _usage(usage: Mapping[str, Any] | None) -> Usage:
    """Token counts; ``input_tokens_details`` says how many inputs the prompt cache read and wrote."""
    if not usage:
        return Usage()
    details = usage.get("input_tokens_details")
    details = details if isinstance(details, Mapping) else {}
    return Usage(
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
        cache_read_tokens=int(details.get("cached_tokens") or 0),
        cache_write_tokens=int(details.get("cache_write_tokens") or 0),
    )


def responses_error_event(event: Mapping[str, Any]) -> ProviderError:
    """The ``ProviderError`` for a stream's ``error`` event ``{type: error, code, message, param}``."""
    nested = event.get("error")
    if isinstance(nested, Mapping):
        error = dict(nested)
    else:
        error = {k: v for k, v in event.items() if k not in ("type", "sequence_number")}
    if not error.get("type") and error.get("code"):
        error["type"] = error["code"]
    return openai_error(None, {"error": error})


# ---------------------------------------------------------------------------------------------
# Streaming


class ResponsesStreamAssembler:
    """Turns Responses API stream events (parsed JSON) into chunks, and the final one into a response.

    Text deltas (``response.output_text.delta``), reasoning summary / reasoning text deltas and
    function-call argument deltas become chunks as they arrive; a call's first tool delta (id and
    name) comes from its ``response.output_item.added``. The response itself is parsed from the
    ``response.completed`` / ``response.incomplete`` event's response object (with the items of
    ``response.output_item.done`` used when a server sends that object without its output).
    """

    def __init__(self) -> None:
        self._final: dict[str, Any] | None = None
        self._calls: dict[str, int] = {}
        self._done_items: dict[int, Any] = {}

    def feed(self, event: Mapping[str, Any]) -> list[LlmStreamChunk]:
        """Take one parsed ``data:`` event; return the chunks it yields (possibly none)."""
        kind = event.get("type")
        if kind == "error":
            raise responses_error_event(event)
        if kind == "response.failed":
            response = event.get("response") or {}
            raise openai_error(None, {"error": response.get("error") or {"message": "failed"}})
        if kind == "response.output_text.delta":
            return [LlmStreamChunk(kind="text", text=event["delta"])] if event["delta"] else []
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            return [LlmStreamChunk(kind="reasoning", text=event["delta"])] if event["delta"] else []
        if kind == "response.output_item.added":
            return self._item_added(event["item"])
        if kind == "response.function_call_arguments.delta":
            index = self._calls.get(str(event.get("item_id")))
            if index is None or not event.get("delta"):
                return []
            delta = ToolDelta(index=index, input_json=event["delta"])
            return [LlmStreamChunk(kind="tool_delta", tool_delta=delta)]
        if kind == "response.output_item.done":
            self._done_items[int(event.get("output_index", len(self._done_items)))] = event["item"]
        elif kind in ("response.completed", "response.incomplete"):
            self._final = dict(event["response"])
        return []

    def _item_added(self, item: Mapping[str, Any]) -> list[LlmStreamChunk]:
        if item.get("type") != "function_call":
            return []
        index = len(self._calls)
        self._calls[str(item.get("id"))] = index
        first = ToolDelta(
            index=index,
            id=item.get("call_id"),
            name=item.get("name"),
            input_json=item.get("arguments") or "",
        )
        return [LlmStreamChunk(kind="tool_delta", tool_delta=first)]

    def response(self) -> LlmResponse:
        """The assembled response; a stream that never completed raises ``ProviderError``."""
        if self._final is None:
            raise ProviderError(
                "the OpenAI Responses stream ended before response.completed; the connection "
                "dropped mid-answer. Retry the call.",
                code="stream_incomplete",
                provider="openai",
                retryable=True,
            )
        body = self._final
        if not body.get("output") and self._done_items:
            body = {**body, "output": [self._done_items[k] for k in sorted(self._done_items)]}
        return responses_response(body)
