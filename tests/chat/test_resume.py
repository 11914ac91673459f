"""Chats that outlive the kernel: resume from the journal, a second process, seeds, restart."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loom_nb import (
    BudgetExceededError,
    Chat,
    ConfigurationError,
    ContentValidationError,
    FallbackProvider,
    Journal,
    Limits,
    Message,
    ModelSettings,
    ReplayDivergenceError,
    ScriptedProvider,
    Usage,
    agent_loop,
    chats,
    tool,
)
from loom_nb.render import transcript_of
from tests.chat.hanging import Hanging
from tests.chat.priced import anthropic, price
from tests.conftest import JournalBackend

WORKER = Path(__file__).with_name("resume_worker.py")


@tool(requires_approval=True)
def send_email(to: str, body: str) -> str:
    """Send an email.

    Args:
        to: The address.
        body: The text.
    """
    return f"sent to {to}"


def _steps(journal: Journal, execution_id: str) -> list[str]:
    return [
        e.step_id or ""
        for e in journal.events(execution_id)
        if e.kind in ("step_completed", "step_failed")
    ]


async def test_resume_brings_back_the_chat_and_goes_on_live(
    journal_backend: JournalBackend,
) -> None:
    """History, turns, usage, cost and a parked approval come back with no model call; both go on."""
    first, first_sent = anthropic(
        {"text": "Hi.", "usage": {"input_tokens": 100, "output_tokens": 20}},
        {
            "tool_calls": [{"id": "c1", "name": "send_email", "input": {"to": "bo", "body": "x"}}],
            "usage": {"input_tokens": 200, "output_tokens": 30},
        },
    )
    kernel = journal_backend.open("j")
    chat = Chat(first, tools=[send_email], journal=kernel, id="q3", system="Be brief.")
    await chat("hello")
    assert (await chat.run("email bo")).status == "parked"
    assert len(first_sent) == 2
    kernel.close()  # the kernel is gone

    second, sent = anthropic(
        {"text": "Sent.", "usage": {"input_tokens": 300, "output_tokens": 10}},
        {"text": "Bye.", "usage": {"input_tokens": 50, "output_tokens": 5}},
    )
    again = journal_backend.open("j")
    resumed = Chat.resume("q3", second, journal=again, tools=[send_email])
    assert sent == []  # nothing was asked of the model
    assert [m.model_dump() for m in resumed.history] == [m.model_dump() for m in chat.history]
    assert [(t.kind, t.status, t.position) for t in resumed.turns] == [
        ("chat", "completed", 0),
        ("run", "parked", 1),
    ]
    assert resumed.usage == chat.usage
    assert resumed.usage.input_tokens == 300
    assert resumed.cost == chat.cost == price(100, 20) + price(200, 30)
    assert [d["id"] for d in resumed.pending_approvals] == ["c1"]
    assert resumed.system == "Be brief."  # as the chat's last turn was sent
    assert "awaiting approval: c1" in resumed.header()

    result = await resumed.approve(True)
    assert (result.status, result.text) == ("completed", "Sent.")
    assert result.tool_calls[0].status == "ok"
    assert len(sent) == 1  # the approval went on live: one call
    assert (await resumed("bye")).content == "Bye."
    assert len(sent) == 2
    assert [t.kind for t in resumed.turns] == ["chat", "run", "chat"]
    assert resumed.turns[-1].position == 2  # live after the log's two positions
    assert resumed.cost == price(100, 20) + price(200, 30) + price(300, 10) + price(50, 5)
    assert _steps(again, "q3") == ["#chat:0:model", "#chat:1:run", "#chat:2:model"]


async def test_a_chat_of_runs_only_is_resumed_with_its_system_prompt(tmp_path: Path) -> None:
    """The recorded system prompt comes back when the chat's only model calls were a run's."""
    journal = Journal(tmp_path / "j.sqlite")
    chat = Chat(ScriptedProvider([{"text": "Done."}]), journal=journal, id="r", system="Be brief.")
    await chat.run("do it")
    provider = ScriptedProvider([{"text": "Next."}])
    resumed = Chat.resume("r", provider, journal=journal)
    assert resumed.system == "Be brief."
    await resumed("and now?")
    assert provider.requests[-1].system == "Be brief."  # the next turn is sent as before


async def test_resume_keeps_the_settings_the_chat_was_sent_with(tmp_path: Path) -> None:
    """``settings`` default to the recorded ones, as ``system`` does; given ones win."""
    journal = Journal(tmp_path / "j.sqlite")
    settings = {"temperature": 0.2, "max_tokens": 64}
    chat = Chat(ScriptedProvider([{"text": "Hi."}]), journal=journal, id="s", settings=settings)
    await chat("hello")
    provider = ScriptedProvider([{"text": "Again."}])
    resumed = Chat.resume("s", provider, journal=journal)
    assert resumed.settings == chat.settings
    await resumed("more")
    assert provider.requests[-1].settings == chat.settings
    other = Chat.resume("s", provider, journal=journal, settings={"temperature": 1.0})
    assert other.settings == ModelSettings(temperature=1.0)


async def test_resume_on_another_provider_records_which_answered_each_turn(
    tmp_path: Path,
) -> None:
    """A resume on another provider journals the change; every turn keeps its provider and price."""
    journal = Journal(tmp_path / "j.sqlite")
    priced, _ = anthropic({"text": "A", "usage": {"input_tokens": 10, "output_tokens": 2}})
    await Chat(priced, journal=journal, id="p")("one")
    offline = ScriptedProvider([{"text": "B", "usage": {"input_tokens": 7, "output_tokens": 1}}])
    moved = Chat.resume("p", offline, journal=journal)
    assert (await moved("two")).content == "B"
    assert _steps(journal, "p") == ["#chat:0:model", "#chat:1:provider", "#chat:2:model"]
    later = Chat.resume("p", ScriptedProvider([]), journal=journal)
    assert [(t.provider, t.model) for t in later.turns] == [
        ("AnthropicProvider", "claude-sonnet-4-5"),
        ("ScriptedProvider", "scripted"),
    ]
    assert later.turns[0].cost == price(10, 2)
    assert later.turns[1].cost is None  # a scripted model has no price
    assert later.cost is None
    assert _steps(journal, "p") == ["#chat:0:model", "#chat:1:provider", "#chat:2:model"]
    mark = next(e for e in journal.events("p") if e.step_id == "#chat:1:provider" and e.payload)
    assert mark.payload["output"]["provider"] == "ScriptedProvider"
    started = journal.start_of("p") or {}
    assert started["meta"]["chat"]["provider"] == "AnthropicProvider"


def _worker(mode: str, journal: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(WORKER), mode, journal],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.slow
def test_a_second_process_resumes_a_chat_the_first_one_finished(
    journal_backend: JournalBackend,
) -> None:
    """Kernel two resumes kernel one's chat from the journal, decides its parked run, goes on (sync API)."""
    target = journal_backend.url("shared")
    assert _worker("record", target) == {"status": "parked", "calls": 2}
    seen = _worker("resume", target)
    assert seen["history"] == ["user", "assistant", "user", "assistant"]
    assert seen["pending"] == ["c1"]
    assert seen["usage"] == [31, 10]
    assert seen["system"] == "Be brief."
    assert seen["calls_after_resume"] == 0
    assert (seen["status"], seen["text"], seen["reply"]) == ("completed", "Sent.", "Anything else?")
    assert seen["calls"] == 2  # the approval's model call and the new message
    assert seen["turns"] == 3
    assert seen["loop_running"] is False  # a plain script: no event loop
    journal = journal_backend.open("shared")
    assert [c.id for c in chats(journal)] == ["kernel-chat"]
    assert chats(journal)[0].turns == 3


async def test_a_seeded_chat_journals_its_seed_and_replays_exactly(tmp_path: Path) -> None:
    """history= starts the chat from given messages, journaled first; the same seed replays."""
    journal = Journal(tmp_path / "j.sqlite")
    seed: list[Any] = [
        Message(role="user", content="My name is Ana."),
        {"role": "assistant", "content": "Hello Ana."},
    ]
    provider = ScriptedProvider([{"text": "You are Ana."}])
    chat = Chat(provider, journal=journal, id="seeded", history=seed)
    assert [m.content for m in chat.history] == ["My name is Ana.", "Hello Ana."]
    assert chat.turns == []
    assert (await chat("Who am I?")).content == "You are Ana."
    assert [m.content for m in provider.requests[0].messages] == [
        "My name is Ana.",
        "Hello Ana.",
        "Who am I?",
    ]
    assert _steps(journal, "seeded") == ["#chat:0:seed", "#chat:1:model"]
    assert chat.turns[0].start == 2
    # Re-running the same cells: the seed and the turn are served; the provider is not called.
    empty = ScriptedProvider([])
    again = Chat(empty, journal=journal, id="seeded", history=seed)
    assert (await again("Who am I?")).content == "You are Ana."
    assert empty.requests == []
    assert again.history == chat.history
    # The transcript of the log and a resume show the seed too.
    assert [m.content for m in transcript_of(journal.execution("seeded")).messages] == [
        "My name is Ana.",
        "Hello Ana.",
        "Who am I?",
        "You are Ana.",
    ]
    assert Chat.resume("seeded", empty, journal=journal).history == chat.history
    # Another seed under the same id is a changed input, with both ways on named.
    other = Chat(empty, journal=journal, id="seeded", history=[{"role": "user", "content": "Bo"}])
    with pytest.raises(ReplayDivergenceError) as changed:
        await other("Who am I?")
    assert changed.value.code == "input_changed"
    assert "Chat.resume('seeded', provider)" in changed.value.message
    assert "restart=True" in changed.value.message


def test_a_seed_is_checked_when_the_chat_is_made() -> None:
    """A seed that is not messages is refused at once, naming the message and the remedy."""
    provider = ScriptedProvider([])
    with pytest.raises(ConfigurationError) as text:
        Chat(provider, history="hi")  # type: ignore[arg-type]
    assert text.value.code == "invalid_argument"
    with pytest.raises(ConfigurationError) as system:
        Chat(provider, history=[{"role": "system", "content": "Be brief."}])
    assert "Chat(system=...)" in system.value.message
    with pytest.raises(ContentValidationError) as role:
        Chat(provider, history=[{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}])
    assert "history[1]" in role.value.message


async def test_an_edited_turn_names_resume_and_restart(tmp_path: Path) -> None:
    """Re-running a chat with another question refuses with input_changed naming both remedies."""
    journal = Journal(tmp_path / "j.sqlite")
    await Chat(ScriptedProvider([{"text": "4"}]), journal=journal, id="q3")("2 + 2?")
    edited = Chat(ScriptedProvider([{"text": "6"}]), journal=journal, id="q3")
    with pytest.raises(ReplayDivergenceError) as refused:
        await edited("3 + 3?")
    message = refused.value.message
    assert refused.value.code == "input_changed"
    assert "Chat.resume('q3', provider)" in message
    assert "Chat(provider, id='q3', restart=True)" in message


async def test_an_unknown_id_names_the_nearest_chats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An id the journal lacks is unknown_chat with the closest ids; an agent run is not_a_chat."""
    journal = Journal(tmp_path / "j.sqlite")
    for chat_id in ("review-q3", "review-q4", "budget"):
        await Chat(ScriptedProvider([{"text": "ok"}]), journal=journal, id=chat_id)("hi")
    await agent_loop(
        journal.execution("agent-1"),
        ScriptedProvider([{"text": "done"}]),
        [],
        [{"role": "user", "content": "x"}],
    )
    with pytest.raises(ConfigurationError) as unknown:
        Chat.resume("review-q5", ScriptedProvider([]), journal=journal)
    assert unknown.value.code == "unknown_chat"
    assert set(unknown.value.details["nearest"]) == {"review-q3", "review-q4"}
    assert "'review-q3'" in unknown.value.message
    assert "loom-nb chat ls" in unknown.value.message
    with pytest.raises(ConfigurationError) as agent:
        Chat.resume("agent-1", ScriptedProvider([]), journal=journal)
    assert agent.value.code == "not_a_chat"
    monkeypatch.chdir(tmp_path)  # no .loom/journal.sqlite here
    with pytest.raises(ConfigurationError) as nowhere:
        Chat.resume("review-q3", ScriptedProvider([]))
    assert nowhere.value.code == "unknown_chat"
    assert not (tmp_path / ".loom").exists()


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: The key.
    """
    return f"value of {key}"


async def test_restart_archives_the_old_turns_and_starts_the_id_over(
    journal_backend: JournalBackend,
) -> None:
    """restart=True copies the turns to an archived id (listed, resumable); the id starts empty."""
    journal = journal_backend.open("j")
    old = Chat(
        ScriptedProvider(
            [
                {"text": "first"},
                {"tool_calls": [{"id": "t1", "name": "lookup", "input": {"key": "a"}}]},
                {"text": "looked up"},
            ]
        ),
        tools=[lookup],
        journal=journal,
        id="q3",
    )
    await old("one")
    await old.run("look a up")
    assert old.turns[-1].run_id == "q3/run-0"
    fresh_model = ScriptedProvider(
        [
            {"text": "fresh"},
            {"tool_calls": [{"id": "t2", "name": "lookup", "input": {"key": "b"}}]},
            {"text": "again"},
        ]
    )
    fresh = Chat(fresh_model, tools=[lookup], journal=journal, id="q3", restart=True)
    assert fresh.history == []
    listed = {c.id: c for c in chats(journal)}
    (archived,) = [i for i in listed if i.startswith("q3~archived-")]
    assert listed["q3"].turns == 0
    assert listed[archived].turns == 2
    assert listed[archived].first_user_text == "one"
    back = Chat.resume(archived, ScriptedProvider([]), journal=journal, tools=[lookup])
    assert [m.model_dump() for m in back.history] == [m.model_dump() for m in old.history]
    assert transcript_of(journal.execution("q3")).messages == []  # the old turns are superseded

    assert (await fresh("two")).content == "fresh"
    await fresh.run("look b up")
    assert fresh.turns[-1].run_id == "q3/run-1"  # run-0 is the archived chat's
    assert [
        m.content for m in Chat.resume("q3", fresh_model, journal=journal, tools=[lookup]).history
    ][:2] == [
        "two",
        "fresh",
    ]
    # Re-running the cells without restart replays the new start, restart step included.
    empty = ScriptedProvider([])
    rerun = Chat(empty, tools=[lookup], journal=journal, id="q3")
    assert (await rerun("two")).content == "fresh"
    assert (await rerun.run("look b up")).text == "again"
    assert empty.requests == []
    # Restarting an id that holds nothing but its restart archives nothing more.
    Chat(empty, journal=journal, id="q3", restart=True)
    Chat(empty, journal=journal, id="q3", restart=True)
    assert len([c for c in chats(journal) if c.id.startswith("q3~archived-")]) == 2


async def test_a_resumed_chat_undoes_forks_and_keeps_its_tenant(tmp_path: Path) -> None:
    """undo() and fork() work on a resumed chat as on the original; another tenant is refused."""
    journal = Journal(tmp_path / "j.sqlite")
    first = Chat(
        ScriptedProvider([{"text": "1"}, {"text": "2"}]), journal=journal, id="u", tenant="ana"
    )
    await first("a")
    await first("b")
    with pytest.raises(ConfigurationError) as tenant:
        Chat.resume("u", ScriptedProvider([]), journal=journal)
    assert tenant.value.code == "principal_mismatch"
    assert "tenant='ana'" in tenant.value.message
    provider = ScriptedProvider([{"text": "3"}, {"text": "forked"}])
    resumed = Chat.resume("u", provider, journal=journal, tenant="ana")
    assert [m.content for m in resumed.undo()] == ["b", "2"]
    assert (await resumed("c")).content == "3"
    assert [m.content for m in provider.requests[-1].messages] == ["a", "1", "c"]
    assert _steps(journal, "u") == [
        "#chat:0:model",
        "#chat:1:model",
        "#chat:2:undo",
        "#chat:3:model",
    ]
    child = resumed.fork(1)
    assert [m.content for m in child.history] == ["a", "1"]
    assert (await child("d")).content == "forked"
    assert [m.content for m in provider.requests[-1].messages] == ["a", "1", "d"]
    again = Chat.resume("u", ScriptedProvider([]), journal=journal, tenant="ana")
    assert [m.content for m in again.history] == ["a", "1", "c", "3"]
    assert [
        m.content for m in Chat.resume(child.id, provider, journal=journal, tenant="ana").history
    ] == [
        "a",
        "1",
        "d",
        "forked",
    ]


async def test_a_resumed_chat_forks_into_a_new_id_not_the_last_kernels_fork(
    tmp_path: Path,
) -> None:
    """A fork made before the restart keeps its log; the resumed chat's fork is a new execution."""
    journal = Journal(tmp_path / "j.sqlite")
    first = Chat(ScriptedProvider([{"text": "1"}, {"text": "2"}, {"text": "s"}]), journal=journal)
    await first("a")
    await first("b")
    side = first.fork(1)
    await side("side")
    resumed = Chat.resume(first.id, ScriptedProvider([{"text": "o"}]), journal=journal)
    child = resumed.fork(2)
    assert child.id != side.id
    await child("other")
    assert [m.content for m in child.history] == ["a", "1", "b", "2", "other", "o"]
    back = Chat.resume(child.id, ScriptedProvider([]), journal=journal)
    assert [m.content for m in back.history] == ["a", "1", "b", "2", "other", "o"]
    kept = Chat.resume(side.id, ScriptedProvider([]), journal=journal)
    assert [m.content for m in kept.history] == ["a", "1", "side", "s"]


async def test_a_chat_started_over_forks_into_a_new_id_not_an_old_fork(tmp_path: Path) -> None:
    """After ``restart=True`` a fork is not the old turns' fork; a re-run reopens the new one."""
    journal = Journal(tmp_path / "j.sqlite")
    old = Chat(ScriptedProvider([{"text": "old"}, {"text": "old-q"}]), journal=journal, id="r")
    await old("hi")
    side = old.fork(1)
    await side("q")
    new = Chat(
        ScriptedProvider([{"text": "new"}, {"text": "new-q"}]),
        journal=journal,
        id="r",
        restart=True,
    )
    await new("hi")
    child = new.fork(1)
    assert child.id != side.id
    assert (await child("q")).content == "new-q"
    back = Chat.resume(side.id, ScriptedProvider([]), journal=journal)
    assert [m.content for m in back.history] == ["hi", "old", "q", "old-q"]
    # Re-running the cells replays the new start and reopens its fork, not the old one.
    empty = ScriptedProvider([])
    rerun = Chat(empty, journal=journal, id="r")
    await rerun("hi")
    again = rerun.fork(1)
    assert again.id == child.id
    assert (await again("q")).content == "new-q"
    assert empty.requests == []


async def test_a_stopped_turn_comes_back_with_its_partial_text(tmp_path: Path) -> None:
    """A turn stopped while streaming is resumed as it was: its partial text, marked stopped."""
    journal = Journal(tmp_path / "j.sqlite")
    provider = Hanging("Par", "tial")
    chat = Chat(provider, journal=journal, id="st", stream=True)  # type: ignore[arg-type]
    task = asyncio.ensure_future(chat("talk", on_text=lambda _d: None))
    await provider.started.wait()
    chat.stop()
    await task
    resumed = Chat.resume("st", ScriptedProvider([{"text": "next"}]), journal=journal)
    assert [m.content for m in resumed.history] == ["talk", "Partial"]
    assert [(t.status, t.position, t.cost) for t in resumed.turns] == [("stopped", 0, None)]
    assert "stopped: turn 0" in resumed.header()
    assert (await resumed("go on")).content == "next"
    assert _steps(journal, "st") == [
        "#chat:0:model",  # failed: stopped
        "#chat:1:stop",
        "#chat:2:provider",  # resumed on another provider than the one that streamed
        "#chat:3:model",
    ]
    assert resumed.turns[-1].position == 3


@tool
def step(n: int) -> str:
    """Take a step.

    Args:
        n: The step.
    """
    return f"did {n}"


async def test_a_run_a_spending_limit_halted_is_resumed_halted_and_goes_on(
    journal_backend: JournalBackend,
) -> None:
    """A halted run comes back as a halted turn with its spend; chat.run(limits=...) finishes it."""
    calls = [
        {
            "tool_calls": [{"id": f"c{i}", "name": "step", "input": {"n": i}}],
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
        for i in range(2)
    ]
    first = ScriptedProvider([*calls, {"text": "never asked"}])
    kernel = journal_backend.open("j")
    chat = Chat(first, tools=[step], journal=kernel, id="halting")
    with pytest.raises(BudgetExceededError):
        await chat.run("go", limits=Limits(max_requests=2))
    kernel.close()
    second = ScriptedProvider([{"text": "done", "usage": {"input_tokens": 10, "output_tokens": 5}}])
    resumed = Chat.resume("halting", second, journal=journal_backend.open("j"), tools=[step])
    assert [(t.kind, t.status) for t in resumed.turns] == [("run", "halted")]
    assert resumed.usage == Usage(input_tokens=20, output_tokens=10)
    assert "halted by a spending limit" in resumed.header()
    assert second.requests == []
    result = await resumed.run(limits=Limits(max_requests=5))
    assert (result.status, result.text) == ("completed", "done")
    assert len(second.requests) == 1  # only the refused call is made now
    assert [t.status for t in resumed.turns] == ["completed"]
    assert resumed.usage == Usage(input_tokens=30, output_tokens=15)


async def test_a_fallback_chat_is_priced_by_the_member_that_answered(tmp_path: Path) -> None:
    """A FallbackProvider's turns are recorded and priced by the member that answered, also resumed."""
    journal = Journal(tmp_path / "j.sqlite")
    member, _ = anthropic({"text": "A", "usage": {"input_tokens": 10, "output_tokens": 2}})
    chat = Chat(FallbackProvider([member]), journal=journal, id="fb")
    await chat("one")
    assert chat.turns[0].cost == price(10, 2)
    resumed = Chat.resume("fb", ScriptedProvider([]), journal=journal)
    (turn,) = resumed.turns
    assert (turn.provider, turn.model, turn.cost) == (
        "AnthropicProvider",
        "claude-sonnet-4-5",
        price(10, 2),
    )
