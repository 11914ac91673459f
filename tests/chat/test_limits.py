"""Spending limits: a call past a limit is refused before any I/O, journaled, and resumes once
the limit is raised; the output limit caps max_tokens."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from loom_nb import BudgetExceededError, Chat, Journal, Limits, tool
from loom_nb.content import LlmResponse, Usage
from loom_nb.errors import ConfigurationError
from loom_nb.providers import AnthropicProvider, FallbackProvider, OpenAIProvider, ScriptedProvider
from loom_nb.settings import ModelSettings
from tests.providers.answers import anthropic_answer, openai_answer

KEY = "k" * 24


class Wire:
    """An Anthropic endpoint over MockTransport that records every body it receives."""

    def __init__(self, *bodies: dict[str, Any]) -> None:
        self.bodies = list(bodies)
        self.sent: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(json.loads(request.content))
        return httpx.Response(200, json=self.bodies.pop(0))

    def provider(self) -> AnthropicProvider:
        client = httpx.AsyncClient(transport=httpx.MockTransport(self))
        return AnthropicProvider("claude-sonnet-4-5", api_key=KEY, http_client=client)


def journal(tmp_path: Path) -> Journal:
    return Journal(str(tmp_path / "j.sqlite"))


def failures(j: Journal, execution_id: str) -> list[dict[str, Any]]:
    return [
        json.loads(e.payload["error"])
        if isinstance(e.payload.get("error"), str)
        else e.payload["error"]
        for e in j.events(execution_id)
        if e.kind == "step_failed"
    ]


async def test_a_call_past_the_cost_limit_is_refused_before_any_io_and_journaled(
    tmp_path: Path,
) -> None:
    """Once the chat's cost reaches max_cost the next call is refused: the transport is not
    called, the error names the limit and what was spent, and the journal records the refusal."""
    wire = Wire(anthropic_answer("one"), anthropic_answer("two"))
    j = journal(tmp_path)
    chat = Chat(wire.provider(), journal=j, id="cost", limits=Limits(max_cost="0.004"))
    await chat("first")  # 1000 in + 100 out on claude-sonnet-4-5: $0.0045
    assert chat.cost == Decimal("0.0045")
    with pytest.raises(BudgetExceededError) as info:
        await chat("second")
    assert len(wire.sent) == 1  # nothing went out
    error = info.value
    assert (error.code, error.limit, error.scope) == ("budget_exceeded", "max_cost", "chat")
    assert "$0.0045" in error.message
    assert "raise the limit" in error.message
    assert [f["code"] for f in failures(j, "cost")] == ["budget_exceeded"]
    assert len(chat.history) == 2  # the refused turn changed nothing

    chat.limits = Limits(max_cost=1)
    reply = await chat("second")
    assert reply.content == "two"
    assert len(wire.sent) == 2


async def test_output_limit_caps_max_tokens_then_refuses(tmp_path: Path) -> None:
    """max_output_tokens caps each call's max_tokens to what is left; at zero left it refuses."""
    wire = Wire(anthropic_answer("a", tokens_out=700), anthropic_answer("b", tokens_out=300))
    chat = Chat(
        wire.provider(), journal=journal(tmp_path), id="out", limits=Limits(max_output_tokens=1000)
    )
    await chat("one")
    await chat("two")
    assert [body["max_tokens"] for body in wire.sent] == [1000, 300]
    with pytest.raises(BudgetExceededError) as info:
        await chat("three")
    assert info.value.limit == "max_output_tokens"
    assert info.value.spent == 1000
    assert len(wire.sent) == 2


async def test_max_tokens_is_not_raised_by_the_cap(tmp_path: Path) -> None:
    """A cap larger than the call's own max_tokens leaves it alone (the provider default 4096)."""
    wire = Wire(anthropic_answer("a"))
    chat = Chat(
        wire.provider(), journal=journal(tmp_path), id="cap", limits=Limits(max_output_tokens=10**6)
    )
    await chat("one")
    assert wire.sent[0]["max_tokens"] == 4096


async def test_the_output_cap_reaches_a_fallback_member_whose_settings_raise_max_tokens(
    tmp_path: Path,
) -> None:
    """A FallbackProvider member built with settings=ModelSettings(max_tokens=10_000): with 5,000
    output tokens left its call is capped to 5,000, as it is without the fallback. The fallback
    looked only at the members' max_tokens attributes (4096), so the member sent 10,000."""
    wire = Wire(anthropic_answer("a"))
    client = httpx.AsyncClient(transport=httpx.MockTransport(wire))
    big = AnthropicProvider(
        "claude-sonnet-4-5",
        api_key=KEY,
        http_client=client,
        settings=ModelSettings(max_tokens=10_000),
    )
    other = AnthropicProvider("claude-haiku-4-5", api_key=KEY)
    chat = Chat(
        FallbackProvider([big, other]),
        journal=journal(tmp_path),
        id="fb-settings",
        limits=Limits(max_output_tokens=5000),
    )
    await chat("hi")
    assert wire.sent[0]["max_tokens"] == 5000


async def test_a_map_caps_a_provider_whose_settings_set_max_tokens(tmp_path: Path) -> None:
    """A plain provider built with settings=ModelSettings(max_tokens=10_000) in a map under
    Limits(max_output_tokens=5000): the item's call is capped to 5,000. (The map's budget read
    the provider's max_tokens attribute, 4096, as its default; the journaled step merges the
    provider's settings into the request first, so the cap was right all along.)"""
    wire = Wire(anthropic_answer("a"))
    big = AnthropicProvider(
        "claude-sonnet-4-5",
        api_key=KEY,
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(wire)),
        settings=ModelSettings(max_tokens=10_000),
    )
    chat = Chat(big, journal=journal(tmp_path), id="map-settings")
    result = await chat.map(["q"], limits=Limits(max_output_tokens=5000))
    assert result.errors == {}
    assert wire.sent[0]["max_tokens"] == 5000


async def test_a_run_halts_at_its_request_limit_and_resumes_where_it_stopped(
    tmp_path: Path,
) -> None:
    """chat.run(limits=Limits(max_requests=2)): two model calls, the third refused (journaled);
    the run is a halted turn whose spend counts; chat.run(limits=...) resumes it, serving the
    first two calls from the journal and making only the third."""

    @tool
    def step(n: int) -> str:
        """Take a step."""
        return f"did {n}"

    calls = [{"tool_calls": [{"id": f"c{i}", "name": "step", "input": {"n": i}}]} for i in range(2)]
    turns: list[Any] = [
        *[
            LlmResponse.model_validate(
                {**_response(c), "usage": {"input_tokens": 10, "output_tokens": 5}}
            )
            for c in calls
        ],
        LlmResponse(content="done", usage=Usage(input_tokens=10, output_tokens=5)),
    ]
    provider = ScriptedProvider(turns)
    j = journal(tmp_path)
    chat = Chat(provider, tools=[step], journal=j, id="runs")
    with pytest.raises(BudgetExceededError) as info:
        await chat.run("go", limits=Limits(max_requests=2))
    assert (info.value.limit, info.value.scope, info.value.spent) == ("max_requests", "run", 2)
    assert provider.remaining == 1
    assert chat.turns[-1].status == "halted"
    assert chat.usage == Usage(input_tokens=20, output_tokens=10)
    assert "halted by a spending limit" in chat.header()
    run_id = chat.turns[-1].run_id or ""
    assert [f["code"] for f in failures(j, run_id)] == ["budget_exceeded"]

    result = await chat.run(limits=Limits(max_requests=5))
    assert result.status == "completed"
    assert result.text == "done"
    assert provider.remaining == 0  # only the refused call was made
    assert [t.status for t in chat.turns] == ["completed"]
    assert chat.usage == Usage(input_tokens=30, output_tokens=15)


async def test_a_run_halted_before_its_first_call_costs_nothing(tmp_path: Path) -> None:
    """A run refused before its first model call spent $0, not an unknown amount: the chat's
    cost stays known and its max_cost limit goes on admitting calls. The halted turn's cost was
    None, so chat.cost became "cost unknown" and every later call was refused as cost_unknown."""

    @tool
    def step(n: int) -> str:
        """Take a step."""
        return f"did {n}"

    wire = Wire(anthropic_answer("one"), anthropic_answer("two"))
    chat = Chat(
        wire.provider(),
        tools=[step],
        journal=journal(tmp_path),
        id="zero",
        limits=Limits(max_cost=1),
    )
    await chat("first")
    with pytest.raises(BudgetExceededError):
        await chat.run("go", limits=Limits(max_requests=0))
    assert [t.status for t in chat.turns] == ["completed", "halted"]
    assert chat.turns[-1].cost == 0
    assert chat.cost == Decimal("0.0045")
    reply = await chat("second")
    assert reply.content == "two"
    assert len(wire.sent) == 2


def _response(turn: dict[str, Any]) -> dict[str, Any]:
    return {"content": "", "tool_calls": turn["tool_calls"], "stop_reason": "tool_use"}


async def test_chat_limits_count_earlier_turns_and_runs(tmp_path: Path) -> None:
    """The chat's limits count every turn so far, a run's model calls included."""
    provider = ScriptedProvider(
        [
            LlmResponse(content=str(i), usage=Usage(input_tokens=400, output_tokens=1))
            for i in range(3)
        ]
    )
    chat = Chat(
        provider, journal=journal(tmp_path), id="tokens", limits=Limits(max_input_tokens=800)
    )
    await chat("a")
    await chat.run("b")
    with pytest.raises(BudgetExceededError) as info:
        await chat("c")
    assert (info.value.limit, info.value.spent) == ("max_input_tokens", 800)
    assert provider.remaining == 1


async def test_max_cost_on_an_unpriced_model_is_refused_up_front(tmp_path: Path) -> None:
    """A cost limit cannot be kept without a price: refused before the first call (cost_unknown)."""

    def handler(request: httpx.Request) -> httpx.Response:  # pragma: no cover - never called
        raise AssertionError("no request may be sent")

    local = OpenAIProvider(
        "llama3",
        api_key=KEY,
        base_url="http://localhost:11434/v1",
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler)),
    )
    chat = Chat(local, journal=journal(tmp_path), id="unpriced", limits=Limits(max_cost=1))
    with pytest.raises(BudgetExceededError) as info:
        await chat("hi")
    assert info.value.code == "cost_unknown"


def test_limits_are_checked() -> None:
    """Negative, non-numeric or boolean limits are ConfigurationError invalid_limit; a wrong
    limits argument is refused by Chat."""
    for bad in (
        {"max_cost": -1},
        {"max_cost": "lots"},
        {"max_requests": True},
        {"max_output_tokens": 1.5},
    ):
        with pytest.raises(ConfigurationError) as info:
            Limits(**bad)
        assert info.value.code == "invalid_limit"
    assert Limits(max_cost=0.5).max_cost == Decimal("0.5")
    assert repr(Limits(max_requests=3)) == "Limits(max_requests=3)"
    with pytest.raises(ConfigurationError):
        Chat(ScriptedProvider([]), limits={"max_cost": 1})  # type: ignore[arg-type]


async def test_a_refusal_never_calls_money_spent_free(tmp_path: Path) -> None:
    """A refusal after a tiny but paid call states its cost as format_cost does, never $0.0000."""
    wire = Wire(
        anthropic_answer("one", tokens_in=10, tokens_out=1)
    )  # $0.000045 on claude-sonnet-4-5
    chat = Chat(
        wire.provider(), journal=journal(tmp_path), id="tiny", limits=Limits(max_requests=1)
    )
    await chat("first")
    with pytest.raises(BudgetExceededError) as info:
        await chat("second")
    message = info.value.message
    assert "$0.0000)" not in message
    assert "1 request, 10 in / 1 out tokens, $0.000045" in message


async def test_a_run_resumed_on_another_vendor_prices_each_answer_by_its_own_vendor(
    tmp_path: Path,
) -> None:
    """A run parked on Anthropic, resumed (``Chat.resume``) on OpenAI under ``max_cost`` and
    approved: its replayed Anthropic answer is priced by Anthropic, the new call by OpenAI, so
    the call is sent (it was refused ``cost_unknown``) and the turn's cost is their sum, also
    when the chat is resumed again."""

    @tool(requires_approval=True)
    async def deploy(target: str) -> str:
        """Deploy.

        Args:
            target: Where.
        """
        return "done"

    call = anthropic_answer(tokens_in=100, tokens_out=10)
    call["content"] = [
        {"type": "tool_use", "id": "t1", "name": "deploy", "input": {"target": "prod"}}
    ]
    call["stop_reason"] = "tool_use"
    j = journal(tmp_path)
    limits = Limits(max_cost=1.0)
    first = Chat(Wire(call).provider(), tools=[deploy], journal=j, id="v", limits=limits)
    assert (await first.run("deploy")).status == "parked"
    assert first.cost == Decimal("0.00045")  # 100 in at $3/M, 10 out at $15/M

    sent: list[httpx.Request] = []

    def openai(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json=openai_answer("deployed"))

    def on_openai() -> OpenAIProvider:
        client = httpx.AsyncClient(transport=httpx.MockTransport(openai))
        return OpenAIProvider("gpt-4.1", api_key=KEY, http_client=client)

    resumed = Chat.resume("v", on_openai(), tools=[deploy], journal=j, limits=limits)
    result = await resumed.approve()
    assert (result.status, result.text) == ("completed", "deployed")
    assert len(sent) == 1
    # gpt-4.1: 1,000 in at $2/M, 10 out at $8/M = $0.00208; with the Anthropic call, $0.00253.
    assert resumed.turns[-1].cost == Decimal("0.00253")
    assert resumed.turns[-1].model == "gpt-4.1-2025-04-14"
    again = Chat.resume("v", on_openai(), tools=[deploy], journal=j, limits=limits)
    assert again.cost == Decimal("0.00253")
    assert len(sent) == 1  # the resume replayed the run: no call
