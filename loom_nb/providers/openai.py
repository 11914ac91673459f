"""``OpenAIProvider``: Chat Completions over httpx, for OpenAI and any compatible server (ADR 0120 2, 6-8).

The thin HTTP side; the mapping lives in ``openai_wire``. Every call first checks the request
against the declared capabilities (decision 6: refused before any I/O, for direct callers too),
then guards it (decision 7: guarding a guarded request changes nothing), then maps it.

``base_url`` points the provider at any OpenAI-compatible server (Ollama, vLLM, llama.cpp, a
gateway), given with its ``/v1`` like the OpenAI SDK's. Two things change off the default URL:

- capabilities default to text-only (the model id says nothing about what serves it), so media is
  refused until the caller passes ``capabilities=``;
- the key is only what ``api_key=`` gives, never ``OPENAI_API_KEY`` (sending the OpenAI key to
  whatever server a notebook names would leak it), and none is needed: a local server gets no
  ``Authorization`` header.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

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
    Secret,
    SseEvent,
    http_error,
    resolve_api_key,
    send_json,
    stream_json,
)
from loom_nb.providers.openai_wire import (
    OpenAIStreamAssembler,
    openai_error_fields,
    openai_error_retryable,
    openai_request_body,
    openai_response,
)

__all__ = ["DEFAULT_BASE_URL", "OpenAIProvider", "decode_openai_events", "parse_openai_error"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""OpenAI's own endpoint; any other ``base_url`` is treated as a compatible server."""

VENDOR = "OpenAI"

_RESERVED = frozenset({"model", "messages", "tools", "stream", "stream_options"})


def _is_default(base_url: str | None) -> bool:
    if base_url is None:
        return True
    return base_url.strip().rstrip("/").lower() in {
        "https://api.openai.com/v1",
        "https://api.openai.com",
    }


class OpenAIProvider:
    """OpenAI models (or any OpenAI-compatible server) through Chat Completions.

    ``OpenAIProvider("gpt-4o")`` reads ``OPENAI_API_KEY``; ``OpenAIProvider("llama3.2",
    base_url="http://localhost:11434/v1")`` talks to Ollama with no key and no media unless
    ``capabilities=`` says otherwise. ``extra_body`` is merged into every request body (sampling
    settings such as ``{"temperature": 0, "max_completion_tokens": 512}``, ``tool_choice``).
    ``http_client`` injects an ``httpx.AsyncClient`` (tests use ``httpx.MockTransport``);
    otherwise the provider owns one, closed by ``aclose()``.
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
        organization: str | None = None,
        project: str | None = None,
        max_retries: int = 3,
        timeout: httpx.Timeout | float | None = DEFAULT_TIMEOUT,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self._key: Secret | None
        if _is_default(base_url):
            self._key = resolve_api_key(api_key, "OPENAI_API_KEY", VENDOR)
        else:
            self._key = Secret(api_key) if api_key else None
        self._url = (base_url or DEFAULT_BASE_URL).rstrip("/") + "/chat/completions"
        self._capabilities = (
            capabilities
            if capabilities is not None
            else default_capabilities("openai", model, base_url)
        )
        clash = sorted(_RESERVED.intersection(extra_body or {}))
        if clash:
            raise ConfigurationError(
                f"extra_body may not set {clash}: the provider builds those from the request. "
                "Put sampling options (temperature, max_completion_tokens, tool_choice ...) there.",
                code="reserved_body_field",
                fields=clash,
            )
        self._extra = dict(extra_body or {})
        self._org_headers = {
            name: value
            for name, value in (("OpenAI-Organization", organization), ("OpenAI-Project", project))
            if value
        }
        self._owns_client = http_client is None
        self._client = http_client if http_client is not None else httpx.AsyncClient()
        self._policy = retry_policy or RetryPolicy(max_retries=max_retries)
        self._timeout = timeout

    def __repr__(self) -> str:
        return f"OpenAIProvider(model={self.model!r}, base_url={self._url!r})"

    @property
    def capabilities(self) -> Capabilities:
        """The media this provider accepts; anything else is refused before any I/O."""
        return self._capabilities

    async def aclose(self) -> None:
        """Close the HTTP client if the provider created it (an injected one is the caller's)."""
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> OpenAIProvider:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def wire_body(
        self, request: LlmRequest | Mapping[str, Any], *, stream: bool = False
    ) -> dict[str, Any]:
        """The exact JSON body ``complete`` (or ``stream``) would send, after the checks and the guard."""
        parsed = parse_request(request)
        assert_request_supported(parsed, self._capabilities, provider=VENDOR, model=self.model)
        # Structure and provenance, not the inline caps: those bound the journaled request,
        # while the provider sees media already resolved from the store (up to the resolve budget).
        guarded = guard_request(
            parsed, max_inline_bytes=MAX_RESOLVED_BYTES, max_inline_total_bytes=MAX_RESOLVED_BYTES
        )
        body = openai_request_body(guarded, model=self.model, stream=stream)
        return {**body, **self._extra}

    def _headers(self) -> dict[str, str]:
        headers = {"accept": "application/json", **self._org_headers}
        if self._key is not None:
            headers["authorization"] = "Bearer " + self._key.reveal()
        return headers

    async def complete(self, request: LlmRequest | Mapping[str, Any]) -> LlmResponse:
        """Send the request and return the whole response."""
        body = self.wire_body(request)
        response = await send_json(
            self._client,
            self._url,
            headers=self._headers(),
            body=body,
            provider=VENDOR,
            parse_error=parse_openai_error,
            policy=self._policy,
            http_timeout=self._timeout,
        )
        try:
            data = response.json()
        except ValueError as exc:
            raise ProviderError(
                f"OpenAI answered HTTP {response.status_code} with a body that is not JSON. "
                "Check base_url (it should end in /v1).",
                code="malformed_response",
                provider=VENDOR,
                status=response.status_code,
            ) from exc
        if not isinstance(data, dict):
            raise ProviderError(
                "OpenAI answered with JSON that is not an object. Check base_url.",
                code="malformed_response",
                provider=VENDOR,
            )
        return openai_response(data)

    async def stream(
        self, request: LlmRequest | Mapping[str, Any]
    ) -> AsyncIterator[LlmStreamChunk]:
        """Send the request with ``stream: true`` and yield text and tool deltas, then ``done``.

        Tool calls come from the assembled deltas, whatever ``finish_reason`` says. A retried
        attempt after partial output first yields a ``reset`` chunk.
        """
        body = self.wire_body(request, stream=True)
        headers = {**self._headers(), "accept": "text/event-stream"}
        async for chunk in stream_json(
            self._client,
            self._url,
            headers=headers,
            body=body,
            provider=VENDOR,
            parse_error=parse_openai_error,
            decode=decode_openai_events,
            policy=self._policy,
            http_timeout=self._timeout,
        ):
            yield chunk


def parse_openai_error(response: httpx.Response) -> ProviderError:
    """The ``ProviderError`` for an OpenAI error response (status, type, message, code, param)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    error_type, message, details = openai_error_fields(body)
    return http_error(
        response,
        provider=VENDOR,
        error_type=error_type,
        message=message,
        retryable=openai_error_retryable(response.status_code, body),
        **details,
    )


async def decode_openai_events(events: AsyncIterator[SseEvent]) -> AsyncIterator[LlmStreamChunk]:
    """The chunks of one streamed attempt (a fresh assembler per attempt), ending with ``done``."""
    assembler = OpenAIStreamAssembler()
    async for event in events:
        if event.data.strip() == "[DONE]":
            assembler.mark_done()
            break
        try:
            data = json.loads(event.data)
        except json.JSONDecodeError as exc:
            raise ProviderError(
                f"OpenAI sent a stream event that is not JSON ({exc.msg}). Retry, or use complete().",
                code="malformed_response",
                provider=VENDOR,
            ) from exc
        if not isinstance(data, dict):
            raise ProviderError(
                "OpenAI sent a stream event that is not a JSON object. Retry, or use complete().",
                code="malformed_response",
                provider=VENDOR,
            )
        try:
            chunks = assembler.feed(data)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ProviderError(
                f"OpenAI sent a stream event loom_nb cannot read ({type(exc).__name__}: {exc}). "
                "Retry, or use complete().",
                code="malformed_response",
                provider=VENDOR,
            ) from exc
        for chunk in chunks:
            yield chunk
    yield LlmStreamChunk(kind="done", response=assembler.response())
