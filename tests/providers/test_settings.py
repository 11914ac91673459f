"""``ModelSettings``: validation, merging, canonical JSON, and each vendor's wire fields and refusals."""

from __future__ import annotations

import io
import json
from typing import Any

import httpx
import pytest

from loom_nb.content import LlmRequest, Message, canonical_json
from loom_nb.errors import ConfigurationError
from loom_nb.guard._canonical import canonical_request_json
from loom_nb.journal import Journal, create_llm_effect, hash_request
from loom_nb.providers import (
    AnthropicProvider,
    GeminiProvider,
    OpenAIProvider,
    ScriptedProvider,
    collect_stream,
)
from loom_nb.settings import ModelSettings, merge_settings

HI = LlmRequest(messages=[Message(role="user", content="hi")])

ANTHROPIC_OK = {
    "id": "msg_s", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
    "usage": {"input_tokens": 1, "output_tokens": 1},
}  # fmt: skip
OPENAI_OK = {
    "id": "c1", "object": "chat.completion", "model": "gpt-4o",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1},
}  # fmt: skip
GEMINI_OK = {
    "candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}],
    "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1},
}  # fmt: skip


class Wire:
    """A MockTransport that records request bodies and answers with one canned JSON."""

    def __init__(self, answer: dict[str, Any]) -> None:
        self.bodies: list[dict[str, Any]] = []
        self._answer = answer

    def client(self) -> httpx.AsyncClient:
        def handler(request: httpx.Request) -> httpx.Response:
            self.bodies.append(json.loads(request.content))
            return httpx.Response(200, json=self._answer)

        return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def anthropic(wire: Wire, **kwargs: Any) -> AnthropicProvider:
    return AnthropicProvider(
        kwargs.pop("model", "claude-sonnet-4-5"),
        http_client=wire.client(),
        **{"api_key": "k", **kwargs},
    )


def openai(wire: Wire, **kwargs: Any) -> OpenAIProvider:
    return OpenAIProvider(
        kwargs.pop("model", "gpt-4o"), http_client=wire.client(), **{"api_key": "k", **kwargs}
    )


def gemini(wire: Wire, **kwargs: Any) -> GeminiProvider:
    return GeminiProvider(
        kwargs.pop("model", "gemini-2.5-flash"),
        http_client=wire.client(),
        **{"api_key": "k", **kwargs},
    )


# -- the model ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": 1.5}, "max_tokens"),
        ({"temperature": -0.1}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"temperature": True}, "temperature"),
        ({"top_p": 1.5}, "top_p"),
        ({"stop_sequences": "END"}, "stop_sequences"),
        ({"stop_sequences": [""]}, "stop_sequences"),
        ({"thinking_budget": -1}, "thinking_budget"),
        ({"reasoning_effort": "extreme"}, "reasoning_effort"),
        ({"seed": "7"}, "seed"),
        ({"temprature": 0}, "temprature"),
    ],
)
def test_bad_settings_are_a_configuration_error_naming_the_field(
    kwargs: dict[str, Any], field: str
) -> None:
    """An out-of-range or misspelled setting raises ConfigurationError(invalid_setting) naming it."""
    with pytest.raises(ConfigurationError) as info:
        ModelSettings(**kwargs)
    assert info.value.code == "invalid_setting"
    assert info.value.details["field"] == field
    assert field in info.value.message


def test_settings_serialize_only_what_is_set() -> None:
    """Unset fields are left out, so adding a field later never changes a recorded request."""
    settings = ModelSettings(max_tokens=10, stop_sequences=["a", "b"])
    assert settings.model_dump(mode="json") == {"max_tokens": 10, "stop_sequences": ["a", "b"]}
    assert settings.stop_sequences == ("a", "b")


def test_merge_is_field_by_field_later_layers_winning() -> None:
    """merge_settings keeps every field some layer set; the later layer wins a field both set."""
    base = ModelSettings(max_tokens=100, temperature=0.5)
    merged = merge_settings(base, ModelSettings(temperature=0.1), ModelSettings(seed=3))
    assert merged == ModelSettings(max_tokens=100, temperature=0.1, seed=3)
    assert merge_settings(None, ModelSettings(), None) is None
    with pytest.raises(ConfigurationError) as info:
        merge_settings({"max_tokens": 3})  # type: ignore[arg-type]
    assert info.value.code == "invalid_setting"


def test_request_without_settings_hashes_as_before() -> None:
    """A request with no settings (or empty ones) has the same canonical JSON as before settings existed."""
    assert (
        canonical_json(HI)
        == '{"messages":[{"content":"hi","role":"user"}],"system":null,"tools":[]}'
    )
    empty = LlmRequest(messages=HI.messages, settings=ModelSettings())
    assert empty.settings is None
    assert hash_request(empty) == hash_request(HI)


def test_settings_and_schema_are_in_the_canonical_json_and_the_fast_path_agrees() -> None:
    """Settings and an output schema change the hash; the guard's fast encoder writes the same string."""
    request = LlmRequest(
        messages=HI.messages,
        settings=ModelSettings(temperature=0.25, stop_sequences=["Z"]),
        output_schema={"type": "object", "properties": {"a": {"type": "integer"}}},
    )
    text = canonical_json(request)
    assert '"settings":{"stop_sequences":["Z"],"temperature":0.25}' in text
    assert '"output_schema":{"properties"' in text
    assert canonical_request_json(request) == text
    assert hash_request(request) != hash_request(HI)


# -- merging on a provider ------------------------------------------------------------------------


async def test_call_settings_override_request_over_construction() -> None:
    """construction < request < call, field by field, and the effective settings travel on the request."""
    provider = ScriptedProvider(
        [{"text": "a"}], settings=ModelSettings(max_tokens=100, temperature=0.5, seed=1)
    )
    request = LlmRequest(messages=HI.messages, settings=ModelSettings(temperature=0.2, top_p=0.9))
    await provider.complete(request, settings=ModelSettings(top_p=0.3))
    assert provider.requests[0].settings == ModelSettings(
        max_tokens=100, temperature=0.2, top_p=0.3, seed=1
    )


async def test_openai_wire_carries_the_merged_settings() -> None:
    """On OpenAI's endpoint max_tokens goes out as max_completion_tokens, with the rest by name."""
    wire = Wire(OPENAI_OK)
    provider = openai(wire, settings=ModelSettings(max_tokens=64, seed=9))
    await provider.complete(
        HI, settings=ModelSettings(temperature=0, top_p=0.5, stop_sequences=["END"])
    )
    body = wire.bodies[0]
    assert {k: body[k] for k in ("max_completion_tokens", "seed", "temperature", "top_p", "stop")} == {
        "max_completion_tokens": 64, "seed": 9, "temperature": 0, "top_p": 0.5, "stop": ["END"],
    }  # fmt: skip
    assert "max_tokens" not in body


async def test_openai_compatible_server_gets_max_tokens() -> None:
    """A compatible server reads max_tokens, and its model's rules are not OpenAI's to enforce."""
    wire = Wire(OPENAI_OK)
    provider = openai(
        wire, model="o3-distill-local", base_url="http://127.0.0.1:8000/v1", api_key=None
    )
    await provider.complete(HI, settings=ModelSettings(max_tokens=5, temperature=0.7))
    assert wire.bodies[0]["max_tokens"] == 5
    assert wire.bodies[0]["temperature"] == 0.7
    assert "max_completion_tokens" not in wire.bodies[0]


async def test_openai_reasoning_model_takes_effort() -> None:
    """reasoning_effort reaches an o-series model as reasoning_effort."""
    wire = Wire(OPENAI_OK)
    await openai(wire, model="o4-mini").complete(
        HI, settings=ModelSettings(reasoning_effort="high", max_tokens=500)
    )
    assert wire.bodies[0]["reasoning_effort"] == "high"
    assert wire.bodies[0]["max_completion_tokens"] == 500


async def test_anthropic_wire_fields_and_thinking() -> None:
    """Anthropic gets max_tokens, top_p, stop_sequences and thinking {type, budget_tokens}."""
    wire = Wire(ANTHROPIC_OK)
    provider = anthropic(wire, settings=ModelSettings(max_tokens=8000))
    await provider.complete(
        HI,
        settings=ModelSettings(thinking_budget=2048, top_p=0.97, stop_sequences=["###"]),
    )
    body = wire.bodies[0]
    assert body["max_tokens"] == 8000
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["top_p"] == 0.97
    assert body["stop_sequences"] == ["###"]
    assert "temperature" not in body


async def test_anthropic_default_max_tokens_without_settings_is_unchanged() -> None:
    """No settings: the body is exactly what it was (max_tokens from the constructor, no new keys)."""
    wire = Wire(ANTHROPIC_OK)
    await anthropic(wire, max_tokens=321).complete(HI)
    assert set(wire.bodies[0]) == {"model", "max_tokens", "messages", "stream"}
    assert wire.bodies[0]["max_tokens"] == 321


async def test_anthropic_takes_extra_body_and_refuses_reserved_keys() -> None:
    """extra_body reaches the Anthropic wire; a key built from the request is refused at construction."""
    wire = Wire(ANTHROPIC_OK)
    await anthropic(wire, extra_body={"top_k": 5, "metadata": {"user_id": "u1"}}).complete(HI)
    assert wire.bodies[0]["top_k"] == 5
    assert wire.bodies[0]["metadata"] == {"user_id": "u1"}
    with pytest.raises(ConfigurationError) as info:
        anthropic(Wire(ANTHROPIC_OK), extra_body={"messages": []})
    assert info.value.code == "reserved_body_field"


async def test_gemini_generation_config_and_extra_body_combine() -> None:
    """Settings map into generationConfig and merge with extra_body's generationConfig keys."""
    wire = Wire(GEMINI_OK)
    provider = gemini(wire, extra_body={"generationConfig": {"topK": 4}})
    await provider.complete(
        HI,
        settings=ModelSettings(
            max_tokens=99, temperature=0.3, top_p=0.8, stop_sequences=["x"], seed=5,
            thinking_budget=0,
        ),
    )  # fmt: skip
    assert wire.bodies[0]["generationConfig"] == {
        "topK": 4, "maxOutputTokens": 99, "temperature": 0.3, "topP": 0.8,
        "stopSequences": ["x"], "seed": 5, "thinkingConfig": {"thinkingBudget": 0},
    }  # fmt: skip


async def test_gemini_3_maps_effort_to_thinking_level() -> None:
    """On Gemini 3 reasoning_effort becomes thinkingConfig.thinkingLevel."""
    wire = Wire(GEMINI_OK)
    await gemini(wire, model="gemini-3-pro-preview").complete(
        HI, settings=ModelSettings(reasoning_effort="low")
    )
    assert wire.bodies[0]["generationConfig"]["thinkingConfig"] == {"thinkingLevel": "low"}


async def test_stream_sends_the_settings_too() -> None:
    """stream() takes settings= like complete() and puts them on the streamed body."""
    bodies: list[dict[str, Any]] = []
    sse = (
        'data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\n'
        "data: [DONE]\n\n"
    )

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(
            200, content=sse.encode(), headers={"content-type": "text/event-stream"}
        )

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    provider = OpenAIProvider("gpt-4o", api_key="k", http_client=client)
    reply = await collect_stream(provider.stream(HI, settings=ModelSettings(seed=42)))
    assert reply.content == "ok"
    assert bodies[0]["seed"] == 42
    assert bodies[0]["stream"] is True


# -- refusals before any I/O ----------------------------------------------------------------------


REFUSALS = [
    ("anthropic", {}, ModelSettings(seed=1), "seed"),
    ("anthropic", {}, ModelSettings(reasoning_effort="low"), "reasoning_effort"),
    ("anthropic", {}, ModelSettings(temperature=1.5), "temperature"),
    ("anthropic", {}, ModelSettings(temperature=0.5, top_p=0.9), "top_p"),
    ("anthropic", {}, ModelSettings(thinking_budget=512), "thinking_budget"),
    ("anthropic", {}, ModelSettings(thinking_budget=5000, max_tokens=4000), "thinking_budget"),
    ("anthropic", {}, ModelSettings(thinking_budget=2048, temperature=0.2), "temperature"),
    ("openai", {"model": "o3"}, ModelSettings(temperature=0.2), "temperature"),
    ("openai", {"model": "gpt-5-mini"}, ModelSettings(top_p=0.2), "top_p"),
    ("openai", {"model": "o4-mini"}, ModelSettings(stop_sequences=["x"]), "stop_sequences"),
    ("openai", {"model": "gpt-4o"}, ModelSettings(reasoning_effort="low"), "reasoning_effort"),
    ("openai", {}, ModelSettings(thinking_budget=1000), "thinking_budget"),
    ("openai", {}, ModelSettings(stop_sequences=list("abcde")), "stop_sequences"),
    ("gemini", {}, ModelSettings(reasoning_effort="low"), "reasoning_effort"),
    ("gemini", {"model": "gemini-2.0-flash"}, ModelSettings(thinking_budget=100), "thinking_budget"),
    ("gemini", {"model": "gemini-3-pro"}, ModelSettings(reasoning_effort="xhigh"), "reasoning_effort"),
    ("gemini", {}, ModelSettings(stop_sequences=list("abcdef")), "stop_sequences"),
]  # fmt: skip


@pytest.mark.parametrize(("vendor", "kwargs", "settings", "setting"), REFUSALS)
async def test_unsupported_setting_is_refused_before_any_io(
    vendor: str, kwargs: dict[str, Any], settings: ModelSettings, setting: str
) -> None:
    """A setting the vendor/model cannot take is ConfigurationError(unsupported_setting); nothing is sent."""
    make = {"anthropic": (anthropic, ANTHROPIC_OK), "openai": (openai, OPENAI_OK)}.get(
        vendor, (gemini, GEMINI_OK)
    )
    wire = Wire(make[1])
    provider = make[0](wire, **kwargs)
    for call in (
        lambda: provider.complete(HI, settings=settings),
        lambda: collect_stream(provider.stream(HI, settings=settings)),
    ):
        with pytest.raises(ConfigurationError) as info:
            await call()
        assert info.value.code == "unsupported_setting"
        assert info.value.details["setting"] == setting
        assert setting in info.value.message
    assert wire.bodies == []


async def test_construction_settings_are_checked_per_call_too() -> None:
    """Defaults given at construction that the model refuses fail the call, not silently later."""
    wire = Wire(OPENAI_OK)
    provider = openai(wire, model="o3", settings=ModelSettings(temperature=0.0))
    with pytest.raises(ConfigurationError):
        await provider.complete(HI)
    assert wire.bodies == []


async def test_extra_body_contradicting_a_setting_is_refused() -> None:
    """extra_body and settings disagreeing on a field is setting_conflict, not one silently winning."""
    wire = Wire(OPENAI_OK)
    provider = openai(wire, extra_body={"temperature": 1.0})
    with pytest.raises(ConfigurationError) as info:
        await provider.complete(HI, settings=ModelSettings(temperature=0.0))
    assert info.value.code == "setting_conflict"
    g = gemini(Wire(GEMINI_OK), extra_body={"generationConfig": {"temperature": 1.0}})
    with pytest.raises(ConfigurationError) as info:
        await g.complete(HI, settings=ModelSettings(temperature=0.0))
    assert info.value.details["fields"] == ["generationConfig.temperature"]
    assert wire.bodies == []
    # Agreeing is fine, and extra_body alone still works as before.
    await provider.complete(HI, settings=ModelSettings(temperature=1.0))
    await provider.complete(HI)
    assert [b["temperature"] for b in wire.bodies] == [1.0, 1.0]


async def test_settings_must_be_model_settings() -> None:
    """A dict where ModelSettings belongs is refused with a typed error at construction and per call."""
    with pytest.raises(ConfigurationError):
        ScriptedProvider([], settings={"max_tokens": 3})  # type: ignore[arg-type]
    provider = ScriptedProvider([{"text": "x"}])
    with pytest.raises(ConfigurationError):
        await provider.complete(HI, settings={"max_tokens": 3})  # type: ignore[arg-type]


# -- the journal ----------------------------------------------------------------------------------


async def test_journal_records_the_effective_settings() -> None:
    """The journaled step input holds the provider defaults merged under the request's settings."""
    journal = Journal()
    execution = journal.execution("s1")
    provider = ScriptedProvider([{"text": "a"}], settings=ModelSettings(max_tokens=50, seed=4))
    effect = create_llm_effect(provider)
    request = LlmRequest(messages=HI.messages, settings=ModelSettings(seed=8))
    await effect(execution, "llm", request)
    out = io.StringIO()
    journal.export_jsonl("s1", out)
    steps = [json.loads(line) for line in out.getvalue().splitlines()]
    completed = next(r for r in steps if r["kind"] == "step_completed")
    payload = completed["payload"]
    payload = json.loads(payload) if isinstance(payload, str) else payload
    assert payload["input"]["settings"] == {"max_tokens": 50, "seed": 8}
    assert provider.requests[0].settings == ModelSettings(max_tokens=50, seed=8)
