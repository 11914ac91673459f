"""``GeminiProvider`` over ``httpx.MockTransport``: every Gemini recording replayed, and the HTTP side.

Each recorded request is rebuilt canonically (``canonical_from_gemini``, the reverse mapping
written independently here, keeping the recording's own call ids and thought signatures), sent
through the provider (``complete`` for ``:generateContent``, ``stream`` for
``:streamGenerateContent?alt=sse``), and the body on the wire is compared with the recorded one
(normalised as ``test_gemini_wire`` documents); the parsed answers are checked against values
read off the recordings.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from loom_nb.capabilities import Capabilities
from loom_nb.content import (
    AudioPart,
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
    assistant_message_of,
)
from loom_nb.errors import ConfigurationError, ProviderError, UnsupportedModalityError
from loom_nb.providers import collect_stream
from loom_nb.providers._http import RetryPolicy
from loom_nb.providers.gemini import GeminiProvider
from loom_nb.providers.gemini_wire import THOUGHT_SIGNATURE
from tests.providers.recordings import ReplayTransport, load_recording, recording_paths
from tests.providers.test_gemini_wire import normalized, standard_b64

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def _media(inline: dict[str, Any]) -> Part:
    mime, source = inline["mimeType"], DataSource(data=standard_b64(inline["data"]))
    if mime.startswith("image/"):
        return ImagePart(media_type=mime, source=source)
    if mime.startswith("audio/"):
        return AudioPart(media_type=mime, source=source)
    return FilePart(media_type=mime, source=source)


def canonical_from_gemini(body: dict[str, Any]) -> LlmRequest:
    """The canonical request a recorded generateContent body stands for."""
    messages: list[Message] = []
    for content in body["contents"]:
        parts: list[Part] = []
        for wire in content["parts"]:
            if "text" in wire:
                parts.append(TextPart(text=wire["text"]))
            elif "functionCall" in wire:
                call = wire["functionCall"]
                signed = None
                if "thoughtSignature" in wire:
                    signed = {THOUGHT_SIGNATURE: standard_b64(wire["thoughtSignature"])}
                parts.append(
                    ToolUsePart(
                        id=call["id"], name=call["name"], input=call["args"], provider_data=signed
                    )
                )
            elif "functionResponse" in wire:
                value = wire["functionResponse"]["response"]
                output = value["return_value"] if "return_value" in value else value["content"]
                parts.append(
                    ToolResultPart(tool_use_id=wire["functionResponse"]["id"], content=output)
                )
            else:
                parts.append(_media(wire["inlineData"]))
        role = "assistant" if content["role"] == "model" else "user"
        if messages and messages[-1].role == role == "user":
            previous = messages[-1].content
            assert isinstance(previous, list)
            messages[-1] = Message(role="user", content=[*previous, *parts])
        else:
            messages.append(Message(role=role, content=parts))
    system = body.get("systemInstruction", {}).get("parts", [{}])[0].get("text")
    tools = [
        ToolSpec(
            name=d["name"],
            description=d["description"],
            input_schema=d.get("parameters_json_schema") or d["parameters"],
        )
        for t in body.get("tools", [])
        for d in t["functionDeclarations"]
    ]
    return LlmRequest(system=system, messages=messages, tools=tools)


# (content prefix, [(name, input)], stop reason, (input tokens, output tokens)), per interaction.
EXPECTED: dict[str, list[Any]] = {
    "stream-tool-call-thought-signature.yaml": [
        ("", [("get_country", {})], "tool_use", (29, 212)),
        ("The capital of Mexico is Mexico City.", [], "end_turn", (257, 8)),
    ],
    "stream-tool-loop-system-instruction.json": [
        ("", [("get_weather", {"city": "Paris"})], "tool_use", (61, 15 + 40)),
        (
            "The weather in Paris is sunny with a temperature of 22 degrees.",
            [],
            "end_turn",
            (148, 15),
        ),
    ],
    "tool-result-with-audio.yaml": [
        ("", [("get_file", {})], "tool_use", (41, 10 + 52)),
        ('The audio file contains a male voice saying, "Hell', [], "end_turn", (214, 17)),
    ],
    "tool-result-with-image.yaml": [
        ("", [("get_file", {})], "tool_use", (41, 10 + 223)),
        ("I received an image of a kiwi fruit cut in half", [], "end_turn", (328, 72 + 242)),
    ],
    "tool-result-with-pdf.yaml": [
        ("", [("get_file", {})], "tool_use", (41, 10 + 41)),
        ("I received a file that appears to be a dummy PDF", [], "end_turn", (328, 20 + 77)),
    ],
    "tool-roundtrip-nonstream.yaml": [
        ("", [("get_weather", {"city": "Paris"})], "tool_use", (49, 15 + 48)),
        ("The weather in Paris is sunny with a temperature of 22C.", [], "end_turn", (88, 15)),
    ],
}


def test_every_gemini_recording_has_expectations() -> None:
    """The replay table covers every recording in the gemini folder."""
    assert sorted(EXPECTED) == sorted(p.name for p in recording_paths("gemini"))


@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_recording_replays_through_the_provider(name: str) -> None:
    """Each recorded request is re-sent as recorded (to the recorded URL) and each answer parses."""
    recording = load_recording(f"gemini/{name}")
    replay = ReplayTransport(recording)
    async with replay.client() as client:
        for index, interaction in enumerate(recording.interactions):
            model = interaction.request.url.split("/models/")[1].split(":")[0]
            provider = GeminiProvider(
                model,
                api_key="g-test-key",
                http_client=client,
                capabilities=Capabilities(image=["*"], audio=["*"], file=["*"]),
                retry_policy=RetryPolicy(max_retries=0),
            )
            request = canonical_from_gemini(interaction.request.json())
            if interaction.response.is_sse:
                response = await collect_stream(provider.stream(request))
            else:
                response = await provider.complete(request)
            sent = replay.requests[index]
            assert str(sent.url) == interaction.request.url
            assert "key=" not in str(sent.url)
            assert sent.headers["x-goog-api-key"] == "g-test-key"
            assert json.loads(sent.content) == normalized(interaction.request.json())
            text, calls, stop, usage = EXPECTED[name][index]
            assert response.content.startswith(text)
            assert bool(response.content) == bool(text)
            assert [(c.name, c.input) for c in response.tool_calls] == calls
            assert all(c.id.startswith("gemini_") for c in response.tool_calls)
            assert response.stop_reason == stop
            assert (response.usage.input_tokens, response.usage.output_tokens) == usage


def _canned(request: httpx.Request) -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": "ok"}]},
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1},
            "responseId": "r",
        },
    )


def _client(seen: list[httpx.Request], handler: Any = _canned) -> httpx.AsyncClient:
    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        result: httpx.Response = handler(request)
        return result

    return httpx.AsyncClient(transport=httpx.MockTransport(record))


def test_key_from_gemini_or_google_variable_and_clear_error_without(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GEMINI_API_KEY, else GOOGLE_API_KEY; with neither, the error names GEMINI_API_KEY."""
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(ConfigurationError) as info:
        GeminiProvider("gemini-2.5-flash")
    assert "GEMINI_API_KEY" in str(info.value)
    monkeypatch.setenv("GOOGLE_API_KEY", "google-k")
    assert GeminiProvider("gemini-2.5-flash")._headers()["x-goog-api-key"] == "google-k"
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-k")
    provider = GeminiProvider("models/gemini-2.5-flash")
    assert provider._headers()["x-goog-api-key"] == "gemini-k"
    assert "gemini-k" not in repr(provider)
    assert provider.model == "gemini-2.5-flash"


async def test_error_envelope_becomes_provider_error_and_503_is_retried() -> None:
    """A 503 UNAVAILABLE is retried; a 400 INVALID_ARGUMENT is raised with its status name."""
    answers = [
        httpx.Response(
            503, json={"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}
        ),
        _canned(httpx.Request("POST", "http://x")),
        httpx.Response(
            400, json={"error": {"code": 400, "message": "bad", "status": "INVALID_ARGUMENT"}}
        ),
    ]
    seen: list[httpx.Request] = []

    async def no_sleep(seconds: float) -> None:
        return None

    async with _client(seen, lambda request: answers[len(seen) - 1]) as client:
        provider = GeminiProvider(
            "gemini-2.5-flash",
            api_key="k",
            http_client=client,
            retry_policy=RetryPolicy(sleep=no_sleep),
        )
        request = LlmRequest(messages=[Message(role="user", content="hi")])
        assert (await provider.complete(request)).content == "ok"
        with pytest.raises(ProviderError) as info:
            await provider.complete(request)
    assert (info.value.status, info.value.error_type, info.value.retryable) == (
        400,
        "INVALID_ARGUMENT",
        False,
    )
    assert "k" not in info.value.details.values()
    assert len(seen) == 3


async def test_undeclared_media_is_refused_before_any_io() -> None:
    """gemini-1.0-pro declares no media: an image request never reaches the wire."""
    seen: list[httpx.Request] = []
    async with _client(seen) as client:
        provider = GeminiProvider("gemini-1.0-pro", api_key="k", http_client=client)
        image = ImagePart(media_type="image/png", source=DataSource(data=PNG))
        request = LlmRequest(messages=[Message(role="user", content=[image])])
        with pytest.raises(UnsupportedModalityError):
            await provider.complete(request)
        with pytest.raises(UnsupportedModalityError):
            await collect_stream(provider.stream(request))
    assert seen == []


async def test_untrusted_tool_media_moves_with_its_fence() -> None:
    """An untrusted tool result's image follows the functionResponse between its fence texts."""
    seen: list[httpx.Request] = []
    async with _client(seen) as client:
        provider = GeminiProvider("gemini-2.5-flash", api_key="k", http_client=client)
        request = LlmRequest(
            messages=[
                Message(role="user", content="look"),
                Message(role="assistant", content=[ToolUsePart(id="c1", name="shot", input={})]),
                Message(
                    role="user",
                    content=[
                        ToolResultPart(
                            tool_use_id="c1",
                            origin="tool:browser",
                            content=[
                                ImagePart(media_type="image/png", source=DataSource(data=PNG))
                            ],
                        )
                    ],
                ),
            ]
        )
        await provider.complete(request)
    parts = json.loads(seen[0].content)["contents"][2]["parts"]
    assert parts[1]["text"].startswith("[media returned by tool call ")  # the call's header
    parts = [parts[0], *parts[2:]]
    assert [next(iter(p)) for p in parts] == ["functionResponse", "text", "inlineData", "text"]
    assert parts[1]["text"].startswith('<untrusted nonce="')
    assert 'origin="tool:browser"' in parts[1]["text"]
    assert parts[3]["text"].startswith("</untrusted nonce=")
    assert parts[2]["inlineData"] == {"mimeType": "image/png", "data": PNG}


def test_extra_body_merges_but_cannot_replace_contents() -> None:
    """generationConfig may be added; contents may not be replaced."""
    provider = GeminiProvider(
        "gemini-2.5-flash", api_key="k", extra_body={"generationConfig": {"temperature": 0}}
    )
    body = provider.wire_body(LlmRequest(messages=[Message(role="user", content="hi")]))
    assert body["generationConfig"] == {"temperature": 0}
    with pytest.raises(ConfigurationError):
        GeminiProvider("gemini-2.5-flash", api_key="k", extra_body={"contents": []})


def _recorded_signature(interaction: Any) -> str:
    """The thoughtSignature beside the functionCall in a recorded response (SSE or JSON)."""
    response = interaction.response
    if response.is_sse:
        lines = response.body.decode().splitlines()
        events = [json.loads(line[5:]) for line in lines if line.startswith("data:")]
    else:
        events = [response.json()]
    (signature,) = [
        part["thoughtSignature"]
        for event in events
        for candidate in event.get("candidates", [])
        for part in candidate["content"].get("parts", [])
        if "functionCall" in part and "thoughtSignature" in part
    ]
    return str(signature)


@pytest.mark.parametrize(
    "name", ["stream-tool-call-thought-signature.yaml", "tool-roundtrip-nonstream.yaml"]
)
async def test_thought_signature_rides_in_provider_data_and_is_echoed_exactly(name: str) -> None:
    """Turn 1's call keeps a short id with its signature in provider_data; turn 2 sends it back byte for byte."""
    recording = load_recording(f"gemini/{name}")
    replay = ReplayTransport(recording)
    turn1, turn2 = recording.interactions
    model = turn1.request.url.split("/models/")[1].split(":")[0]
    async with replay.client() as client:
        provider = GeminiProvider(
            model, api_key="g-test-key", http_client=client, retry_policy=RetryPolicy(max_retries=0)
        )

        async def send(request: LlmRequest, sse: bool) -> LlmResponse:
            if sse:
                return await collect_stream(provider.stream(request))
            return await provider.complete(request)

        first = canonical_from_gemini(turn1.request.json())
        answer = await send(first, turn1.response.is_sse)
        (call,) = answer.tool_calls
        signature = _recorded_signature(turn1)
        assert len(signature) > 100
        assert call.id == f"gemini_{answer.provider_data['response_id']}_0"  # short, plain
        assert call.provider_data == {THOUGHT_SIGNATURE: signature}
        assert "thought_signatures" not in answer.provider_data
        recorded = canonical_from_gemini(turn2.request.json())
        (result,) = [
            p
            for m in recorded.messages
            if isinstance(m.content, list)
            for p in m.content
            if isinstance(p, ToolResultPart)
        ]
        second = LlmRequest(
            system=first.system,
            tools=first.tools,
            messages=[
                *first.messages,
                assistant_message_of(answer),
                Message(role="user", content=[result.model_copy(update={"tool_use_id": call.id})]),
            ],
        )
        await send(second, turn2.response.is_sse)
    body = json.loads(replay.requests[1].content)
    (echoed,) = [p for c in body["contents"] for p in c["parts"] if "functionCall" in p]
    (answered,) = [p for c in body["contents"] for p in c["parts"] if "functionResponse" in p]
    assert echoed["thoughtSignature"] == signature
    (recorded_echo,) = [
        p for c in turn2.request.json()["contents"] for p in c["parts"] if "functionCall" in p
    ]
    assert echoed["thoughtSignature"] == standard_b64(recorded_echo["thoughtSignature"])
    assert echoed["functionCall"]["id"] == answered["functionResponse"]["id"] == call.id
