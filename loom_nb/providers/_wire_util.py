"""Small helpers the OpenAI and Gemini wire mappers share: inline bytes, plain text, media fences.

Mappers only ever see a guarded request (ADR 0120 decision 7): refs resolved to data, untrusted
text fenced. Anything else reaching them is a caller bug, refused here with the remedy rather than
sent half-mapped. Untrusted media keeps its ``origin`` through the guard; ``MediaFencer`` brackets
it with the guard's fence text (the open fence, the media, the close fence, always together).
"""

from __future__ import annotations

import json
from typing import Any

from loom_nb.content import (
    AudioPart,
    DataSource,
    FilePart,
    ImagePart,
    LlmRequest,
    MediaPart,
    Part,
)
from loom_nb.errors import GuardError, ProviderError, UnresolvedContentError
from loom_nb.guard import fence_nonce, fence_untrusted_media
from loom_nb.taint import Untrusted

__all__ = ["MediaFencer", "compact_json", "inline_data", "is_media", "plain_text", "unexpected"]


def is_media(part: object) -> bool:
    """Whether ``part`` is an image, audio or file part."""
    return isinstance(part, ImagePart | AudioPart | FilePart)


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


def compact_json(value: Any) -> str:
    """JSON with compact separators and UTF-8 kept: the form vendors emit tool arguments in."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def unexpected(vendor: str, what: str) -> ProviderError:
    """The error for a response holding content loom_nb does not model (it fails loudly)."""
    return ProviderError(
        f"the {vendor} response holds {what}, which loom_nb does not model; refusing rather than "
        "dropping it. Check the request options (e.g. output modalities) or report the shape.",
        code="unsupported_response_content",
        provider=vendor,
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
