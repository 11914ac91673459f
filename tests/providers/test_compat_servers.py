"""OpenAI-compatible servers (issue 14 item 1): unknown metadata is kept, unknown content refused.

Bodies come from tests/fixtures/compat (each names its source). Anthropic and Gemini follow the
same liberal-where-lossless rule.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from loom_nb.content import LlmRequest, Message
from loom_nb.errors import ProviderError
from loom_nb.providers import OpenAIProvider, collect_stream
from loom_nb.providers.anthropic_wire import anthropic_response
from loom_nb.providers.gemini_wire import gemini_response
from loom_nb.providers.openai_answer import openai_response

COMPAT = Path(__file__).parent.parent / "fixtures" / "compat"
CASES: dict[str, Any] = json.loads((COMPAT / "openai-compatible.json").read_text())
ACCEPTED = [name for name in CASES if not name.startswith("_") and name != "audio_output_refused"]


@pytest.mark.parametrize("name", ACCEPTED)
def test_every_compatible_server_answer_is_accepted_with_nothing_lost(name: str) -> None:
    """Each recorded answer parses, and every field of it is either modeled or kept in provider_data."""
    body = CASES[name]["body"]
    response = openai_response(body)
    message = body["choices"][0]["message"]
    assert response.content == (message.get("content") or "")
    kept = json.dumps(response.model_dump(mode="json"))
    for key, value in body.items():
        if key in {"choices", "usage"} or value is None:
            continue
        assert json.dumps(value)[:40].strip('"') in kept, key
    for key, value in message.items():
        if value in (None, [], ""):
            continue
        assert (
            key in {"role", "content", "tool_calls"} or json.dumps(value)[:30].strip('"') in kept
        ), key


def test_unknown_top_level_and_choice_fields_land_in_provider_data() -> None:
    """llama.cpp's timings, Cerebras' time_info, vLLM's stop_reason: kept under their own names."""
    llama = openai_response(CASES["llamacpp_timings"]["body"])
    assert llama.provider_data["response_fields"]["timings"]["predicted_n"] == 9
    assert llama.reasoning[0].text == "Short question."
    cerebras = openai_response(CASES["cerebras_time_info"]["body"])
    assert cerebras.provider_data["response_fields"]["time_info"]["total_time"] == 0.006
    ollama = openai_response(CASES["ollama_reasoning"]["body"])
    assert ollama.reasoning[0].provider_data == {
        "vendor": "openai",
        "api": "chat",
        "field": "reasoning",
    }


def test_unknown_content_is_still_refused() -> None:
    """Audio output would be lost: the response is refused rather than half-read."""
    with pytest.raises(ProviderError) as info:
        openai_response(CASES["audio_output_refused"]["body"])
    assert info.value.code == "unsupported_response_content"


async def test_groq_stream_with_channel_and_reasoning_is_accepted() -> None:
    """A Groq gpt-oss stream ('channel': 'analysis', reasoning deltas, x_groq) streams and assembles."""
    body = (COMPAT / "groq-gpt-oss-stream.sse").read_bytes()
    client = httpx.AsyncClient(
        transport=httpx.MockTransport(
            lambda r: httpx.Response(
                200, content=body, headers={"content-type": "text/event-stream"}
            )
        )
    )
    provider = OpenAIProvider(
        "openai/gpt-oss-20b",
        base_url="https://api.groq.com/openai/v1",
        api_key="k",
        http_client=client,
    )
    thoughts: list[str] = []
    response = await collect_stream(
        provider.stream(LlmRequest(messages=[Message(role="user", content="q")])),
        on_reasoning=thoughts.append,
    )
    assert "".join(thoughts) == "User asks a lookup; call the tool."
    assert response.reasoning[0].text == "User asks a lookup; call the tool."
    assert response.reasoning[0].provider_data == {
        "vendor": "openai",
        "api": "chat",
        "field": "reasoning",
    }
    assert [(c.id, c.name, c.input) for c in response.tool_calls] == [("fc_1", "lookup", {"q": 1})]
    assert response.provider_data["message_fields"] == {"channel": "commentary"}
    assert response.provider_data["response_fields"]["x_groq"]["usage"]["total_tokens"] == 180
    assert response.usage.output_tokens == 30


def test_anthropic_unknown_block_fields_are_kept_and_unknown_blocks_refused() -> None:
    """A new field on a text or tool_use block is metadata (kept); a new block type is content (refused)."""
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [
            {"type": "text", "text": "hi", "cache_hint": "x"},
            {"type": "tool_use", "id": "t", "name": "f", "input": {}, "caller": {"type": "direct"}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    response = anthropic_response(body)
    assert response.provider_data["block_fields"] == [
        {"index": 0, "cache_hint": "x"},
        {"index": 1, "caller": {"type": "direct"}},
    ]
    body["content"] = [{"type": "hologram", "data": "..."}]
    with pytest.raises(ProviderError) as info:
        anthropic_response(body)
    assert info.value.code == "unsupported_response_content"


def test_gemini_unknown_part_metadata_is_kept_and_unknown_content_refused() -> None:
    """A known part kind with a new field is kept; a part with no content kind loom_nb knows is refused."""
    body = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [{"text": "hi", "videoMetadata": {"fps": 1}}],
                },
                "finishReason": "STOP",
            }
        ],
        "responseId": "r",
    }
    response = gemini_response(body)
    assert response.content == "hi"
    assert response.provider_data["part_fields"] == [{"index": 0, "videoMetadata": {"fps": 1}}]
    body["candidates"][0]["content"]["parts"] = [{"hologram": {"x": 1}}]
    with pytest.raises(ProviderError) as info:
        gemini_response(body)
    assert info.value.code == "unsupported_response_content"
