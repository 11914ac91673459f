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

from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx

from loom_nb.capabilities import Capabilities
from loom_nb.content import LlmRequest, LlmResponse
from loom_nb.errors import ProviderError
from loom_nb.providers._base import LlmStreamChunk
from loom_nb.providers._http import (
    DEFAULT_STREAM_DEADLINE,
    DEFAULT_TIMEOUT,
    RetryPolicy,
    Secret,
    SseEvent,
    decode_json,
    http_error,
    resolve_api_key,
)
from loom_nb.providers._http_provider import HttpProvider, checked_extra_body, error_body
from loom_nb.providers._settings_wire import openai_chat_settings_fields
from loom_nb.providers._structured import schema_name, strict_openai_schema
from loom_nb.providers.openai_wire import (
    OpenAIStreamAssembler,
    openai_error_fields,
    openai_error_retryable,
    openai_request_body,
    openai_response,
)
from loom_nb.settings import ModelSettings

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


class OpenAIProvider(HttpProvider):
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
    deadline). Invalid tool-argument JSON, streamed or not, is refused at once as
    ``ProviderError(code="invalid_tool_arguments", retryable=False)``, never retried silently.
    """

    _VENDOR = VENDOR
    _CAPABILITIES_KEY = "openai"
    _NOT_JSON_REMEDY = "Check base_url (it should end in /v1)."

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        capabilities: Capabilities | None = None,
        http_client: httpx.AsyncClient | None = None,
        extra_body: Mapping[str, Any] | None = None,
        settings: ModelSettings | None = None,
        organization: str | None = None,
        project: str | None = None,
        max_retries: int = 3,
        timeout: httpx.Timeout | float | None = DEFAULT_TIMEOUT,
        retry_policy: RetryPolicy | None = None,
        stream_deadline: float | None = DEFAULT_STREAM_DEADLINE,
    ) -> None:
        self._key: Secret | None
        self._official = _is_default(base_url)
        if self._official:
            self._key = resolve_api_key(api_key, "OPENAI_API_KEY", VENDOR)
        else:
            self._key = Secret(api_key) if api_key else None
        extra = checked_extra_body(
            extra_body,
            _RESERVED,
            hint="Put sampling options (temperature, max_completion_tokens, tool_choice ...) there.",
        )
        self._org_headers = {
            name: value
            for name, value in (("OpenAI-Organization", organization), ("OpenAI-Project", project))
            if value
        }
        super().__init__(
            model,
            base_url=base_url,
            url=(base_url or DEFAULT_BASE_URL).rstrip("/") + "/chat/completions",
            capabilities=capabilities,
            http_client=http_client,
            extra_body=extra,
            settings=settings,
            max_retries=max_retries,
            timeout=timeout,
            retry_policy=retry_policy,
            stream_deadline=stream_deadline,
        )

    def _body(self, request: LlmRequest, *, stream: bool) -> dict[str, Any]:
        return openai_request_body(request, model=self.model, stream=stream)

    def _settings_fields(self, request: LlmRequest) -> dict[str, Any]:
        return openai_chat_settings_fields(
            request.settings, model=self.model, official=self._official
        )

    def _output_fields(self, request: LlmRequest, schema: dict[str, Any]) -> dict[str, Any]:
        strict_schema, strict = strict_openai_schema(schema)
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": schema_name(schema),
                    "schema": strict_schema,
                    "strict": strict,
                },
            }
        }

    def _headers(self) -> dict[str, str]:
        headers = {"accept": "application/json", **self._org_headers}
        if self._key is not None:
            headers["authorization"] = "Bearer " + self._key.reveal()
        return headers

    def _parse_response(self, data: Any) -> LlmResponse:
        return openai_response(data)

    def _parse_error(self, response: httpx.Response) -> ProviderError:
        return parse_openai_error(response)

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
