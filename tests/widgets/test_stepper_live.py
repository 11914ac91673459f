"""ReplayStepper on a live or forked run: per-turn latency, "fork here", and following new turns."""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from typing import Any

import pytest

from loom_nb import ReplayStepper
from loom_nb.content import LlmRequest, Message
from loom_nb.errors import ConfigurationError, JournalError
from loom_nb.journal import Journal, create_llm_effect
from loom_nb.providers import ScriptedProvider


class SlowProvider(ScriptedProvider):
    """A scripted model that takes ``delay`` seconds per call."""

    def __init__(self, script: list[dict[str, Any]], delay: float) -> None:
        super().__init__(script)
        self.delay = delay

    async def complete(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(self.delay)
        return await super().complete(*args, **kwargs)


def ask(n: int) -> LlmRequest:
    messages = [Message(role="user", content=f"question {k}") for k in range(n + 1)]
    return LlmRequest(messages=messages)


async def two_turns(journal: Journal, execution_id: str, delay: float = 0.0) -> None:
    effect = create_llm_effect(SlowProvider([{"text": "one"}, {"text": "two"}], delay))
    execution = journal.execution(execution_id)
    await effect(execution, "m0", ask(0))
    await effect(execution, "m1", ask(1))


async def test_each_turn_shows_its_latency_from_the_journal() -> None:
    """A turn's latency is the time from its step_started to its outcome, shown in the view."""
    with Journal() as journal:
        await two_turns(journal, "slow", delay=0.15)
        stepper = ReplayStepper(journal, "slow")
        events = {(e.kind, e.step_id): e.created for e in journal.events("slow")}
    for record in stepper.turns:
        expected = (
            events[("step_completed", record.step_id)] - events[("step_started", record.step_id)]
        )
        assert record.latency_s == expected.total_seconds()
        assert record.latency_s is not None
        assert record.latency_s >= 0.15
    assert stepper.current["latency"].endswith(" s")
    assert float(stepper.current["latency"].removesuffix(" s")) >= 0.1
    assert "view.latency" in ReplayStepper._esm


async def test_fork_here_copies_the_turns_before_the_shown_one() -> None:
    """fork_here at turn 2 makes an execution holding turn 1 only; running turn 2 there goes live."""
    with Journal() as journal:
        await two_turns(journal, "run")
        stepper = ReplayStepper(journal, "run")
        stepper.turn = 1
        new_id = stepper.fork_here()
        assert new_id == "run-fork-2"
        assert "'run-fork-2'" in stepper.forked
        assert [t.step_id for t in ReplayStepper(journal, new_id).turns] == ["m0"]
        # edit turn 2 and go on: the prefix replays, the edited turn runs live
        effect = create_llm_effect(ScriptedProvider([{"text": "edited answer"}]))
        fork = journal.execution(new_id)
        await effect(fork, "m0", ask(0))
        edited = LlmRequest(messages=[*ask(0).messages, Message(role="user", content="edited")])
        reply = await effect(fork, "m1", edited)
        assert reply.content == "edited answer"
        assert [t.step_id for t in ReplayStepper(journal, "run").turns] == ["m0", "m1"]
        assert stepper.fork_here() == "run-fork-2-2"  # the default id is never a taken one
        with pytest.raises(JournalError) as taken:
            stepper.fork_here("run")
        assert taken.value.code == "execution_exists"
        with pytest.raises(ConfigurationError):
            stepper.fork_here(5)  # type: ignore[arg-type]


async def test_the_fork_button_message_forks_or_says_why_not() -> None:
    """The front end's fork message forks at the shown turn; a failure is shown, not raised."""
    with Journal() as journal:
        await two_turns(journal, "b")
        stepper = ReplayStepper(journal, "b")
        stepper._handle_custom_msg({"type": "fork", "turn": 0}, [])
        assert stepper.forked.startswith("forked at turn 1 as 'b-fork-1'")
        journal.close()
        stepper._handle_custom_msg({"type": "fork", "turn": 0}, [])
        assert stepper.forked.startswith("could not fork: ")


def wait_for(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.02)


def journal_urls() -> list[str]:
    urls = ["sqlite"]
    if os.environ.get("LOOM_TEST_POSTGRES"):
        urls.append(os.environ["LOOM_TEST_POSTGRES"])
    return urls


@pytest.mark.parametrize("backend", journal_urls())
async def test_follow_shows_new_turns_as_they_land(backend: str, tmp_path: Any) -> None:
    """follow=True: turns written by another Journal (another process) appear, the view moves to them."""
    url = str(tmp_path / "j.sqlite") if backend == "sqlite" else backend
    execution_id = f"v13-follow-{uuid.uuid4().hex[:8]}"
    with Journal(url) as writer, Journal(url) as reader:
        effect = create_llm_effect(ScriptedProvider([{"text": "one"}, {"text": "two"}]))
        execution = writer.execution(execution_id)
        await effect(execution, "m0", ask(0))
        stepper = ReplayStepper(reader, execution_id, follow=True, poll=0.05)
        redrawn_on: set[int] = set()
        stepper.observe(lambda _change: redrawn_on.add(threading.get_ident()), names="count")
        try:
            assert stepper.following
            assert stepper.count == 1
            await effect(execution, "m1", ask(1))
            await asyncio.to_thread(wait_for, lambda: stepper.count == 2)
            assert redrawn_on == {threading.get_ident()}  # the loop's thread, not the watch's
            assert stepper.turn == 1  # it showed the last turn, so it moves to the new one
            assert stepper.current["response"]["items"][0]["text"] == "two"
            assert "2 turns" in stepper.title
        finally:
            stepper.stop_following()
        assert not stepper.following
        assert stepper.refresh() == 2


async def test_follow_refuses_a_non_bool() -> None:
    """follow is True or False."""
    with Journal() as journal:
        await two_turns(journal, "f")
        with pytest.raises(ConfigurationError):
            ReplayStepper(journal, "f", follow="yes")  # type: ignore[arg-type]
