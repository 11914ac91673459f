"""Thinking round trips per vendor (issue 14 item 2), against recorded traffic in tests/fixtures/compat.

Each test parses a vendor answer holding reasoning, rebuilds the assistant turn with
``assistant_message_of`` (as the agent loop and the journal do), and checks the next request's
wire body carries the reasoning exactly where and as the vendor requires it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from loom_nb.content import (
    LlmRequest,
    LlmResponse,
    Message,
    ReasoningPart,
    ToolResultPart,
    ToolSpec,
    assistant_message_of,
    canonical_json,
)
from loom_nb.providers import (
    AnthropicProvider,
    GeminiProvider,
    OpenAIProvider,
    collect_stream,
)
from loom_nb.providers.anthropic_wire import anthropic_response
from loom_nb.providers.gemini_wire import gemini_response
from loom_nb.providers.openai_answer import openai_response

COMPAT = Path(__file__).parent.parent / "fixtures" / "compat"
TOOL = ToolSpec(name="return_fruit", description="A fruit.", input_schema={"type": "object"})


def compat(name: str) -> Any:
    return json.loads((COMPAT / name).read_text())


def sse_client(name: str) -> httpx.AsyncClient:
    body = (COMPAT / name).read_bytes()
    return httpx.AsyncClient(
        transport=httpx.MockTransport(
            lambda r: httpx.Response(
                200, content=body, headers={"content-type": "text/event-stream"}
            )
        )
    )


def next_turn(response: LlmResponse, call_id: str | None) -> LlmRequest:
    """The request after ``response``: its assistant turn, then the tool's answer (or a question)."""
    follow: Message
    if call_id is None:
        follow = Message(role="user", content="and then?")
    else:
        follow = Message(role="user", content=[ToolResultPart(tool_use_id=call_id, content="ok")])
    return LlmRequest(
        tools=[TOOL],
        messages=[Message(role="user", content="q"), assistant_message_of(response), follow],
    )


def test_anthropic_thinking_and_tool_use_go_back_first_and_unchanged() -> None:
    """A recorded thinking + tool_use answer comes back as thinking block first, signature byte for byte."""
    body = compat("anthropic-thinking-tool-use.json")["body"]
    response = anthropic_response(body)
    assert [p.signature for p in response.reasoning] == [body["content"][0]["signature"]]
    assert response.reasoning[0].text == body["content"][0]["thinking"]
    assert "thinking" not in response.provider_data  # in reasoning, not duplicated
    provider = AnthropicProvider("claude-sonnet-4-0", api_key="k")
    wire = provider.wire_body(next_turn(response, response.tool_calls[0].id))
    assistant = wire["messages"][1]
    assert assistant["content"] == [body["content"][0], body["content"][1]]  # as the API sent them


def test_anthropic_thinking_survives_a_journal_round_trip() -> None:
    """Dumped to JSON and read back (as the journal stores it), the turn maps to the same wire body."""
    response = anthropic_response(compat("anthropic-thinking-tool-use.json")["body"])
    request = next_turn(response, response.tool_calls[0].id)
    again = LlmRequest.model_validate_json(canonical_json(request))
    provider = AnthropicProvider("claude-sonnet-4-0", api_key="k")
    assert provider.wire_body(again) == provider.wire_body(request)


async def test_anthropic_streamed_thinking_yields_reasoning_deltas_and_the_signature() -> None:
    """thinking_delta events stream as reasoning chunks; signature_delta completes the part."""
    provider = AnthropicProvider(
        "claude-sonnet-4-0", api_key="k", http_client=sse_client("anthropic-thinking-stream.sse")
    )
    thoughts: list[str] = []
    texts: list[str] = []
    response = await collect_stream(
        provider.stream(LlmRequest(messages=[Message(role="user", content="q")])),
        on_reasoning=thoughts.append,
        on_text=texts.append,
    )
    assert "".join(thoughts) == "This is a straightforward question about pedestrian safety."
    assert response.content == "".join(texts) == "Here's how to cross the street safely."
    [part] = response.reasoning
    assert part.text == "".join(thoughts)
    assert part.signature is not None
    assert part.signature.startswith("Eu4CCkYICxgC")
    assert part.signature.endswith("BpoJQGAE=")


async def test_anthropic_redacted_thinking_streams_and_goes_back_as_data() -> None:
    """Two redacted_thinking blocks become redacted parts and return as the same blocks."""
    provider = AnthropicProvider(
        "claude-sonnet-4-5",
        api_key="k",
        http_client=sse_client("anthropic-redacted-thinking-stream.sse"),
    )
    response = await collect_stream(
        provider.stream(LlmRequest(messages=[Message(role="user", content="q")]))
    )
    assert [p.redacted for p in response.reasoning] == [True, True]
    assert response.reasoning[0].data is not None
    assert response.reasoning[0].data.startswith("EqkECkYIBxgC")
    wire = provider.wire_body(next_turn(response, None))
    blocks = wire["messages"][1]["content"]
    assert [b["type"] for b in blocks] == ["redacted_thinking", "redacted_thinking", "text"]
    assert blocks[1] == {"type": "redacted_thinking", "data": response.reasoning[1].data}


def test_reasoning_of_another_vendor_is_left_out_of_the_wire() -> None:
    """A signature means nothing to another vendor: Anthropic thinking never reaches OpenAI or Gemini."""
    response = anthropic_response(compat("anthropic-thinking-tool-use.json")["body"])
    request = next_turn(response, response.tool_calls[0].id)
    openai_body = OpenAIProvider("gpt-4o", api_key="k").wire_body(request)
    gemini_body = GeminiProvider("gemini-2.5-flash", api_key="k").wire_body(request)
    signature = response.reasoning[0].signature
    assert signature is not None
    assert signature not in json.dumps(openai_body)
    assert signature not in json.dumps(gemini_body)


def test_deepseek_reasoning_content_goes_back_on_the_tool_calling_turn() -> None:
    """DeepSeek 400s a tool-calling turn without its reasoning_content: it is sent back there."""
    response = openai_response(
        compat("openai-compatible.json")["deepseek_thinking_tool_call"]["body"]
    )
    [part] = response.reasoning
    assert part.provider_data == {"vendor": "openai", "api": "chat", "field": "reasoning_content"}
    provider = OpenAIProvider("deepseek-chat", base_url="https://api.deepseek.com/v1", api_key="k")
    wire = provider.wire_body(next_turn(response, response.tool_calls[0].id))
    assistant = wire["messages"][1]
    assert assistant["reasoning_content"] == part.text
    assert assistant["tool_calls"][0]["id"] == "call_00_xq3RC1B9K2"


def test_reasoning_without_tool_calls_is_not_sent_back() -> None:
    """On a turn without calls servers ignore (or, old deepseek-reasoner, refuse) reasoning: it stays home."""
    response = openai_response(compat("openai-compatible.json")["deepseek_reasoner"]["body"])
    assert response.reasoning[0].text.startswith("Okay, the user wrote")
    assert response.content == "Hello! How can I assist you today?"
    provider = OpenAIProvider(
        "deepseek-reasoner", base_url="https://api.deepseek.com/v1", api_key="k"
    )
    assistant = provider.wire_body(next_turn(response, None))["messages"][1]
    assert assistant == {"role": "assistant", "content": "Hello! How can I assist you today?"}


def test_openrouter_reasoning_details_round_trip_with_the_field_name() -> None:
    """OpenRouter's reasoning and reasoning_details come back on the tool-calling turn as they came."""
    body = compat("openai-compatible.json")["openrouter_reasoning_details"]["body"]
    response = openai_response(body)
    [part] = response.reasoning
    assert part.text == "I need the weather first."
    assert response.provider_data["response_fields"] == {"provider": "Anthropic"}
    assert response.provider_data["choice_fields"] == {"native_finish_reason": "tool_use"}
    provider = OpenAIProvider(
        "anthropic/claude-sonnet-4.5", base_url="https://openrouter.ai/api/v1", api_key="k"
    )
    assistant = provider.wire_body(next_turn(response, "toolu_01abc"))["messages"][1]
    message = body["choices"][0]["message"]
    assert assistant["reasoning"] == message["reasoning"]
    assert assistant["reasoning_details"] == message["reasoning_details"]


def test_gemini_compat_thought_signature_on_a_tool_call_round_trips() -> None:
    """extra_content.google.thought_signature is kept on the call and sent back on it unchanged."""
    body = compat("openai-compatible.json")["gemini_openai_compat_signature"]["body"]
    response = openai_response(body)
    [call] = response.tool_calls
    assert call.input == {"productId": "P-KURTA-RED"}
    provider = OpenAIProvider(
        "gemini-3-pro-preview",
        base_url="https://generativelanguage.googleapis.com/v1beta/openai",
        api_key="k",
    )
    sent = provider.wire_body(next_turn(response, call.id))["messages"][1]["tool_calls"][0]
    assert sent["extra_content"] == {"google": {"thought_signature": "EocDCoQDAdHtim9opaque"}}
    assert sent["id"] == "call_20038"
    assert json.loads(sent["function"]["arguments"]) == {"productId": "P-KURTA-RED"}


def gemini_thought_body() -> dict[str, Any]:
    # Shape of a Gemini 2.5/3 generateContent answer with includeThoughts: a thought summary part,
    # then a signed functionCall (ai.google.dev/gemini-api/docs/thinking, thought signatures).
    return {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": "**Planning** I should look it up.", "thought": True},
                        {
                            "functionCall": {"name": "return_fruit", "args": {"name": "kiwi"}},
                            "thoughtSignature": "CiQBVKhc7sig==",
                        },
                    ],
                },
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 10,
            "candidatesTokenCount": 5,
            "thoughtsTokenCount": 40,
        },
        "modelVersion": "gemini-2.5-flash",
        "responseId": "rid1",
    }


def test_gemini_thought_parts_become_reasoning_and_go_back_first() -> None:
    """A thought part is reasoning (not answer text) and returns as a thought part before the call."""
    response = gemini_response(gemini_thought_body())
    assert response.content == ""
    assert [p.text for p in response.reasoning] == ["**Planning** I should look it up."]
    assert "thoughts" not in response.provider_data
    provider = GeminiProvider("gemini-2.5-flash", api_key="k")
    parts = provider.wire_body(next_turn(response, response.tool_calls[0].id))["contents"][1][
        "parts"
    ]
    assert parts[0] == {"text": "**Planning** I should look it up.", "thought": True}
    assert parts[1]["thoughtSignature"] == "CiQBVKhc7sig=="


def test_gemini_streamed_thought_pieces_are_one_part() -> None:
    """Thought text split over stream events assembles into one reasoning part, as unstreamed."""
    body = gemini_thought_body()
    parts = body["candidates"][0]["content"]["parts"]
    parts[:1] = [
        {"text": "**Planning** I should", "thought": True},
        {"text": " look it up.", "thought": True},
    ]
    response = gemini_response(body)
    assert [p.text for p in response.reasoning] == ["**Planning** I should look it up."]


@pytest.mark.parametrize("vendor", ["anthropic", "openai", "gemini"])
def test_user_built_reasoning_without_a_vendor_is_never_sent(vendor: str) -> None:
    """A reasoning part no vendor wrote (provider_data unset) reaches no wire body."""
    request = LlmRequest(
        messages=[
            Message(role="user", content="q"),
            Message(role="assistant", content=[ReasoningPart(text="SECRET-NOTE"), *[]]),
            Message(role="user", content="more"),
        ]
    )
    provider: Any = {
        "anthropic": AnthropicProvider("claude-sonnet-4-0", api_key="k"),
        "openai": OpenAIProvider("gpt-4o", api_key="k"),
        "gemini": GeminiProvider("gemini-2.5-flash", api_key="k"),
    }[vendor]
    assert "SECRET-NOTE" not in json.dumps(provider.wire_body(request))
