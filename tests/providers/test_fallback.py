"""FallbackProvider over httpx.MockTransport: which errors move the call on, which never do,
streams, and that the journal keeps who answered (a replay calls nobody)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import httpx
import pytest

from loom_nb import Chat, Journal
from loom_nb.chat._cost import price_of
from loom_nb.content import AudioPart, DataSource, LlmRequest, Message, TextPart
from loom_nb.errors import GuardError, ProviderError
from loom_nb.providers import (
    AnthropicProvider,
    FallbackProvider,
    GeminiProvider,
    OpenAIProvider,
    ScriptedProvider,
    collect_stream,
)
from loom_nb.providers._base import LlmStreamChunk
from loom_nb.providers._http import RetryPolicy
from loom_nb.taint import Untrusted
from tests.display import displayed
from tests.providers.answers import anthropic_answer, openai_answer
from tests.providers.conftest import RecordingSleep
from tests.providers.recordings import load_recording

KEY = "k" * 24
REQUEST = LlmRequest(messages=[Message(role="user", content="hi")])
OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


class Script:
    """A MockTransport handler answering from a list of (status, body) or exceptions; ``sent``
    holds the JSON body of every request it got."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.calls = 0
        self.sent: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        self.sent.append(json.loads(request.content))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        status, body = answer
        return httpx.Response(status, json=body)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self))


def anthropic(script: Script, sleeps: RecordingSleep, **kw: Any) -> AnthropicProvider:
    policy = RetryPolicy(max_retries=2, sleep=sleeps)
    return AnthropicProvider(
        "claude-sonnet-4-5", api_key=KEY, http_client=script.client(), retry_policy=policy, **kw
    )


def openai(script: Script, **kw: Any) -> OpenAIProvider:
    return OpenAIProvider("gpt-4.1", api_key=KEY, http_client=script.client(), **kw)


async def test_529_after_retries_then_the_next_provider_answers(sleeps: RecordingSleep) -> None:
    """Anthropic answers 529 overloaded on every retry; the call goes to OpenAI, and the answer
    says OpenAI's model answered and why Anthropic was skipped."""
    first = Script((529, OVERLOADED), (529, OVERLOADED), (529, OVERLOADED))
    second = Script((200, openai_answer()))
    fallback = FallbackProvider([anthropic(first, sleeps), openai(second)])
    response = await fallback.complete(REQUEST)
    assert (first.calls, second.calls) == (3, 1)  # the primary's own retries ran first
    assert response.content == "from openai"
    assert response.provider == "openai"
    assert response.model == "gpt-4.1-2025-04-14"
    assert response.provider_data["fallback"][0]["provider"] == "anthropic"
    assert response.provider_data["fallback"][0]["code"] == "provider_overloaded"
    assert fallback.answered_by(response) is fallback.providers[1]
    # priced for the provider that answered, not the first one
    assert price_of(fallback, response) == price_of(fallback.providers[1], response)
    assert price_of(fallback, response) is not None


async def test_a_timeout_moves_on(sleeps: RecordingSleep) -> None:
    """A read timeout (after retries) is unavailability: the next provider answers."""
    timeouts = [httpx.ReadTimeout("slow") for _ in range(3)]
    first = Script(*timeouts)
    second = Script((200, openai_answer("after a timeout")))
    response = await FallbackProvider([anthropic(first, sleeps), openai(second)]).complete(REQUEST)
    assert response.content == "after a timeout"
    assert response.provider_data["fallback"][0]["code"] == "provider_timeout"


async def test_a_capability_refusal_moves_on_before_any_io() -> None:
    """Audio the first model cannot take (Anthropic has no audio input) is refused by that
    provider before any I/O; the audio-capable second provider answers."""
    wav = AudioPart(media_type="audio/wav", source=DataSource(data="UklGRiQAAABXQVZF"))
    request = LlmRequest(messages=[Message(role="user", content=[TextPart(text="listen"), wav])])
    first = Script()  # never called
    second = Script((200, openai_answer("I hear it")))
    audio = OpenAIProvider("gpt-4o-audio-preview", api_key=KEY, http_client=second.client())
    fallback = FallbackProvider(
        [AnthropicProvider("claude-sonnet-4-5", api_key=KEY, http_client=first.client()), audio]
    )
    assert fallback.capabilities.accepts("audio", "audio/wav")
    response = await fallback.complete(request)
    assert first.calls == 0
    assert response.provider == "openai"
    assert response.provider_data["fallback"][0]["code"] == "unsupported_modality"


async def test_a_400_never_falls_back(sleeps: RecordingSleep) -> None:
    """A recorded 400 (fixture anthropic/error-400-invalid-request.yaml) is the request's fault:
    it is raised at once and the second provider is never called."""
    recorded = load_recording("anthropic/error-400-invalid-request.yaml").interactions[0].response
    first = Script((400, recorded.json()))
    second = Script((200, openai_answer()))
    fallback = FallbackProvider([anthropic(first, sleeps), openai(second)])
    with pytest.raises(ProviderError) as info:
        await fallback.complete(REQUEST)
    assert info.value.status == 400
    assert second.calls == 0


async def test_a_guard_refusal_never_falls_back() -> None:
    """An untrusted system prompt is refused by the first provider's guard; no other is tried."""
    second = Script((200, openai_answer()))
    fallback = FallbackProvider(
        [AnthropicProvider("claude-sonnet-4-5", api_key=KEY), openai(second)]
    )
    request = LlmRequest(
        messages=[Message(role="user", content="hi")], system=Untrusted("x", "web")
    )
    with pytest.raises(GuardError) as info:
        await fallback.complete(request)
    assert info.value.code != "unsupported_modality"
    assert second.calls == 0


async def test_when_every_provider_is_down_the_last_error_lists_the_attempts(
    sleeps: RecordingSleep,
) -> None:
    """Both down: the last error is raised, with every attempt in its details."""
    first = Script((529, OVERLOADED), (529, OVERLOADED), (529, OVERLOADED))
    second = Script((503, {"error": {"message": "down", "type": "server_error"}}))
    fallback = FallbackProvider([anthropic(first, sleeps), openai(second, max_retries=0)])
    with pytest.raises(ProviderError) as info:
        await fallback.complete(REQUEST)
    assert info.value.status == 503
    assert [a["provider"] for a in info.value.details["fallback_attempts"]] == [
        "anthropic",
        "openai",
    ]


async def test_a_final_error_after_skipped_providers_lists_the_attempts(
    sleeps: RecordingSleep,
) -> None:
    """Anthropic is overloaded (skipped), then OpenAI refuses the request with a 400: the 400 is
    raised as it is (same type, status and code) and its details list both attempts. It used to
    carry no record that Anthropic had been tried, so the user could not tell why OpenAI was
    asked at all."""
    invalid = {"error": {"message": "bad", "type": "invalid_request_error"}}
    alone = openai(Script((400, invalid)), max_retries=0)
    with pytest.raises(ProviderError) as plain:
        await alone.complete(REQUEST)
    first = Script((529, OVERLOADED), (529, OVERLOADED), (529, OVERLOADED))
    second = Script((400, invalid))
    fallback = FallbackProvider([anthropic(first, sleeps), openai(second, max_retries=0)])
    with pytest.raises(ProviderError) as info:
        await fallback.complete(REQUEST)
    error = info.value
    assert (type(error), error.status, error.code) == (ProviderError, 400, plain.value.code)
    attempts = error.details["fallback_attempts"]
    assert [(a["provider"], a["code"]) for a in attempts] == [
        ("anthropic", "provider_overloaded"),
        ("openai", plain.value.code),
    ]
    assert "fallback_attempts" not in plain.value.details  # nothing was skipped: nothing to list
    # the same in a stream
    first = Script((529, OVERLOADED), (529, OVERLOADED), (529, OVERLOADED))
    second = Script((400, invalid))
    fallback = FallbackProvider([anthropic(first, sleeps), openai(second, max_retries=0)])
    with pytest.raises(ProviderError) as streamed:
        await collect_stream(fallback.stream(REQUEST))
    assert [a["provider"] for a in streamed.value.details["fallback_attempts"]] == [
        "anthropic",
        "openai",
    ]


async def test_a_stream_that_breaks_midway_is_reset_before_the_next_provider(
    sleeps: RecordingSleep,
) -> None:
    """Anthropic streams a text delta, then a mid-stream overloaded error (every attempt): the
    consumer gets a reset, then OpenAI's answer."""
    broken = (
        'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message",'
        '"role":"assistant","content":[],"model":"claude-sonnet-4-5","usage":{"input_tokens":5,"output_tokens":1}}}\n\n'
        'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
        'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"par"}}\n\n'
        'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
    )

    def anthropic_handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=broken, headers={"content-type": "text/event-stream"})

    recorded = load_recording("openai/stream-tool-call-forced-choice.json").interactions[0].response

    def openai_handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, content=recorded.body, headers={"content-type": "text/event-stream"}
        )

    first = AnthropicProvider(
        "claude-sonnet-4-5",
        api_key=KEY,
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(anthropic_handler)),
        retry_policy=RetryPolicy(max_retries=1, sleep=sleeps),
    )
    second = OpenAIProvider(
        "gpt-4o-mini",
        api_key=KEY,
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(openai_handler)),
    )
    texts: list[str] = []
    resets: list[bool] = []
    response = await collect_stream(
        FallbackProvider([first, second]).stream(REQUEST),
        on_text=texts.append,
        on_tool_reset=lambda: resets.append(True),
    )
    assert texts[0] == "par"
    assert resets  # the partial answer was withdrawn before OpenAI's
    assert response.provider == "openai"
    assert response.tool_calls[0].name == "get_weather"


async def test_a_stream_that_ends_without_a_final_response_moves_on_after_a_reset() -> None:
    """A provider whose stream stops after a delta, with no terminal chunk, is a broken stream
    (stream_incomplete): the partial text is withdrawn and the next provider answers. It used to
    end the call with that error, the next provider never asked."""

    class Cut(ScriptedProvider):
        async def stream(self, request: Any, **kwargs: Any) -> Any:
            yield LlmStreamChunk(kind="text", text="par")

    texts: list[str] = []
    resets: list[bool] = []
    fallback = FallbackProvider([Cut([]), ScriptedProvider([{"text": "ok"}])])
    response = await collect_stream(
        fallback.stream(REQUEST),
        on_text=texts.append,
        on_tool_reset=lambda: resets.append(True),
    )
    assert (response.content, response.provider) == ("ok", "scripted")
    assert texts[0] == "par"
    assert resets
    assert response.provider_data["fallback"][0]["code"] == "stream_incomplete"
    with pytest.raises(ProviderError) as info:
        await collect_stream(FallbackProvider([Cut([]), Cut([])]).stream(REQUEST))
    assert info.value.code == "stream_incomplete"
    assert len(info.value.details["fallback_attempts"]) == 2


async def test_the_journal_keeps_who_answered_and_a_replay_calls_nobody(
    tmp_path: Any, sleeps: RecordingSleep
) -> None:
    """A chat turn answered by the second provider is journaled with provider and model; re-running
    the same chat replays it exactly without calling any provider, and the view says who answered."""
    path = str(tmp_path / "j.sqlite")
    first = Script((529, OVERLOADED), (529, OVERLOADED), (529, OVERLOADED))
    second = Script((200, openai_answer()))
    chat = Chat(
        FallbackProvider([anthropic(first, sleeps), openai(second)]), journal=Journal(path), id="fb"
    )
    reply = await chat("hi")
    assert reply.provider == "openai"
    html = displayed(chat)["text/html"]
    assert "via openai gpt-4.1-2025-04-14" in html

    silent = Script()  # any call fails the test
    again = Chat(
        FallbackProvider([anthropic(silent, sleeps), openai(silent)]),
        journal=Journal(path),
        id="fb",
    )
    replayed = await again("hi")
    assert silent.calls == 0
    assert replayed.model_dump() == reply.model_dump()
    assert again.turns[0].cost == chat.turns[0].cost
    assert isinstance(chat.turns[0].cost, Decimal)


async def test_scripted_providers_fall_back_and_keep_their_own_settings() -> None:
    """Offline: a scripted primary that raises a retryable error and a scripted secondary; the
    secondary's answer is labelled, and a call's settings reach the provider that answers."""
    down = ScriptedProvider(
        [
            lambda request: (_ for _ in ()).throw(
                ProviderError("x", code="provider_overloaded", status=529, retryable=True)
            )
        ]
    )
    up = ScriptedProvider([{"text": "ok"}])
    fallback = FallbackProvider([down, up])
    assert fallback.labels == ("scripted#0", "scripted#1")
    response = await fallback.complete(REQUEST)
    assert response.provider == "scripted#1"
    assert response.content == "ok"


async def test_a_fallback_inside_a_fallback_prices_its_answers(tmp_path: Any) -> None:
    """FallbackProvider([FallbackProvider([anthropic]), openai]) is the flat list of its
    providers: the answer names the provider that gave it and is priced as that model, so a
    cost limit keeps admitting calls. The outer fallback used to relabel the answer with the
    inner one's name, whose price nobody knows: chat.cost was unknown and the second call under
    Limits(max_cost=...) was refused as cost_unknown."""
    from loom_nb import Limits

    first = Script((200, anthropic_answer("ok")), (200, anthropic_answer("ok")))
    inner = FallbackProvider(
        [AnthropicProvider("claude-sonnet-4-5", api_key=KEY, http_client=first.client())]
    )
    outer = FallbackProvider([inner, openai(Script())])
    assert outer.labels == ("anthropic", "openai")
    chat = Chat(
        outer, journal=Journal(str(tmp_path / "j.sqlite")), id="n", limits=Limits(max_cost=1)
    )
    reply = await chat("a")
    assert (reply.provider, reply.model) == ("anthropic", "claude-sonnet-4-5")
    assert chat.cost == Decimal("0.0045")
    await chat("b")
    assert first.calls == 2


async def test_the_output_cap_reaches_a_fallback_member_without_a_default(
    tmp_path: Any, sleeps: RecordingSleep
) -> None:
    """A FallbackProvider whose first member has a default max_tokens (Anthropic's 4096) and whose
    second has none (OpenAI): with 5,000 output tokens left, the member that answers is capped
    too. The fallback used to report the smaller default, so the cap looked needless and OpenAI
    was sent no limit at all."""
    from loom_nb import Limits

    first = Script((529, OVERLOADED), (529, OVERLOADED), (529, OVERLOADED))
    second = Script((200, openai_answer("hi")))
    fallback = FallbackProvider([anthropic(first, sleeps), openai(second)])
    chat = Chat(
        fallback,
        journal=Journal(str(tmp_path / "j.sqlite")),
        id="fb",
        limits=Limits(max_output_tokens=5000),
    )
    reply = await chat("hi")
    assert (first.calls, second.calls, reply.provider) == (3, 1, "openai")
    assert first.sent[0]["max_tokens"] <= 5000
    assert second.sent[0]["max_completion_tokens"] == 5000


async def test_a_fallback_members_thinking_budget_counts_against_the_output_limit(
    tmp_path: Any, sleeps: RecordingSleep
) -> None:
    """A member built with settings=ModelSettings(thinking_budget=2000) under
    Limits(max_output_tokens=1500): the call is refused as budget_exceeded before any I/O, as it
    is with that provider alone. The budget saw no thinking budget behind the fallback, so it
    admitted the call capped to 1,500; the member then refused it (its thinking budget must be
    below max_tokens) and the call silently went to the next model."""
    from loom_nb import BudgetExceededError, Limits, ModelSettings

    thinking = ModelSettings(thinking_budget=2000)
    first, second = Script(), Script((200, openai_answer("not the model asked for")))
    members = [anthropic(first, sleeps, settings=thinking), openai(second)]
    fallback = FallbackProvider(members)
    assert fallback.thinking_budget == 2000  # a member that does not think leaves it known
    assert FallbackProvider([members[1]]).thinking_budget is None
    for n, provider in enumerate([members[0], fallback]):
        chat = Chat(
            provider,
            journal=Journal(str(tmp_path / f"{n}.sqlite")),
            id="think",
            limits=Limits(max_output_tokens=1500),
        )
        with pytest.raises(BudgetExceededError) as info:
            await chat("hi")
        assert info.value.limit == "max_output_tokens"
        assert "thinking budget (2000)" in info.value.message
    assert (first.calls, second.calls) == (0, 0)


def test_construction_is_checked() -> None:
    """An empty list or a non-provider is refused as ConfigurationError."""
    from loom_nb.errors import ConfigurationError

    with pytest.raises(ConfigurationError):
        FallbackProvider([])
    with pytest.raises(ConfigurationError):
        FallbackProvider([object()])  # type: ignore[list-item]
    assert (
        json.dumps(list(FallbackProvider([GeminiProvider("gemini-2.5-flash", api_key=KEY)]).labels))
        == '["gemini"]'
    )
