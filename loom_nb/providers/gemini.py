"""``GeminiProvider``: the Gemini API (generateContent) over httpx (ADR 0120 decisions 2, 6, 7, 8).

The thin HTTP side; the mapping lives in ``gemini_wire``. Every call first checks the request
against the declared capabilities (refused before any I/O), then guards it, then maps it. The key
goes in the ``x-goog-api-key`` header, never in a ``?key=`` query (URLs end up in logs and error
messages). ``complete`` calls ``:generateContent``; ``stream`` calls
``:streamGenerateContent?alt=sse``, where a function call arrives whole, so its tool deltas are the
id and name, then the whole arguments JSON in one fragment.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import httpx

from loom_nb.content import LlmRequest, LlmResponse
from loom_nb.errors import ProviderError
from loom_nb.providers._base import LlmStreamChunk
from loom_nb.providers._http import SseEvent, decode_json, http_error
from loom_nb.providers._http_provider import HttpProvider, error_body
from loom_nb.providers._settings_wire import gemini_settings_fields
from loom_nb.providers._structured import check_vendor_output
from loom_nb.providers.gemini_wire import (
    GeminiStreamAssembler,
    gemini_error_fields,
    gemini_request_body,
    gemini_response,
)

__all__ = ["DEFAULT_BASE_URL", "GeminiProvider", "decode_gemini_events", "parse_gemini_error"]

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"
"""The Gemini API (Google AI); ``base_url`` replaces it (a proxy)."""

VENDOR = "Gemini"


class GeminiProvider(HttpProvider):
    """Gemini models through the Gemini API's generateContent.

    ``GeminiProvider("gemini-2.5-flash")`` reads ``GEMINI_API_KEY`` (or ``GOOGLE_API_KEY``); pass
    ``api_key=`` to give one. ``capabilities`` defaults to ``default_capabilities("gemini", model,
    base_url)``. ``settings`` (a ``ModelSettings``) are the defaults under each request's and
    call's, mapped into ``generationConfig``. ``extra_body`` is merged into every body
    (``generationConfig`` keys combine with the settings', ``toolConfig``, ``safetySettings``); it
    may not contradict a setting. ``output_type=`` uses ``responseMimeType: application/json``
    with ``responseJsonSchema``. ``http_client`` injects an ``httpx.AsyncClient``; otherwise the provider
    owns one, closed by ``aclose()``. ``complete`` calls ``:generateContent``, ``stream`` calls
    ``:streamGenerateContent?alt=sse``; both send the same body.

    Hardening shared by every provider: a key the server echoes is redacted (``***``) from the
    ``ProviderError``; JSON nested deeper than 200 levels is ``malformed_response``; one streamed
    attempt ends after ``stream_deadline`` seconds in total (``stream_timeout``; None: no
    deadline), a non-streamed one after ``request_deadline`` (``request_timeout``); a body, an SSE
    line or an SSE event over ``max_response_bytes`` is ``response_too_large``. Invalid
    tool-argument JSON, streamed or not, is refused at once as
    ``ProviderError(code="invalid_tool_arguments", retryable=False)``, never retried silently.
    """

    _VENDOR = VENDOR
    _CAPABILITIES_KEY = "gemini"
    _KEY_ENV = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    _DEFAULT_BASE_URL = DEFAULT_BASE_URL
    _RESERVED = frozenset({"contents", "systemInstruction", "tools"})
    _EXTRA_BODY_HINT = "Put generationConfig, toolConfig or safetySettings there."

    @staticmethod
    def _model_id(model: str) -> str:
        return model.removeprefix("models/")

    def _endpoints(self, model: str, base_url: str | None) -> tuple[str, str]:
        root = (base_url or DEFAULT_BASE_URL).rstrip("/") + "/models/" + quote(model, safe="")
        return root + ":generateContent", root + ":streamGenerateContent?alt=sse"

    def _body(self, request: LlmRequest, *, stream: bool) -> dict[str, Any]:
        return gemini_request_body(request)  # the model and the streaming go in the URL

    def _settings_fields(self, request: LlmRequest) -> dict[str, Any]:
        return gemini_settings_fields(request.settings, model=self.model)

    def _output_fields(self, request: LlmRequest, schema: dict[str, Any]) -> dict[str, Any]:
        check_vendor_output(VENDOR, self.model, request)
        return {
            "generationConfig": {
                "responseMimeType": "application/json",
                "responseJsonSchema": schema,
            }
        }

    def _headers(self) -> dict[str, str]:
        return {**self._key_header("x-goog-api-key"), "accept": "application/json"}

    def _parse_response(self, data: Any) -> LlmResponse:
        return gemini_response(data)

    def _parse_error(self, response: httpx.Response) -> ProviderError:
        return parse_gemini_error(response)

    def _decode(self, events: AsyncIterator[SseEvent]) -> AsyncIterator[LlmStreamChunk]:
        return decode_gemini_events(events)


def parse_gemini_error(response: httpx.Response) -> ProviderError:
    """The ``ProviderError`` for a Gemini error response (status, status name, message)."""
    body = error_body(response)
    error_type, message = gemini_error_fields(body)
    return http_error(response, provider=VENDOR, error_type=error_type, message=message)


async def decode_gemini_events(events: AsyncIterator[SseEvent]) -> AsyncIterator[LlmStreamChunk]:
    """The chunks of one streamed attempt (a fresh assembler per attempt), ending with ``done``."""
    assembler = GeminiStreamAssembler()
    async for event in events:
        data = decode_json(event.data, provider=VENDOR, what="a stream event")
        try:
            if not isinstance(data, dict):
                raise TypeError("the event is not a JSON object")
            chunks = assembler.feed(data)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ProviderError(
                f"Gemini sent a stream event loom_nb cannot read ({type(exc).__name__}: {exc}). "
                "Retry, or use complete().",
                code="malformed_response",
                provider=VENDOR,
            ) from exc
        for chunk in chunks:
            yield chunk
    yield LlmStreamChunk(kind="done", response=assembler.response())
