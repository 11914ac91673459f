"""``OpenAIResponsesProvider``: the OpenAI Responses API (``POST /v1/responses``) over httpx.

The thin HTTP side; the mapping lives in ``openai_responses_wire``. New OpenAI models and
features (reasoning items, encrypted reasoning carried between turns) appear here first. Like
every shipped provider it checks the request against its capabilities before any I/O (decision
6), guards it (decision 7), then maps it; retries, backoff and streamed resets are ``_http``'s,
and errors are parsed as OpenAI's (the same ``{"error": {...}}`` envelope as Chat Completions).

``base_url`` points it at another server implementing the Responses API; off OpenAI's own
endpoint, as with ``OpenAIProvider``, capabilities default to text-only and the key is only what
``api_key=`` gives (``OPENAI_API_KEY`` is never sent elsewhere).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx

from loom_nb.capabilities import Capabilities
from loom_nb.content import LlmRequest, LlmResponse
from loom_nb.errors import ConfigurationError, ProviderError
from loom_nb.providers._base import LlmStreamChunk
from loom_nb.providers._http import (
    DEFAULT_STREAM_DEADLINE,
    DEFAULT_TIMEOUT,
    RetryPolicy,
    Secret,
    SseEvent,
    decode_json,
    resolve_api_key,
)
from loom_nb.providers._http_provider import HttpProvider, checked_extra_body
from loom_nb.providers._settings_wire import openai_responses_settings_fields
from loom_nb.providers._structured import schema_name, strict_openai_schema
from loom_nb.providers.openai import DEFAULT_BASE_URL, parse_openai_error
from loom_nb.providers.openai_responses_wire import (
    ResponsesStreamAssembler,
    responses_request_body,
    responses_response,
)
from loom_nb.settings import ModelSettings

__all__ = ["OpenAIResponsesProvider", "decode_responses_events"]

VENDOR = "OpenAI"

_RESERVED = frozenset({"model", "input", "instructions", "tools", "stream", "store"})


def _is_default(base_url: str | None) -> bool:
    if base_url is None:
        return True
    return base_url.strip().rstrip("/").lower() in {
        "https://api.openai.com/v1",
        "https://api.openai.com",
    }


class OpenAIResponsesProvider(HttpProvider):
    """OpenAI models through the Responses API (text, images, PDFs, function calls, reasoning items).

    ``OpenAIResponsesProvider("gpt-5-mini")`` reads ``OPENAI_API_KEY``. Every call is stateless
    (``store: false``): the whole conversation is sent each time, and a reasoning model's
    encrypted reasoning comes back in ``response.reasoning`` (``ReasoningPart.data``) so the next
    turn can send it back. ``settings`` (a ``ModelSettings``) are the defaults under each
    request's and call's (``max_output_tokens``, ``reasoning.effort``; the API has no seed and
    no stop sequences, so those are refused). ``extra_body`` is merged into every body
    (``tool_choice``, ``reasoning: {summary: "auto"}``, ``truncation``); it may not contradict a
    setting. ``output_type=`` uses ``text.format`` json_schema. ``http_client`` injects an
    ``httpx.AsyncClient``; otherwise the provider owns one, closed by ``aclose()``. A streamed
    attempt ends after ``stream_deadline`` seconds in total (``stream_timeout``; None: no
    deadline), however often the server sends keep-alives.
    """

    _VENDOR = VENDOR
    _CAPABILITIES_KEY = "openai-responses"
    _NOT_JSON_REMEDY = "Check base_url (it should end in /v1)."

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        capabilities: Capabilities | None = None,
        http_client: httpx.AsyncClient | None = None,
        settings: ModelSettings | None = None,
        extra_body: Mapping[str, Any] | None = None,
        max_retries: int = 3,
        timeout: httpx.Timeout | float | None = DEFAULT_TIMEOUT,
        retry_policy: RetryPolicy | None = None,
        stream_deadline: float | None = DEFAULT_STREAM_DEADLINE,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(
                f"OpenAIResponsesProvider needs a model id string such as 'gpt-5-mini', not {model!r}.",
                code="invalid_model",
            )
        if api_key is not None and not isinstance(api_key, str):
            raise ConfigurationError(
                f"api_key must be a string, not {type(api_key).__name__}.", code="invalid_api_key"
            )
        self._key: Secret | None
        self._official = _is_default(base_url)
        if self._official:
            self._key = resolve_api_key(api_key, "OPENAI_API_KEY", VENDOR)
        else:
            self._key = Secret(api_key) if api_key else None
        extra = checked_extra_body(
            extra_body,
            _RESERVED,
            hint="Put tool_choice, truncation, reasoning.summary or metadata there.",
        )
        super().__init__(
            model,
            base_url=base_url,
            url=(base_url or DEFAULT_BASE_URL).rstrip("/") + "/responses",
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
        return responses_request_body(request, model=self.model, stream=stream)

    def _settings_fields(self, request: LlmRequest) -> dict[str, Any]:
        return openai_responses_settings_fields(
            request.settings, model=self.model, official=self._official
        )

    def _output_fields(self, request: LlmRequest, schema: dict[str, Any]) -> dict[str, Any]:
        strict_schema, strict = strict_openai_schema(schema)
        return {
            "text": {
                "format": {
                    "type": "json_schema",
                    "name": schema_name(schema),
                    "schema": strict_schema,
                    "strict": strict,
                }
            }
        }

    def _headers(self) -> dict[str, str]:
        headers = {"accept": "application/json"}
        if self._key is not None:
            headers["authorization"] = "Bearer " + self._key.reveal()
        return headers

    def _parse_response(self, data: Any) -> LlmResponse:
        return responses_response(data)

    def _parse_error(self, response: httpx.Response) -> ProviderError:
        return parse_openai_error(response)

    def _decode(self, events: AsyncIterator[SseEvent]) -> AsyncIterator[LlmStreamChunk]:
        return decode_responses_events(events)


async def decode_responses_events(
    events: AsyncIterator[SseEvent],
) -> AsyncIterator[LlmStreamChunk]:
    """The chunks of one streamed attempt (a fresh assembler per attempt), ending with ``done``."""
    assembler = ResponsesStreamAssembler()
    async for event in events:
        if event.data.strip() == "[DONE]":
            break
        data = decode_json(event.data, provider=VENDOR, what="a Responses stream event")
        try:
            if not isinstance(data, dict):
                raise TypeError("the event is not a JSON object")
            chunks = assembler.feed(data)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ProviderError(
                f"OpenAI sent a Responses stream event loom_nb cannot read ({event.event}: "
                f"{type(exc).__name__}: {exc}). Retry, or use complete().",
                code="malformed_response",
                provider=VENDOR,
            ) from exc
        for chunk in chunks:
            yield chunk
    yield LlmStreamChunk(kind="done", response=assembler.response())
