"""``AnthropicProvider``: the Messages API over httpx (ADR 0120 decisions 2, 6, 7, 8).

The thin HTTP side of the Anthropic provider; the mapping lives in ``anthropic_wire``. Every call
first checks the request against the declared capabilities (decision 6: refused before any I/O,
for direct callers too) and then guards it (decision 7: a caller who skipped ``guard_request``
still never gets untrusted content onto the wire unfenced; guarding a guarded request changes
nothing). Keys come from ``api_key=`` or ``ANTHROPIC_API_KEY`` and never appear in a repr or an
error. Retries, backoff and streamed resets are ``_http``'s.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx

from loom_nb.capabilities import Capabilities, assert_request_supported, default_capabilities
from loom_nb.content import LlmRequest, LlmResponse, parse_request
from loom_nb.errors import ProviderError
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
from loom_nb.providers.anthropic_wire import (
    RETRYABLE_ERROR_TYPES,
    AnthropicStreamAssembler,
    anthropic_error_fields,
    anthropic_request_body,
    anthropic_response,
)

__all__ = ["ANTHROPIC_VERSION", "DEFAULT_BASE_URL", "AnthropicProvider"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
"""Where the Messages API lives; ``base_url`` replaces it (a proxy, a compatible gateway)."""

ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` header every request carries."""

VENDOR = "Anthropic"


class AnthropicProvider:
    """Claude models through the Anthropic Messages API.

    ``AnthropicProvider("claude-sonnet-4-5")`` reads ``ANTHROPIC_API_KEY``; pass ``api_key=`` to
    give one. ``capabilities`` defaults to ``default_capabilities("anthropic", model, base_url)``
    (images and PDF for claude-3 and later on the default endpoint, nothing elsewhere).
    ``http_client`` lets a caller inject an ``httpx.AsyncClient`` (tests use
    ``httpx.MockTransport``); otherwise the provider owns one, closed by ``aclose()``.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        capabilities: Capabilities | None = None,
        http_client: httpx.AsyncClient | None = None,
        max_tokens: int = 4096,
        max_retries: int = 3,
        timeout: httpx.Timeout | float | None = DEFAULT_TIMEOUT,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.max_tokens = max_tokens
        self._key = resolve_api_key(api_key, "ANTHROPIC_API_KEY", VENDOR)
        self._url = (base_url or DEFAULT_BASE_URL).rstrip("/") + "/v1/messages"
        self._capabilities = (
            capabilities
            if capabilities is not None
            else default_capabilities("anthropic", model, base_url)
        )
        self._owns_client = http_client is None
        self._client = http_client if http_client is not None else httpx.AsyncClient()
        self._policy = retry_policy or RetryPolicy(max_retries=max_retries)
        self._timeout = timeout

    def __repr__(self) -> str:
        return f"AnthropicProvider(model={self.model!r}, base_url={self._url!r})"

    @property
    def capabilities(self) -> Capabilities:
        """The media this provider accepts; anything else is refused before any I/O."""
        return self._capabilities

    async def aclose(self) -> None:
        """Close the HTTP client if the provider created it (an injected one is the caller's)."""
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> AnthropicProvider:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def wire_body(
        self, request: LlmRequest | Mapping[str, Any], *, stream: bool = False
    ) -> dict[str, Any]:
        """The exact JSON body ``complete`` (or ``stream``) would send, after the checks and the guard."""
        guarded = self._prepare(request)
        return anthropic_request_body(
            guarded, model=self.model, max_tokens=self.max_tokens, stream=stream
        )

    def _prepare(self, request: LlmRequest | Mapping[str, Any]) -> LlmRequest:
        parsed = parse_request(request)
        assert_request_supported(parsed, self._capabilities, provider=VENDOR, model=self.model)
        # Structure and provenance, not the inline caps: those bound the journaled request,
        # while the provider sees media already resolved from the store (up to the resolve budget).
        return guard_request(
            parsed, max_inline_bytes=MAX_RESOLVED_BYTES, max_inline_total_bytes=MAX_RESOLVED_BYTES
        )

    def _headers(self) -> dict[str, str]:
        return {
            "x-api-key": self._key.reveal(),
            "anthropic-version": ANTHROPIC_VERSION,
            "accept": "application/json",
        }

    async def complete(self, request: LlmRequest | Mapping[str, Any]) -> LlmResponse:
        """Send the request and return the whole response."""
        body = self.wire_body(request)
        response = await send_json(
            self._client,
            self._url,
            headers=self._headers(),
            body=body,
            provider=VENDOR,
            parse_error=parse_anthropic_error,
            policy=self._policy,
            http_timeout=self._timeout,
        )
        try:
            data = response.json()
        except ValueError as exc:
            raise ProviderError(
                f"Anthropic answered HTTP {response.status_code} with a body that is not JSON. "
                "Check base_url.",
                code="malformed_response",
                provider=VENDOR,
                status=response.status_code,
            ) from exc
        return anthropic_response(data)

    async def stream(
        self, request: LlmRequest | Mapping[str, Any]
    ) -> AsyncIterator[LlmStreamChunk]:
        """Send the request with ``stream: true`` and yield text and tool deltas, then ``done``.

        A retried attempt after partial output first yields a ``reset`` chunk.
        """
        body = self.wire_body(request, stream=True)
        headers = {**self._headers(), "accept": "text/event-stream"}
        async for chunk in stream_json(
            self._client,
            self._url,
            headers=headers,
            body=body,
            provider=VENDOR,
            parse_error=parse_anthropic_error,
            decode=decode_anthropic_events,
            policy=self._policy,
            http_timeout=self._timeout,
        ):
            yield chunk


def parse_anthropic_error(response: httpx.Response) -> ProviderError:
    """The ``ProviderError`` for an Anthropic error response (status, error type, message, request id)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    error_type, message = anthropic_error_fields(body)
    details: dict[str, Any] = {}
    if isinstance(body, dict) and body.get("request_id"):
        details["request_id"] = body["request_id"]
    retryable = True if error_type in RETRYABLE_ERROR_TYPES else None
    return http_error(
        response,
        provider=VENDOR,
        error_type=error_type,
        message=message,
        retryable=retryable,
        **details,
    )


async def decode_anthropic_events(events: AsyncIterator[SseEvent]) -> AsyncIterator[LlmStreamChunk]:
    """The chunks of one streamed attempt (a fresh assembler per attempt)."""
    assembler = AnthropicStreamAssembler()
    async for event in events:
        try:
            data = json.loads(event.data)
            chunks = assembler.feed(data)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ProviderError(
                f"Anthropic sent a stream event loom_nb cannot read ({event.event}: "
                f"{type(exc).__name__}: {exc}). Retry, or use complete().",
                code="malformed_response",
                provider=VENDOR,
            ) from exc
        for chunk in chunks:
            yield chunk
