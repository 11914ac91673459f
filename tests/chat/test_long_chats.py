"""A long chat costs its length, not its square: kept live, resumed, and read back from its log.

Each turn's request holds the whole conversation so far. Keeping every turn's request (the
chat's positions did), or validating every journaled request whole (resume, a transcript of an
execution, the stepper's turns did), made a chat of N turns hold or validate N²/2 messages: a
2,000-turn chat took 13 s and 2 GB to resume. These tests count what is validated and kept,
so they fail on the quadratic form whatever the machine's speed.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from loom_nb import Chat, Journal, LlmRequest, Message, ScriptedProvider
from loom_nb.content._messages import RequestReader
from loom_nb.render import transcript_of
from loom_nb.render._turns import turns_of

TURNS = 40


def _script(turns: int) -> list[dict[str, Any]]:
    return [{"text": f"answer {i}"} for i in range(turns)]


@pytest.fixture
async def long_log(tmp_path: Path) -> AsyncIterator[tuple[list[Message], Journal]]:
    """A chat of ``TURNS`` plain turns journaled, its history, and its journal opened again."""
    path = tmp_path / "j.sqlite"
    journal = Journal(path)
    chat = Chat(ScriptedProvider(_script(TURNS)), journal=journal, id="long")
    for i in range(TURNS):
        await chat(f"question {i}")
    journal.close()
    again = Journal(path)
    yield chat.history, again
    again.close()


@pytest.fixture
def validated(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many message dicts each validation of a request or a message took (one entry each)."""
    counts: list[int] = []
    request_validate = LlmRequest.model_validate
    message_validate = Message.model_validate

    def request(cls: type[LlmRequest], obj: Any, **kwargs: Any) -> LlmRequest:
        messages = obj.get("messages") if isinstance(obj, dict) else None
        if isinstance(messages, list):
            counts.append(sum(1 for m in messages if isinstance(m, dict)))
        return request_validate(obj, **kwargs)

    def message(cls: type[Message], obj: Any, **kwargs: Any) -> Message:
        counts.append(1 if isinstance(obj, dict) else 0)
        return message_validate(obj, **kwargs)

    monkeypatch.setattr(LlmRequest, "model_validate", classmethod(request))
    monkeypatch.setattr(Message, "model_validate", classmethod(message))
    return counts


async def test_a_live_chat_keeps_no_turn_s_whole_request(tmp_path: Path) -> None:
    provider = ScriptedProvider(_script(TURNS))
    chat = Chat(provider, journal=Journal(tmp_path / "j.sqlite"), id="live")
    built: list[weakref.ref[LlmRequest]] = []
    make = chat._request

    def tracked(messages: list[Message]) -> LlmRequest:
        request = make(messages)
        built.append(weakref.ref(request))
        return request

    chat._request = tracked  # type: ignore[method-assign]
    for i in range(TURNS):
        await chat(f"question {i}")
    provider.requests.clear()  # the scripted provider records what it was sent; a chat must not
    gc.collect()
    alive = [ref for ref in built if ref() is not None]
    # The last request may still be referenced by the walk caches' hand-over; none before it.
    assert len(built) == TURNS
    assert len(alive) <= 1, len(alive)
    assert len(chat.history) == 2 * TURNS
    chat.journal.close()


async def test_resuming_validates_each_journaled_message_about_once(
    long_log: tuple[list[Message], Journal], validated: list[int]
) -> None:
    history, journal = long_log
    validated.clear()
    resumed = Chat.resume("long", ScriptedProvider(_script(2)), journal=journal)
    # Each turn's own message, plus the last request whole (its system and settings are read
    # back); validating every request whole would be 1 + 3 + ... + 79 = 1,600.
    assert sum(validated) <= 4 * TURNS, sum(validated)
    assert resumed.history == history
    await resumed("one more")
    assert len(resumed.history) == 2 * TURNS + 2


async def test_a_transcript_of_a_long_chat_validates_each_message_once(
    long_log: tuple[list[Message], Journal], validated: list[int]
) -> None:
    history, journal = long_log
    validated.clear()
    transcript = transcript_of(journal.execution("long"))
    assert transcript.messages == history
    assert sum(validated) <= 2 * len(history), sum(validated)


async def test_the_turns_of_a_long_chat_validate_each_message_once(
    long_log: tuple[list[Message], Journal], validated: list[int]
) -> None:
    history, journal = long_log
    validated.clear()
    turns = turns_of(journal, "long")
    assert [turn.request.messages for turn in turns[-1:]] == [history[:-1]]
    assert [turn.response.content for turn in turns if turn.response] == [
        f"answer {i}" for i in range(TURNS)
    ]
    assert sum(validated) <= 2 * len(history), sum(validated)


def test_the_reader_validates_as_the_request_does() -> None:
    read = RequestReader()
    first = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    grown = [*first, {"role": "user", "content": "and?"}]
    one, two = read({"messages": first}), read({"messages": grown, "system": "be brief"})
    assert one.messages[0] is two.messages[0]  # a dict met again is not validated again
    assert two == LlmRequest.model_validate({"messages": grown, "system": "be brief"})
    # A list that does not extend the one before is read afresh, its known dicts reused.
    assert read({"messages": grown[1:]}).messages[0] is two.messages[1]
    for bad in (
        {"messages": [*grown, {"role": "user", "content": 3}]},
        {"messages": grown, "system": 5},
        {"messages": "not a list"},
        None,
    ):
        with pytest.raises(ValueError) as whole:
            LlmRequest.model_validate(bad)
        with pytest.raises(type(whole.value)) as got:
            read(bad)
        assert str(got.value) == str(whole.value)  # the same error, naming the same place
