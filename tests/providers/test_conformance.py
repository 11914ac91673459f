"""The conformance kit passes the shipped providers and fails providers that break its rules."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import pytest

from loom_nb.capabilities import Capabilities
from loom_nb.content import LlmRequest, LlmResponse, canonical_json, text_of
from loom_nb.providers import (
    AnthropicProvider,
    LlmStreamChunk,
    ProviderUnderTest,
    ScriptedProvider,
    run_llm_provider_conformance,
)
from tests.providers.raw import raw_factory

ANTHROPIC_OK = {
    "id": "msg_c", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
    "usage": {"input_tokens": 1, "output_tokens": 1},
}  # fmt: skip
ANTHROPIC_SSE = (
    'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_c","model":"m","content":[],"usage":{"input_tokens":1}}}\n\n'
    'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}\n\n'
    'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


def make_anthropic(capabilities: Capabilities) -> ProviderUnderTest:
    """An AnthropicProvider on a MockTransport that logs every request body it receives."""
    log: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        log.append(request)
        if json.loads(request.content).get("stream"):
            return httpx.Response(
                200, content=ANTHROPIC_SSE.encode(), headers={"content-type": "text/event-stream"}
            )
        return httpx.Response(200, json=ANTHROPIC_OK)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    provider = AnthropicProvider(
        "claude-sonnet-4-5", api_key="k", capabilities=capabilities, http_client=client
    )
    return ProviderUnderTest(provider, lambda: [r.content for r in log])


def make_scripted(capabilities: Capabilities) -> ProviderUnderTest:
    """A ScriptedProvider whose 'wire' is the requests it recorded, serialized."""
    provider = ScriptedProvider([{"text": "ok"}] * 4, capabilities=capabilities)
    return ProviderUnderTest(
        provider, lambda: [canonical_json(r).encode() for r in provider.requests]
    )


@pytest.mark.parametrize("factory", [make_scripted, make_anthropic], ids=["scripted", "anthropic"])
async def test_shipped_providers_conform(factory: Any) -> None:
    """Scripted and Anthropic pass every conformance case."""
    cases = await run_llm_provider_conformance(factory)
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


class Careless:
    """A provider that skips the capability check, drops media and string-coerces content."""

    def __init__(self, capabilities: Capabilities) -> None:
        self.capabilities = capabilities
        self.wire: list[bytes] = []

    async def complete(self, request: LlmRequest) -> LlmResponse:
        # Deliberately wrong: repr() of the content, and media silently dropped.
        self.wire.append(
            json.dumps(
                [
                    repr(m.content) if not isinstance(m.content, str) else m.content
                    for m in request.messages
                ]
            ).encode()
        )
        return LlmResponse(content="ok")

    async def stream(self, request: LlmRequest) -> AsyncIterator[LlmStreamChunk]:
        yield LlmStreamChunk(kind="done", response=await self.complete(request))


class OnlyDropsMedia(Careless):
    """Checks capabilities and keeps text, but never sends media."""

    async def complete(self, request: LlmRequest) -> LlmResponse:
        from loom_nb.capabilities import assert_request_supported

        assert_request_supported(request, self.capabilities)
        self.wire.append(json.dumps([text_of(m.content) for m in request.messages]).encode())
        return LlmResponse(content="ok")


def careless_factory(cls: type[Careless]) -> Any:
    def make(capabilities: Capabilities) -> tuple[Careless, Any]:
        provider = cls(capabilities)

        def wire() -> Sequence[bytes]:
            return provider.wire

        return provider, wire

    return make


async def test_kit_fails_a_careless_provider() -> None:
    """A provider that ignores capabilities and string-coerces parts fails the refusal and coercion cases."""
    with pytest.raises(AssertionError) as info:
        await run_llm_provider_conformance(careless_factory(Careless))
    report = str(info.value)
    assert "undeclared_image_refused: text-only complete: accepted" in report
    assert "undeclared_image_refused: jpeg-only stream: yielded a chunk" in report
    assert "text_parts_not_coerced: a text-parts message was string-coerced" in report


async def test_kit_fails_a_provider_that_drops_declared_media() -> None:
    """Declaring image/png and then not sending the image is caught, as is losing the tool pairing."""
    with pytest.raises(AssertionError) as info:
        await run_llm_provider_conformance(careless_factory(OnlyDropsMedia))
    report = str(info.value)
    assert (
        "declared_image_on_wire: declared image/png but the image's bytes never reached the wire"
        in report
    )
    assert "tool_round_trip_paired" in report
    assert "undeclared_image_refused" not in report
    assert "text_parts_not_coerced" not in report


class DropsSettings:
    """Well behaved on media and tools, but accepts settings and output_type and sends neither."""

    def __init__(self, capabilities: Capabilities) -> None:
        self.inner = ScriptedProvider([{"text": "ok"}] * 4, capabilities=capabilities)
        self.capabilities = capabilities

    async def complete(self, request: LlmRequest, **_ignored: Any) -> LlmResponse:
        return await self.inner.complete(request)

    async def stream(self, request: LlmRequest, **_ignored: Any) -> AsyncIterator[LlmStreamChunk]:
        async for chunk in self.inner.stream(request):
            yield chunk


async def test_kit_fails_a_provider_that_drops_settings_and_schema() -> None:
    """Accepting a setting or an output_type and not sending it is caught, setting by setting."""

    def make(capabilities: Capabilities) -> ProviderUnderTest:
        provider = DropsSettings(capabilities)
        return ProviderUnderTest(
            provider, lambda: [canonical_json(r).encode() for r in provider.inner.requests]
        )

    with pytest.raises(AssertionError) as info:
        await run_llm_provider_conformance(make)
    report = str(info.value)
    assert (
        "settings_honoured_or_refused: seed: accepted, but its value 8861 never reached" in report
    )
    assert "settings_honoured_or_refused: max_tokens: accepted" in report
    assert "output_schema_on_wire: output_type was accepted but its schema never reached" in report
    assert "tool_round_trip_paired" not in report


async def test_hardened_error_paths_conform() -> None:
    """AnthropicProvider passes the kit's hardened-error cases (echoed key, deep JSON) through make_raw."""
    cases = await run_llm_provider_conformance(
        make_anthropic, make_raw=raw_factory(AnthropicProvider, "claude-sonnet-4-5")
    )
    assert cases[-2:] == ["echoed_key_redacted", "deep_json_malformed"]
