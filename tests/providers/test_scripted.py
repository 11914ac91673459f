"""ScriptedProvider: plays turns in order, guards and records requests, streams deltas, fails clearly."""

from __future__ import annotations

import json

import pytest

from loom_nb.capabilities import Capabilities
from loom_nb.content import (
    AudioPart,
    ContentRef,
    DataSource,
    LlmRequest,
    LlmResponse,
    Message,
    RefSource,
    TextPart,
    ToolCall,
    assistant_message_of,
    text_of,
)
from loom_nb.errors import (
    ContentValidationError,
    ProviderError,
    UnresolvedContentError,
    UnsupportedModalityError,
)
from loom_nb.providers import LlmProvider, ScriptedProvider, collect_stream
from loom_nb.taint import Untrusted

HELLO = LlmRequest(messages=[Message(role="user", content="hello")])
WAV = AudioPart(media_type="audio/wav", source=DataSource(data="UklGRg=="))


async def test_turns_play_in_order_and_dicts_become_responses() -> None:
    """Dict turns become responses (tool calls imply stop_reason tool_use); each call takes the next."""
    provider = ScriptedProvider([
        {"tool_calls": [{"id": "t1", "name": "f", "input": {"x": 1}}]},
        {"text": "done", "usage": {"input_tokens": 3, "output_tokens": 1}},
        LlmResponse(content="third"),
    ])  # fmt: skip
    first = await provider.complete(HELLO)
    assert first.tool_calls == [ToolCall(id="t1", name="f", input={"x": 1})]
    assert first.stop_reason == "tool_use"
    second = await provider.complete(HELLO)
    assert (second.content, second.stop_reason, second.usage.input_tokens) == (
        "done",
        "end_turn",
        3,
    )
    assert (await provider.complete(HELLO)).content == "third"
    assert provider.remaining == 0
    assert isinstance(provider, LlmProvider)


async def test_exhausted_script_is_a_clear_error() -> None:
    """A call after the last turn raises ProviderError(script_exhausted) saying how to fix it."""
    provider = ScriptedProvider([{"text": "only"}])
    await provider.complete(HELLO)
    with pytest.raises(ProviderError, match="Add a turn") as info:
        await provider.complete(HELLO)
    assert info.value.code == "script_exhausted"


def test_bad_turn_is_refused_at_construction() -> None:
    """A turn with an unknown key or a bad field is refused when the script is built, naming the turn."""
    with pytest.raises(ContentValidationError, match=r"turns\[1\]"):
        ScriptedProvider([{"text": "ok"}, {"txt": "typo"}])
    with pytest.raises(ContentValidationError, match="tool_calls"):
        ScriptedProvider([{"tool_calls": [{"name": "no id"}]}])
    with pytest.raises(ContentValidationError):
        ScriptedProvider([42])  # type: ignore[list-item]


async def test_requests_are_recorded_after_the_guard() -> None:
    """provider.requests holds what the provider saw: untrusted text already fenced."""
    provider = ScriptedProvider([{"text": "ok"}])
    request = LlmRequest(
        messages=[Message(role="user", content=[TextPart(text=Untrusted("web page", "tool:web"))])]
    )
    await provider.complete(request)
    seen = provider.requests[0].messages[0].content
    assert isinstance(seen, list)
    assert isinstance(seen[0], TextPart)
    assert isinstance(seen[0].text, str)
    assert seen[0].text.startswith('<untrusted nonce="')


async def test_default_capabilities_are_multimodal_and_overridable() -> None:
    """Audio is accepted by default; a text-only override refuses it before anything is recorded."""
    request = LlmRequest(messages=[Message(role="user", content=[WAV])])
    assert (await ScriptedProvider([{"text": "heard"}]).complete(request)).content == "heard"
    strict = ScriptedProvider([{"text": "x"}], capabilities=Capabilities())
    with pytest.raises(UnsupportedModalityError):
        await strict.complete(request)
    assert strict.requests == []
    assert strict.remaining == 1


async def test_unresolved_ref_is_refused() -> None:
    """Like a shipped provider, a ref that was never resolved to data is refused."""
    ref = RefSource(ref=ContentRef(address="sha256:" + "b" * 64))
    request = LlmRequest(
        messages=[Message(role="user", content=[AudioPart(media_type="audio/wav", source=ref)])]
    )
    with pytest.raises(UnresolvedContentError):
        await ScriptedProvider([{"text": "x"}]).complete(request)


async def test_stream_chunks_text_and_tool_deltas() -> None:
    """Streaming splits text and tool input JSON into chunk_size pieces; id and name come first."""
    provider = ScriptedProvider(
        [
            {
                "text": "Hello there",
                "tool_calls": [{"id": "c1", "name": "lookup", "input": {"q": "paris"}}],
            }
        ],
        chunk_size=4,
    )
    texts: list[str] = []
    deltas = []
    response = await collect_stream(
        provider.stream(HELLO), on_text=texts.append, on_tool_delta=deltas.append
    )
    assert texts == ["Hell", "o th", "ere"]
    assert (deltas[0].id, deltas[0].name, deltas[0].input_json) == ("c1", "lookup", "")
    assert all(len(d.input_json) <= 4 for d in deltas[1:])
    assert json.loads("".join(d.input_json for d in deltas)) == {"q": "paris"}
    assert response.tool_calls[0].input == {"q": "paris"}


async def test_stream_yields_reasoning_deltas_apart_from_the_text() -> None:
    """Reasoning streams as its own chunk kind, reaches on_reasoning only, and lands in response.reasoning."""
    provider = ScriptedProvider(
        [{"text": "4", "reasoning": [{"text": "two and two", "signature": "s"}]}], chunk_size=5
    )
    texts: list[str] = []
    thoughts: list[str] = []
    response = await collect_stream(
        provider.stream(HELLO), on_text=texts.append, on_reasoning=thoughts.append
    )
    assert thoughts == ["two a", "nd tw", "o"]
    assert texts == ["4"]
    assert response.content == "4"
    assert [(p.text, p.signature) for p in response.reasoning] == [("two and two", "s")]


async def test_function_turns_see_the_guarded_request() -> None:
    """A callable turn answers from the request it is given (here: echoing the last user text)."""

    def echo(request: LlmRequest) -> dict[str, str]:
        return {"text": "you said " + text_of(request.messages[-1].content)}

    provider = ScriptedProvider([echo])
    assert (await provider.complete(HELLO)).content == "you said hello"


async def test_tool_round_trip_threads_through_the_transcript() -> None:
    """A scripted tool call, answered with a tool_result, is accepted by the guard on the next turn."""
    provider = ScriptedProvider(
        [{"tool_calls": [{"id": "t1", "name": "f", "input": {}}]}, {"text": "thanks"}]
    )
    first = await provider.complete(HELLO)
    follow = LlmRequest(messages=[
        *HELLO.messages,
        assistant_message_of(first),
        Message.model_validate({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "42"}]}),
    ])  # fmt: skip
    assert (await provider.complete(follow)).content == "thanks"
    assert len(provider.requests) == 2


def test_repr_and_chunk_size_validation() -> None:
    """The repr says how far the script got; a non-positive chunk_size is refused."""
    assert repr(ScriptedProvider([{"text": "a"}])) == "ScriptedProvider(turns=1, played=0)"
    with pytest.raises(ContentValidationError, match="chunk_size"):
        ScriptedProvider([], chunk_size=0)
