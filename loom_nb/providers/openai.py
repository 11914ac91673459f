"""``OpenAIProvider``: Chat Completions over httpx, for OpenAI and any compatible server (ADR 0120 2, 6-8).

The thin HTTP side; the mapping lives in ``openai_wire`` (requests) and ``openai_answer``
(responses, errors, stream events). Every call first checks the request against the declared
capabilities (decision 6: refused before any I/O, for direct callers too), then guards it
(decision 7: guarding a guarded request changes nothing), then maps it.

``base_url`` points the provider at any OpenAI-compatible server (Ollama, vLLM, llama.cpp, a
gateway), given with its ``/v1`` like the OpenAI SDK's. Two things change off the default URL:

- capabilities default to text-only (the model id says nothing about what serves it), so media is
  refused until the caller passes ``capabilities=``;
- the key is only what ``api_key=`` gives, never ``OPENAI_API_KEY`` (sending the OpenAI key to
  whatever server a notebook names would leak it), and none is needed: a local server gets no
  ``Authorization`` header.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Unpack

import httpx

from loom_nb.content import LlmRequest, LlmResponse
from loom_nb.errors import ProviderError
from loom_nb.providers._base import LlmStreamChunk
from loom_nb.providers._http import Secret, SseEvent, decode_json, http_error
from loom_nb.providers._http_provider import HttpOptions, HttpProvider, error_body
from loom_nb.providers._settings_wire import openai_chat_settings_fields
from loom_nb.providers._structured import openai_json_schema
from loom_nb.providers.openai_answer import (
    OpenAIStreamAssembler,
    openai_error_fields,
    openai_error_retryable,
    openai_response,
)
from loom_nb.providers.openai_wire import openai_request_body

__all__ = [
    "DEFAULT_BASE_URL",
    "OpenAIEndpointProvider",
    "OpenAIProvider",
    "decode_openai_events",
    "is_openai_endpoint",
    "parse_openai_error",
]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""OpenAI's own endpoint; any other ``base_url`` is treated as a compatible server."""

VENDOR = "OpenAI"

_OFFICIAL_URLS = frozenset({"https://api.openai.com/v1", "https://api.openai.com"})


def is_openai_endpoint(base_url: str | None) -> bool:
    """Whether ``base_url`` (None: the default) is OpenAI's own endpoint rather than a compatible one."""
    if base_url is None:
        return True
    return base_url.strip().rstrip("/").lower() in _OFFICIAL_URLS


class OpenAIEndpointProvider(HttpProvider):
    """What both OpenAI APIs share: the endpoint, the key rule off it, the error envelope.

    Off OpenAI's own endpoint the key is only what ``api_key=`` gives, never ``OPENAI_API_KEY``,
    and none is needed (a local server gets no ``Authorization`` header).
    """

    _VENDOR = VENDOR
    _KEY_ENV = ("OPENAI_API_KEY",)
    _DEFAULT_BASE_URL = DEFAULT_BASE_URL
    _NOT_JSON_REMEDY = "Check base_url (it should end in /v1)."

    _official: bool
    """Whether this is OpenAI's own endpoint (the key and some settings' names depend on it)."""

    def _api_key(self, api_key: str | None, base_url: str | None) -> Secret | None:
        self._official = is_openai_endpoint(base_url)
        if self._official:
            return super()._api_key(api_key, base_url)
        return Secret(api_key) if api_key else None

    def _parse_error(self, response: httpx.Response) -> ProviderError:
        return parse_openai_error(response)


class OpenAIProvider(OpenAIEndpointProvider):
    """OpenAI models (or any OpenAI-compatible server) through Chat Completions.

    ``OpenAIProvider("gpt-4o")`` reads ``OPENAI_API_KEY``; ``OpenAIProvider("llama3.2",
    base_url="http://localhost:11434/v1")`` talks to Ollama with no key and no media unless
    ``capabilities=`` says otherwise. ``extra_body`` is merged into every request body (sampling
    settings such as ``{"temperature": 0, "max_completion_tokens": 512}``, ``tool_choice``).
    ``http_client`` injects an ``httpx.AsyncClient`` (tests use ``httpx.MockTransport``);
    otherwise the provider owns one, closed by ``aclose()``. ``stream`` sends the body with
    ``stream: true``; its tool calls come from the assembled deltas, whatever ``finish_reason`` says.

    Hardening shared by every provider: a key the server echoes is redacted (``***``) from the
    ``ProviderError``; JSON nested deeper than 200 levels is ``malformed_response``; one streamed
    attempt ends after ``stream_deadline`` seconds in total (``stream_timeout``; None: no
    deadline), a non-streamed one after ``request_deadline`` (``request_timeout``); a body, an SSE
    line or an SSE event over ``max_response_bytes`` is ``response_too_large``. Invalid
    tool-argument JSON, streamed or not, is refused at once as
    ``ProviderError(code="invalid_tool_arguments", retryable=False)``, never retried silently.
    """

    _CAPABILITIES_KEY = "openai"
    _PATH = "/chat/completions"
    _RESERVED = frozenset({"model", "messages", "tools", "stream", "stream_options"})
    _EXTRA_BODY_HINT = (
        "Put sampling options (temperature, max_completion_tokens, tool_choice ...) there."
    )

    def __init__(
        self,
        model: str,
        *,
        organization: str | None = None,
        project: str | None = None,
        **options: Unpack[HttpOptions],
    ) -> None:
        self._org_headers = {
            name: value
            for name, value in (("OpenAI-Organization", organization), ("OpenAI-Project", project))
            if value
        }
        super().__init__(model, **options)

    def _body(self, request: LlmRequest, *, stream: bool) -> dict[str, Any]:
        return openai_request_body(request, model=self.model, stream=stream)

    def _settings_fields(self, request: LlmRequest) -> dict[str, Any]:
        return openai_chat_settings_fields(
            request.settings, model=self.model, official=self._official
        )

    def _output_fields(self, request: LlmRequest, schema: dict[str, Any]) -> dict[str, Any]:
        return {
            "response_format": {"type": "json_schema", "json_schema": openai_json_schema(schema)}
        }

    def _headers(self) -> dict[str, str]:
        return {
            "accept": "application/json",
            **self._org_headers,
            **self._key_header("authorization", "Bearer "),
        }

    def _parse_response(self, data: Any) -> LlmResponse:
        return openai_response(data)

    def _decode(self, events: AsyncIterator[SseEvent]) -> AsyncIterator[LlmStreamChunk]:
        return decode_openai_events(events)


def parse_openai_error(response: httpx.Response) -> ProviderError:
    """The ``ProviderError`` for an OpenAI error response (status, type, message, code, param)."""
    body = error_body(response)
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
        data = decode_json(event.data, provider=VENDOR, what="a stream event")
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
