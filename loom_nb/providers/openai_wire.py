"""OpenAI Chat Completions request mapping: canonical request → wire body.

Pure functions, no HTTP (ADR 0120 decisions 2, 7, 8); the answers (response bodies, errors,
stream events) are read in ``openai_answer``. The canonical shape has no tool role: tool calls are
``tool_use`` parts of an assistant turn and their answers are ``tool_result`` parts of ONE user
message. Chat Completions wants the opposite, so:

- an assistant turn becomes ``{"role": "assistant", "content": <text or null>, "tool_calls": [...]}``
  with each call's ``arguments`` as a compact JSON string (and the call's fields loom_nb does not
  model, kept by ``openai_answer`` in ``provider_data``, sent back on it unchanged);
- each ``tool_result`` becomes a ``{"role": "tool", "tool_call_id": ...}`` message, placed first as
  the API requires, text only. A failed call (``is_error``) is marked by prefixing its text with
  ``"Error: "`` (the tool message has no error flag). Media of tool results cannot ride in a tool
  message: it moves to ONE trailing user message after the tool messages, each call's media headed
  by a text part naming the call id and the tool (``moved_media_header``), followed by the rest of
  that user message's own parts. Untrusted media moves with its fence open and close around it.
- images go as ``image_url`` data URLs, audio as ``input_audio`` (``wav``/``mp3`` only; anything
  else is refused, never re-encoded), documents as ``file`` with a ``file_data`` data URL and a
  file name (``document.pdf`` etc. when the part names none, or when it is untrusted).
"""

from __future__ import annotations

import json
import mimetypes
from collections.abc import Mapping
from typing import Any

from loom_nb.content import (
    AudioPart,
    DataSource,
    FilePart,
    ImagePart,
    LlmRequest,
    MediaPart,
    MessageContent,
    ReasoningPart,
    TextPart,
    ToolResultPart,
    ToolSpec,
    ToolUsePart,
)
from loom_nb.errors import ContentValidationError, UnsupportedModalityError
from loom_nb.guard import part_path
from loom_nb.providers._wire_util import (
    MediaFencer,
    compact_json,
    inline_data,
    misplaced_in_assistant_turn,
    misplaced_in_user_turn,
    moved_media_header,
    plain_text,
    wire_media_type,
)
from loom_nb.providers.openai_answer import (
    REASONING_API,
    REASONING_DETAILS,
    REASONING_KEYS,
    TOOL_CALL_FIELDS,
)
from loom_nb.taint import Untrusted

__all__ = [
    "ERROR_PREFIX",
    "OPENAI_AUDIO_FORMATS",
    "TOOL_MEDIA_NOTE",
    "default_file_name",
    "openai_request_body",
]

VENDOR = "OpenAI"

OPENAI_AUDIO_FORMATS: dict[str, str] = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/vnd.wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
}
"""Audio media types Chat Completions takes inline, and the ``input_audio.format`` each maps to."""

TOOL_MEDIA_NOTE = "[the tool's media follows in the next user message]"
"""Tool-message text used when a tool result holds media but no text (the media moved)."""

ERROR_PREFIX = "Error: "
"""Prefix marking a failed tool call's text (``is_error``) in its tool message."""


def default_file_name(media_type: str) -> str:
    """The file name sent for a document that names none: ``document`` plus the type's extension."""
    if media_type == "application/pdf":
        return "document.pdf"
    ext = mimetypes.guess_extension(media_type, strict=False) or ".bin"
    return "document" + ext


def openai_request_body(request: LlmRequest, *, model: str, stream: bool = False) -> dict[str, Any]:
    """The Chat Completions body for a guarded request (``model``, ``messages``, ``tools``).

    ``stream=True`` adds ``"stream": true`` and ``stream_options.include_usage`` so the final
    chunk carries token usage. Sampling options are not part of the canonical request; providers
    merge their ``extra_body`` on top of this.
    """
    fencer = MediaFencer(request)
    messages: list[dict[str, Any]] = []
    if request.system is not None:
        system = plain_text(request.system, vendor=VENDOR, where="system")
        if system:
            messages.append({"role": "system", "content": system})
    names: dict[str, str] = {}  # call id -> tool name, for the header of moved media
    append = messages.append
    for index, message in enumerate(request.messages):
        content = message.content
        role = message.role
        if type(content) is str:  # decision 1: the string form passes through unchanged
            append({"role": role, "content": content})
        elif role == "assistant":
            append(_assistant_message(content, index, names))
        else:
            _user_messages(content, index, fencer, names, messages)
    body: dict[str, Any] = {"model": model, "messages": messages}
    if request.tools:
        body["tools"] = [_tool(spec) for spec in request.tools]
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


_MEDIA_CLASSES = (ImagePart, AudioPart, FilePart)
"""The media part classes, as a tuple built once (``A | B | C`` builds a union on every call)."""


def _tool(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.input_schema,
        },
    }


def _loc(index: int, j: int | None = None, k: int | None = None) -> str:
    """``messages[i].content[j].content[k]``: built only for a refusal (formatting one per part
    would cost a noticeable share of the mapping)."""
    return part_path(index, j, k)


def _text(value: str | Untrusted, index: int, j: int, k: int | None = None) -> str:
    if type(value) is str:
        return value
    return plain_text(value, vendor=VENDOR, where=_loc(index, j, k))


def _assistant_message(
    content: MessageContent, index: int, names: dict[str, str]
) -> dict[str, Any]:
    """The assistant turn for ``content``; notes each call's tool name by id in ``names``."""
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    reasoning: list[tuple[int, ReasoningPart]] = []
    for j, part in enumerate(content):
        kind = type(part)
        if kind is TextPart:
            text = part.text  # type: ignore[union-attr]
            texts.append(text if type(text) is str else _text(text, index, j))
        elif kind is ToolUsePart:
            assert isinstance(part, ToolUsePart)
            call_id, name, tool_input = part.id, part.name, part.input
            if type(call_id) is not str or type(name) is not str or type(tool_input) is not dict:
                at = _loc(index, j)
                call_id = plain_text(call_id, vendor=VENDOR, where=at + ".id")
                name = plain_text(name, vendor=VENDOR, where=at + ".name")
                tool_input = _tool_input(part, at)
            call: dict[str, Any] = {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": compact_json(tool_input)},
            }
            provider_data = part.provider_data
            if provider_data:
                extras = provider_data.get(TOOL_CALL_FIELDS)
                if extras:
                    call = {**_decoded_extras(extras, _loc(index, j)), **call}
            calls.append(call)
            names[call_id] = name
        elif kind is ReasoningPart:
            assert isinstance(part, ReasoningPart)
            meta = part.provider_data or {}
            if meta.get("vendor") == "openai" and meta.get("api") == REASONING_API:
                reasoning.append((j, part))
        else:
            raise misplaced_in_assistant_turn(part, _loc(index, j))
    said: Any
    if not texts:
        said = None
    elif len(texts) == 1:
        said = texts[0]
    else:
        said = [{"type": "text", "text": t} for t in texts]
    out: dict[str, Any] = {"role": "assistant", "content": said}
    if calls:
        out["tool_calls"] = calls
        # DeepSeek (thinking mode) and OpenRouter refuse a tool-calling turn without the
        # reasoning that led to it; on a turn without calls the servers ignore or refuse it.
        for k, part in reasoning:
            out[_reasoning_field(part, _loc(index, k))] = part.text
            details = (part.provider_data or {}).get(REASONING_DETAILS)
            if details is not None:
                out[REASONING_DETAILS] = details
    return out


def _reasoning_field(part: ReasoningPart, where: str) -> str:
    """The message field this part's reasoning goes back in: one a server wrote it in, no other.

    ``provider_data["field"]`` is metadata that travels through the journal; naming ``role`` or
    ``content`` there would let it rewrite the message it rides in, so anything but a reasoning
    field is refused. Only an exact ``str`` is compared: a subclass could claim equality with a
    reasoning field and then turn into another name.
    """
    field = (part.provider_data or {}).get("field") or "reasoning_content"
    if type(field) is not str or field not in REASONING_KEYS:
        raise ContentValidationError(
            f"{where}.provider_data.field: {field!r} is not a reasoning field of a Chat "
            f"Completions message (one of {list(REASONING_KEYS)}); the reasoning part was "
            "changed since the model sent it. Keep it as assistant_message_of built it, or "
            "drop the part.",
            field=f"{where}.provider_data",
        )
    return field


def _decoded_extras(text: str, where: str) -> dict[str, Any]:
    try:
        extras = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ContentValidationError(
            f"{where}.provider_data.{TOOL_CALL_FIELDS}: not the JSON object the OpenAI mapper "
            f"wrote ({exc.msg}). Keep tool calls as assistant_message_of built them.",
            field=f"{where}.provider_data",
        ) from exc
    if not isinstance(extras, dict):
        raise ContentValidationError(
            f"{where}.provider_data.{TOOL_CALL_FIELDS}: not a JSON object. Keep tool calls as "
            "assistant_message_of built them.",
            field=f"{where}.provider_data",
        )
    return extras


def _tool_input(part: ToolUsePart, where: str) -> dict[str, Any]:
    if isinstance(part.input, dict):
        return part.input
    plain_text(part.input, vendor=VENDOR, where=where + ".input")  # raises: untrusted input
    return {}  # pragma: no cover


def _user_messages(
    content: MessageContent,
    index: int,
    fencer: MediaFencer,
    names: Mapping[str, str],
    out: list[dict[str, Any]],
) -> None:
    """Append the wire messages of a user turn to ``out``: its tool messages, then one user
    message with the media they moved and the turn's own parts."""
    if isinstance(content, str):
        out.append({"role": "user", "content": content})
        return
    moved: list[dict[str, Any]] = []
    own: list[dict[str, Any]] = []
    for j, part in enumerate(content):
        kind = type(part)
        if kind is ToolResultPart:
            assert isinstance(part, ToolResultPart)
            out.append(_tool_message(part, index, j, fencer, moved, names))
        elif kind is TextPart:
            text = part.text  # type: ignore[union-attr]
            own.append(
                {"type": "text", "text": text if type(text) is str else _text(text, index, j)}
            )
        elif isinstance(part, _MEDIA_CLASSES):
            if part.origin is None:
                own.append(_media(part, (index, j, None)))
            else:
                own.extend(_fenced_media(part, _loc(index, j), fencer))
        else:
            raise misplaced_in_user_turn(_loc(index, j))
    trailing = moved + own if moved else own
    if trailing:
        out.append({"role": "user", "content": trailing})


def _tool_message(
    part: ToolResultPart,
    index: int,
    j: int,
    fencer: MediaFencer,
    moved: list[dict[str, Any]],
    names: Mapping[str, str],
) -> dict[str, Any]:
    raw = part.content
    if type(raw) is str and not part.is_error:  # the common result: its text, as it is
        return {"role": "tool", "tool_call_id": part.tool_use_id, "content": raw}
    texts: list[str] = []
    has_media = False
    if type(raw) is list:
        for k, item in enumerate(raw):
            if type(item) is TextPart:
                texts.append(_text(item.text, index, j, k))
            else:
                if not has_media:  # one header per call, before its first moved item
                    text = moved_media_header(part.tool_use_id, names.get(part.tool_use_id))
                    moved.append({"type": "text", "text": text})
                    has_media = True
                assert isinstance(item, ImagePart | AudioPart | FilePart)
                if item.origin is None:
                    moved.append(_media(item, (index, j, k)))
                else:
                    moved.extend(_fenced_media(item, _loc(index, j, k), fencer))
    elif type(raw) is str:
        texts.append(raw)
    else:
        assert not isinstance(raw, list)
        texts.append(plain_text(raw, vendor=VENDOR, where=_loc(index, j) + ".content"))
    if has_media and not any(texts):
        texts = [TOOL_MEDIA_NOTE]
    if part.is_error:
        texts = [ERROR_PREFIX + texts[0], *texts[1:]] if texts else [ERROR_PREFIX.strip()]
    content: Any = texts[0] if len(texts) == 1 else [{"type": "text", "text": t} for t in texts]
    if not texts:
        content = ""
    return {"role": "tool", "tool_call_id": part.tool_use_id, "content": content}


def _fenced_media(part: MediaPart, where: str, fencer: MediaFencer) -> list[dict[str, Any]]:
    return fencer.blocks(
        part,
        vendor=VENDOR,
        where=where,
        text=lambda text: {"type": "text", "text": text},
        media=lambda media: _media(media, where),
    )


_Where = str | tuple[int, int | None, int | None]
"""A location: the path itself, or (message, part, item) indices formatted only for a refusal."""


def _where_text(where: _Where) -> str:
    return where if isinstance(where, str) else _loc(*where)


def _media(part: MediaPart, where: _Where) -> dict[str, Any]:
    source = part.source
    if type(source) is DataSource:
        data = source.data
    else:
        data = inline_data(part, vendor=VENDOR, where=_where_text(where))
    media_type = wire_media_type(part)
    if isinstance(part, ImagePart):
        return {"type": "image_url", "image_url": {"url": f"data:{media_type};base64,{data}"}}
    if isinstance(part, AudioPart):
        fmt = OPENAI_AUDIO_FORMATS.get(media_type)
        if fmt is None:
            at = _where_text(where)
            raise UnsupportedModalityError(
                f"{at}: OpenAI Chat Completions takes inline audio as wav or mp3 only, not "
                f"{part.media_type}. Convert the clip to audio/wav or audio/mpeg first.",
                modality="audio",
                media_type=part.media_type,
                where=at,
            )
        return {"type": "input_audio", "input_audio": {"data": data, "format": fmt}}
    name = part.name if part.name and part.origin is None else None
    return {
        "type": "file",
        "file": {
            "file_data": f"data:{media_type};base64,{data}",
            "filename": name or default_file_name(media_type),
        },
    }
