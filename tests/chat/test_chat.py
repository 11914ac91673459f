"""Chat: journaled turns, attachments, replay, undo, fork, runs with approvals, stop, usage, display."""

from __future__ import annotations

import asyncio
import io
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from loom_nb import (
    AnthropicProvider,
    Chat,
    ConfigurationError,
    ImagePart,
    Journal,
    LlmResponse,
    LocalContentStore,
    MediaError,
    Message,
    OpenAIProvider,
    ScriptedProvider,
    TextPart,
    Usage,
    tool,
)
from loom_nb.chat._cost import Totals, format_cost, price_of
from loom_nb.chat._views import TurnStats
from loom_nb.content import DataSource, RefSource
from loom_nb.demo import chart_png
from loom_nb.providers.scripted import SCRIPTED_CAPABILITIES
from tests.chat.hanging import Hanging
from tests.display import displayed


def _kinds(journal: Journal, execution_id: str) -> list[tuple[str, str | None]]:
    return [
        (e.kind, e.step_id)
        for e in journal.events(execution_id)
        if e.kind in ("step_completed", "step_failed")
    ]


@tool(requires_approval=True)
def send_email(to: str, body: str) -> str:
    """Send an email.

    Args:
        to: The address.
        body: The text.
    """
    return f"sent to {to}"


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


async def test_a_turn_is_one_journaled_step_with_the_whole_history() -> None:
    """Each chat(...) is step #chat:<k>:model; the provider sees the history, system and tools."""
    provider = ScriptedProvider([{"text": "Hi!"}, {"text": "Fine."}])
    journal = Journal()
    chat = Chat(provider, system="Be brief.", tools=[send_email], journal=journal, id="c")
    reply = await chat("hello")
    assert isinstance(reply, LlmResponse)
    assert reply.content == "Hi!"
    await chat("how are you?")
    assert [m.role for m in chat.history] == ["user", "assistant", "user", "assistant"]
    seen = provider.requests[1]
    assert [m.content for m in seen.messages] == ["hello", "Hi!", "how are you?"]
    assert seen.system == "Be brief."
    assert [t.name for t in seen.tools] == ["send_email"]
    assert _kinds(journal, "c") == [
        ("step_completed", "#chat:0:model"),
        ("step_completed", "#chat:1:model"),
    ]


async def test_default_journal_and_store_live_in_dot_loom(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no journal or store given, .loom/journal.sqlite is created on first use."""
    monkeypatch.chdir(tmp_path)
    chat = Chat(ScriptedProvider([{"text": "ok"}]), id="d")
    assert not (tmp_path / ".loom").exists()
    await chat("hi")
    assert (tmp_path / ".loom" / "journal.sqlite").is_file()
    assert [e.step_id for e in Journal(tmp_path / ".loom" / "journal.sqlite").events("d")][-1] == (
        "#chat:0:model"
    )


async def test_replay_with_the_same_id_needs_no_model(tmp_path: Path) -> None:
    """A second Chat with the same id on the same journal serves the recorded turns."""
    journal = Journal(tmp_path / "j.sqlite")
    first = Chat(ScriptedProvider([{"text": "one"}, {"text": "two"}]), journal=journal, id="r")
    await first("a")
    await first("b")
    empty = ScriptedProvider([{"text": "live"}])
    again = Chat(empty, journal=journal, id="r")
    assert (await again("a")).content == "one"
    assert (await again("b")).content == "two"
    assert empty.requests == []
    assert (await again("c")).content == "live"  # past the log: live


def _noise_png() -> bytes:
    rng = random.Random(3)
    image = Image.frombytes(
        "RGB", (180, 180), bytes(rng.randrange(256) for _ in range(180 * 180 * 3))
    )
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


async def test_attachments_become_parts_and_big_media_travels_by_ref(tmp_path: Path) -> None:
    """Paths, bytes, PIL images and parts are attached; over the cap goes to the store by ref."""
    store = LocalContentStore(tmp_path / "store")
    journal = Journal()
    provider = ScriptedProvider([{"text": "seen"}])
    chart = tmp_path / "chart.bin"
    chart.write_bytes(chart_png("revenue"))
    big = _noise_png()
    chat = Chat(provider, store=store, journal=journal, id="m")
    await chat(
        "describe", chart, big, Image.new("RGB", (3, 3)), TextPart(text="and this"), str(chart)
    )
    sent = chat.history[0].content
    assert isinstance(sent, list)
    kinds = [p.type for p in sent]
    assert kinds == ["text", "image", "image", "image", "text", "image"]
    by_ref = sent[2]
    assert isinstance(by_ref, ImagePart)
    assert isinstance(by_ref.source, RefSource)
    assert store.get(by_ref.source.ref.address) == big
    # The journal holds the address, the provider saw the resolved bytes inline.
    step = next(e for e in journal.events("m") if e.kind == "step_completed")
    assert "sha256:" in str(step.payload)
    assert len(str(step.payload)) < len(big)
    seen = provider.requests[0].messages[0].content[2]
    assert isinstance(seen, ImagePart)
    assert isinstance(seen.source, DataSource)


async def test_bad_attachments_and_prompts_are_typed_errors(tmp_path: Path) -> None:
    """An unreadable path, an unknown object or a non-str prompt is refused; nothing is sent."""
    provider = ScriptedProvider([{"text": "never"}])
    chat = Chat(provider, journal=Journal(), id="bad")
    with pytest.raises(MediaError) as caught:
        await chat("look", tmp_path / "nope.png")
    assert caught.value.code == "unreadable_path"
    with pytest.raises(MediaError):
        await chat("look", 42)
    with pytest.raises(ConfigurationError):
        await chat(b"bytes as text")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        await chat("")
    assert provider.requests == []
    assert chat.history == []


def test_constructor_refuses_what_is_not_a_provider() -> None:
    """Chat(provider=...) must be a provider; bad arguments are ConfigurationError."""
    with pytest.raises(ConfigurationError):
        Chat("claude")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        Chat(ScriptedProvider([]), tools="send_email")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        Chat(ScriptedProvider([]), id="")


async def test_a_refusal_leaves_the_history_unchanged() -> None:
    """Media the provider does not take is refused before I/O; the history does not grow."""
    from loom_nb import Capabilities, UnsupportedModalityError

    provider = ScriptedProvider([{"text": "x"}], capabilities=Capabilities())
    chat = Chat(provider, journal=Journal(), id="t")
    with pytest.raises(UnsupportedModalityError):
        await chat("look", chart_png("x"))
    assert chat.history == []
    assert chat.turns == []


async def test_undo_drops_the_last_turn() -> None:
    """undo() returns the last turn's messages and the next request no longer has them."""
    provider = ScriptedProvider([{"text": "1"}, {"text": "2"}, {"text": "3"}])
    chat = Chat(provider, journal=Journal(), id="u")
    await chat("a")
    await chat("b")
    removed = chat.undo()
    assert [m.content for m in removed] == ["b", "2"]
    await chat("c")
    assert [m.content for m in provider.requests[-1].messages] == ["a", "1", "c"]
    with pytest.raises(ConfigurationError):
        Chat(provider, journal=Journal()).undo()


async def test_undo_is_journaled_and_a_reopened_chat_replays_it(tmp_path: Path) -> None:
    """undo() is the step #chat:<k>:undo; a fresh Chat on the journal replays it, served, with no model."""
    from loom_nb import ReplayDivergenceError, TranscriptView

    journal = Journal(tmp_path / "j.sqlite")
    provider = ScriptedProvider([{"text": "1"}, {"text": "2"}, {"text": "3"}])
    chat = Chat(provider, journal=journal, id="uj")
    await chat("a")
    await chat("b")
    chat.undo()
    await chat("c")
    assert [s for _, s in _kinds(journal, "uj")] == [
        "#chat:0:model",
        "#chat:1:model",
        "#chat:2:undo",
        "#chat:3:model",
    ]
    undo = next(e for e in journal.events("uj") if e.step_id == "#chat:2:undo" and e.payload)
    assert undo.payload["output"]["undo"] == 1  # which turn was dropped
    logged = len(journal.events("uj"))
    # Reopened in a fresh Chat object (a new kernel): the same code replays, undo included.
    empty = ScriptedProvider([])
    again = Chat(empty, journal=journal, id="uj")
    await again("a")
    await again("b")
    assert [m.content for m in again.undo()] == ["b", "2"]
    await again("c")
    assert again.history == chat.history
    assert [t.position for t in again.turns] == [t.position for t in chat.turns] == [0, 3]
    assert empty.requests == []
    assert len(journal.events("uj")) == logged  # everything served, nothing journaled again
    # The journal alone shows the chat without the undone turn.
    view = TranscriptView(journal.execution("uj"))
    assert [m.content for m in view.transcript.messages] == ["a", "1", "c", "3"]
    # Code that no longer undoes where the log did diverges, and says so in the chat's terms.
    forgetful = Chat(ScriptedProvider([{"text": "x"}]), journal=journal, id="uj")
    await forgetful("a")
    await forgetful("b")
    with pytest.raises(ReplayDivergenceError) as caught:
        await forgetful("c")
    assert "chat.undo()" in caught.value.message
    # An undo where the log had a turn diverges too (the undo is checked like any step).
    eager = Chat(ScriptedProvider([]), journal=journal, id="uj")
    await eager("a")
    with pytest.raises(ReplayDivergenceError):
        eager.undo()
    assert [m.content for m in eager.history] == ["a", "1"]  # refused: nothing dropped


async def test_the_journal_shows_an_undone_last_turn_as_gone(tmp_path: Path) -> None:
    """Undo of the last turn, with nothing after it: the execution's transcript stops before it."""
    from loom_nb import TranscriptView

    journal = Journal(tmp_path / "j.sqlite")
    chat = Chat(ScriptedProvider([{"text": "1"}, {"text": "2"}]), journal=journal, id="ul")
    await chat("a")
    await chat("b")
    chat.undo()
    view = TranscriptView(journal.execution("ul"))
    assert [m.content for m in view.transcript.messages] == ["a", "1"]
    chat.undo()
    assert TranscriptView(journal.execution("ul")).transcript.messages == []


async def test_fork_after_undo_replays_the_undo_from_the_shared_log(tmp_path: Path) -> None:
    """A fork taken after an undo copies the undo step with the log and goes on from there."""
    journal = Journal(tmp_path / "j.sqlite")
    provider = ScriptedProvider(
        [{"text": "1"}, {"text": "2"}, {"text": "3"}, {"text": "forked"}, {"text": "other"}]
    )
    chat = Chat(provider, journal=journal, id="fu")
    await chat("a")
    await chat("b")
    chat.undo()
    await chat("c")
    child = chat.fork(1)  # before "c": turn 0, plus the undone turn and its undo in the log
    assert [m.content for m in child.history] == ["a", "1"]
    assert (await child("d")).content == "forked"
    assert [m.content for m in provider.requests[-1].messages] == ["a", "1", "d"]
    assert [s for _, s in _kinds(journal, child.id)] == [
        "#chat:0:model",
        "#chat:1:model",
        "#chat:2:undo",
        "#chat:3:model",
    ]
    # A fork undone before it replayed its shared log journals the undo after that log.
    other = chat.fork(2, id="fu/other")
    other.undo()
    assert [m.content for m in other.history] == ["a", "1"]
    assert (await other("e")).content == "other"
    assert [m.content for m in provider.requests[-1].messages] == ["a", "1", "e"]
    assert [s for _, s in _kinds(journal, "fu/other")][-2:] == ["#chat:4:undo", "#chat:5:model"]


async def test_a_fork_into_an_id_another_log_holds_is_refused_and_that_log_untouched() -> None:
    """fork(turn, id=...) naming another chat's execution is refused before anything is written
    (it once appended this chat's turns to that chat's log); re-running the notebook's own
    fork with a chosen id still reopens and replays it."""
    journal = Journal()
    other = Chat(ScriptedProvider([{"text": "o1"}]), journal=journal, id="other")
    await other("x")
    before = [(e.kind, e.step_id) for e in journal.events("other")]
    chat = Chat(
        ScriptedProvider([{"text": "a1"}, {"text": "a2"}, {"text": "alt"}]), journal=journal, id="a"
    )
    await chat("p")
    await chat("q")
    with pytest.raises(ConfigurationError) as taken:
        chat.fork(1, id="other")
    assert taken.value.code == "execution_exists"
    assert "'other'" in str(taken.value)
    assert "another id" in str(taken.value)
    assert [(e.kind, e.step_id) for e in journal.events("other")] == before
    assert [
        m.content for m in Chat.resume("other", ScriptedProvider([]), journal=journal).history
    ] == [
        "x",
        "o1",
    ]
    alt = chat.fork(1, id="a/alt")
    assert (await alt("r")).content == "alt"
    again = Chat(ScriptedProvider([{"text": "a1"}, {"text": "a2"}]), journal=journal, id="a")
    await again("p")
    await again("q")
    replayed = again.fork(1, id="a/alt")  # the notebook re-run: its own fork, reopened
    assert (await replayed("r")).content == "alt"


async def test_fork_shares_the_log_up_to_the_turn(tmp_path: Path) -> None:
    """fork(1) keeps turn 0, copies its log, and goes on differently; re-forking replays."""
    journal = Journal(tmp_path / "j.sqlite")
    provider = ScriptedProvider([{"text": "0"}, {"text": "1"}, {"text": "fork says"}])
    chat = Chat(provider, journal=journal, id="f")
    await chat("zero")
    await chat("one")
    child = chat.fork(1)
    assert child.id == "f/fork-0"
    assert [m.content for m in child.history] == ["zero", "0"]
    reply = await child("another one")
    assert reply.content == "fork says"
    assert [m.content for m in provider.requests[-1].messages] == ["zero", "0", "another one"]
    assert [s for _, s in _kinds(journal, "f/fork-0")] == ["#chat:0:model", "#chat:1:model"]
    started = journal.events("f/fork-0")[0]
    assert started.payload["forked_from"] == {"execution_id": "f", "position": 1}
    assert chat.history[-1].content == "1"  # the parent is untouched
    # Re-running the notebook: the same fork replays from its own log, no model needed.
    again = Chat(ScriptedProvider([]), journal=journal, id="f")
    await again("zero")
    await again("one")
    child2 = again.fork(1)
    assert (await child2("another one")).content == "fork says"
    with pytest.raises(ConfigurationError):
        chat.fork(9)


async def test_run_parks_for_approval_and_approve_resumes() -> None:
    """chat.run parks on a requires_approval tool; approve(True) runs it and the history grows."""
    provider = ScriptedProvider(
        [
            {
                "tool_calls": [
                    {"id": "c1", "name": "send_email", "input": {"to": "bo", "body": "hi"}}
                ]
            },
            {"text": "Sent."},
            {"text": "after"},
        ]
    )
    journal = Journal()
    chat = Chat(provider, tools=[send_email], journal=journal, id="a")
    result = await chat.run("email bo")
    assert result.status == "parked"
    assert [d["id"] for d in chat.pending_approvals] == ["c1"]
    assert "awaiting approval: c1" in chat.header()
    with pytest.raises(ConfigurationError) as caught:
        await chat("meanwhile")
    assert caught.value.code == "chat_parked"
    result = await chat.approve(True)
    assert result.status == "completed"
    assert result.text == "Sent."
    assert result.tool_calls[0].status == "ok"
    assert chat.pending_approvals == []
    assert chat.turns[-1].kind == "run"
    assert (await chat("and now?")).content == "after"
    assert [m.role for m in chat.history] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    # Re-running the cells replays the decided run; approve() then returns its result.
    again = Chat(ScriptedProvider([]), tools=[send_email], journal=journal, id="a")
    replayed = await again.run("email bo")
    assert replayed.status == "completed"
    assert (await again.approve(True)).text == "Sent."


async def test_decline_tells_the_model() -> None:
    """decline(reason) answers the pending call with a declined error result."""
    provider = ScriptedProvider(
        [
            {"tool_calls": [{"id": "c1", "name": "send_email", "input": {"to": "x", "body": "y"}}]},
            {"text": "OK, not sent."},
        ]
    )
    chat = Chat(provider, tools=[send_email], journal=Journal(), id="d")
    await chat.run("email x")
    result = await chat.decline("not today")
    assert result.tool_calls[0].status == "declined"
    assert "not today" in str(provider.requests[-1].messages[-1].content)
    assert (await chat.approve(True)).text == "OK, not sent."  # decided: the same result
    with pytest.raises(ConfigurationError) as caught:
        await Chat(provider, journal=Journal()).approve(True)
    assert caught.value.code == "nothing_parked"


async def test_streaming_reaches_on_text_or_the_cell(capsys: pytest.CaptureFixture[str]) -> None:
    """stream=True sends deltas to on_text; without a callback they are printed live."""
    provider = ScriptedProvider([{"text": "streamed words"}, {"text": "printed"}], chunk_size=4)
    chat = Chat(provider, journal=Journal(), id="s")
    seen: list[str] = []
    reply = await chat("go", stream=True, on_text=seen.append)
    assert seen == ["stre", "amed", " wor", "ds"]
    assert reply.content == "streamed words"
    await chat("again", stream=True)
    assert capsys.readouterr().out == "printed\n"


async def test_stop_keeps_the_partial_text_and_journals_no_completed_step() -> None:
    """stop() cancels the streaming reply: partial text kept, turn 'stopped', step not completed."""
    provider = Hanging()
    journal = Journal()
    chat = Chat(provider, journal=journal, id="stop")  # type: ignore[arg-type]
    task = asyncio.ensure_future(chat("talk", stream=True, on_text=lambda _d: None))
    await provider.started.wait()
    assert chat.busy
    assert chat.live_text == "Hello"
    assert chat.stop() is True
    reply = await task
    assert reply.content == "Hello"
    assert chat.turns[-1].status == "stopped"
    assert [m.content for m in chat.history] == ["talk", "Hello"]
    assert _kinds(journal, "stop") == [
        ("step_failed", "#chat:0:model"),
        ("step_completed", "#chat:1:stop"),  # the partial text, for a resume
    ]
    assert journal.events("stop")[-1].payload["input"] == {"text": "Hello"}
    assert "stopped: turn 0" in chat.header()
    assert not chat.busy
    assert chat.stop() is False


async def test_cancelling_from_outside_is_not_a_stop() -> None:
    """A cancellation that is not chat.stop() propagates as CancelledError."""
    provider = Hanging()
    chat = Chat(provider, journal=Journal(), id="cx")  # type: ignore[arg-type]
    task = asyncio.ensure_future(chat("talk", stream=True, on_text=lambda _d: None))
    await provider.started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert chat.turns == []
    assert not chat.busy


async def test_usage_is_per_turn_and_total() -> None:
    """chat.usage sums the turns; each turn keeps its own counts; unknown prices give None."""
    provider = ScriptedProvider(
        [
            {"text": "a", "usage": {"input_tokens": 10, "output_tokens": 2}},
            {"text": "b", "usage": {"input_tokens": 15, "output_tokens": 3}},
        ]
    )
    chat = Chat(provider, journal=Journal(), id="usage")
    await chat("x")
    await chat("y")
    assert [t.usage.input_tokens for t in chat.turns] == [10, 15]
    assert chat.usage == Usage(input_tokens=25, output_tokens=5)
    assert chat.cost is None
    assert "cost unknown" in chat.header()


def test_cost_comes_from_genai_prices_for_known_models() -> None:
    """A known vendor and model get the price table's figure; a local server gets None."""
    from genai_prices import Usage as PriceUsage
    from genai_prices import calc_price

    response = LlmResponse(
        content="x", usage=Usage(input_tokens=1000, output_tokens=500), model="claude-sonnet-4-5"
    )
    provider = AnthropicProvider("claude-sonnet-4-5", api_key="test-key-not-used")
    expected = calc_price(
        PriceUsage(input_tokens=1000, output_tokens=500),
        "claude-sonnet-4-5",
        provider_id="anthropic",
    ).total_price
    assert price_of(provider, response) == expected
    assert expected > 0
    local = OpenAIProvider("llama3.2", base_url="http://127.0.0.1:11434/v1")
    assert price_of(local, response.model_copy(update={"model": "llama3.2"})) is None
    unknown = response.model_copy(update={"model": "no-such-model-xyz"})
    assert price_of(provider, unknown) is None
    assert format_cost(None) == "cost unknown"
    assert format_cost(Decimal("0.0105")) == "$0.0105"


async def test_a_cost_below_a_millionth_of_a_dollar_is_not_shown_as_free() -> None:
    """One input token on gpt-4.1-nano costs $0.0000001: the chat's header says "<$0.000001",
    not "$0.000000", which reads as free; an exact zero stays "$0"."""
    answer = {
        "id": "c",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4.1-nano",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1},
    }
    client = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda _request: httpx.Response(200, json=answer))
    )
    chat = Chat(
        OpenAIProvider("gpt-4.1-nano", api_key="k" * 24, http_client=client),
        journal=Journal(),
        id="tiny",
    )
    await chat("hi")
    assert chat.cost == Decimal("0.0000001")
    assert chat.header().endswith(" · <$0.000001")
    assert "&lt;$0.000001" in displayed(chat)["text/html"]  # escaped in the saved HTML
    assert chat.to_markdown().splitlines()[0].endswith(r" · \<\$0\.000001")  # escaped Markdown
    assert format_cost(Decimal("0.0000005")) == "<$0.000001"  # rounds to six zeros
    assert format_cost(Decimal("0.00000051")) == "$0.000001"
    assert format_cost(Decimal("0.000123")) == "$0.000123"
    assert format_cost(Decimal(0)) == "$0"


async def test_chat_and_values_display_as_transcripts() -> None:
    """Chat, Message, LlmResponse and AgentResult bundles carry escaped static HTML and plain text."""
    hostile = "<script>alert(1)</script>"
    provider = ScriptedProvider(
        [{"text": hostile, "usage": {"input_tokens": 7, "output_tokens": 1}}]
    )
    chat = Chat(provider, journal=Journal(), id="show")
    reply = await chat("show me")
    data = displayed(chat)
    html = data["text/html"]
    assert "<script>" not in html
    assert "&lt;script&gt;" in html
    assert "chat show · 1 turn · 7 in · 1 out · cost unknown" in html
    assert "application/vnd.jupyter.widget-view+json" in data
    assert data["text/plain"].startswith("Chat(chat show")
    for value in (reply, Message(role="user", content=hostile)):
        bundle = displayed(value)
        assert "&lt;script&gt;" in bundle["text/html"]
        assert "<script>" not in bundle["text/html"]
    only_html = displayed(chat, include={"text/html"})
    assert set(only_html) == {"text/html"}
    from tests.render.safety import unsafe_parts

    assert unsafe_parts(html) == []  # what JupyterLab's sanitizer would strip: nothing
    assert "<style" not in html


async def test_agent_result_display_names_pending_approvals() -> None:
    """A parked AgentResult's header says which calls await approval."""
    provider = ScriptedProvider(
        [{"tool_calls": [{"id": "c9", "name": "send_email", "input": {"to": "a", "body": "b"}}]}]
    )
    chat = Chat(provider, tools=[send_email], journal=Journal(), id="p")
    result = await chat.run("mail")
    data = displayed(result)
    assert "awaiting approval: send_email (c9)" in data["text/html"]


def test_display_without_the_notebook_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the widget layer unavailable the bundle is the static HTML alone (core stays usable)."""
    import sys

    monkeypatch.setitem(sys.modules, "loom_nb.widgets._transcript", None)
    data = displayed(Message(role="user", content="plain"))
    assert set(data) == {"text/html", "text/plain"}
    assert "plain" in data["text/html"]


async def test_settings_travel_on_every_request_and_are_journaled() -> None:
    """Chat(settings=...) puts the settings on each request; the journal records them."""
    from loom_nb import ModelSettings

    provider = ScriptedProvider([{"text": "a"}])
    journal = Journal()
    chat = Chat(provider, settings={"temperature": 0, "max_tokens": 64}, journal=journal, id="set")
    assert chat.settings == ModelSettings(temperature=0, max_tokens=64)
    await chat("hi")
    assert provider.requests[0].settings == ModelSettings(temperature=0, max_tokens=64)
    step = next(e for e in journal.events("set") if e.kind == "step_completed")
    assert step.payload["input"]["settings"] == {"max_tokens": 64, "temperature": 0.0}
    with pytest.raises(ConfigurationError):
        Chat(provider, settings="hot")  # type: ignore[arg-type]


async def test_a_run_sends_the_chats_settings_on_every_model_call() -> None:
    """chat.run(...) sends Chat(settings=...) with each of its model calls, as a plain turn does
    (it used to send none: a run answered at the provider's default temperature and length)."""
    from loom_nb import ModelSettings

    provider = ScriptedProvider(
        [
            {"tool_calls": [{"id": "c1", "name": "add", "input": {"a": 1, "b": 2}}]},
            {"text": "3"},
        ]
    )
    journal = Journal()
    settings = ModelSettings(temperature=0, max_tokens=64)
    chat = Chat(provider, tools=[add], settings=settings, journal=journal, id="run-set")
    result = await chat.run("add 1 and 2")
    assert result.status == "completed"
    assert len(provider.requests) == 2
    assert [r.settings for r in provider.requests] == [settings, settings]
    steps = [e for e in journal.events("run-set/run-0") if e.kind == "step_completed"]
    models = [e for e in steps if e.step_id is not None and e.step_id.endswith(":model")]
    assert [e.payload["input"]["settings"] for e in models] == [
        {"max_tokens": 64, "temperature": 0.0}
    ] * 2
    # Re-running the cell replays the run from the log: the same settings, so no divergence.
    again = Chat(
        ScriptedProvider([]), tools=[add], settings=settings, journal=journal, id="run-set"
    )
    assert (await again.run("add 1 and 2")).text == "3"


async def test_structured_output_is_validated_live_and_replayed(tmp_path: Path) -> None:
    """output_type=Model gives reply.output as a Model instance, live and on replay."""
    from pydantic import BaseModel

    from loom_nb.errors import StructuredOutputError

    class City(BaseModel):
        name: str
        population: int

    journal = Journal(tmp_path / "j.sqlite")
    provider = ScriptedProvider(
        [{"text": '{"name": "Lyon", "population": 522000}'}, {"text": "no"}]
    )
    chat = Chat(provider, journal=journal, id="so")
    reply = await chat("a city", output_type=City)
    assert reply.output == City(name="Lyon", population=522000)
    assert provider.requests[0].output_schema is not None
    again = Chat(ScriptedProvider([]), journal=journal, id="so")
    assert (await again("a city", output_type=City)).output == City(name="Lyon", population=522000)
    with pytest.raises(StructuredOutputError):
        await chat("another", output_type=City)


async def test_decide_collects_one_decision_per_call_then_resumes() -> None:
    """decide(call, approved) waits for every pending call, then resumes with all decisions."""
    provider = ScriptedProvider(
        [
            {
                "tool_calls": [
                    {"id": "a", "name": "send_email", "input": {"to": "1", "body": "x"}},
                    {"id": "b", "name": "send_email", "input": {"to": "2", "body": "y"}},
                ]
            },
            {"text": "one sent, one declined"},
        ]
    )
    chat = Chat(provider, tools=[send_email], journal=Journal(), id="two")
    await chat.run("mail both")
    assert await chat.decide("a", True) is None
    assert [d["id"] for d in chat.pending_approvals] == ["a", "b"]  # still parked
    result = await chat.decide("b", False, reason="not him")
    assert result is not None
    assert [c.status for c in result.tool_calls] == ["ok", "declined"]
    with pytest.raises(ConfigurationError):
        await chat.decide("a", True)


async def test_run_with_no_text_resumes_a_parked_run_with_approve() -> None:
    """chat.run(approve=...) with no message resumes the parked run, as agent_loop does."""
    provider = ScriptedProvider(
        [
            {"tool_calls": [{"id": "c1", "name": "send_email", "input": {"to": "a", "body": "b"}}]},
            {"text": "sent"},
        ]
    )
    chat = Chat(provider, tools=[send_email], journal=Journal(), id="resume")
    assert (await chat.run("mail")).status == "parked"
    with pytest.raises(ConfigurationError) as caught:
        await chat.run("something else")
    assert caught.value.code == "chat_parked"
    still = await chat.run()  # no decision yet: parked again, nothing run
    assert still.status == "parked"
    done = await chat.run(approve={"c1": True})
    assert done.status == "completed"
    assert done.text == "sent"


async def test_a_fork_of_a_fork_and_a_failed_turn_in_the_prefix() -> None:
    """Forking a fork before its first call works, and a failed turn in the shared log is not replayed as completed."""
    provider = ScriptedProvider([{"text": "0"}, {"text": "2"}, {"text": "grandchild"}])
    journal = Journal()
    chat = Chat(provider, journal=journal, id="g")
    await chat("zero")
    with pytest.raises(MediaError):
        await chat("bad", 42)  # refused before any step: no position taken
    from loom_nb import Capabilities, UnsupportedModalityError

    provider._capabilities = Capabilities()  # the next turn is refused inside its step
    with pytest.raises(UnsupportedModalityError):
        await chat("img", chart_png("x"))
    provider._capabilities = SCRIPTED_CAPABILITIES
    await chat("two")
    assert [k for k, _ in _kinds(journal, "g")] == [
        "step_completed",
        "step_failed",
        "step_completed",
    ]
    child = chat.fork(1)  # before "two": zero, plus the failed position
    grandchild = child.fork(1)
    reply = await grandchild("again")
    assert reply.content == "grandchild"
    assert [m.content for m in provider.requests[-1].messages] == ["zero", "0", "again"]
    kinds = [k for k, _ in _kinds(journal, grandchild.id)]
    assert kinds.count("step_completed") == 2  # the copied turn 0 and the new turn
    assert grandchild.id == "g/fork-0/fork-0"


async def test_approvals_say_who_decided_what_and_the_view_callback_resumes() -> None:
    """chat.approvals() marks awaiting calls, then who approved or declined; the view's callback resumes."""
    provider = ScriptedProvider(
        [
            {
                "tool_calls": [
                    {"id": "a", "name": "send_email", "input": {"to": "1", "body": "x"}},
                    {"id": "b", "name": "send_email", "input": {"to": "2", "body": "y"}},
                ]
            },
            {"text": "done"},
        ]
    )
    journal = Journal()
    chat = Chat(provider, tools=[send_email], journal=journal, id="who")
    await chat.run("mail both")
    assert chat.approvals() == {
        "a": {"state": "awaiting", "by": None, "reason": None},
        "b": {"state": "awaiting", "by": None, "reason": None},
    }
    await chat._on_view_decision("a", True)
    assert chat.approvals()["a"]["state"] == "awaiting"  # the run waits for both decisions
    await chat._on_view_decision("b", False)
    assert chat.pending_approvals == []
    assert chat.turns[-1].status == "completed"
    assert chat.approvals() == {
        "a": {"state": "approved", "by": "the notebook view", "reason": None},
        "b": {"state": "declined", "by": "the notebook view", "reason": None},
    }
    # Replayed in a new kernel, the log still says what was decided.
    again = Chat(ScriptedProvider([]), tools=[send_email], journal=journal, id="who")
    await again.run("mail both")
    assert {k: v["state"] for k, v in again.approvals().items()} == {
        "a": "approved",
        "b": "declined",
    }
    await chat._on_view_decision("zzz", True)  # nothing pending: logged, never raised into the UI


async def test_the_chat_view_has_buttons_whose_decision_resumes_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A parked chat's view shows 'awaiting approval' with on_decision; the view's decide resumes the run."""
    from loom_nb.widgets import _transcript

    made: list[Any] = []
    original = _transcript.TranscriptView.__init__

    def keep(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(_transcript.TranscriptView, "__init__", keep)
    provider = ScriptedProvider(
        [
            {"tool_calls": [{"id": "c1", "name": "send_email", "input": {"to": "a", "body": "b"}}]},
            {"text": "sent it"},
        ]
    )
    chat = Chat(provider, tools=[send_email], journal=Journal(), id="btn")
    await chat.run("mail")
    data = displayed(chat)
    assert "awaiting approval" in data["text/html"]
    view = made[-1]
    task = view.decide("c1", True)  # what the Approve button does
    if task is not None:
        await task
    assert chat.turns[-1].status == "completed"
    assert chat.history[-1].content == "sent it"
    after = displayed(chat)
    assert "awaiting approval" not in after["text/html"]
    assert chat.approvals()["c1"]["by"] == "the notebook view"


async def test_chat_passes_on_reasoning_when_streaming() -> None:
    """chat(text, stream=True, on_reasoning=...) sees the streamed reasoning, not the answer."""
    thoughts: list[str] = []
    turn = {"text": "yes", "reasoning": [{"type": "reasoning", "text": "hmm"}]}
    chat = Chat(ScriptedProvider([turn]), journal=Journal(), id="reason")
    reply = await chat("ok?", stream=True, on_text=lambda _t: None, on_reasoning=thoughts.append)
    assert reply.content == "yes"
    assert thoughts == ["hmm"]


async def test_running_totals_and_stats_match_a_fresh_count_through_undo_and_forks() -> None:
    """The memoised usage, cost and per-turn stats equal a count from scratch after every change."""
    rng = random.Random(7)
    script = [
        {"text": f"a{n}", "usage": {"input_tokens": rng.randint(1, 50), "output_tokens": n}}
        for n in range(40)
    ]
    chat = Chat(ScriptedProvider(script), journal=Journal(), id="totals")

    def check(c: Chat) -> None:
        usage, cost, stats = c.usage, c.cost, c._stats.of(c.turns, len(c.history))
        assert Totals().of(c.turns) == (usage, cost)  # what a count from scratch gives
        assert TurnStats().of(c.turns, len(c.history)) == stats
        assert usage.input_tokens == sum(t.usage.input_tokens for t in c.turns)

    for step in range(30):
        if step % 7 == 6 and chat.turns:
            chat.undo()
        else:
            await chat(f"q{step}")
        check(chat)
    fork = chat.fork(3)
    check(fork)
    await fork("after the fork")
    check(fork)
