"""Tool output → ``ToolResultPart``: the envelope, the re-applied mark and the media gate (ADR 0120 decisions 5, 7, 9).

A tool step journals the tool's own output (as JSON, ``{"ok": value}`` or ``{"error": ...}``), and
the result part is built from that journaled value, so a replay builds byte-identical results
without running the tool.

Text path. The result is ``{"tool": name, "result": value}`` as canonical JSON. An ``Untrusted``
value inside the output would serialize to a marker object that, once inside a string, no guard
can see; so marks are taken off the value before serializing and ONE mark is put back around the
whole text (``origin`` on the part), for a tool declared ``untrusted`` as for any ``Untrusted``
value in its output. The guard then fences the text.

Media path. ``media_result(parts)`` is honoured only for a tool declared ``returns_media`` and only
when the output carries no mark: the marker is a shape any JSON can have, and honoured for an
untrusted output it would let a web page choose which blob is fetched into the prompt. Inline media
is capped per part (``MAX_INLINE_BYTES``) and over the transcript (``MAX_INLINE_TOTAL_BYTES``)
HERE, before the part enters the transcript that is re-sent every turn; a violation is an error
result telling the tool author to return a ref, and the run goes on. The part is also checked with
the guard and the provider's capabilities, so a result the next request could not carry never
bricks the run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import TypeAdapter, ValidationError

from loom_nb.agent._tools import _PARTS, MEDIA_RESULT_MARKER, ToolDefinition
from loom_nb.capabilities import Capabilities, assert_request_supported
from loom_nb.content import (
    DataSource,
    LlmRequest,
    MediaPart,
    Message,
    Part,
    ToolResultPart,
    ToolUsePart,
    canonical_json,
)
from loom_nb.errors import LoomError
from loom_nb.guard import b64_decoded_size, caches_kept, guard_request, is_standard_base64
from loom_nb.limits import MAX_INLINE_BYTES, MAX_INLINE_TOTAL_BYTES
from loom_nb.taint import UNTRUSTED_MARKER, Untrusted, contains_untrusted

__all__ = [
    "build_result",
    "error_result",
    "inline_bytes_of",
    "jsonable_outcome",
    "unwrap_untrusted",
]

_ANY = TypeAdapter(Any)
_MAX_ERROR_MESSAGE = 2000


def jsonable_outcome(value: Any) -> dict[str, Any]:
    """The tool step's journaled output: ``{"ok": <JSON>}``, or an error when it is not JSON."""
    try:
        dumped = _ANY.dump_python(value, mode="json")
        return {"ok": json.loads(json.dumps(dumped, allow_nan=False))}
    except (ValueError, TypeError, RecursionError) as exc:
        return failure_outcome(
            "unserializable_output",
            f"the tool returned a {type(value).__name__} that is not JSON ({exc}); "
            "return dicts, lists, strings, numbers, pydantic models or media_result(parts).",
        )


def failure_outcome(error_type: str, message: str) -> dict[str, Any]:
    """The tool step's journaled output for a tool that raised."""
    if len(message) > _MAX_ERROR_MESSAGE:
        message = message[:_MAX_ERROR_MESSAGE] + "… (truncated)"
    return {"error": {"type": error_type, "message": message}}


def unwrap_untrusted(value: Any) -> tuple[Any, str | None]:
    """``value`` with every mark (``Untrusted`` or its JSON marker) replaced by the marked value.

    Returns the plain value and the origin of the first mark met (None when there was none).
    Iterative, so no depth raises ``RecursionError``.
    """
    origin: str | None = None
    holder: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, holder, 0)]
    while stack:
        node, parent, key = stack.pop()
        marked: Untrusted | None = None
        if isinstance(node, Untrusted):
            marked = node
        elif isinstance(node, dict) and UNTRUSTED_MARKER in node:
            try:
                marked = Untrusted.model_validate(node)
            except ValidationError:
                marked = Untrusted(node[UNTRUSTED_MARKER], "untrusted")
        if marked is not None:
            origin = origin or marked.origin
            stack.append((marked.value, parent, key))
        elif isinstance(node, dict):
            new_dict: dict[str, Any] = dict(node)
            parent[key] = new_dict
            stack.extend((v, new_dict, k) for k, v in reversed(node.items()))
        elif isinstance(node, list | tuple):
            new_list: list[Any] = list(node)
            parent[key] = new_list
            stack.extend((v, new_list, i) for i, v in reversed(list(enumerate(node))))
        else:
            parent[key] = node
    return holder[0], origin


def error_result(
    call_id: str, name: str, error_type: str, message: str, *, origin: str | None = None
) -> ToolResultPart:
    """An ``is_error`` result: ``{"tool": name, "error": {"type", "message"}}`` as JSON text.

    ``origin`` marks the text untrusted (an untrusted tool's own error message may quote what it
    read).
    """
    text = canonical_json({"tool": name, "error": {"type": error_type, "message": message}})
    return ToolResultPart(tool_use_id=call_id, content=text, is_error=True, origin=origin)


def _media_parts(output: Any) -> list[Any] | None:
    if isinstance(output, dict) and set(output) == {MEDIA_RESULT_MARKER}:
        body = output[MEDIA_RESULT_MARKER]
        if isinstance(body, dict) and set(body) == {"parts"}:
            parts: list[Any] = body["parts"]
            return parts
    return None


def _inline_size(part: Any) -> int:
    """A part's decoded inline bytes (0 without inline data, -1 when it is not valid base64)."""
    source = getattr(part, "source", None)
    if not isinstance(source, DataSource):
        return 0
    data = source.data
    return b64_decoded_size(data) if is_standard_base64(data) else -1


def _counted_size(part: Any) -> int:
    """A part's inline bytes as the transcript's running total counts them (length arithmetic).

    Not validated: the transcript's parts were checked when they entered it (``build_result``),
    and the guard refuses malformed base64 before any request is sent, so the total only needs
    the size, which the length and padding give without decoding. Only a media part has a
    source (asked first: ``getattr`` on a part without the field costs a pydantic miss).
    """
    if not isinstance(part, MediaPart):
        return 0
    source = part.source
    if not isinstance(source, DataSource) or not isinstance(source.data, str):
        return 0
    data = source.data
    return b64_decoded_size(data) if len(data) % 4 == 0 else 0


def inline_bytes_of(messages: Sequence[Message]) -> int:
    """Decoded bytes of inline media across a transcript (tool results included)."""
    total = 0
    for message in messages:
        if isinstance(message.content, str):
            continue
        for part in message.content:
            if isinstance(part, ToolResultPart) and isinstance(part.content, list):
                total += sum(_counted_size(p) for p in part.content)
            else:
                total += _counted_size(part)
    return total


def build_result(
    tool: ToolDefinition,
    call_id: str,
    outcome: Any,
    *,
    inline_total: int,
    capabilities: Capabilities,
    max_inline_bytes: int = MAX_INLINE_BYTES,
    max_inline_total_bytes: int = MAX_INLINE_TOTAL_BYTES,
) -> tuple[ToolResultPart, int]:
    """The result part for a journaled tool outcome, and the inline bytes it adds to the transcript."""
    own = tool.result_part(call_id, outcome, capabilities=capabilities)
    if own is not None:  # a tool with its own rules (MCP): media by ref, so no inline bytes
        return own, inline_bytes_of([Message(role="user", content=[own])])
    declared = f"tool:{tool.name}" if tool.untrusted else None
    if not isinstance(outcome, dict) or not ({"ok"} == set(outcome) or {"error"} == set(outcome)):
        return error_result(
            call_id,
            tool.name,
            "bad_outcome",
            "the tool step's record is malformed",
            origin=declared,
        ), 0
    if "error" in outcome:
        err, err_origin = unwrap_untrusted(outcome["error"])
        error_type = err.get("type") if isinstance(err, dict) else None
        message = err.get("message") if isinstance(err, dict) else None
        return error_result(
            call_id,
            tool.name,
            str(error_type or "error"),
            str(message or ""),
            origin=declared or err_origin,
        ), 0
    output = outcome["ok"]
    raw_parts = _media_parts(output) if tool.returns_media else None
    part_origin = _part_origin(raw_parts) if raw_parts is not None else None
    if (
        raw_parts is not None
        and declared is None
        and part_origin is None
        and contains_untrusted(raw_parts) is False
    ):
        return _media_result(
            tool,
            call_id,
            raw_parts,
            inline_total=inline_total,
            capabilities=capabilities,
            max_inline_bytes=max_inline_bytes,
            max_inline_total_bytes=max_inline_total_bytes,
        )
    value, value_origin = unwrap_untrusted(output)
    text = canonical_json({"tool": tool.name, "result": value})
    origin = declared or value_origin or part_origin
    return ToolResultPart(tool_use_id=call_id, content=text, origin=origin), 0


def _part_origin(raw_parts: list[Any]) -> str | None:
    """The ``origin`` of the first part that carries one (a part marked untrusted by its source)."""
    for part in raw_parts:
        if isinstance(part, dict) and isinstance(part.get("origin"), str):
            origin: str = part["origin"]
            return origin
    return None


def _media_result(
    tool: ToolDefinition,
    call_id: str,
    raw_parts: list[Any],
    *,
    inline_total: int,
    capabilities: Capabilities,
    max_inline_bytes: int,
    max_inline_total_bytes: int,
) -> tuple[ToolResultPart, int]:
    name = tool.name
    try:
        parts = _PARTS.validate_python(raw_parts)
    except ValidationError as exc:
        return error_result(call_id, name, "invalid_media_result", _first_error(exc)), 0
    added = 0
    for index, part in enumerate(parts):
        size = _inline_size(part)
        if size < 0:
            return error_result(
                call_id,
                name,
                "invalid_inline_media",
                f"part {index} carries inline data that is not valid base64; store the bytes in "
                "the content store and return a RefSource instead.",
            ), 0
        if size > max_inline_bytes:
            return error_result(
                call_id,
                name,
                "oversized_inline_media",
                f"part {index} carries {size} bytes inline, over the {max_inline_bytes}-byte cap "
                "per part. Tool author: store the bytes in the content store and return a "
                "RefSource (media travels by address).",
            ), 0
        added += size
    if inline_total + added > max_inline_total_bytes:
        return error_result(
            call_id,
            name,
            "inline_total_exceeded",
            f"this result's {added} inline bytes would bring the transcript's inline media to "
            f"{inline_total + added} bytes, over the {max_inline_total_bytes}-byte total. "
            "Tool author: store the bytes in the content store and return a RefSource.",
        ), 0
    result = ToolResultPart(tool_use_id=call_id, content=list(parts))
    problem = _unsendable(call_id, name, result, capabilities, max_inline_bytes)
    if problem is not None:
        return error_result(call_id, name, problem[0], problem[1]), 0
    return result, added


def _unsendable(
    call_id: str,
    name: str,
    result: ToolResultPart,
    capabilities: Capabilities,
    max_inline_bytes: int,
) -> tuple[str, str] | None:
    """Why the next request could not carry this result (guard or capabilities), or None."""
    use: list[Part] = [ToolUsePart(id=call_id, name=name, input={})]
    answer: list[Part] = [result]
    probe = LlmRequest(
        messages=[Message(role="assistant", content=use), Message(role="user", content=answer)]
    )
    # The guard and iter_media keep the last transcript they walked so the next turn walks only
    # what it added (issue 15); this two-message probe must not take that place, or the next
    # turn's guard would walk the whole transcript again.
    with caches_kept():
        try:
            guard_request(probe, max_inline_bytes=max_inline_bytes)
            assert_request_supported(probe, capabilities)
        except LoomError as exc:
            return exc.code, f"{exc.message} (the provider could not be sent this tool result)"
    return None


def _first_error(exc: ValidationError) -> str:
    first = exc.errors(include_url=False)[0]
    where = ".".join(str(p) for p in first["loc"]) or "(root)"
    return f"media_result part {where}: {first['msg']}; parts are text, image, audio or file parts."
