"""The conformance kit is green for OpenAIProvider, on OpenAI and on an OpenAI-compatible server."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from loom_nb.capabilities import Capabilities
from loom_nb.providers import OpenAIProvider, ProviderUnderTest, run_llm_provider_conformance
from tests.providers.raw import raw_factory

OPENAI_OK = {
    "id": "chatcmpl-c", "object": "chat.completion", "model": "gpt-4o",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}  # fmt: skip
OPENAI_SSE = (
    'data: {"id":"chatcmpl-c","choices":[{"index":0,"delta":{"role":"assistant","content":"ok"}}]}\n\n'
    'data: {"id":"chatcmpl-c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    'data: {"id":"chatcmpl-c","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}\n\n'
    "data: [DONE]\n\n"
)


def make_factory(base_url: str | None) -> Callable[[Capabilities], ProviderUnderTest]:
    """A factory of OpenAIProviders on a MockTransport that logs every request body."""

    def make(capabilities: Capabilities) -> ProviderUnderTest:
        log: list[httpx.Request] = []

        def handler(request: httpx.Request) -> httpx.Response:
            log.append(request)
            if json.loads(request.content).get("stream"):
                return httpx.Response(
                    200, content=OPENAI_SSE.encode(), headers={"content-type": "text/event-stream"}
                )
            return httpx.Response(200, json=OPENAI_OK)

        client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
        provider = OpenAIProvider(
            "gpt-4o", api_key="k", base_url=base_url, capabilities=capabilities, http_client=client
        )
        return ProviderUnderTest(provider, lambda: [r.content for r in log])

    return make


@pytest.mark.parametrize(
    "base_url", [None, "http://localhost:11434/v1"], ids=["openai", "compatible-server"]
)
async def test_openai_provider_conforms(base_url: str | None) -> None:
    """OpenAIProvider passes every conformance case, on OpenAI and on a compatible server."""
    cases = await run_llm_provider_conformance(make_factory(base_url))
    assert cases == [
        "undeclared_image_refused",
        "declared_image_on_wire",
        "text_parts_not_coerced",
        "tool_round_trip_paired",
        "settings_honoured_or_refused",
        "output_schema_on_wire",
        "foreign_reasoning_not_sent",
        "reasoning_outside_assistant_refused",
    ]


async def test_hardened_error_paths_conform() -> None:
    """OpenAIProvider passes the kit's hardened-error cases (echoed key, deep JSON) through make_raw."""
    cases = await run_llm_provider_conformance(
        make_factory(None), make_raw=raw_factory(OpenAIProvider, "gpt-4o")
    )
    assert cases[-2:] == ["echoed_key_redacted", "deep_json_malformed"]
