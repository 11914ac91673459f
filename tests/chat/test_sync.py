"""chat.sync / run_sync inside a running loop and out of one; a chat call never awaited is said."""

from __future__ import annotations

import _thread
import asyncio
import gc
import os
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from loom_nb import Chat, ConfigurationError, Journal, ScriptedProvider, tool
from loom_nb.chat import NotAwaitedWarning, _sync
from loom_nb.chat._sync import run_blocking
from tests.chat.hanging import Hanging
from tests.display import displayed

SCRIPT = """
import asyncio, json, sys
from loom_nb import Chat, Journal, ScriptedProvider

chat = Chat(ScriptedProvider([{"text": "one two three"}, {"text": "again"}], chunk_size=4),
            journal=Journal(sys.argv[1]), id="script")
reply = chat.sync("hi", stream=True)
second = chat.sync("more")
print()
print(json.dumps([reply.content, second.content, len(chat.turns)]))
"""


@pytest.mark.slow
def test_sync_works_in_a_plain_script_with_no_event_loop(tmp_path: Path) -> None:
    """A script with no loop calls chat.sync twice: the replies, streamed text printed live."""
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "j.sqlite")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "one two three"  # printed as it streamed
    assert lines[-1] == '["one two three", "again", 2]'
    assert Journal(tmp_path / "j.sqlite").events("script")[-1].step_id == "#chat:1:model"


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: The key.
    """
    return f"value of {key}"


async def test_sync_inside_a_running_loop_streams_and_updates_the_views() -> None:
    """From a coroutine (a notebook cell's loop), chat.sync runs on a private loop and waits."""
    provider = ScriptedProvider(
        [
            {"text": "streamed words here"},
            {"tool_calls": [{"id": "t1", "name": "lookup", "input": {"key": "k"}}]},
            {"text": "found it"},
        ],
        chunk_size=5,
    )
    chat = Chat(provider, tools=[lookup], journal=Journal(), id="insync", stream=True)
    data = displayed(chat)
    model_id = data["application/vnd.jupyter.widget-view+json"]["model_id"]
    (view,) = [v for v in chat._views or () if v.model_id == model_id]
    live: list[str] = []
    view.observe(lambda change: live.append(change["new"]), names="live_text")
    deltas: list[str] = []
    threads: set[str] = set()
    while_streaming: list[tuple[bool, str]] = []

    def on_text(delta: str) -> None:
        deltas.append(delta)
        threads.add(threading.current_thread().name)
        while_streaming.append((view.stoppable, view.header))

    outer = asyncio.get_running_loop()
    reply = chat.sync("go", on_text=on_text)
    assert asyncio.get_running_loop() is outer  # the cell's loop is untouched
    assert reply.content == "streamed words here"
    assert deltas == ["strea", "med w", "ords ", "here"]
    assert threads == {"loom_nb-sync"}  # the reply ran on the private loop's thread
    assert live[-2:] == ["streamed words here", ""]
    # The cell's loop is held: a Stop button could not be heard, so the view says to interrupt.
    assert {stoppable for stoppable, _ in while_streaming} == {False}
    assert while_streaming[-1][1].endswith("· replying (interrupt the kernel to stop)")
    assert not view.header.endswith("to stop)")
    assert "streamed words here" in view.to_static_html()
    result = chat.run_sync("look k up", stream=False)
    assert (result.status, result.text) == ("completed", "found it")
    assert [t.kind for t in chat.turns] == ["chat", "run"]
    assert "found it" in view.to_static_html()  # the view followed the run too


async def test_stop_works_on_a_sync_reply_from_another_thread() -> None:
    """The view's Stop (from the kernel's thread) stops a sync reply: the partial text is kept."""
    provider = Hanging("Par", "tial")
    journal = Journal()
    chat = Chat(provider, journal=journal, id="syncstop", stream=True)  # type: ignore[arg-type]
    stopped: list[bool] = []

    def press_stop() -> None:
        deadline = time.monotonic() + 30
        while chat.live_text != "Partial" and time.monotonic() < deadline:
            time.sleep(0.01)
        stopped.append(chat.stop())

    presser = threading.Thread(target=press_stop)
    presser.start()
    reply = chat.sync("talk", on_text=lambda _d: None)
    presser.join()
    assert stopped == [True]
    assert reply.content == "Partial"
    assert chat.turns[-1].status == "stopped"
    assert [m.content for m in chat.history] == ["talk", "Partial"]
    assert not chat.busy


@pytest.mark.usefixtures("sigint_raises")
def test_an_interrupt_stops_a_sync_reply_then_is_raised() -> None:
    """Ctrl-C (the kernel's stop button) while a sync reply streams: the turn is stopped, kept, then raised."""
    provider = Hanging("Par", "tial")
    chat = Chat(provider, journal=Journal(), id="interrupted", stream=True)  # type: ignore[arg-type]

    def interrupt() -> None:
        deadline = time.monotonic() + 30
        while chat.live_text != "Partial" and time.monotonic() < deadline:
            time.sleep(0.01)
        _thread.interrupt_main()

    threading.Thread(target=interrupt).start()
    with pytest.raises(KeyboardInterrupt):
        chat.sync("talk", on_text=lambda _d: None)
    assert chat.turns[-1].status == "stopped"
    assert [m.content for m in chat.history] == ["talk", "Partial"]
    assert not chat.busy


def test_a_sync_call_from_inside_a_sync_call_is_refused() -> None:
    """A tool that calls chat.sync while a sync run drives it would wait on itself: refused."""
    inner = Chat(ScriptedProvider([{"text": "never"}]), journal=Journal(), id="inner")

    @tool
    def ask_inner(question: str) -> str:
        """Ask the other chat.

        Args:
            question: The question.
        """
        return inner.sync(question).content

    outer = Chat(
        ScriptedProvider(
            [
                {"tool_calls": [{"id": "t1", "name": "ask_inner", "input": {"question": "q"}}]},
                {"text": "done"},
            ]
        ),
        tools=[ask_inner],
        journal=Journal(),
        id="outer",
    )
    result = outer.run_sync("go")
    assert result.tool_calls[0].status == "error"
    assert "would wait for itself" in str(result.messages[2].content)
    assert inner.turns == []


def _advice(text: str, call: str, sync: str) -> None:
    assert f"{call} was not sent" in text
    assert f"`await {call}`" in text
    assert f"`{sync}`" in text


async def test_a_displayed_unawaited_call_says_how_to_send_it() -> None:
    """chat('...') shown in a cell (repr, HTML, mimebundle) says it was not sent and what to write."""
    provider = ScriptedProvider([{"text": "late"}])
    chat = Chat(provider, journal=Journal(), id="shown")
    pending = chat("hi")
    data = displayed(pending)  # what a notebook shows for `chat("hi")` last in a cell
    _advice(data["text/plain"], "chat(...)", "chat.sync(...)")
    assert data["text/html"].startswith('<div class="loom-not-sent"><b>Not sent.</b>')
    assert "`await chat(...)`" in data["text/html"]  # escaped text, no markup from the advice
    _advice(pending._repr_html_(), "chat(...)", "chat.sync(...)")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # shown once, it does not warn again when collected
        del pending
        gc.collect()
    assert provider.requests == []
    run = chat.run("go")
    _advice(repr(run), "chat.run(...)", "chat.run_sync(...)")
    del run
    # Awaited, the same call is an ordinary coroutine: it runs, as a task too.
    assert (await asyncio.create_task(chat("hi"))).content == "late"


def test_a_dropped_unawaited_call_warns_how_to_send_it() -> None:
    """chat('...') dropped without await warns (NotAwaitedWarning, a RuntimeWarning); nothing is sent."""
    provider = ScriptedProvider([{"text": "never"}])
    chat = Chat(provider, journal=Journal(), id="dropped")
    with pytest.warns(NotAwaitedWarning) as caught:
        chat("hi")  # dropped at once: CPython frees it at the end of the statement
    (warning,) = caught
    assert issubclass(warning.category, RuntimeWarning)
    _advice(str(warning.message), "chat(...)", "chat.sync(...)")
    with pytest.warns(NotAwaitedWarning, match=r"chat\.run_sync"):
        chat.run("go")
    gc.collect()  # what earlier tests in this process left behind warns now, not in the block
    with warnings.catch_warnings(record=True) as python_own:
        warnings.simplefilter("always")
        chat("again")
        gc.collect()
    assert [w.category for w in python_own] == [NotAwaitedWarning]  # not Python's own as well
    assert provider.requests == []
    assert chat.turns == []


def test_an_unknown_chat_resumed_in_sync_code_is_refused_before_any_loop(tmp_path: Path) -> None:
    """Chat.resume is synchronous: an unknown id is refused at once, with no loop or await."""
    with pytest.raises(ConfigurationError) as unknown:
        Chat.resume("nothing", ScriptedProvider([]), journal=Journal(tmp_path / "j.sqlite"))
    assert unknown.value.code == "unknown_chat"


def parked_deploy(chat_id: str, started: threading.Event, cleanup: float) -> Chat:
    """A chat whose run is parked on a ``deploy`` call needing approval; approved, the call
    sets ``started`` and hangs until cancelled, then cleans up for ``cleanup`` seconds (a second
    call answers at once)."""

    @tool(requires_approval=True)
    async def deploy(target: str) -> str:
        """Deploy.

        Args:
            target: Where.
        """
        if not started.is_set():  # the first call hangs until the interrupt
            started.set()
            try:
                await asyncio.Event().wait()
            finally:
                await asyncio.sleep(cleanup)  # a tool that cleans up when cancelled
        return "done"

    provider = ScriptedProvider(
        [
            {"tool_calls": [{"id": "d1", "name": "deploy", "input": {"target": "prod"}}]},
            {"text": "Deployed."},
        ]
    )
    chat = Chat(provider, tools=[deploy], journal=Journal(), id=chat_id)
    assert chat.run_sync("deploy").status == "parked"
    return chat


@pytest.mark.usefixtures("sigint_raises")
def test_an_interrupt_during_approve_sync_settles_the_run_as_run_sync_does() -> None:
    """Ctrl-C while an approved call runs under approve_sync: the run settles before the
    interrupt is raised (the chat is not left busy), as under run_sync."""
    started = threading.Event()
    chat = parked_deploy("approve-int", started, cleanup=0.5)

    def interrupt() -> None:
        started.wait(30)
        _thread.interrupt_main()

    threading.Thread(target=interrupt).start()
    with pytest.raises(KeyboardInterrupt):
        chat.approve_sync()
    assert not chat.busy  # the next cell's call is not refused as "still in flight"
    assert chat.turns[-1].status == "parked"
    assert chat.pending_approvals[0]["id"] == "d1"
    result = chat.approve_sync()  # the interrupted run goes on where it stopped
    assert (result.status, result.text) == ("completed", "Deployed.")


def test_an_interrupt_as_the_call_is_handed_to_the_loop_still_settles_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C that lands while the waiting thread is still handing the call to the private loop,
    which has already reached the call's first await: the call is cancelled and its cleanup is
    over before the interrupt is raised (it was once lost, and the task collected mid-cleanup)."""
    began = threading.Event()
    cleaned: list[bool] = []

    async def work() -> str:
        began.set()
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0.2)
            cleaned.append(True)
        return "never"

    hand_over = _sync._Call.start

    def hand_over_then_interrupt(call: _sync._Call[Any]) -> None:
        hand_over(call)
        assert began.wait(30)  # the loop runs the call: the interrupt lands now
        raise KeyboardInterrupt

    monkeypatch.setattr(_sync._Call, "start", hand_over_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        run_blocking(work())
    assert cleaned == [True]


def test_an_interrupt_as_approve_sync_hands_over_the_run_leaves_the_chat_idle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same moment under approve_sync, the run already in its tool: the chat's stop ends the
    run, which settles parked, so the next cell's call is not refused as busy."""
    started = threading.Event()
    chat = parked_deploy("approve-handover", started, cleanup=0.2)
    hand_over = _sync._Call.start

    def hand_over_then_interrupt(call: _sync._Call[Any]) -> None:
        hand_over(call)
        assert started.wait(30)
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(_sync._Call, "start", hand_over_then_interrupt)
        with pytest.raises(KeyboardInterrupt):
            chat.approve_sync()
    assert not chat.busy
    assert chat.pending_approvals[0]["id"] == "d1"
    assert chat.approve_sync().text == "Deployed."
