"""Prompt-cache usage from each vendor's published responses, streamed and not, and its price.

Where each response comes from is said per test. Only Anthropic has a public recording whose
cache counts are not zero (``tests/fixtures/provider-traffic-cache``); for OpenAI and Gemini the
tests take a real recorded body from ``tests/fixtures/provider-traffic`` and put in the usage a
published source reports, saying so.
"""

from __future__ import annotations

import copy
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
from genai_prices import Usage as PriceUsage
from genai_prices import calc_price

from loom_nb.chat._cost import price_of
from loom_nb.content import LlmRequest, LlmResponse, Message, Usage
from loom_nb.providers import (
    AnthropicProvider,
    GeminiProvider,
    OpenAIProvider,
    OpenAIResponsesProvider,
    collect_stream,
)
from loom_nb.providers.anthropic_wire import AnthropicStreamAssembler, anthropic_response
from loom_nb.providers.gemini_wire import gemini_response
from loom_nb.providers.openai_answer import openai_response
from tests.providers.recordings import load_recording

CACHE_TRAFFIC = Path(__file__).resolve().parent.parent / "fixtures" / "provider-traffic-cache"
REQUEST = LlmRequest(messages=[Message(role="user", content="hi")])


def anthropic_cache_recording() -> list[dict[str, Any]]:
    """The two real response bodies of pydantic-ai's cache recording (see SOURCES.md there)."""
    doc = json.loads((CACHE_TRAFFIC / "anthropic" / "cache-messages-nonstream.json").read_text())
    return [interaction["response"]["body"] for interaction in doc["interactions"]]


def transport_of(bodies: list[bytes], content_type: str = "application/json") -> httpx.AsyncClient:
    """A client whose transport answers the given bodies in order."""
    queue = list(bodies)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=queue.pop(0), headers={"content-type": content_type})

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


# -- Anthropic ---------------------------------------------------------------------------------


def test_anthropic_recorded_cache_write_then_read() -> None:
    """The recording's first call wrote 1,111 tokens to the cache, the second read them back:
    input counts every token, the split is kept."""
    first, second = (anthropic_response(body) for body in anthropic_cache_recording())
    assert first.usage == Usage(
        input_tokens=3 + 1111, output_tokens=391, cache_read_tokens=0, cache_write_tokens=1111
    )
    assert second.usage == Usage(
        input_tokens=3 + 403 + 1111,
        output_tokens=33,
        cache_read_tokens=1111,
        cache_write_tokens=403,
    )


async def test_anthropic_recorded_cache_usage_through_the_provider() -> None:
    """The same bodies served over httpx give the same usage through AnthropicProvider.complete."""
    bodies = [json.dumps(b).encode() for b in anthropic_cache_recording()]
    provider = AnthropicProvider(
        "claude-sonnet-4-5", api_key="k" * 20, http_client=transport_of(bodies)
    )
    first = await provider.complete(REQUEST)
    second = await provider.complete(REQUEST)
    assert (first.usage.cache_write_tokens, second.usage.cache_read_tokens) == (1111, 1111)


def test_anthropic_streamed_cache_usage() -> None:
    """Streamed: the SSE events of the real stream fixture anthropic/stream-tool-call-input-json-delta.json
    (opencode), with the usage objects of the cache recording's second call in message_start and
    message_delta (no public stream with non-zero cache counts was found), assemble the same usage
    as the non-streamed body."""
    recorded = load_recording("anthropic/stream-tool-call-input-json-delta.json")
    usage = anthropic_cache_recording()[1]["usage"]
    assembler = AnthropicStreamAssembler()
    response: LlmResponse | None = None
    for block in recorded.interactions[0].response.body.decode().split("\n\n"):
        data_lines = [line[6:] for line in block.splitlines() if line.startswith("data: ")]
        if not data_lines:
            continue
        event = json.loads(data_lines[0])
        if event["type"] == "message_start":
            event["message"]["usage"] = dict(usage, output_tokens=1)
        elif event["type"] == "message_delta":
            event["usage"] = {k: usage[k] for k in usage if k != "cache_creation"}
        for chunk in assembler.feed(event):
            if chunk.kind == "done":
                response = chunk.response
    assert response is not None
    assert response.tool_calls
    assert response.usage == anthropic_response(anthropic_cache_recording()[1]).usage


# -- OpenAI ------------------------------------------------------------------------------------

# A usage object of a real Chat Completions call, logged verbatim in a public repository's
# activity log (xn-intenton-z2a/agentic-lib, intentïon activity log of 2025-05-27).
LOGGED_OPENAI_USAGE = {
    "prompt_tokens": 20897,
    "completion_tokens": 5706,
    "total_tokens": 26603,
    "prompt_tokens_details": {"cached_tokens": 1536, "audio_tokens": 0},
    "completion_tokens_details": {
        "reasoning_tokens": 4608,
        "audio_tokens": 0,
        "accepted_prediction_tokens": 0,
        "rejected_prediction_tokens": 0,
    },
}

# The usage of the example response in OpenAI's prompt-caching guide
# (platform.openai.com/docs/guides/prompt-caching, "Requirements").
OPENAI_GUIDE_USAGE = {
    "prompt_tokens": 2006,
    "completion_tokens": 300,
    "total_tokens": 2306,
    "prompt_tokens_details": {"cached_tokens": 1920},
    "completion_tokens_details": {
        "reasoning_tokens": 0,
        "accepted_prediction_tokens": 0,
        "rejected_prediction_tokens": 0,
    },
}


def openai_body_with(usage: dict[str, Any]) -> dict[str, Any]:
    """The real recorded answer of openai/tool-roundtrip-nonstream.yaml with ``usage`` in it."""
    body = load_recording("openai/tool-roundtrip-nonstream.yaml").interactions[1].response.json()
    return {**body, "usage": usage}


def test_openai_cached_tokens_are_read() -> None:
    """prompt_tokens_details.cached_tokens becomes cache_read_tokens; input keeps all prompt tokens."""
    logged = openai_response(openai_body_with(LOGGED_OPENAI_USAGE)).usage
    assert logged == Usage(input_tokens=20897, output_tokens=5706, cache_read_tokens=1536)
    guide = openai_response(openai_body_with(OPENAI_GUIDE_USAGE)).usage
    assert (guide.input_tokens, guide.cache_read_tokens) == (2006, 1920)


def test_openai_cache_writes_and_deepseek_hits_are_read() -> None:
    """Servers that report writes (prompt_tokens_details.cache_write_tokens, in the SDK's
    PromptTokensDetails) or DeepSeek's prompt_cache_hit_tokens fill the split too."""
    writes = dict(
        OPENAI_GUIDE_USAGE, prompt_tokens_details={"cached_tokens": 0, "cache_write_tokens": 2000}
    )
    assert openai_response(openai_body_with(writes)).usage.cache_write_tokens == 2000
    deepseek = {
        "prompt_tokens": 1236,
        "completion_tokens": 95,
        "prompt_cache_hit_tokens": 1024,
        "prompt_cache_miss_tokens": 212,
    }
    assert openai_response(openai_body_with(deepseek)).usage.cache_read_tokens == 1024


async def test_openai_streamed_cached_tokens() -> None:
    """Streamed: the real SSE of openai/stream-tool-call-roundtrip.yaml (pydantic-ai), whose final
    usage chunk gets prompt_tokens_details.cached_tokens = 32 (set here), assembles
    cache_read_tokens."""
    recorded = load_recording("openai/stream-tool-call-roundtrip.yaml").interactions[0]
    lines = []
    for line in recorded.response.body.decode().split("\n"):
        if line.startswith("data: {") and '"usage":{' in line.replace(" ", ""):
            event = json.loads(line[6:])
            if event.get("usage"):
                event["usage"]["prompt_tokens_details"] = {"cached_tokens": 32, "audio_tokens": 0}
                line = "data: " + json.dumps(event)
        lines.append(line)
    client = transport_of(["\n".join(lines).encode()], "text/event-stream")
    provider = OpenAIProvider("gpt-4o-mini", api_key="k" * 20, http_client=client)
    response = await collect_stream(provider.stream(REQUEST))
    assert response.usage.cache_read_tokens == 32
    assert response.usage.input_tokens == 53  # the recorded prompt_tokens, cached ones included


async def test_openai_responses_cached_tokens() -> None:
    """Responses API: input_tokens_details.cached_tokens (the SDK's ResponseUsage) is read."""
    body = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-5-mini",
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "hi", "annotations": []}],
            }
        ],
        "usage": {
            "input_tokens": 2006,
            "output_tokens": 300,
            "total_tokens": 2306,
            "input_tokens_details": {"cached_tokens": 1920},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }
    provider = OpenAIResponsesProvider(
        "gpt-5-mini", api_key="k" * 20, http_client=transport_of([json.dumps(body).encode()])
    )
    response = await provider.complete(REQUEST)
    assert response.usage == Usage(input_tokens=2006, output_tokens=300, cache_read_tokens=1920)


# -- Gemini ------------------------------------------------------------------------------------


def gemini_body(cached: int) -> dict[str, Any]:
    """The real answer of gemini/tool-roundtrip-nonstream.yaml with cachedContentTokenCount set.

    No public recording carries the field; its meaning is the API reference's (UsageMetadata:
    "Number of tokens in the cached part of the prompt"; promptTokenCount "includes the number of
    tokens in the cached content")."""
    body = load_recording("gemini/tool-roundtrip-nonstream.yaml").interactions[1].response.json()
    body = copy.deepcopy(body)
    body["usageMetadata"]["cachedContentTokenCount"] = cached
    return body


def test_gemini_implicit_cache_is_reported() -> None:
    """cachedContentTokenCount becomes cache_read_tokens, within promptTokenCount."""
    body = gemini_body(32)
    usage = gemini_response(body).usage
    assert usage.cache_read_tokens == 32
    assert usage.input_tokens == body["usageMetadata"]["promptTokenCount"]


async def test_gemini_streamed_cache_is_reported() -> None:
    """Streamed: the real SSE of gemini/stream-tool-loop-system-instruction.json (opencode), whose
    usageMetadata gets cachedContentTokenCount, reports it on the assembled response."""
    recorded = load_recording("gemini/stream-tool-loop-system-instruction.json").interactions[0]
    events = []
    for block in recorded.response.body.decode().replace("\r\n", "\n").split("\n\n"):
        if block.startswith("data: "):
            event = json.loads(block[6:])
            if "usageMetadata" in event:
                event["usageMetadata"]["cachedContentTokenCount"] = 7
            events.append("data: " + json.dumps(event))
    client = transport_of(["\n\n".join(events).encode() + b"\n\n"], "text/event-stream")
    provider = GeminiProvider("gemini-2.5-flash", api_key="k" * 20, http_client=client)
    response = await collect_stream(provider.stream(REQUEST))
    assert response.usage.cache_read_tokens == 7


# -- cost --------------------------------------------------------------------------------------


def genai_price(model: str, vendor: str, **usage: int) -> Decimal:
    return calc_price(PriceUsage(**usage), model, provider_id=vendor).total_price


def test_issue_example_cost_uses_the_split() -> None:
    """900 of 1,000 input tokens read from the cache: $0.00072 (genai-prices with the split), not
    the $0.00315 of pricing every input token at the full rate."""
    provider = AnthropicProvider("claude-sonnet-4-5", api_key="k" * 20)
    response = LlmResponse(
        model="claude-sonnet-4-5",
        usage=Usage(input_tokens=1000, output_tokens=10, cache_read_tokens=900),
    )
    assert price_of(provider, response) == Decimal("0.00072")
    assert genai_price(
        "claude-sonnet-4-5", "anthropic", input_tokens=1000, output_tokens=10
    ) == Decimal("0.00315")


def test_recorded_anthropic_cost_matches_genai_prices_with_the_split() -> None:
    """Both recorded calls cost what genai-prices says for their read/write split."""
    provider = AnthropicProvider("claude-sonnet-4-5", api_key="k" * 20)
    for body in anthropic_cache_recording():
        response = anthropic_response(body)
        u = response.usage
        expected = genai_price(
            "claude-sonnet-4-5-20250929",
            "anthropic",
            input_tokens=u.input_tokens,
            output_tokens=u.output_tokens,
            cache_read_tokens=u.cache_read_tokens,
            cache_write_tokens=u.cache_write_tokens,
        )
        assert price_of(provider, response) == expected
        flat = genai_price(
            "claude-sonnet-4-5-20250929",
            "anthropic",
            input_tokens=u.input_tokens,
            output_tokens=u.output_tokens,
        )
        assert expected != flat


def test_anthropic_one_hour_writes_are_priced_at_their_rate() -> None:
    """Writes the raw usage puts in the 1-hour cache (cache_creation.ephemeral_1h_input_tokens)
    cost the 1-hour rate."""
    body = copy.deepcopy(anthropic_cache_recording()[0])
    body["usage"]["cache_creation"] = {
        "ephemeral_1h_input_tokens": 1111,
        "ephemeral_5m_input_tokens": 0,
    }
    response = anthropic_response(body)
    provider = AnthropicProvider("claude-sonnet-4-5", api_key="k" * 20)
    expected = genai_price(
        "claude-sonnet-4-5-20250929",
        "anthropic",
        input_tokens=1114,
        output_tokens=391,
        cache_write_tokens=1111,
        cache_write_1h_tokens=1111,
    )
    assert price_of(provider, response) == expected
    assert expected > price_of(provider, anthropic_response(anthropic_cache_recording()[0]))


def test_openai_and_gemini_cost_with_cached_tokens() -> None:
    """OpenAI and Gemini answers are priced with their cached share at the cached rate."""
    openai = openai_response(openai_body_with(OPENAI_GUIDE_USAGE))
    price = price_of(OpenAIProvider("gpt-5-mini", api_key="k" * 20), openai)
    assert price == genai_price(
        openai.model or "", "openai", input_tokens=2006, output_tokens=300, cache_read_tokens=1920
    )
    gemini = gemini_response(gemini_body(32))
    u = gemini.usage
    assert price_of(GeminiProvider("gemini-2.5-flash", api_key="k" * 20), gemini) == genai_price(
        "gemini-2.5-flash",
        "google",
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        cache_read_tokens=32,
    )


def test_usage_without_cache_serializes_as_before() -> None:
    """Old journals read the same: a usage without cache counts has the bytes it always had, and
    an old usage dict validates with zero cache counts."""
    assert (
        Usage(input_tokens=5, output_tokens=2).model_dump_json()
        == '{"input_tokens":5,"output_tokens":2}'
    )
    old = Usage.model_validate({"input_tokens": 5, "output_tokens": 2})
    assert (old.cache_read_tokens, old.cache_write_tokens) == (0, 0)
    assert '"provider"' not in LlmResponse().model_dump_json()
    both = Usage(input_tokens=5, cache_read_tokens=3, cache_write_tokens=1)
    assert Usage.model_validate_json(both.model_dump_json()) == both
