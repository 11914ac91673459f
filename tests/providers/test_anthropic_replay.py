"""Every Anthropic recording replayed through AnthropicProvider over httpx.MockTransport.

For each recorded call the same conversation is rebuilt in the canonical shape, sent through the
provider, and (1) the body we send is compared field for field with the recorded one, and (2) the
recorded answer is parsed and checked against values pinned from the recording.

Fields the recordings' clients added that the canonical request does not model, and so are
ignored in the comparison: ``tool_choice`` (pydantic-ai, opencode), ``temperature`` (llm-anthropic,
opencode), ``output_config`` (pydantic-ai's effort test). Two spellings are normalised: a
``system`` sent as a one-text-block list (opencode) equals the plain string we send, and a
``tool_result`` without ``is_error`` (llm-anthropic) equals ``is_error: false``, which we always send.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from loom_nb.content import (
    DataSource,
    FilePart,
    ImagePart,
    LlmRequest,
    LlmResponse,
    Message,
    Part,
    TextPart,
    ToolResultPart,
    ToolSpec,
    ToolUsePart,
)
from loom_nb.errors import ProviderError
from loom_nb.providers import AnthropicProvider, LlmStreamChunk, collect_stream
from loom_nb.providers._http import RetryPolicy
from tests.providers.recordings import ReplayTransport, load_recording, recording_paths

CLIENT_ADDED = frozenset({"tool_choice", "temperature", "output_config", "metadata"})


def _block_to_part(block: dict[str, Any]) -> Part:
    kind = block["type"]
    if kind == "text":
        return TextPart(text=block["text"])
    if kind == "image":
        src = block["source"]
        return ImagePart(media_type=src["media_type"], source=DataSource(data=src["data"]))
    if kind == "document":
        src = block["source"]
        return FilePart(media_type=src["media_type"], source=DataSource(data=src["data"]))
    if kind == "tool_use":
        return ToolUsePart(id=block["id"], name=block["name"], input=block["input"])
    if kind == "tool_result":
        content = block["content"]
        if isinstance(content, list):
            content = [_block_to_part(b) for b in content]
        return ToolResultPart(
            tool_use_id=block["tool_use_id"], content=content, is_error=block.get("is_error", False)
        )
    raise AssertionError(f"recording holds a block type the test does not know: {kind}")


def canonical_of(body: dict[str, Any]) -> LlmRequest:
    """The canonical request for a recorded Anthropic body (the same conversation)."""
    system = body.get("system")
    if isinstance(system, list):
        system = "".join(block["text"] for block in system)
    messages = []
    for message in body["messages"]:
        content = message["content"]
        parts = content if isinstance(content, str) else [_block_to_part(b) for b in content]
        messages.append(Message(role=message["role"], content=parts))
    tools = [ToolSpec(**tool) for tool in body.get("tools", [])]
    return LlmRequest(messages=messages, tools=tools, system=system)


def normalised(body: dict[str, Any]) -> dict[str, Any]:
    """The body without client-added fields, in the spellings described in the module docstring."""
    out = {k: v for k, v in body.items() if k not in CLIENT_ADDED}
    if isinstance(out.get("system"), list):
        out["system"] = "".join(block["text"] for block in out["system"])
    for message in out["messages"]:
        if isinstance(message["content"], list):
            for block in message["content"]:
                if block["type"] == "tool_result":
                    block.setdefault("is_error", False)
    return out


INTERACTIONS = [
    pytest.param(path, index, id=f"{path.name}#{index}")
    for path in recording_paths("anthropic")
    for index in range(len(load_recording(path).interactions))
]


async def replay(
    path: Any, index: int
) -> tuple[LlmResponse | ProviderError, dict[str, Any], dict[str, Any]]:
    """Send the recorded conversation through the provider; return the outcome, our body and theirs."""
    recording = load_recording(path)
    interaction = recording.interactions[index]
    recorded = interaction.request.json()
    single = type(recording)(recording.path, [interaction], recording.storage_format)
    transport = ReplayTransport(single)
    provider = AnthropicProvider(
        recorded["model"],
        api_key="sk-ant-test-key",
        http_client=transport.client(),
        max_tokens=recorded["max_tokens"],
        retry_policy=RetryPolicy(max_retries=0),
    )
    request = canonical_of(recorded)
    outcome: LlmResponse | ProviderError
    try:
        if recorded.get("stream"):
            outcome = await collect_stream(provider.stream(request))
        else:
            outcome = await provider.complete(request)
    except ProviderError as exc:
        outcome = exc
    assert len(transport.requests) == 1
    sent = transport.requests[0]
    assert sent.url.path == "/v1/messages"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers["x-api-key"] == "sk-ant-test-key"
    return outcome, json.loads(sent.content), recorded


@pytest.mark.parametrize(("path", "index"), INTERACTIONS)
async def test_our_body_matches_the_recorded_body(path: Any, index: int) -> None:
    """Mapping the recorded conversation gives the recorded body field for field (modulo client extras)."""
    _, ours, recorded = await replay(path, index)
    if path.name == "error-400-tool-use-without-result.json":
        # The recorded client put text after the tool_use and got a 400; we send text first.
        assert [b["type"] for b in recorded["messages"][0]["content"]] == ["tool_use", "text"]
        assert [b["type"] for b in ours["messages"][0]["content"]] == ["text", "tool_use"]
        ours["messages"][0]["content"].reverse()
    assert normalised(ours) == normalised(recorded)


def usage_of(response: LlmResponse) -> tuple[int, int]:
    return response.usage.input_tokens, response.usage.output_tokens


EXPECTED: dict[tuple[str, int], dict[str, Any]] = {
    ("tool-roundtrip-nonstream.yaml", 0): {
        "calls": [("toolu_01WN4AuToBnJyXNQXwQBBebj", "get_weather", {"city": "Paris"})],
        "stop": "tool_use", "usage": (572, 53), "text": "",
    },
    ("tool-roundtrip-nonstream.yaml", 1): {
        "calls": [], "stop": "end_turn", "usage": (646, 31), "text": "The weather in Paris is currently sunny",
    },
    ("parallel-tool-calls-with-system.yaml", 0): {
        "calls": [
            ("toolu_0167cfEnoQaPviGdVXA95zcu", "retrieve_entity_info", {"name": "Alice"}),
            ("toolu_01EEe2V5HD1Ac4rKiUR4HD2T", "retrieve_entity_info", {"name": "Bob"}),
            ("toolu_01XFyAjstT3966qvRynZyVPo", "retrieve_entity_info", {"name": "Charlie"}),
            ("toolu_013mnQZbgtK2oe3Mo3XKJsx3", "retrieve_entity_info", {"name": "Daisy"}),
        ],
        "stop": "tool_use", "text": "I'll help you find out who is the youngest",
    },
    ("parallel-tool-calls-with-system.yaml", 1): {"calls": [], "stop": "end_turn", "text": "Based on the retrieved information"},
    ("pdf-document-input.yaml", 0): {"calls": [], "stop": "end_turn", "text": 'The document simply contains the text "Dummy PDF file"'},
    ("tool-result-with-image.yaml", 0): {
        "calls": [("toolu_01UHzuh9hCDgj8wZUA6m9ReX", "get_file", {})], "stop": "tool_use",
        "text": "I'll retrieve the file for you now.",
    },
    ("tool-result-with-image.yaml", 1): {"calls": [], "stop": "end_turn", "text": "I received an image showing a cross-section of a kiwi"},
    ("tool-result-with-pdf.yaml", 0): {
        "calls": [("toolu_01HzDtXgiLkmwF8S4CJyBPHZ", "get_file", {})], "stop": "tool_use",
        "text": "I'll retrieve the document file for you.",
    },
    ("tool-result-with-pdf.yaml", 1): {"calls": [], "stop": "end_turn", "text": "I received a PDF document"},
    ("stream-image-input-png.yaml", 0): {"calls": [], "stop": "end_turn", "usage": (83, 9), "text": "Red"},
    ("stream-parallel-tools-roundtrip.yaml", 0): {
        "calls": [("toolu_01LtHJmixrs9NcWQkK8hu8hj", "pelican_name_generator", {}),
                  ("toolu_01N8a4jWyf116qKTMqKKmjyt", "pelican_name_generator", {})],
        "stop": "tool_use", "usage": (542, 62),
    },
    ("stream-parallel-tools-roundtrip.yaml", 1): {"calls": [], "stop": "end_turn", "usage": (678, 82)},
    ("stream-tool-call-input-json-delta.json", 0): {
        "calls": [("toolu_01NGuJD7Pku4wqQzegRiBDyH", "get_weather", {"city": "Paris"})],
        "stop": "tool_use", "usage": (677, 33), "text": "",
    },
}  # fmt: skip

ERRORS = {
    "error-400-invalid-request.yaml": ("does not support effort level 'xhigh'", "req_011Ca7jT9AHpgXgdv8igm4z9"),
    "error-400-tool-use-without-result.json": ("`tool_use` ids were found without `tool_result`", "req_011Cak2XdJgnzxKCY2BC2Beh"),
}  # fmt: skip


def test_every_recording_has_pinned_expectations() -> None:
    """No Anthropic recording goes unchecked: each interaction is pinned above or is an error."""
    names = {(p.values[0].name, p.values[1]) for p in INTERACTIONS}
    assert names == set(EXPECTED) | {(name, 0) for name in ERRORS}


@pytest.mark.parametrize(("path", "index"), INTERACTIONS)
async def test_recorded_answer_is_parsed(path: Any, index: int) -> None:
    """The recorded answer parses to the pinned text, tool calls, stop reason and usage (or error)."""
    outcome, _, _ = await replay(path, index)
    if path.name in ERRORS:
        assert isinstance(outcome, ProviderError)
        message, request_id = ERRORS[path.name]
        assert outcome.status == 400
        assert outcome.error_type == "invalid_request_error"
        assert outcome.code == "invalid_request"
        assert message in outcome.message
        assert outcome.details["request_id"] == request_id
        assert outcome.retryable is False
        return
    assert isinstance(outcome, LlmResponse), outcome
    expected = EXPECTED[(path.name, index)]
    assert [(c.id, c.name, c.input) for c in outcome.tool_calls] == expected["calls"]
    assert outcome.stop_reason == expected["stop"]
    assert outcome.provider_data["stop_reason"] == expected["stop"]
    assert outcome.provider_data["id"].startswith("msg_")
    assert outcome.model is not None
    assert outcome.model.startswith("claude-")
    if "usage" in expected:
        assert usage_of(outcome) == expected["usage"]
    else:
        assert outcome.usage.input_tokens > 0
        assert outcome.usage.output_tokens > 0
    if "text" in expected:
        assert outcome.content.startswith(expected["text"])


async def test_streamed_image_answer_text_is_the_concatenated_deltas() -> None:
    """The PNG stream's text deltas arrive as text chunks and join to the final content."""
    recording = load_recording("anthropic/stream-image-input-png.yaml")
    transport = ReplayTransport(recording)
    provider = AnthropicProvider("claude-sonnet-4-5", api_key="k", http_client=transport.client())
    request = canonical_of(recording.interactions[0].request.json())
    chunks: list[LlmStreamChunk] = [c async for c in provider.stream(request)]
    texts = [c.text for c in chunks if c.kind == "text"]
    assert len(texts) == 5
    assert chunks[-1].kind == "done"
    assert chunks[-1].response is not None
    assert "".join(texts) == chunks[-1].response.content


async def test_streamed_tool_call_deltas_carry_id_name_then_fragments() -> None:
    """The input_json_delta stream gives a first delta with id and name, then the JSON fragments."""
    recording = load_recording("anthropic/stream-tool-call-input-json-delta.json")
    transport = ReplayTransport(recording)
    provider = AnthropicProvider("claude-haiku-4-5", api_key="k", http_client=transport.client())
    deltas = []
    response = await collect_stream(
        provider.stream(canonical_of(recording.interactions[0].request.json())),
        on_tool_delta=deltas.append,
    )
    assert deltas[0].id == "toolu_01NGuJD7Pku4wqQzegRiBDyH"
    assert deltas[0].name == "get_weather"
    assert [d.input_json for d in deltas[1:]] == ['{"city', '": "Paris"}']
    assert {d.index for d in deltas} == {0}
    assert json.loads("".join(d.input_json for d in deltas)) == response.tool_calls[0].input


async def test_gzip_stream_with_two_zero_argument_calls() -> None:
    """The gzip-stored stream with two parallel no-argument calls yields two calls with input {}."""
    recording = load_recording("anthropic/stream-parallel-tools-roundtrip.yaml")
    assert recording.interactions[0].response.headers["content-encoding"] == "gzip"
    transport = ReplayTransport(recording)
    provider = AnthropicProvider("claude-haiku-4-5", api_key="k", http_client=transport.client())
    deltas = []
    response = await collect_stream(
        provider.stream(canonical_of(recording.interactions[0].request.json())),
        on_tool_delta=deltas.append,
    )
    assert [(d.index, d.id) for d in deltas] == [
        (0, "toolu_01LtHJmixrs9NcWQkK8hu8hj"),
        (1, "toolu_01N8a4jWyf116qKTMqKKmjyt"),
    ]
    assert [c.input for c in response.tool_calls] == [{}, {}]


def test_replay_client_is_an_httpx_client() -> None:
    """The replay helper builds a real httpx.AsyncClient (nothing is patched)."""
    transport = ReplayTransport(load_recording("anthropic/error-400-invalid-request.yaml"))
    assert isinstance(transport.client(), httpx.AsyncClient)
