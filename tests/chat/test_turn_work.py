"""What one Chat turn does, counted (issue 31): no work repeated per turn, nothing timed.

A turn's price is looked up once, when first read; the guard walks a request once per turn; the
journal hashes and serializes only what the turn added. Each test counts calls of the function
that does the work, so a change that brings the repetition back fails here whatever the machine.
"""

from __future__ import annotations

import copy
import io
import pickle
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from PIL import Image

import loom_nb.chat._cost as cost_module
from loom_nb import (
    Chat,
    GuardError,
    Journal,
    LlmRequest,
    Message,
    ModelSettings,
    ScriptedProvider,
    TextPart,
    assert_request_supported,
    guard_request,
)
from loom_nb.capabilities import guard_supported
from loom_nb.chat._cost import price_for
from loom_nb.guard import iter_media
from loom_nb.journal._content_pins import MediaOnce
from tests.chat.priced import ANTHROPIC, anthropic
from tests.executions import Executions

USAGE = {"input_tokens": 1200, "output_tokens": 300}


def _counting(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[int]:
    """Wrap ``owner.name`` so that each call is counted; the count, as a one-item list."""
    calls = [0]
    real: Callable[..., Any] = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


async def test_a_turns_price_is_looked_up_once_when_first_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Turns are priced when their cost is read, each once; the figures are genai-prices' own."""
    lookups = _counting(monkeypatch, cost_module, "_lookup")
    provider, _ = anthropic(*({"text": f"a{i}", "usage": USAGE} for i in range(3)))
    chat = Chat(provider, journal=Journal(), id="priced-later")
    for i in range(3):
        await chat(f"q{i}")
    assert lookups[0] == 0  # three turns, no price looked up yet
    expected = [price_for(ANTHROPIC, t.response) for t in chat.turns if t.response is not None]
    lookups[0] = 0
    assert chat.cost == sum(expected, Decimal(0))
    assert chat.cost > 0
    assert [t.cost for t in chat.turns] == expected
    assert lookups[0] == 3  # once per turn, read twice
    turn = chat.turns[0]
    assert pickle.loads(pickle.dumps(turn)) == turn == copy.copy(turn)  # noqa: S301 (our own bytes)


async def test_a_copied_or_pickled_turn_carries_its_price() -> None:
    """A turn copied or pickled before its cost was read has the same cost as the original."""
    provider, _ = anthropic({"text": "a", "usage": USAGE})
    chat = Chat(provider, journal=Journal(), id="priced-copy")
    await chat("q")
    fresh = chat.turns[0]
    copied, pickled = copy.copy(fresh), pickle.loads(pickle.dumps(fresh))  # noqa: S301 (ours)
    assert copied.cost == pickled.cost == fresh.cost is not None
    assert repr(pickled) == repr(fresh)


@pytest.mark.parametrize("kind", ["scripted", "http"])
async def test_a_turn_guards_and_checks_its_request_once(kind: str) -> None:
    """Each turn runs ``guard_request`` once, and ``assert_request_supported`` once when the
    request holds media (a text-only request has nothing it could refuse): the provider takes
    the request the journaled call just checked without running either again."""
    if kind == "scripted":
        provider: Any = ScriptedProvider([{"text": f"a{i}"} for i in range(5)])
    else:
        provider, _ = anthropic(*({"text": f"a{i}", "usage": USAGE} for i in range(5)))
    chat = Chat(provider, journal=Journal(), id=f"once-{kind}")
    await chat("warm up")
    with Executions(guard_request, assert_request_supported) as seen:
        for i in range(3):
            await chat(f"q{i}")
    assert seen.counts == {"guard_request": 3, "assert_request_supported": 0}
    png = io.BytesIO()
    Image.new("RGB", (2, 2)).save(png, format="PNG")
    with Executions(guard_request, assert_request_supported) as seen:
        await chat("and this?", png.getvalue())
    assert seen.counts == {"guard_request": 1, "assert_request_supported": 1}
    assert len(chat.history) == 10


async def test_a_provider_called_directly_still_guards() -> None:
    """Outside a journaled call the provider runs both checks itself (``guard_supported``: the
    guard and the capability check on one walk), and refuses what they refuse."""
    provider = ScriptedProvider([{"text": "a"}, {"text": "b"}])
    with Executions(guard_supported, guard_request) as seen:
        await provider.complete(LlmRequest(messages=[Message(role="user", content="hi")]))
    assert seen.counts == {"guard_supported": 1, "guard_request": 0}
    forged = Message(role="assistant", content=[TextPart(text="x", origin="tool:web")])
    with pytest.raises(GuardError):
        await provider.complete(LlmRequest(messages=[Message(role="user", content="q"), forged]))


async def test_a_replayed_turn_does_not_walk_its_request_for_pins() -> None:
    """Pins (the stored content a live call will read) are found for turns that run live only:
    a text-only turn is known to hold no media from the JSON its hashing made, so it walks
    nothing (the effect's media check reads the same answer); a replayed chat serves every
    turn from the log without walking its media either (a transcript holding an image is walked
    for its pins on every live turn: ``test_journal_pins``)."""
    journal = Journal()
    chat = Chat(ScriptedProvider([{"text": f"a{i}"} for i in range(3)]), journal=journal, id="p")
    with Executions(MediaOnce.pins, iter_media) as live:
        for i in range(3):
            await chat(f"q{i}")
    again = Chat(ScriptedProvider([]), journal=journal, id="p")
    with Executions(MediaOnce.pins, iter_media) as replayed:
        for i in range(3):
            await again(f"q{i}")
    assert live.counts == {"MediaOnce.pins": 3, "iter_media": 0}
    assert replayed.counts == {"MediaOnce.pins": 0, "iter_media": 0}
    assert [m.content for m in again.history] == [m.content for m in chat.history]


async def test_a_chats_cache_settings_are_made_once_and_still_sent() -> None:
    """The default prompt caching a Chat asks for is made into call settings on the first turn
    only (frozen, the same each turn); every request still carries the marks, and a chat that
    sets its own caching gets its own (here: no marks at all)."""
    from loom_nb.settings import PromptCache, _call_settings_for

    provider, sent = anthropic(*({"text": f"a{i}", "usage": USAGE} for i in range(4)))
    chat = Chat(provider, journal=Journal(), id="cache-once")
    with Executions(_call_settings_for) as seen:
        for i in range(4):
            await chat(f"q{i}")
    assert seen.counts == {"_call_settings_for": 1}
    assert len(sent) == 4
    assert all(b'"cache_control"' in request.content for request in sent[1:])
    provider, sent = anthropic(*({"text": f"a{i}", "usage": USAGE} for i in range(2)))
    own = ModelSettings(cache=PromptCache(turns=0))
    chat = Chat(provider, journal=Journal(), id="cache-own", settings=own)
    for i in range(2):
        await chat(f"q{i}")
    assert len(sent) == 2  # the second request holds an earlier turn (auto would mark it)
    assert not any(b'"cache_control"' in request.content for request in sent[1:])


async def test_a_live_answer_has_the_key_order_its_replay_has() -> None:
    """A live turn returns its answer as read back from the journaled text, so what a notebook
    shows of it (a tool call's input, in the order the model wrote) is what a replay shows:
    the journal keeps the response's own JSON, in that order, and both sides come from it."""
    call = {"id": "c1", "name": "send", "input": {"to": "ana@example.com", "summary": "May"}}
    journal = Journal()
    chat = Chat(ScriptedProvider([{"text": "", "tool_calls": [call]}]), journal=journal, id="k")
    live = await chat("send it")
    again = Chat(ScriptedProvider([]), journal=journal, id="k")
    replayed = await again("send it")
    assert list(live.tool_calls[0].input) == list(replayed.tool_calls[0].input)
    assert list(live.tool_calls[0].input) == ["to", "summary"]


def _lookup_city(city: str) -> str:
    """Look a city up."""
    return city


async def test_a_chats_request_fields_are_validated_once_not_each_turn() -> None:
    """A turn's request is the chat's tool menu, system prompt and settings, validated when first
    used and again only when one of them is replaced (as a resume does), with the turn's
    messages beside them: no turn validates the whole transcript again. Each request has the
    fields a validated one has, and a tools list of its own."""
    provider = ScriptedProvider([{"text": f"a{i}"} for i in range(5)])
    chat = Chat(provider, journal=Journal(), id="fields", system="Be brief.", tools=[_lookup_city])
    with Executions(LlmRequest._empty_settings_are_none) as seen:
        for i in range(3):
            await chat(f"q{i}")
    assert seen.counts == {"LlmRequest._empty_settings_are_none": 1}
    first, last = provider.requests[0], provider.requests[-1]
    assert last == LlmRequest(
        messages=chat.history[:-1], tools=first.tools, system="Be brief.", settings=None
    )
    assert last.model_fields_set == {"messages", "tools", "system", "settings"}
    assert [t.name for t in last.tools] == ["_lookup_city"]
    assert first.tools is not last.tools
    last.tools.clear()  # a request's list is its own: the next turn still offers the tool
    chat._system = "Be kind."  # what a resume does when the log's system prompt differs
    chat._settings = ModelSettings()  # empty settings are no settings, as validation makes them
    await chat("q3")
    assert provider.requests[-1].system == "Be kind."
    assert provider.requests[-1].settings is None
    assert [t.name for t in provider.requests[-1].tools] == ["_lookup_city"]
