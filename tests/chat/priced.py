"""An Anthropic provider whose API is a script: offline, yet its model has a known price."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import httpx

from loom_nb import AnthropicProvider, LlmResponse, Usage
from loom_nb.chat._cost import price_for

ANTHROPIC = {
    "api_url": None,
    "model": "claude-sonnet-4-5",
    "provider": "AnthropicProvider",
    "vendor": "anthropic",
}


def anthropic(*answers: dict[str, Any]) -> tuple[AnthropicProvider, list[httpx.Request]]:
    """An AnthropicProvider whose API is a script (its price is known); the requests it sent."""
    sent: list[httpx.Request] = []
    queue = list(answers)

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        answer = queue.pop(0)
        content: list[dict[str, Any]] = []
        if "text" in answer:
            content.append({"type": "text", "text": answer["text"]})
        content += [{"type": "tool_use", **call} for call in answer.get("tool_calls", [])]
        return httpx.Response(
            200,
            json={
                "id": f"msg_{len(sent)}",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": content,
                "stop_reason": "tool_use" if answer.get("tool_calls") else "end_turn",
                "stop_sequence": None,
                "usage": answer["usage"],
            },
        )

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return AnthropicProvider("claude-sonnet-4-5", api_key="k", http_client=client), sent


def price(input_tokens: int, output_tokens: int) -> Decimal:
    """What genai-prices charges for that usage of claude-sonnet-4-5 (checked to be a price)."""
    usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens)
    found = price_for(ANTHROPIC, LlmResponse(usage=usage))
    assert found is not None
    assert found > 0
    return found
