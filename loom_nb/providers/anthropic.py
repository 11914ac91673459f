"""``AnthropicProvider``: the Messages API over httpx (ADR 0120 decisions 2, 6, 7, 8).

The thin HTTP side of the Anthropic provider; the mapping lives in ``anthropic_wire``. Every call
first checks the request against the declared capabilities (decision 6: refused before any I/O,
for direct callers too) and then guards it (decision 7: a caller who skipped ``guard_request``
still never gets untrusted content onto the wire unfenced; guarding a guarded request changes
nothing). Keys come from ``api_key=`` or ``ANTHROPIC_API_KEY`` and never appear in a repr or an
error. Retries, backoff and streamed resets are ``_http``'s.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Unpack

import httpx

from loom_nb.content import LlmRequest, LlmResponse
from loom_nb.errors import ProviderError
from loom_nb.providers._base import LlmStreamChunk
from loom_nb.providers._cache_wire import anthropic_cache_breakpoints
from loom_nb.providers._http import SseEvent, decode_json, http_error
from loom_nb.providers._http_provider import HttpOptions, HttpProvider, error_body
from loom_nb.providers._settings_wire import anthropic_settings_fields
from loom_nb.providers._structured import anthropic_schema, check_vendor_output
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


class AnthropicProvider(HttpProvider):
    """Claude models through the Anthropic Messages API.

    ``AnthropicProvider("claude-sonnet-4-5")`` reads ``ANTHROPIC_API_KEY``; pass ``api_key=`` to
    give one. ``capabilities`` defaults to ``default_capabilities("anthropic", model, base_url)``
    (images and PDF for claude-3 and later on the default endpoint, nothing elsewhere).
    ``http_client`` lets a caller inject an ``httpx.AsyncClient`` (tests use
    ``httpx.MockTransport``); otherwise the provider owns one, closed by ``aclose()``.
    ``stream`` sends the body with ``stream: true``. ``settings`` (a ``ModelSettings``) are the
    defaults under each request's and call's; ``max_tokens`` is the one used when no settings
    give one (the Messages API requires it). ``extra_body`` is merged into every body (``top_k``,
    ``tool_choice``, ``metadata``); it may not contradict a setting. ``output_type=`` uses the
    Messages API's native structured outputs (``output_config.format``). ``settings.cache``
    (``"auto"`` under ``Chat``) places ``cache_control`` breakpoints on the tools, the system
    prompt and the ends of the previous turns (see ``PromptCache``).

    Hardening shared by every provider: a key the server echoes is redacted (``***``) from the
    ``ProviderError``; JSON nested deeper than 200 levels is ``malformed_response``; one streamed
    attempt ends after ``stream_deadline`` seconds in total (``stream_timeout``; None: no
    deadline), a non-streamed one after ``request_deadline`` (``request_timeout``); a body, an SSE
    line or an SSE event over ``max_response_bytes`` is ``response_too_large``. Invalid
    tool-argument JSON, streamed or not, is refused at once as
    ``ProviderError(code="invalid_tool_arguments", retryable=False)``, never retried silently.
    """

    _VENDOR = VENDOR
    _CAPABILITIES_KEY = "anthropic"
    _KEY_ENV = ("ANTHROPIC_API_KEY",)
    _DEFAULT_BASE_URL = DEFAULT_BASE_URL
    _PATH = "/v1/messages"
    _RESERVED = frozenset({"model", "messages", "system", "tools", "stream"})
    _EXTRA_BODY_HINT = "Put top_k, metadata, tool_choice, service_tier or output_config there."
    _REQUIRES_OBJECT = False  # anthropic_response refuses a non-object with its own message

    def __init__(
        self, model: str, *, max_tokens: int = 4096, **options: Unpack[HttpOptions]
    ) -> None:
        self.max_tokens = max_tokens
        super().__init__(model, **options)

    def _body(self, request: LlmRequest, *, stream: bool) -> dict[str, Any]:
        body = anthropic_request_body(
            request, model=self.model, max_tokens=self.max_tokens, stream=stream
        )
        if request.settings is None or request.settings.cache is None:
            return body
        return anthropic_cache_breakpoints(body, request.settings.cache)

    def _settings_fields(self, request: LlmRequest) -> dict[str, Any]:
        return anthropic_settings_fields(
            request.settings, model=self.model, default_max_tokens=self.max_tokens
        )

    def _output_fields(self, request: LlmRequest, schema: dict[str, Any]) -> dict[str, Any]:
        check_vendor_output(VENDOR, self.model, request)
        return {
            "output_config": {"format": {"type": "json_schema", "schema": anthropic_schema(schema)}}
        }

    def _headers(self) -> dict[str, str]:
        return {
            **self._key_header("x-api-key"),
            "anthropic-version": ANTHROPIC_VERSION,
            "accept": "application/json",
        }

    def _parse_response(self, data: Any) -> LlmResponse:
        return anthropic_response(data)

    def _parse_error(self, response: httpx.Response) -> ProviderError:
        return parse_anthropic_error(response)

    def _decode(self, events: AsyncIterator[SseEvent]) -> AsyncIterator[LlmStreamChunk]:
        return decode_anthropic_events(events)


def parse_anthropic_error(response: httpx.Response) -> ProviderError:
    """The ``ProviderError`` for an Anthropic error response (status, error type, message, request id)."""
    body = error_body(response)
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
        data = decode_json(event.data, provider=VENDOR, what="a stream event")
        try:
            chunks = assembler.feed(data)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ProviderError(
                f"Anthropic sent a stream event loom_nb cannot read ({event.event}: "
                f"{type(exc).__name__}: {exc}). Retry, or use complete().",
                code="malformed_response",
                provider=VENDOR,
            ) from exc
        for chunk in chunks:
            yield chunk
