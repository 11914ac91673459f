"""``GeminiProvider``: the Gemini API (generateContent) over httpx (ADR 0120 decisions 2, 6, 7, 8).

The thin HTTP side; the mapping lives in ``gemini_wire``. Every call first checks the request
against the declared capabilities (refused before any I/O), then guards it, then maps it. The key
goes in the ``x-goog-api-key`` header, never in a ``?key=`` query (URLs end up in logs and error
messages). ``complete`` calls ``:generateContent``; ``stream`` calls
``:streamGenerateContent?alt=sse``, where a function call arrives whole, so its tool deltas are the
id and name, then the whole arguments JSON in one fragment.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import quote

import httpx

from loom_nb.capabilities import Capabilities, assert_request_supported, default_capabilities
from loom_nb.content import LlmRequest, LlmResponse, parse_request
from loom_nb.errors import ConfigurationError, ProviderError
from loom_nb.guard import guard_request
from loom_nb.limits import MAX_RESOLVED_BYTES
from loom_nb.providers._base import LlmStreamChunk
from loom_nb.providers._http import (
    DEFAULT_TIMEOUT,
    RetryPolicy,
    SseEvent,
    http_error,
    resolve_api_key,
    send_json,
    stream_json,
)
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

_RESERVED = frozenset({"contents", "systemInstruction", "tools"})


class GeminiProvider:
    """Gemini models through the Gemini API's generateContent.

    ``GeminiProvider("gemini-2.5-flash")`` reads ``GEMINI_API_KEY`` (or ``GOOGLE_API_KEY``); pass
    ``api_key=`` to give one. ``capabilities`` defaults to ``default_capabilities("gemini", model,
    base_url)``. ``extra_body`` is merged into every body (``generationConfig``, ``toolConfig``,
    ``safetySettings``). ``http_client`` injects an ``httpx.AsyncClient``; otherwise the provider
    owns one, closed by ``aclose()``.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        capabilities: Capabilities | None = None,
        http_client: httpx.AsyncClient | None = None,
        extra_body: Mapping[str, Any] | None = None,
        max_retries: int = 3,
        timeout: httpx.Timeout | float | None = DEFAULT_TIMEOUT,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        self.model = model.removeprefix("models/")
        self.base_url = base_url
        fallback = os.environ.get("GEMINI_API_KEY", "").strip() or os.environ.get(
            "GOOGLE_API_KEY", ""
        )
        self._key = resolve_api_key(api_key or fallback.strip() or None, "GEMINI_API_KEY", VENDOR)
        root = (base_url or DEFAULT_BASE_URL).rstrip("/") + "/models/" + quote(self.model, safe="")
        self._url = root + ":generateContent"
        self._stream_url = root + ":streamGenerateContent?alt=sse"
        self._capabilities = (
            capabilities
            if capabilities is not None
            else default_capabilities("gemini", self.model, base_url)
        )
        clash = sorted(_RESERVED.intersection(extra_body or {}))
        if clash:
            raise ConfigurationError(
                f"extra_body may not set {clash}: the provider builds those from the request. "
                "Put generationConfig, toolConfig or safetySettings there.",
                code="reserved_body_field",
                fields=clash,
            )
        self._extra = dict(extra_body or {})
        self._owns_client = http_client is None
        self._client = http_client if http_client is not None else httpx.AsyncClient()
        self._policy = retry_policy or RetryPolicy(max_retries=max_retries)
        self._timeout = timeout

    def __repr__(self) -> str:
        return f"GeminiProvider(model={self.model!r}, base_url={self._url!r})"

    @property
    def capabilities(self) -> Capabilities:
        """The media this provider accepts; anything else is refused before any I/O."""
        return self._capabilities

    async def aclose(self) -> None:
        """Close the HTTP client if the provider created it (an injected one is the caller's)."""
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> GeminiProvider:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def wire_body(self, request: LlmRequest | Mapping[str, Any]) -> dict[str, Any]:
        """The exact JSON body ``complete`` / ``stream`` would send, after the checks and the guard."""
        parsed = parse_request(request)
        assert_request_supported(parsed, self._capabilities, provider=VENDOR, model=self.model)
        # Structure and provenance, not the inline caps: those bound the journaled request,
        # while the provider sees media already resolved from the store (up to the resolve budget).
        guarded = guard_request(
            parsed, max_inline_bytes=MAX_RESOLVED_BYTES, max_inline_total_bytes=MAX_RESOLVED_BYTES
        )
        return {**gemini_request_body(guarded), **self._extra}

    def _headers(self) -> dict[str, str]:
        return {"x-goog-api-key": self._key.reveal(), "accept": "application/json"}

    async def complete(self, request: LlmRequest | Mapping[str, Any]) -> LlmResponse:
        """Send the request to ``:generateContent`` and return the whole response."""
        body = self.wire_body(request)
        response = await send_json(
            self._client,
            self._url,
            headers=self._headers(),
            body=body,
            provider=VENDOR,
            parse_error=parse_gemini_error,
            policy=self._policy,
            http_timeout=self._timeout,
        )
        try:
            data = response.json()
        except ValueError as exc:
            raise ProviderError(
                f"Gemini answered HTTP {response.status_code} with a body that is not JSON. "
                "Check base_url.",
                code="malformed_response",
                provider=VENDOR,
                status=response.status_code,
            ) from exc
        if not isinstance(data, dict):
            raise ProviderError(
                "Gemini answered with JSON that is not an object. Check base_url.",
                code="malformed_response",
                provider=VENDOR,
            )
        return gemini_response(data)

    async def stream(
        self, request: LlmRequest | Mapping[str, Any]
    ) -> AsyncIterator[LlmStreamChunk]:
        """Send the request to ``:streamGenerateContent?alt=sse``; yield deltas, then ``done``.

        A retried attempt after partial output first yields a ``reset`` chunk.
        """
        body = self.wire_body(request)
        headers = {**self._headers(), "accept": "text/event-stream"}
        async for chunk in stream_json(
            self._client,
            self._stream_url,
            headers=headers,
            body=body,
            provider=VENDOR,
            parse_error=parse_gemini_error,
            decode=decode_gemini_events,
            policy=self._policy,
            http_timeout=self._timeout,
        ):
            yield chunk


def parse_gemini_error(response: httpx.Response) -> ProviderError:
    """The ``ProviderError`` for a Gemini error response (status, status name, message)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    error_type, message = gemini_error_fields(body)
    return http_error(response, provider=VENDOR, error_type=error_type, message=message)


async def decode_gemini_events(events: AsyncIterator[SseEvent]) -> AsyncIterator[LlmStreamChunk]:
    """The chunks of one streamed attempt (a fresh assembler per attempt), ending with ``done``."""
    assembler = GeminiStreamAssembler()
    async for event in events:
        try:
            data = json.loads(event.data)
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
