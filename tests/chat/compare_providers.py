"""Providers for the compare tests: answers that depend only on the input, so concurrency cannot
reorder them, and whose call counts and prices are known.

``echo_anthropic(prefix)`` is an AnthropicProvider over ``httpx.MockTransport`` (its model has a
price) answering ``<prefix> <last user text>`` with ``input_tokens = 10 + len(text)`` and
``output_tokens = 2 + len(text)``; ``Flaky`` is a provider without a price that refuses chosen
inputs and can answer in markdown.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from loom_nb import (
    AnthropicProvider,
    LlmRequest,
    LlmResponse,
    ProviderError,
    ScriptedProvider,
    Usage,
    text_of,
)


def usage_of(text: str) -> tuple[int, int]:
    """The (input, output) tokens the echo providers report for an input ``text``."""
    return 10 + len(text), 2 + len(text)


def echo_anthropic(prefix: str) -> tuple[AnthropicProvider, list[str]]:
    """A priced provider answering ``<prefix> <text>``; the texts it was asked, in call order."""
    asked: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        content = body["messages"][-1]["content"]
        text = content if isinstance(content, str) else content[-1]["text"]
        asked.append(text)
        tokens_in, tokens_out = usage_of(text)
        return httpx.Response(
            200,
            json={
                "id": f"msg_{len(asked)}",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": f"{prefix} {text}"}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out},
            },
        )

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    provider = AnthropicProvider("claude-sonnet-4-5", api_key="k", http_client=client)
    return provider, asked


class Flaky:
    """An unpriced provider: ``reply(text)`` answers, inputs in ``fail`` are refused (HTTP 400)."""

    name = "flaky"
    model = "flaky-1"

    def __init__(self, reply: Any = None, *, fail: set[str] | None = None) -> None:
        self.capabilities = ScriptedProvider([]).capabilities
        self.reply = reply or (lambda text: f"**{text}**")
        self.fail = set(fail or ())
        self.calls: list[str] = []

    async def complete(self, request: LlmRequest, **_options: Any) -> LlmResponse:
        text = text_of(request.messages[-1].content)  # raw-content: the item's text
        self.calls.append(text)
        if text in self.fail:
            raise ProviderError(
                f"the flaky server refused {text!r}.", code="invalid_request", status=400
            )
        tokens_in, tokens_out = usage_of(text)
        return LlmResponse(
            content=self.reply(text),
            usage=Usage(input_tokens=tokens_in, output_tokens=tokens_out),
        )

    async def stream(self, request: LlmRequest, **options: Any) -> Any:
        raise NotImplementedError  # the map never streams
