"""Small helpers the wire mappers share: inline bytes, plain text, media fences, shared refusals.

Mappers only ever see a guarded request (ADR 0120 decision 7): refs resolved to data, untrusted
text fenced. Anything else reaching them is a caller bug, refused here with the remedy rather than
sent half-mapped. Untrusted media keeps its ``origin`` through the guard; ``MediaFencer`` brackets
it with the guard's fence text (the open fence, the media, the close fence, always together).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from loom_nb.content import (
    AudioPart,
    DataSource,
    FilePart,
    ImagePart,
    LlmRequest,
    LlmResponse,
    MediaPart,
    Part,
    StopReason,
    TextPart,
)
from loom_nb.errors import ContentValidationError, GuardError, ProviderError, UnresolvedContentError
from loom_nb.guard import fence_nonce, fence_untrusted_media, media_essence
from loom_nb.taint import Untrusted

__all__ = [
    "MediaFencer",
    "compact_json",
    "inline_data",
    "invalid_tool_arguments",
    "is_media",
    "misplaced_in_assistant_turn",
    "misplaced_in_user_turn",
    "moved_media_header",
    "parse_tool_arguments",
    "plain_text",
    "shape_checked",
    "stop_reason_for",
    "unexpected",
]

Block = dict[str, Any]
"""One wire content block / part, as the vendor's JSON."""


def is_media(part: object) -> bool:
    """Whether ``part`` is an image, audio or file part."""
    return isinstance(part, ImagePart | AudioPart | FilePart)


_ESSENCES: dict[str, str] = {}


def wire_media_type(part: MediaPart) -> str:
    """The part's media type as vendors expect it: lowercase ``type/subtype``, parameters dropped.

    Media types are case-insensitive and the capability check ignores parameters, so
    ``image/PNG; name=x`` was accepted; vendors match exact lowercase strings. Uses the guard's
    own parser, so the wire and the checks agree on what the type is.
    """
    media_type = part.media_type
    known = _ESSENCES.get(media_type)
    if known is None:
        known = media_essence(media_type) or media_type
        if len(_ESSENCES) < 1024:  # a few types recur; never let odd inputs grow it unbounded
            _ESSENCES[media_type] = known
    return known


def inline_data(part: MediaPart, *, vendor: str, where: str) -> str:
    """The part's base64 data; a ref (unresolved claim-check) is refused, never dropped."""
    if isinstance(part.source, DataSource):
        return part.source.data
    raise UnresolvedContentError(
        f"{where}: the {part.type} part names a stored ref ({part.source.ref.address}) but the "
        f"{vendor} provider only sends inline data. Resolve refs first with "
        "resolve_request_content(request, resolver, context), or use create_llm_effect with "
        "resolve_content=.",
        address=part.source.ref.address,
        where=where,
    )


def plain_text(value: str | Untrusted, *, vendor: str, where: str) -> str:
    """``value`` as text, refusing an ``Untrusted`` that the guard should have fenced or refused."""
    if isinstance(value, str):
        return value
    raise GuardError(
        f"{where}: untrusted text (origin {value.origin!r}) reached the {vendor} mapper unfenced. "
        "Pass the request through guard_request first; the shipped providers do this themselves.",
        code="unguarded_untrusted",
        where=where,
    )


_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def _make_compact() -> Callable[[Any], str]:
    """One C encoder, built once: ``json.dumps`` (and even ``JSONEncoder.encode``) build a new
    one per call, which showed in the mapper benchmark (one call per tool call)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython always has the C accelerator
        return _COMPACT.encode

    def unsupported(value: Any) -> Any:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")

    markers: dict[int, Any] = {}  # cycle detection; emptied again after every call
    encode = make(
        markers, unsupported, json.encoder.encode_basestring, None, ":", ",", False, False, True
    )

    def compact(value: Any) -> str:
        if isinstance(value, str):
            return json.encoder.encode_basestring(value)
        try:
            return "".join(encode(value, 0))
        finally:
            markers.clear()

    return compact


_compact_encode = _make_compact()


def compact_json(value: Any) -> str:
    """JSON with compact separators and UTF-8 kept: the form vendors emit tool arguments in.

    Exactly ``json.dumps(value, separators=(",", ":"), ensure_ascii=False)``, with the encoder
    built once.
    """
    return _compact_encode(value)


TOOL_ARGUMENTS_POLICY = (
    "Invalid tool-argument JSON (cut off, or not an object) is refused at once on every vendor, "
    "streamed or not: ProviderError(code='invalid_tool_arguments', retryable=False). It is "
    "never retried silently (a retry is another paid call that may fail the same way) and never "
    "run as a guess."
)
"""The one policy for broken tool arguments, quoted by the providers' docstrings and the README."""


def invalid_tool_arguments(vendor: str, call_id: str, name: str, why: str) -> ProviderError:
    """The refusal of a tool call whose arguments are not a JSON object (``TOOL_ARGUMENTS_POLICY``)."""
    return ProviderError(
        f"the {vendor} tool call {call_id} ({name}) has arguments that {why}; the output may "
        "have been cut off (stop reason max_tokens). Nothing was run or retried: call again with "
        "a larger token limit, or a simpler tool schema.",
        code="invalid_tool_arguments",
        provider=vendor,
        retryable=False,
        tool_use_id=call_id,
    )


def parse_tool_arguments(text: str, *, vendor: str, call_id: str, name: str) -> dict[str, Any]:
    """A call's arguments from their JSON text (``""`` is ``{}``); anything but an object is refused."""
    if not text.strip():
        return {}
    try:
        parsed = _decode_arguments(text)
    except json.JSONDecodeError as exc:
        raise invalid_tool_arguments(
            vendor, call_id, name, f"are not valid JSON ({exc.msg} at {exc.pos})"
        ) from None
    except RecursionError:
        raise invalid_tool_arguments(vendor, call_id, name, "nest too deep to read") from None
    if not isinstance(parsed, dict):
        raise invalid_tool_arguments(
            vendor, call_id, name, f"are a JSON {type(parsed).__name__}, not an object"
        )
    return parsed


_decode_arguments = json.JSONDecoder().decode


def moved_media_header(call_id: str, name: str | None) -> str:
    """The text put before a tool result's media where the wire moves it out of the result.

    Chat Completions and Gemini cannot carry media inside a tool result, so it follows in the
    user turn; this header names the call, so images from two calls stay attributable (ADR 0120
    gap closed by issue 14 item 7).
    """
    tool = f" ({name})" if name else ""
    return f"[media returned by tool call {call_id}{tool}]"


def unexpected(vendor: str, what: str) -> ProviderError:
    """The error for a response holding content loom_nb does not model (it fails loudly)."""
    return ProviderError(
        f"the {vendor} response holds {what}, which loom_nb does not model; refusing rather than "
        "dropping it. Check the request options (e.g. output modalities) or report the shape.",
        code="unsupported_response_content",
        provider=vendor,
    )


def shape_checked(
    parse: Callable[[Mapping[str, Any]], LlmResponse],
    body: Mapping[str, Any],
    *,
    vendor: str,
    shape: str,
    provider: str,
    remedy: str | None = None,
) -> LlmResponse:
    """``parse(body)``, with a body lacking the documented ``shape`` refused as ``ProviderError``.

    The lookups a parser makes on a malformed body fail as ``KeyError``/``TypeError``/
    ``AttributeError``/``ValueError``; those become ``malformed_response`` (never a bare error).
    """
    try:
        return parse(body)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        message = (
            f"the {vendor} response does not have the {shape} shape ({type(exc).__name__}: {exc})."
        )
        raise ProviderError(
            f"{message} {remedy}" if remedy else message,
            code="malformed_response",
            provider=provider,
        ) from exc


def stop_reason_for(
    table: Mapping[str, StopReason], raw: str | None, *, has_tool_calls: bool
) -> StopReason:
    """``tool_use`` when calls are present, else ``table[raw]`` (``other`` for a missing/unknown one)."""
    if has_tool_calls:
        return "tool_use"
    if raw is None:
        return "other"
    return table.get(raw, "other")


def misplaced_in_assistant_turn(part: Part, where: str) -> ContentValidationError:
    """The error for a media or tool_result part inside an assistant turn."""
    return ContentValidationError(
        f"{where}: an assistant turn holds a {part.type} part; only text and tool_use parts "
        "belong there (media and tool results go in user messages).",
        field=where,
    )


def misplaced_in_user_turn(where: str) -> ContentValidationError:
    """The error for a tool_use part inside a user message."""
    return ContentValidationError(
        f"{where}: a user message holds a tool_use part; tool calls belong in assistant turns.",
        field=where,
    )


class MediaFencer:
    """Brackets untrusted media with fence text parts, computing the request's nonce once."""

    def __init__(self, request: LlmRequest) -> None:
        self._request = request
        self._nonce: str | None = None

    def parts(self, part: MediaPart) -> list[Part]:
        """``[part]`` for trusted media; ``[fence open, part, fence close]`` for untrusted media."""
        if part.origin is None:
            return [part]
        if self._nonce is None:
            self._nonce = fence_nonce(self._request)
        return list(fence_untrusted_media(part, self._nonce))

    def blocks(
        self,
        part: MediaPart,
        *,
        vendor: str,
        where: str,
        text: Callable[[str], Block],
        media: Callable[[MediaPart], Block],
    ) -> list[Block]:
        """The vendor blocks for ``part`` and its fences: ``text`` builds a fence's, ``media`` the part's."""
        out: list[Block] = []
        for item in self.parts(part):
            if isinstance(item, TextPart):
                out.append(text(plain_text(item.text, vendor=vendor, where=where)))
            elif isinstance(item, ImagePart | AudioPart | FilePart):
                out.append(media(item))
        return out
