"""OpenAI Chat Completions mapping against the recorded traffic: request bodies and responses.

Each recorded conversation is rebuilt in the canonical shape (turn 2 threads the parsed turn-1
response through ``assistant_message_of``), mapped, and compared field for field with the body
the recording's client sent, after removing only the fields that client added on its own:

- ``tool_choice`` (pydantic-ai and opencode send it; the canonical request has no tool choice),
- ``stream: false`` and ``n: 1`` (pydantic-ai spells out the defaults),
- ``tools[].function.strict`` (pydantic-ai's strict mode),
- ``max_tokens`` and ``temperature`` (opencode's sampling settings; ``extra_body`` on the provider).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx
import pytest

from loom_nb.content import (
    AudioPart,
    DataSource,
    FilePart,
    ImagePart,
    LlmRequest,
    Message,
    TextPart,
    ToolResultPart,
    ToolSpec,
    assistant_message_of,
)
from loom_nb.providers._http import iter_sse
from loom_nb.providers.openai_answer import OpenAIStreamAssembler, openai_response
from loom_nb.providers.openai_wire import openai_request_body
from tests.providers.recordings import (
    Recording,
    load_recording,
    without_media_headers,
)

CLIENT_FIELDS = ("tool_choice", "n", "max_tokens", "temperature")


def recorded_body(recording: Recording, index: int) -> dict[str, Any]:
    """The recorded request body minus the fields its client added on its own."""
    body: dict[str, Any] = copy.deepcopy(recording.interactions[index].request.json())
    for key in CLIENT_FIELDS:
        body.pop(key, None)
    if body.get("stream") is False:
        del body["stream"]
    for tool in body.get("tools", []):
        tool["function"].pop("strict", None)
    return body


def tools_of(body: dict[str, Any]) -> list[ToolSpec]:
    """The canonical tool menu equivalent to a recorded ``tools`` list."""
    return [
        ToolSpec(
            name=t["function"]["name"],
            description=t["function"].get("description", ""),
            input_schema=t["function"]["parameters"],
        )
        for t in body.get("tools", [])
    ]


def user_text(body: dict[str, Any], index: int = 0) -> str:
    """The string content of a recorded message."""
    content = body["messages"][index]["content"]
    assert isinstance(content, str)
    return content


async def stream_response(raw: bytes) -> tuple[Any, list[Any]]:
    """Run recorded SSE bytes through ``iter_sse`` and the assembler; return (response, chunks)."""
    assembler = OpenAIStreamAssembler()
    chunks: list[Any] = []
    async for event in iter_sse(httpx.Response(200, content=raw)):
        if event.data == "[DONE]":
            assembler.mark_done()
            continue
        chunks.extend(assembler.feed(json.loads(event.data)))
    return assembler.response(), chunks


def tool_round_trip(recording: Recording, result: Any) -> tuple[LlmRequest, LlmRequest]:
    """Turn 1 as recorded, and turn 2 threading the parsed turn-1 answer and ``result``."""
    body = recording.interactions[0].request.json()
    first = LlmRequest(
        messages=[Message(role="user", content=user_text(body))], tools=tools_of(body)
    )
    answer = openai_response(recording.interactions[0].response.json())
    (call,) = answer.tool_calls
    second = LlmRequest(
        messages=[
            *first.messages,
            assistant_message_of(answer),
            Message(role="user", content=[ToolResultPart(tool_use_id=call.id, content=result)]),
        ],
        tools=first.tools,
    )
    return first, second


def test_nonstream_tool_round_trip_matches_the_recorded_bodies() -> None:
    """Both turns of the non-streamed tool round trip map to the bodies pydantic-ai sent."""
    rec = load_recording("openai/tool-roundtrip-nonstream.yaml")
    first, second = tool_round_trip(rec, "Sunny, 22C in Paris")
    assert openai_request_body(first, model="gpt-5-mini") == recorded_body(rec, 0)
    assert openai_request_body(second, model="gpt-5-mini") == recorded_body(rec, 1)


def test_nonstream_tool_round_trip_responses_parse() -> None:
    """The tool call (id, name, parsed input), stop reasons, usage and vendor fields are read."""
    rec = load_recording("openai/tool-roundtrip-nonstream.yaml")
    first = openai_response(rec.interactions[0].response.json())
    assert first.content == ""
    assert [(c.id, c.name, c.input) for c in first.tool_calls] == [
        ("call_aDdJTteHrpMdhdkEkyxjxEHH", "get_weather", {"city": "Paris"})
    ]
    assert first.stop_reason == "tool_use"
    assert (first.usage.input_tokens, first.usage.output_tokens) == (132, 23)
    assert first.model == "gpt-5-mini-2025-08-07"
    assert first.provider_data["id"] == "chatcmpl-D3Sqix10hJ5DCDejQOQklpm4k7cj8"
    assert first.provider_data["finish_reason"] == "tool_calls"
    assert first.provider_data["usage"]["completion_tokens_details"]["reasoning_tokens"] == 0
    assert "system_fingerprint" in first.provider_data
    second = openai_response(rec.interactions[1].response.json())
    assert second.content.startswith("It's sunny in Paris right now")
    assert second.tool_calls == []
    assert second.stop_reason == "end_turn"
    assert (second.usage.input_tokens, second.usage.output_tokens) == (167, 171)


async def test_streamed_round_trip_matches_bodies_and_assembles_deltas() -> None:
    """The streamed round trip: bodies match, tool deltas assemble into the call, text streams."""
    rec = load_recording("openai/stream-tool-call-roundtrip.yaml")
    body = rec.interactions[0].request.json()
    first_request = LlmRequest(
        messages=[Message(role="user", content=user_text(body))], tools=tools_of(body)
    )
    assert openai_request_body(first_request, model="gpt-4o-mini", stream=True) == recorded_body(
        rec, 0
    )
    first, chunks = await stream_response(rec.interactions[0].response.body)
    (call,) = first.tool_calls
    assert (call.id, call.name, call.input) == (
        "call_ZR5UUuTt3pf61kjwAJIYdVMj",
        "get_capital",
        {"country": "UK"},
    )
    assert first.stop_reason == "tool_use"
    assert (first.usage.input_tokens, first.usage.output_tokens) == (53, 15)
    deltas = [c.tool_delta for c in chunks if c.kind == "tool_delta"]
    assert deltas[0].id == call.id
    assert deltas[0].name == "get_capital"
    assert all(d.id is None for d in deltas[1:])
    assert "".join(d.input_json for d in deltas) == '{"country":"UK"}'
    second_request = LlmRequest(
        messages=[
            *first_request.messages,
            assistant_message_of(first),
            Message(role="user", content=[ToolResultPart(tool_use_id=call.id, content="London")]),
        ],
        tools=first_request.tools,
    )
    assert openai_request_body(second_request, model="gpt-4o-mini", stream=True) == recorded_body(
        rec, 1
    )
    second, chunks = await stream_response(rec.interactions[1].response.body)
    assert second.content == "The capital of the UK is London."
    assert "".join(c.text for c in chunks if c.kind == "text") == second.content
    assert second.stop_reason == "end_turn"
    assert (second.usage.input_tokens, second.usage.output_tokens) == (78, 9)


async def test_forced_tool_choice_is_a_tool_call_although_finish_reason_says_stop() -> None:
    """A forced tool choice ends with finish_reason "stop"; the call is still detected from deltas."""
    rec = load_recording("openai/stream-tool-call-forced-choice.json")
    body = rec.interactions[0].request.json()
    request = LlmRequest(
        system=body["messages"][0]["content"],
        messages=[Message(role="user", content=user_text(body, 1))],
        tools=tools_of(body),
    )
    assert openai_request_body(request, model="gpt-4o-mini", stream=True) == recorded_body(rec, 0)
    response, _ = await stream_response(rec.interactions[0].response.body)
    assert response.provider_data["finish_reason"] == "stop"
    assert response.stop_reason == "tool_use"
    assert [(c.id, c.name, c.input) for c in response.tool_calls] == [
        ("call_5wBV98AvGPwOyC6a2HtKh85w", "get_weather", {"city": "Paris"})
    ]
    assert response.provider_data["system_fingerprint"] == "fp_d0a1738203"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (67, 5)


def test_audio_input_matches_the_recorded_body_and_answer() -> None:
    """An mp3 audio part maps to input_audio with format mp3, as recorded; the answer parses."""
    rec = load_recording("openai/audio-input-mp3.yaml")
    parts = rec.interactions[0].request.json()["messages"][0]["content"]
    request = LlmRequest(
        messages=[
            Message(
                role="user",
                content=[
                    TextPart(text=parts[0]["text"]),
                    AudioPart(
                        media_type="audio/mpeg",
                        source=DataSource(data=parts[1]["input_audio"]["data"]),
                    ),
                ],
            )
        ]
    )
    assert openai_request_body(request, model="gpt-4o-audio-preview") == recorded_body(rec, 0)
    response = openai_response(rec.interactions[0].response.json())
    assert response.content == "The name mentioned in the audio is Marcelo."
    assert response.stop_reason == "end_turn"
    assert response.usage.input_tokens == 64


def test_pdf_file_input_matches_the_recorded_body() -> None:
    """A PDF file part maps to a file part with a data URL and its file name, as recorded."""
    rec = load_recording("openai/pdf-file-input.yaml")
    parts = rec.interactions[0].request.json()["messages"][0]["content"]
    data = parts[1]["file"]["file_data"].removeprefix("data:application/pdf;base64,")
    request = LlmRequest(
        messages=[
            Message(
                role="user",
                content=[
                    TextPart(text=parts[0]["text"]),
                    FilePart(
                        media_type="application/pdf",
                        source=DataSource(data=data),
                        name="filename.pdf",
                    ),
                ],
            )
        ]
    )
    assert openai_request_body(request, model="gpt-4o") == recorded_body(rec, 0)
    assert openai_response(rec.interactions[0].response.json()).content == (
        'The main content of the document is "Dummy PDF file."'
    )


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("openai/tool-result-with-image.yaml", "image"),
        ("openai/tool-result-with-pdf.yaml", "file"),
        ("openai/error-400-audio-unsupported-by-model.yaml", "audio"),
    ],
)
def test_tool_result_media_rides_in_one_trailing_user_message(path: str, kind: str) -> None:
    """A tool result's media moves to one user message after the tool message, as recorded."""
    rec = load_recording(path)
    trailing = rec.interactions[1].request.json()["messages"][3]["content"][0]
    media: Any
    if kind == "image":
        url = trailing["image_url"]["url"]
        media = ImagePart(media_type="image/jpeg", source=DataSource(data=url.split(",", 1)[1]))
    elif kind == "file":
        url = trailing["file"]["file_data"]
        media = FilePart(
            media_type="application/pdf",
            source=DataSource(data=url.split(",", 1)[1]),
            name="filename.pdf",
        )
    else:
        media = AudioPart(
            media_type="audio/mpeg", source=DataSource(data=trailing["input_audio"]["data"])
        )
    first, second = tool_round_trip(rec, [TextPart(text="File attached"), media])
    assert openai_request_body(first, model="gpt-5-mini") == recorded_body(rec, 0)
    body = openai_request_body(second, model="gpt-5-mini")
    assert without_media_headers(body) == recorded_body(rec, 1)
    call_id = body["messages"][2]["tool_call_id"]
    assert body["messages"][3]["content"][0]["text"].startswith(
        f"[media returned by tool call {call_id} ("
    )
