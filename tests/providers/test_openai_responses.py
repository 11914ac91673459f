"""``OpenAIResponsesProvider`` over ``httpx.MockTransport``: recorded Responses traffic replayed, the mapping, the HTTP side.

The recordings in ``tests/fixtures/provider-traffic-extra/openai-responses`` (``SOURCES.md``
there) are real exchanges with ``/v1/responses`` made by other projects' test suites. Each is
rebuilt as a canonical request by ``canonical_from_responses`` (the reverse mapping, written
independently here), sent through the provider, and the parsed answer is checked against values
read off the recording by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from loom_nb.capabilities import Capabilities, default_capabilities
from loom_nb.content import (
    AudioPart,
    DataSource,
    FilePart,
    ImagePart,
    LlmRequest,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolResultPart,
    ToolSpec,
    ToolUsePart,
    assistant_message_of,
)
from loom_nb.errors import ConfigurationError, ProviderError, UnsupportedModalityError
from loom_nb.providers import (
    OpenAIResponsesProvider,
    ProviderUnderTest,
    collect_stream,
    run_llm_provider_conformance,
)
from loom_nb.providers._http import RetryPolicy
from loom_nb.settings import ModelSettings
from tests.providers.recordings import ReplayTransport, load_recording
from tests.providers.sdk_types import responses_body_errors

EXTRA = Path(__file__).resolve().parent.parent / "fixtures" / "provider-traffic-extra"
FOLDER = EXTRA / "openai-responses"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
HI = LlmRequest(messages=[Message(role="user", content="hi")])


class CityLocation(BaseModel):
    """The structured answer of the recorded structured-output exchange."""

    city: str
    country: str


def canonical_from_responses(body: dict[str, Any]) -> LlmRequest:
    """The canonical request a recorded Responses body stands for (the reverse of the mapping)."""
    system: str | None = body.get("instructions") or None
    messages: list[Message] = []

    def add(role: str, parts: list[Part] | str) -> None:
        last = messages[-1] if messages else None
        if last is not None and last.role == role and isinstance(parts, list):
            previous = (
                last.content
                if isinstance(last.content, list)
                else [TextPart(text=last.content)]
                if last.content
                else []
            )
            messages[-1] = Message(role=role, content=[*previous, *parts])  # type: ignore[arg-type]
        else:
            messages.append(Message(role=role, content=parts))  # type: ignore[arg-type]

    for item in body["input"]:
        kind = item.get("type", "message")
        if kind == "message" and item["role"] == "system":
            system = item["content"]
        elif kind == "message" and item["role"] == "user":
            content = item["content"]
            if isinstance(content, str):
                add("user", content)
            else:
                add("user", [TextPart(text=c["text"]) for c in content])
        elif kind == "message":
            if item["content"]:
                add("assistant", [TextPart(text=item["content"])])
        elif kind == "function_call":
            part = ToolUsePart(
                id=item["call_id"], name=item["name"], input=json.loads(item["arguments"])
            )
            add("assistant", [part])
        else:
            assert kind == "function_call_output"
            add("user", [ToolResultPart(tool_use_id=item["call_id"], content=item["output"])])
    tools = [
        ToolSpec(
            name=t["name"], description=t.get("description") or "", input_schema=t["parameters"]
        )
        for t in body.get("tools", [])
    ]
    return LlmRequest(system=system, messages=messages, tools=tools)


def settings_of(body: dict[str, Any]) -> ModelSettings | None:
    """The ModelSettings the recorded body's mapped fields stand for."""
    effort = (body.get("reasoning") or {}).get("effort")
    settings = ModelSettings(max_tokens=body.get("max_output_tokens"), reasoning_effort=effort)
    return None if settings.is_empty() else settings


def extra_of(body: dict[str, Any]) -> dict[str, Any]:
    """The recorded body's fields that are neither canonical nor settings (they go in extra_body)."""
    extra: dict[str, Any] = {}
    if "tool_choice" in body:
        extra["tool_choice"] = body["tool_choice"]
    summary = (body.get("reasoning") or {}).get("summary")
    if summary:
        extra["reasoning"] = {"summary": summary}
    if "verbosity" in (body.get("text") or {}):
        extra["text"] = {"verbosity": body["text"]["verbosity"]}
    return extra


# Per interaction: (text, [(call id, name, input)], stop reason, (in, out) tokens, model), read off the files.
EXPECTED: dict[str, list[tuple[str, list[tuple[str, str, dict[str, Any]]], str, tuple[int, int], str]]] = {
    "stream-tool-call-forced-choice.json": [
        ("", [("call_ZAbAwsIFeJSyPqz3HaHRXBSn", "get_weather", {"city": "Paris"})], "tool_use", (61, 18), "gpt-5.5-2026-04-23"),
    ],
    "stream-reasoning-encrypted-store-false.json": [
        ("Hello!", [], "end_turn", (31, 21), "gpt-5.5-2026-04-23"),
    ],
    "tool-roundtrip-nonstream.yaml": [
        ("", [("call_61cRAI5gleGxCN89umufHn2a", "get_capital", {"country": "PotatoLand"})], "tool_use", (256, 18), "gpt-4o-2024-08-06"),
        ("The capital of PotatoLand is Potato City.", [], "end_turn", (287, 11), "gpt-4o-2024-08-06"),
    ],
    "structured-output-json-schema.yaml": [
        ("", [("call_Uog29U6F8U0yDj7TKqzN9Zkm", "get_user_country", {})], "tool_use", (73, 12), "gpt-4o-2024-08-06"),
        ('{"city":"Mexico City","country":"Mexico"}', [], "end_turn", (92, 16), "gpt-4o-2024-08-06"),
    ],
}  # fmt: skip


def test_every_recording_has_expectations_and_a_source() -> None:
    """The replay table covers every recording, and SOURCES.md names each one's origin."""
    names = sorted(p.name for p in FOLDER.iterdir() if p.suffix in {".json", ".yaml"})
    assert sorted(EXPECTED) == names
    sources = (EXTRA / "SOURCES.md").read_text(encoding="utf-8")
    for name in names:
        assert f"`{name}`" in sources


@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_recording_replays_through_the_provider(name: str) -> None:
    """Each recorded request is re-sent through the provider and each recorded answer parses as read."""
    recording = load_recording(FOLDER / name)
    replay = ReplayTransport(recording)
    async with replay.client() as client:
        for index, interaction in enumerate(recording.interactions):
            body = interaction.request.json()
            provider = OpenAIResponsesProvider(
                body["model"],
                api_key="sk-test-123",
                http_client=client,
                extra_body=extra_of(body),
                retry_policy=RetryPolicy(max_retries=0),
            )
            request = canonical_from_responses(body)
            output_type = CityLocation if "format" in (body.get("text") or {}) else None
            if body.get("stream"):
                stream = provider.stream(
                    request, settings=settings_of(body), output_type=output_type
                )
                response = await collect_stream(stream)
            else:
                response = await provider.complete(
                    request, settings=settings_of(body), output_type=output_type
                )
            text, calls, stop, tokens, model = EXPECTED[name][index]
            assert response.content == text
            assert [(c.id, c.name, c.input) for c in response.tool_calls] == calls
            assert response.stop_reason == stop
            assert (response.usage.input_tokens, response.usage.output_tokens) == tokens
            assert response.model == model
            sent = json.loads(replay.requests[index].content)
            assert_sent_matches_recorded(sent, body)
            if output_type is not None and not calls:
                assert response.output == CityLocation(city="Mexico City", country="Mexico")


def assert_sent_matches_recorded(sent: dict[str, Any], recorded: dict[str, Any]) -> None:
    """Our body carries what the recorded one did, in loom_nb's conventions (instructions, store
    false), and is valid for the openai SDK's request types."""
    assert responses_body_errors(sent) is None, responses_body_errors(sent)
    assert sent["model"] == recorded["model"]
    assert sent["store"] is False
    assert bool(sent.get("stream")) == bool(recorded.get("stream"))
    recorded_items = [
        i for i in recorded["input"] if i.get("role") != "system" and i.get("content") != ""
    ]
    assert len(sent["input"]) == len(recorded_items)
    for ours, theirs in zip(sent["input"], recorded_items, strict=True):
        assert ours.get("type", "message") == theirs.get("type", "message")
        for key in ("call_id", "name", "output", "role"):
            assert ours.get(key) == theirs.get(key)
        if "arguments" in theirs:
            assert json.loads(ours["arguments"]) == json.loads(theirs["arguments"])
    assert [t["name"] for t in sent.get("tools", [])] == [
        t["name"] for t in recorded.get("tools", [])
    ]
    for key in ("max_output_tokens", "tool_choice", "include"):
        if key in recorded:
            assert sent[key] == recorded[key]
    if "format" in (recorded.get("text") or {}):
        ours_fmt, theirs_fmt = sent["text"]["format"], recorded["text"]["format"]
        assert {k: ours_fmt[k] for k in ("type", "name", "strict")} == {
            k: theirs_fmt[k] for k in ("type", "name", "strict")
        }
        assert ours_fmt["schema"]["required"] == theirs_fmt["schema"]["required"]
        assert ours_fmt["schema"]["additionalProperties"] is False


async def test_streamed_tool_call_deltas_follow_the_recording() -> None:
    """The recorded argument fragments arrive as tool deltas after the call's id and name."""
    recording = load_recording(FOLDER / "stream-tool-call-forced-choice.json")
    replay = ReplayTransport(recording)
    body = recording.interactions[0].request.json()
    provider = OpenAIResponsesProvider("gpt-5.5", api_key="k", http_client=replay.client())
    deltas = []
    response = await collect_stream(
        provider.stream(canonical_from_responses(body)), on_tool_delta=deltas.append
    )
    assert (deltas[0].id, deltas[0].name) == ("call_ZAbAwsIFeJSyPqz3HaHRXBSn", "get_weather")
    assert [d.input_json for d in deltas[1:]] == ['{"', "city", '":"', "Paris", '"}']
    assert response.tool_calls[0].provider_data == {
        "item_id": "fc_05200a06f78f5b310069fa8aa37ca8819e9f131e85e47bcff9"
    }


async def test_recorded_reasoning_round_trips_with_its_encrypted_content() -> None:
    """The reasoning item of a store:false answer comes back as a ReasoningPart and is sent back unchanged."""
    recording = load_recording(FOLDER / "stream-reasoning-encrypted-store-false.json")
    events = [
        json.loads(line.removeprefix("data: "))
        for line in recording.interactions[0].response.body.decode().splitlines()
        if line.startswith("data: ")
    ]
    final_item = events[-1]["response"]["output"][0]
    replay = ReplayTransport(recording)
    body = recording.interactions[0].request.json()
    provider = OpenAIResponsesProvider("gpt-5.5", api_key="k", http_client=replay.client())
    response = await collect_stream(provider.stream(canonical_from_responses(body)))
    [part] = response.reasoning
    assert part.data == final_item["encrypted_content"]
    assert part.provider_data == {"vendor": "openai", "api": "responses", "id": final_item["id"]}
    # The next turn sends the reasoning item back first, with its id and encrypted content.
    history = [*canonical_from_responses(body).messages, assistant_message_of(response)]
    follow_up = LlmRequest(messages=[*history, Message(role="user", content="Again?")])
    wire = provider.wire_body(follow_up)
    assert wire["input"][1] == {
        "type": "reasoning",
        "summary": [],
        "id": final_item["id"],
        "encrypted_content": final_item["encrypted_content"],
    }
    assert wire["input"][2] == {"role": "assistant", "content": "Hello!"}
    assert wire["include"] == ["reasoning.encrypted_content"]


# -- the request mapping ----------------------------------------------------------------------------


def provider(model: str = "gpt-4o", **kwargs: Any) -> OpenAIResponsesProvider:
    caps = kwargs.pop("capabilities", Capabilities(image=["*"], audio=["*"], file=["*"]))
    return OpenAIResponsesProvider(model, api_key="k", capabilities=caps, **kwargs)


def test_system_goes_in_instructions_and_tools_are_not_strict() -> None:
    """system becomes instructions; function tools are flat and strict:false (the API defaults to strict)."""
    tool = ToolSpec(name="f", description="d", input_schema={"type": "object", "properties": {}})
    body = provider().wire_body(LlmRequest(system="Be brief.", messages=HI.messages, tools=[tool]))
    assert body["instructions"] == "Be brief."
    assert body["input"] == [{"role": "user", "content": "hi"}]
    assert body["tools"] == [
        {
            "type": "function",
            "name": "f",
            "description": "d",
            "parameters": tool.input_schema,
            "strict": False,
        }
    ]
    assert body["store"] is False
    assert "include" not in body  # gpt-4o does not reason


def test_media_parts_map_to_input_items() -> None:
    """Text, images and PDFs become input_text / input_image / input_file with data URLs."""
    parts: list[Part] = [
        TextPart(text="look"),
        ImagePart(media_type="image/PNG", source=DataSource(data=PNG)),
        FilePart(media_type="application/pdf", source=DataSource(data="JVBERi0="), name="a.pdf"),
    ]
    body = provider().wire_body(LlmRequest(messages=[Message(role="user", content=parts)]))
    assert body["input"][0]["content"] == [
        {"type": "input_text", "text": "look"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "auto"},
        {
            "type": "input_file",
            "filename": "a.pdf",
            "file_data": "data:application/pdf;base64,JVBERi0=",
        },
    ]


def test_audio_is_refused_even_when_declared() -> None:
    """The Responses API takes no audio input: refused with the remedy, never dropped."""
    clip = AudioPart(media_type="audio/wav", source=DataSource(data="UklGRg=="))
    with pytest.raises(UnsupportedModalityError) as info:
        provider().wire_body(LlmRequest(messages=[Message(role="user", content=[clip])]))
    assert "OpenAIProvider" in info.value.message


def test_tool_round_trip_pairs_by_call_id_and_keeps_media_in_the_output() -> None:
    """function_call and function_call_output share the call id; a result's image rides in its output."""
    request = LlmRequest(
        messages=[
            Message(role="user", content="show me"),
            Message(
                role="assistant",
                content=[
                    TextPart(text="Fetching."),
                    ToolUsePart(
                        id="call_1", name="shot", input={"n": 1}, provider_data={"item_id": "fc_9"}
                    ),
                    ToolUsePart(id="call_2", name="fail", input={}),
                ],
            ),
            Message(
                role="user",
                content=[
                    ToolResultPart(
                        tool_use_id="call_1",
                        content=[
                            TextPart(text="here"),
                            ImagePart(media_type="image/png", source=DataSource(data=PNG)),
                        ],
                    ),
                    ToolResultPart(tool_use_id="call_2", content="boom", is_error=True),
                    TextPart(text="thanks"),
                ],
            ),
        ]
    )
    items = provider().wire_body(request)["input"]
    assert items[1] == {"role": "assistant", "content": "Fetching."}
    assert items[2] == {
        "type": "function_call",
        "call_id": "call_1",
        "name": "shot",
        "arguments": '{"n":1}',
        "id": "fc_9",
    }
    assert items[3] == {
        "type": "function_call",
        "call_id": "call_2",
        "name": "fail",
        "arguments": "{}",
    }
    assert items[4] == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": [
            {"type": "input_text", "text": "here"},
            {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"},
        ],
    }
    assert items[5] == {
        "type": "function_call_output",
        "call_id": "call_2",
        "output": "Error: boom",
    }
    assert items[6] == {"role": "user", "content": [{"type": "input_text", "text": "thanks"}]}


def test_untrusted_tool_media_is_fenced_inside_the_output() -> None:
    """Media from an untrusted tool result travels between its fence texts."""
    image = ImagePart(media_type="image/png", source=DataSource(data=PNG), origin="tool:web")
    request = LlmRequest(
        messages=[
            Message(role="user", content="go"),
            Message(role="assistant", content=[ToolUsePart(id="c", name="web", input={})]),
            Message(role="user", content=[ToolResultPart(tool_use_id="c", content=[image])]),
        ]
    )
    output = provider().wire_body(request)["input"][2]["output"]
    assert [o["type"] for o in output] == ["input_text", "input_image", "input_text"]
    assert "untrusted" in output[0]["text"]


def test_only_this_apis_reasoning_is_sent_back() -> None:
    """Reasoning from another vendor (or Chat Completions) is left out; a summary goes back as written."""
    ours = ReasoningPart(
        text="step",
        data="enc",
        provider_data={"vendor": "openai", "api": "responses", "id": "rs_1", "summary": ["a", "b"]},
    )
    theirs = ReasoningPart(text="hmm", signature="sig", provider_data={"vendor": "anthropic"})
    request = LlmRequest(
        messages=[
            *HI.messages,
            Message(role="assistant", content=[theirs, ours, TextPart(text="ok")]),
        ]
    )
    items = provider("gpt-5").wire_body(request)["input"]
    assert items[1] == {
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "a"}, {"type": "summary_text", "text": "b"}],
        "id": "rs_1",
        "encrypted_content": "enc",
    }
    assert items[2] == {"role": "assistant", "content": "ok"}
    assert len(items) == 3


def test_settings_and_structured_output_map_to_responses_fields() -> None:
    """max_tokens → max_output_tokens, effort → reasoning.effort, output_type → text.format json_schema."""
    p = provider("o4-mini", extra_body={"reasoning": {"summary": "auto"}})
    body = p.wire_body(
        HI, settings=ModelSettings(max_tokens=99, reasoning_effort="low"), output_type=CityLocation
    )
    assert body["max_output_tokens"] == 99
    assert body["reasoning"] == {"effort": "low", "summary": "auto"}
    assert body["text"]["format"]["type"] == "json_schema"
    assert body["text"]["format"]["name"] == "CityLocation"
    assert body["text"]["format"]["strict"] is True
    assert body["include"] == ["reasoning.encrypted_content"]


@pytest.mark.parametrize(
    ("settings", "setting"),
    [
        (ModelSettings(seed=1), "seed"),
        (ModelSettings(stop_sequences=["x"]), "stop_sequences"),
        (ModelSettings(thinking_budget=100), "thinking_budget"),
    ],
)
async def test_settings_the_responses_api_lacks_are_refused_before_io(
    settings: ModelSettings, setting: str
) -> None:
    """seed, stop sequences and a thinking budget have no Responses field: refused, nothing sent."""
    sent: list[httpx.Request] = []
    client = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda r: sent.append(r) or httpx.Response(500))
    )
    p = OpenAIResponsesProvider("gpt-4o", api_key="k", http_client=client)
    with pytest.raises(ConfigurationError) as info:
        await p.complete(HI, settings=settings)
    assert info.value.details["setting"] == setting
    assert sent == []


def test_bad_constructor_arguments_are_typed_errors() -> None:
    """A model or key of the wrong type is a ConfigurationError, not a crash at the first call."""
    for kwargs in ({"model": 123}, {"model": " "}, {"model": "gpt-4o", "api_key": 5}):
        with pytest.raises(ConfigurationError):
            OpenAIResponsesProvider(**kwargs)  # type: ignore[arg-type]


def test_reserved_extra_body_keys_are_refused() -> None:
    """extra_body cannot replace what the provider builds from the request (input, store ...)."""
    for key in ("input", "store", "instructions"):
        with pytest.raises(ConfigurationError) as info:
            OpenAIResponsesProvider("gpt-4o", api_key="k", extra_body={key: 1})
        assert info.value.code == "reserved_body_field"


def test_default_capabilities_follow_the_allowlist() -> None:
    """Images and PDFs for the vision families on OpenAI's endpoint; nothing off it; never audio."""
    caps = OpenAIResponsesProvider("gpt-4.1-mini", api_key="k").capabilities
    assert caps.accepts("image", "image/png")
    assert caps.accepts("file", "application/pdf")
    assert not caps.accepts("audio", "audio/wav")
    assert default_capabilities("openai-responses", "gpt-4o-audio-preview") == Capabilities()
    off = OpenAIResponsesProvider("gpt-4o", base_url="http://127.0.0.1:9/v1")
    assert off.capabilities == Capabilities()


# -- the response side --------------------------------------------------------------------------


def answer(output: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-4o", "output": output,
            "usage": {"input_tokens": 5, "output_tokens": 7}, **extra}  # fmt: skip


def mock(
    payload: dict[str, Any] | str, status: int = 200, sent: list[httpx.Request] | None = None
) -> httpx.AsyncClient:
    def handler(request: httpx.Request) -> httpx.Response:
        if sent is not None:
            sent.append(request)
        if isinstance(payload, str):
            return httpx.Response(
                status, content=payload.encode(), headers={"content-type": "text/event-stream"}
            )
        return httpx.Response(status, json=payload)

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


async def test_reasoning_summary_and_refusal_are_read() -> None:
    """A reasoning item's summary becomes the part's text; a refusal is the stop reason and kept."""
    body = answer([
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Thinking."}], "encrypted_content": "e"},
        {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]},
    ])  # fmt: skip
    response = await OpenAIResponsesProvider("o3", api_key="k", http_client=mock(body)).complete(HI)
    assert response.reasoning[0].text == "Thinking."
    assert response.reasoning[0].provider_data == {
        "vendor": "openai",
        "api": "responses",
        "id": "rs_1",
        "summary": ["Thinking."],
    }
    assert response.stop_reason == "refusal"
    assert response.provider_data["refusal"] == "No."


async def test_incomplete_at_max_output_tokens_is_max_tokens() -> None:
    """status incomplete with reason max_output_tokens maps to stop_reason max_tokens."""
    body = answer(
        [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Par"}]}],
        status="incomplete", incomplete_details={"reason": "max_output_tokens"},
    )  # fmt: skip
    response = await OpenAIResponsesProvider(
        "gpt-4o", api_key="k", http_client=mock(body)
    ).complete(HI)
    assert (response.content, response.stop_reason) == ("Par", "max_tokens")


async def test_an_output_item_loom_nb_does_not_model_is_refused() -> None:
    """A hosted tool's call item (here web_search_call) fails loudly rather than being dropped."""
    body = answer([{"type": "web_search_call", "id": "ws_1", "status": "completed"}])
    with pytest.raises(ProviderError) as info:
        await OpenAIResponsesProvider("gpt-4o", api_key="k", http_client=mock(body)).complete(HI)
    assert info.value.code == "unsupported_response_content"


async def test_http_errors_are_parsed_and_retried_like_openai(fast_retries: RetryPolicy) -> None:
    """A 500 is retried through the shared HTTP layer; a 400 surfaces as a typed ProviderError at once."""
    sent: list[httpx.Request] = []
    error = {
        "error": {
            "message": "bad input",
            "type": "invalid_request_error",
            "param": "input",
            "code": None,
        }
    }
    p = OpenAIResponsesProvider(
        "gpt-4o", api_key="k", http_client=mock(error, 400, sent), retry_policy=fast_retries
    )
    with pytest.raises(ProviderError) as info:
        await p.complete(HI)
    assert (info.value.status, info.value.error_type, len(sent)) == (
        400,
        "invalid_request_error",
        1,
    )
    sent.clear()
    p = OpenAIResponsesProvider(
        "gpt-4o",
        api_key="k",
        http_client=mock({"error": {"message": "x", "type": "server_error"}}, 500, sent),
        retry_policy=fast_retries,
    )
    with pytest.raises(ProviderError):
        await p.complete(HI)
    assert len(sent) == 4


def sse(*events: dict[str, Any]) -> str:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


async def test_stream_reasoning_deltas_and_error_events() -> None:
    """Reasoning summary deltas stream as reasoning chunks; an error event is a ProviderError."""
    final = answer(
        [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "A"}],
            }
        ]
    )
    stream = sse(
        {"type": "response.reasoning_summary_text.delta", "delta": "Hmm", "item_id": "rs_1"},
        {"type": "response.output_text.delta", "delta": "A", "item_id": "m"},
        {"type": "response.completed", "response": final},
    )
    thoughts: list[str] = []
    p = OpenAIResponsesProvider("gpt-4o", api_key="k", http_client=mock(stream))
    response = await collect_stream(p.stream(HI), on_reasoning=thoughts.append)
    assert (thoughts, response.content) == (["Hmm"], "A")
    failing = sse({"type": "error", "code": "invalid_prompt", "message": "nope", "param": None})
    p = OpenAIResponsesProvider(
        "gpt-4o", api_key="k", http_client=mock(failing), retry_policy=RetryPolicy(max_retries=0)
    )
    with pytest.raises(ProviderError) as info:
        await collect_stream(p.stream(HI))
    assert "nope" in info.value.message
    assert info.value.error_type == "invalid_prompt"


async def test_stream_without_completion_is_incomplete() -> None:
    """A stream cut before response.completed is stream_incomplete (retryable), not a half answer."""
    cut = sse({"type": "response.output_text.delta", "delta": "Hal", "item_id": "m"})
    p = OpenAIResponsesProvider(
        "gpt-4o", api_key="k", http_client=mock(cut), retry_policy=RetryPolicy(max_retries=0)
    )
    with pytest.raises(ProviderError) as info:
        await collect_stream(p.stream(HI))
    assert info.value.code == "stream_incomplete"


def test_key_from_the_environment_only_on_openais_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """OPENAI_API_KEY is read for api.openai.com and never sent to another base_url."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-secret")
    assert OpenAIResponsesProvider("gpt-4o")._headers()["authorization"] == "Bearer sk-env-secret"
    other = OpenAIResponsesProvider("m", base_url="http://127.0.0.1:8000/v1")
    assert "authorization" not in other._headers()
    assert "sk-env-secret" not in repr(OpenAIResponsesProvider("gpt-4o"))


# -- the conformance kit ------------------------------------------------------------------------


def make_responses(capabilities: Capabilities) -> ProviderUnderTest:
    """An OpenAIResponsesProvider on a MockTransport logging bodies, answering 'ok' (JSON or SSE)."""
    log: list[httpx.Request] = []
    ok = answer(
        [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "ok"}],
            }
        ]
    )

    def handler(request: httpx.Request) -> httpx.Response:
        log.append(request)
        if json.loads(request.content).get("stream"):
            body = sse(
                {"type": "response.output_text.delta", "delta": "ok"},
                {"type": "response.completed", "response": ok},
            )
            return httpx.Response(
                200, content=body.encode(), headers={"content-type": "text/event-stream"}
            )
        return httpx.Response(200, json=ok)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    p = OpenAIResponsesProvider(
        "gpt-5-mini", api_key="k", capabilities=capabilities, http_client=client
    )
    return ProviderUnderTest(p, lambda: [r.content for r in log])


async def test_conformance_kit_passes() -> None:
    """OpenAIResponsesProvider passes every case of the conformance kit."""
    cases = await run_llm_provider_conformance(make_responses)
    assert "settings_honoured_or_refused" in cases
    assert "output_schema_on_wire" in cases


async def test_an_echoed_key_is_redacted_and_deep_nesting_is_malformed() -> None:
    """A 401 quoting the key never shows it; a response nested 100,000 deep is malformed_response."""
    key = "sk-live-abcdef1234567890"
    echo = {
        "error": {
            "message": f"Incorrect API key provided: Bearer {key}",
            "type": "invalid_request_error",
        }
    }
    p = OpenAIResponsesProvider("gpt-4o", api_key=key, http_client=mock(echo, 401))
    with pytest.raises(ProviderError) as info:
        await p.complete(HI)
    assert key not in info.value.message
    assert key not in repr(info.value)
    deep = '{"output":' + "[" * 100_000 + "]" * 100_000 + "}"

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, content=deep.encode(), headers={"content-type": "application/json"}
        )

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    p = OpenAIResponsesProvider("gpt-4o", api_key="k", http_client=client)
    with pytest.raises(ProviderError) as info:
        await p.complete(HI)
    assert info.value.code == "malformed_response"


async def test_a_stream_event_nested_too_deep_is_malformed() -> None:
    """An SSE event nested 100,000 deep is malformed_response, not a bare RecursionError."""
    deep = "data: " + "[" * 100_000 + "]" * 100_000 + "\n\n"
    p = OpenAIResponsesProvider(
        "gpt-4o", api_key="k", http_client=mock(deep), retry_policy=RetryPolicy(max_retries=0)
    )
    with pytest.raises(ProviderError) as info:
        await collect_stream(p.stream(HI))
    assert info.value.code == "malformed_response"
