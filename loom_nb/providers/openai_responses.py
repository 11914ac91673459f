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

from collections.abc import AsyncIterator
from typing import Any

from loom_nb.content import LlmRequest, LlmResponse
from loom_nb.errors import ProviderError
from loom_nb.providers._base import LlmStreamChunk
from loom_nb.providers._http import SseEvent, decode_json
from loom_nb.providers._settings_wire import openai_responses_settings_fields
from loom_nb.providers._structured import openai_json_schema
from loom_nb.providers.openai import VENDOR, OpenAIEndpointProvider
from loom_nb.providers.openai_responses_wire import (
    ResponsesStreamAssembler,
    responses_request_body,
    responses_response,
)

__all__ = ["OpenAIResponsesProvider", "decode_responses_events"]


class OpenAIResponsesProvider(OpenAIEndpointProvider):
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
    deadline), however often the server sends keep-alives; a non-streamed one after
    ``request_deadline`` (``request_timeout``). A body, an SSE line or an SSE event over
    ``max_response_bytes`` is ``response_too_large``.
    """

    _CAPABILITIES_KEY = "openai-responses"
    _PATH = "/responses"
    _RESERVED = frozenset({"model", "input", "instructions", "tools", "stream", "store"})
    _EXTRA_BODY_HINT = "Put tool_choice, truncation, reasoning.summary or metadata there."

    def _body(self, request: LlmRequest, *, stream: bool) -> dict[str, Any]:
        return responses_request_body(request, model=self.model, stream=stream)

    def _settings_fields(self, request: LlmRequest) -> dict[str, Any]:
        return openai_responses_settings_fields(
            request.settings, model=self.model, official=self._official
        )

    def _output_fields(self, request: LlmRequest, schema: dict[str, Any]) -> dict[str, Any]:
        return {"text": {"format": {"type": "json_schema", **openai_json_schema(schema)}}}

    def _headers(self) -> dict[str, str]:
        return {"accept": "application/json", **self._key_header("authorization", "Bearer ")}

    def _parse_response(self, data: Any) -> LlmResponse:
        return responses_response(data)

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
