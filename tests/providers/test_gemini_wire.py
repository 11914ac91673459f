"""Gemini generateContent mapping against the recorded traffic: request bodies and responses.

Each recorded conversation is rebuilt canonically (turn 2 threads the parsed turn-1 response
through ``assistant_message_of``), mapped, and compared field for field with the recorded body
after undoing only what the recording's client chose differently:

- ``generationConfig`` / ``toolConfig`` (client settings; ``extra_body`` on the provider);
- the schema key: pydantic-ai's snake_case ``parameters_json_schema`` and opencode's ``parameters``
  (an OpenAPI schema that here is the same dict) become our ``parametersJsonSchema``;
- tool-call ids: the model returned none, and each client made up its own (``pyd_ai_…``,
  ``tool_0``) where we derive ``gemini_<responseId>_<n>``;
- the ``functionResponse.response`` key: ``return_value`` (pydantic-ai) or ``{name, content}``
  (opencode) where we send the documented ``output``;
- base64 alphabet: google-genai sends url-safe base64 for ``inlineData`` and thought signatures;
  we send the standard alphabet the API returned;
- pydantic-ai sends a tool result's media as a second consecutive user turn; we keep it in the
  same user turn, after the ``functionResponse``.
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
    LlmResponse,
    Message,
    ToolCall,
    ToolResultPart,
    ToolSpec,
    ToolUsePart,
    assistant_message_of,
    canonical_json,
)
from loom_nb.errors import ProviderError
from loom_nb.guard import guard_request
from loom_nb.journal._codec import decode, encode_value
from loom_nb.providers._http import iter_sse
from loom_nb.providers.anthropic_wire import anthropic_request_body
from loom_nb.providers.gemini_wire import (
    GeminiStreamAssembler,
    gemini_error,
    gemini_error_fields,
    gemini_request_body,
    gemini_response,
)
from loom_nb.providers.openai_wire import openai_request_body
from tests.providers.recordings import (
    Recording,
    load_recording,
    media_headers,
    without_media_headers,
)


def standard_b64(data: str) -> str:
    """The standard-alphabet spelling of (possibly url-safe) base64."""
    return data.replace("-", "+").replace("_", "/")


def normalized(body: dict[str, Any], ids: dict[str, str] | None = None) -> dict[str, Any]:
    """A recorded body with the client's own choices (module docstring) undone."""
    body = copy.deepcopy(body)
    body.pop("generationConfig", None)
    body.pop("toolConfig", None)
    for tool in body.get("tools", []):
        for decl in tool["functionDeclarations"]:
            for key in ("parameters_json_schema", "parameters"):
                if key in decl:
                    decl["parametersJsonSchema"] = decl.pop(key)
    merged: list[dict[str, Any]] = []
    for content in body["contents"]:
        for part in content["parts"]:
            if "functionCall" in part and ids:
                part["functionCall"]["id"] = ids[part["functionCall"]["id"]]
            if "thoughtSignature" in part:
                part["thoughtSignature"] = standard_b64(part["thoughtSignature"])
            if "inlineData" in part:
                part["inlineData"]["data"] = standard_b64(part["inlineData"]["data"])
            if "functionResponse" in part:
                response = part["functionResponse"]
                if ids:
                    response["id"] = ids[response["id"]]
                value = response["response"]
                output = value["return_value"] if "return_value" in value else value["content"]
                response["response"] = {"output": output}
        if merged and merged[-1]["role"] == content["role"] == "user":
            merged[-1]["parts"].extend(content["parts"])
        else:
            merged.append(content)
    body["contents"] = merged
    return body


def tools_of(body: dict[str, Any]) -> list[ToolSpec]:
    """The canonical tool menu equivalent to a recorded ``tools`` list."""
    specs: list[ToolSpec] = []
    for tool in body.get("tools", []):
        for decl in tool["functionDeclarations"]:
            schema = decl.get("parameters_json_schema") or decl.get("parameters")
            specs.append(
                ToolSpec(name=decl["name"], description=decl["description"], input_schema=schema)
            )
    return specs


def first_request(recording: Recording) -> LlmRequest:
    """The canonical form of a recording's first request (a user text, a system prompt, tools)."""
    body = recording.interactions[0].request.json()
    system = body.get("systemInstruction", {}).get("parts", [{}])[0].get("text")
    (content,) = body["contents"]
    return LlmRequest(
        system=system,
        messages=[Message(role="user", content=content["parts"][0]["text"])],
        tools=tools_of(body),
    )


async def stream_response(raw: bytes) -> tuple[LlmResponse, list[Any]]:
    """Run recorded SSE bytes through ``iter_sse`` and the assembler; return (response, chunks)."""
    assembler = GeminiStreamAssembler()
    chunks: list[Any] = []
    async for event in iter_sse(httpx.Response(200, content=raw)):
        chunks.extend(assembler.feed(json.loads(event.data)))
    return assembler.response(), chunks


async def turn_one(recording: Recording) -> LlmResponse:
    """The parsed first response of a recording, streamed or not."""
    response = recording.interactions[0].response
    if response.is_sse:
        parsed, _ = await stream_response(response.body)
        return parsed
    return gemini_response(response.json())


def second_request(first: LlmRequest, answer: LlmResponse, result: Any) -> LlmRequest:
    """Turn 2: turn 1, the assistant turn built from ``answer``, and the tool's ``result``."""
    (call,) = answer.tool_calls
    return LlmRequest(
        system=first.system,
        messages=[
            *first.messages,
            assistant_message_of(answer),
            Message(role="user", content=[ToolResultPart(tool_use_id=call.id, content=result)]),
        ],
        tools=first.tools,
    )


def recorded_ids(recording: Recording, answer: LlmResponse) -> dict[str, str]:
    """The client's made-up call id in turn 2, mapped to the wire id we derived."""
    turn2 = recording.interactions[1].request.json()
    (recorded,) = [
        p["functionCall"]["id"]
        for c in turn2["contents"]
        for p in c["parts"]
        if "functionCall" in p
    ]
    (call,) = answer.tool_calls
    return {recorded: call.id}


async def test_nonstream_tool_round_trip_matches_the_recorded_bodies() -> None:
    """Both turns of the non-streamed round trip match, the thought signature echoed exactly."""
    rec = load_recording("gemini/tool-roundtrip-nonstream.yaml")
    first = first_request(rec)
    assert gemini_request_body(first) == normalized(rec.interactions[0].request.json())
    answer = await turn_one(rec)
    (call,) = answer.tool_calls
    assert call.id == "gemini_78F7aafeKcDVz7IPh4DK-AM_0"
    raw_part = rec.interactions[0].response.json()["candidates"][0]["content"]["parts"][0]
    assert call.provider_data == {"thought_signature": raw_part["thoughtSignature"]}
    second = second_request(first, answer, "Sunny, 22C in Paris")
    expected = normalized(rec.interactions[1].request.json(), recorded_ids(rec, answer))
    body = gemini_request_body(second)
    assert body == expected
    assert body["contents"][1]["parts"][0]["thoughtSignature"] == raw_part["thoughtSignature"]
    assert body["contents"][2]["parts"][0]["functionResponse"]["id"] == call.id


def test_nonstream_responses_parse() -> None:
    """Call (name, input), stop reasons, usage (thoughts counted as output) and vendor fields."""
    rec = load_recording("gemini/tool-roundtrip-nonstream.yaml")
    first = gemini_response(rec.interactions[0].response.json())
    assert [(c.name, c.input) for c in first.tool_calls] == [("get_weather", {"city": "Paris"})]
    assert first.stop_reason == "tool_use"
    assert first.provider_data["finish_reason"] == "STOP"
    assert first.provider_data["candidate"] == {
        "finishMessage": "Model generated function call(s)."
    }
    assert (first.usage.input_tokens, first.usage.output_tokens) == (49, 15 + 48)
    assert first.model == "gemini-2.5-flash"
    assert first.provider_data["response_id"] == "78F7aafeKcDVz7IPh4DK-AM"
    second = gemini_response(rec.interactions[1].response.json())
    assert second.content == "The weather in Paris is sunny with a temperature of 22C."
    assert second.stop_reason == "end_turn"
    assert (second.usage.input_tokens, second.usage.output_tokens) == (88, 15)


async def test_streamed_tool_loop_with_system_instruction() -> None:
    """opencode's streamed loop: system instruction and both turns match; deltas are synthetic."""
    rec = load_recording("gemini/stream-tool-loop-system-instruction.json")
    first = first_request(rec)
    assert first.system == "Use the get_weather tool, then answer in one short sentence."
    assert gemini_request_body(first) == normalized(rec.interactions[0].request.json())
    answer, chunks = await stream_response(rec.interactions[0].response.body)
    (call,) = answer.tool_calls
    assert (call.name, call.input) == ("get_weather", {"city": "Paris"})
    assert answer.stop_reason == "tool_use"
    deltas = [c.tool_delta for c in chunks if c.kind == "tool_delta"]
    assert [(d.id, d.name, d.input_json) for d in deltas] == [
        (call.id, "get_weather", ""),
        (None, None, '{"city":"Paris"}'),
    ]
    second = second_request(first, answer, '{"temperature":22,"condition":"sunny"}')
    expected = normalized(rec.interactions[1].request.json(), recorded_ids(rec, answer))
    assert gemini_request_body(second) == expected
    final, chunks = await stream_response(rec.interactions[1].response.body)
    assert final.content == "The weather in Paris is sunny with a temperature of 22 degrees."
    assert [c.text for c in chunks if c.kind == "text"] == [
        "The weather in Paris",
        " is sunny with a temperature of 22 degrees.",
    ]
    assert final.stop_reason == "end_turn"
    assert (final.usage.input_tokens, final.usage.output_tokens) == (148, 15)


async def test_gemini_3_thought_signature_is_echoed_back_in_the_next_turn() -> None:
    """Gemini 3's signature (streamed beside the call) returns unchanged on the echoed call."""
    rec = load_recording("gemini/stream-tool-call-thought-signature.yaml")
    first = first_request(rec)
    assert gemini_request_body(first) == normalized(rec.interactions[0].request.json())
    answer = await turn_one(rec)
    assert answer.stop_reason == "tool_use"
    assert answer.model == "gemini-3-pro-preview"
    second = second_request(first, answer, "Mexico")
    body = gemini_request_body(second)
    assert body == normalized(rec.interactions[1].request.json(), recorded_ids(rec, answer))
    echoed = body["contents"][1]["parts"][0]
    assert echoed["thoughtSignature"].startswith("EpwICpkIAXLI2nxlU6gsWZaZHRYkX1orzuM8vSUFwaAt")
    (call,) = answer.tool_calls
    assert call.id == f"gemini_{answer.provider_data['response_id']}_0"
    assert echoed["thoughtSignature"] == (call.provider_data or {})["thought_signature"]
    _, chunks = await stream_response(rec.interactions[0].response.body)
    assert [c.tool_delta.id for c in chunks if c.kind == "tool_delta"] == [call.id, None]
    final, _ = await stream_response(rec.interactions[1].response.body)
    assert final.content.startswith("The capital of Mexico")
    assert final.stop_reason == "end_turn"


@pytest.mark.parametrize(
    ("path", "mime"),
    [
        ("gemini/tool-result-with-pdf.yaml", "application/pdf"),
        ("gemini/tool-result-with-image.yaml", "image/jpeg"),
        ("gemini/tool-result-with-audio.yaml", "audio/mpeg"),
    ],
)
async def test_tool_result_media_rides_as_inline_data_beside_the_function_response(
    path: str, mime: str
) -> None:
    """A tool result's media follows its functionResponse as inlineData in the same user turn."""
    rec = load_recording(path)
    first = first_request(rec)
    assert gemini_request_body(first) == normalized(rec.interactions[0].request.json())
    answer = await turn_one(rec)
    turn2 = rec.interactions[1].request.json()
    inline = turn2["contents"][3]["parts"][0]["inlineData"]
    assert inline["mimeType"] == mime
    source = DataSource(data=standard_b64(inline["data"]))
    media: Any
    if mime.startswith("image/"):
        media = ImagePart(media_type=mime, source=source)
    elif mime.startswith("audio/"):
        media = AudioPart(media_type=mime, source=source)
    else:
        media = FilePart(media_type=mime, source=source)
    second = second_request(first, answer, [{"type": "text", "text": "File attached"}, media])
    body = gemini_request_body(second)
    assert without_media_headers(body) == normalized(turn2, recorded_ids(rec, answer))
    assert [next(iter(p)) for p in body["contents"][2]["parts"]] == [
        "functionResponse",
        "text",
        "inlineData",
    ]
    call_id = body["contents"][2]["parts"][0]["functionResponse"]["id"]
    name = answer.tool_calls[0].name
    assert media_headers(body) == [f"[media returned by tool call {call_id} ({name})]"]
    final = gemini_response(rec.interactions[1].response.json())
    assert final.content
    assert final.stop_reason == "end_turn"
    raw_parts = rec.interactions[1].response.json()["candidates"][0]["content"]["parts"]
    signatures = [p["thoughtSignature"] for p in raw_parts if "thoughtSignature" in p]
    assert final.provider_data.get("text_thought_signatures", []) == signatures


def test_call_without_id_gets_a_deterministic_id_from_its_position() -> None:
    """Calls with no id get gemini_<responseId>_<n>; a returned id is kept as it is."""
    body = {
        "responseId": "r1",
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"functionCall": {"name": "a", "args": {}}},
                        {"functionCall": {"id": "srv", "name": "b", "args": {"x": 1}}},
                        {"functionCall": {"name": "c"}},
                    ],
                },
                "finishReason": "STOP",
            }
        ],
    }
    response = gemini_response(body)
    assert [c.id for c in response.tool_calls] == ["gemini_r1_0", "srv", "gemini_r1_2"]
    assert gemini_response(body) == response


def test_error_result_and_pairing_by_name_lookup() -> None:
    """is_error maps to {"error": ...}; the functionResponse name comes from the earlier call."""
    request = LlmRequest(
        messages=[
            Message(role="user", content="go"),
            Message(
                role="assistant",
                content=[
                    {
                        "type": "tool_use",
                        "id": "c1",
                        "name": "fetch",
                        "input": {},
                        "provider_data": {"thought_signature": "U0lH"},
                    }
                ],
            ),
            Message(
                role="user",
                content=[
                    {
                        "type": "tool_result",
                        "tool_use_id": "c1",
                        "content": "404",
                        "is_error": True,
                    }
                ],
            ),
        ]
    )
    body = gemini_request_body(request)
    assert body["contents"][1]["parts"] == [
        {"functionCall": {"id": "c1", "name": "fetch", "args": {}}, "thoughtSignature": "U0lH"}
    ]
    assert body["contents"][2]["parts"] == [
        {"functionResponse": {"id": "c1", "name": "fetch", "response": {"error": "404"}}}
    ]


def test_unknown_response_part_fails_loudly() -> None:
    """A part loom_nb cannot represent (generated inline media) raises, never silently drops."""
    body = {
        "candidates": [
            {
                "content": {"parts": [{"inlineData": {"mimeType": "image/png", "data": "AA=="}}]},
                "finishReason": "STOP",
            }
        ]
    }
    with pytest.raises(ProviderError) as info:
        gemini_response(body)
    assert info.value.code == "unsupported_response_content"


def test_blocked_prompt_is_a_refusal_with_its_feedback_kept() -> None:
    """No candidates with promptFeedback.blockReason is a refusal; the feedback is kept."""
    body = {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 7}}
    response = gemini_response(body)
    assert response.stop_reason == "refusal"
    assert response.provider_data["prompt_feedback"] == {"blockReason": "SAFETY"}
    assert response.usage.input_tokens == 7


def test_error_envelope_fields_and_retryability() -> None:
    """The error envelope's status name is the error type; 503 retries, 400 does not."""
    body = {"error": {"code": 400, "message": "bad schema", "status": "INVALID_ARGUMENT"}}
    assert gemini_error_fields(body) == ("INVALID_ARGUMENT", "bad schema")
    assert gemini_error(400, body).retryable is False
    assert gemini_error(None, {"error": {"code": 503, "status": "UNAVAILABLE"}}).retryable is True


def _signed_transcript() -> tuple[LlmRequest, str]:
    """A Gemini-3-shaped transcript: the call's thought signature rides in provider_data."""
    signature = "EpwICpkIAXLI2nxl" + "A" * 2000 + "=="
    answer = LlmResponse(
        tool_calls=[
            ToolCall(
                id="gemini_r1_0",
                name="get_country",
                input={"q": "capital"},
                provider_data={"thought_signature": signature},
            )
        ],
        stop_reason="tool_use",
    )
    request = LlmRequest(
        messages=[
            Message(role="user", content="Capital of Mexico?"),
            assistant_message_of(answer),
            Message(
                role="user", content=[ToolResultPart(tool_use_id="gemini_r1_0", content="Mexico")]
            ),
        ],
        tools=[ToolSpec(name="get_country", description="d", input_schema={"type": "object"})],
    )
    return request, signature


def test_signature_survives_the_journal_round_trip_into_the_gemini_body() -> None:
    """assistant_message_of → the journal's canonical JSON → validated back → Gemini body keeps the exact signature."""
    request, signature = _signed_transcript()
    text, decoded = encode_value(request, step_id="llm")
    assert "|ts:" not in text
    reread = LlmRequest.model_validate(decode(text, where="step llm"))
    assert reread == request
    assert LlmRequest.model_validate(decoded) == request
    body = gemini_request_body(guard_request(reread))
    assert body["contents"][1]["parts"] == [
        {
            "functionCall": {"id": "gemini_r1_0", "name": "get_country", "args": {"q": "capital"}},
            "thoughtSignature": signature,
        }
    ]
    assert body["contents"][2]["parts"][0]["functionResponse"]["id"] == "gemini_r1_0"


def test_anthropic_and_openai_bodies_ignore_provider_data() -> None:
    """A transcript carrying provider_data maps to the very bodies it would give without it."""
    signed, signature = _signed_transcript()
    call = signed.messages[1].content[0]
    assert isinstance(call, ToolUsePart)
    unsigned = Message(role="assistant", content=[call.model_copy(update={"provider_data": None})])
    plain = signed.model_copy(
        update={"messages": [signed.messages[0], unsigned, signed.messages[2]]}
    )
    assert plain != signed
    assert signature in canonical_json(signed)
    assert signature not in canonical_json(plain)

    def bodies(request: LlmRequest) -> list[dict[str, Any]]:
        guarded = guard_request(request)
        return [
            anthropic_request_body(guarded, model="m", max_tokens=64),
            openai_request_body(guarded, model="m"),
        ]

    assert bodies(signed) == bodies(plain)
    assert signature not in json.dumps(bodies(signed))
