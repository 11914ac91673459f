"""ReplayStepper and the turn reader: stepping, turn diffs, tool results, static fallback, replay of a recording."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest

from loom_nb import ReplayStepper
from loom_nb.agent import ToolDefinition, agent_loop
from loom_nb.content import Message
from loom_nb.errors import JournalError, LoomError
from loom_nb.journal import Journal
from loom_nb.providers import ScriptedProvider
from loom_nb.render._turns import new_messages, turns_of
from tests.render.safety import unsafe_parts
from tests.widgets.recording import EXECUTION_ID, RECORDING, TOOLS, record

KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")


@pytest.fixture
def journal() -> Iterator[Journal]:
    """An in-memory journal."""
    with Journal() as j:
        yield j


@pytest.fixture
def stepper(journal: Journal, monkeypatch: pytest.MonkeyPatch) -> ReplayStepper:
    """A stepper over the committed recording, imported with no API key in the environment."""
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    execution_id = journal.import_jsonl(RECORDING)
    return ReplayStepper(journal, execution_id)


def test_imported_recording_replays_turn_by_turn_without_a_key(stepper: ReplayStepper) -> None:
    """The committed JSONL recording yields its three model turns with stop reasons, calls and usage."""
    rows = [t.summary() for t in stepper.turns]
    assert [r["stop_reason"] for r in rows] == ["tool_use", "tool_use", "end_turn"]
    assert [r["tool_calls"] for r in rows] == [["weather t1", "web_fetch t2"], ["send_note t3"], []]
    assert [(r["input_tokens"], r["output_tokens"]) for r in rows] == [
        (120, 31),
        (260, 22),
        (301, 17),
    ]
    assert [r["step_id"] for r in rows] == ["#turn:0:model", "#turn:1:model", "#turn:2:model"]
    assert stepper.count == 3
    assert stepper.turn == 0


def test_recording_matches_a_fresh_run() -> None:
    """Re-running the recorded script gives the same turns as the committed file (it is not hand-made)."""
    import asyncio

    with Journal() as fresh, Journal() as imported:
        asyncio.run(record(fresh))
        execution_id = imported.import_jsonl(RECORDING)
        assert [t.summary() for t in turns_of(fresh, EXECUTION_ID)] == [
            t.summary() for t in turns_of(imported, execution_id)
        ]


def test_next_previous_and_turn_move_the_shown_turn(stepper: ReplayStepper) -> None:
    """next()/previous() step and stop at the ends; assigning turn shows that turn's view."""
    assert stepper.current["label"] == "turn 1 of 3"
    assert stepper.next() == 1
    assert stepper.current["step_id"] == "#turn:1:model"
    assert stepper.next() == 2
    assert stepper.next() == 2
    assert stepper.current["stop_reason"] == "end_turn"
    assert stepper.previous() == 1
    assert stepper.previous() == 0
    assert stepper.previous() == 0
    stepper.turn = 2
    assert stepper.current["label"] == "turn 3 of 3"
    assert stepper.record is stepper.turns[2]


def test_a_turn_out_of_range_is_refused(stepper: ReplayStepper) -> None:
    """Setting an index outside the run raises a LoomError naming the valid range."""
    with pytest.raises(LoomError) as caught:
        stepper.turn = 3
    assert caught.value.code == "invalid_turn"
    assert "0 to 2" in caught.value.message
    assert stepper.turn == 0


def test_the_front_end_slider_sets_the_turn(stepper: ReplayStepper) -> None:
    """A state update from the front end (as the comm delivers it) changes the synced turn view."""
    stepper.set_state({"turn": 1})
    assert stepper.current["index"] == 1
    state = stepper.get_state()
    assert state["turn"] == 1
    assert state["current"]["label"] == "turn 2 of 3"


def test_turn_diffs_name_the_new_messages(stepper: ReplayStepper) -> None:
    """Each turn says which messages are new since the previous turn's request."""
    assert [t.changes for t in stepper.turns] == [
        "+1 message: user text",
        "+2 messages: assistant text + tool_use t1 + tool_use t2, user tool_result t1 + tool_result t2",
        "+2 messages: assistant tool_use t3, user tool_result t3",
    ]


def test_compaction_is_reported_as_a_change() -> None:
    """When the earlier request is not a prefix, only the unseen messages count and compaction is flagged."""
    a, b, c = (Message(role="user", content=t) for t in ("a", "b", "c"))
    summary = Message(role="user", content="summary of a")
    assert new_messages([a, b], [a, b, c]) == ([c], False)
    assert new_messages([a, b], [summary, b, c]) == ([summary, c], True)


def test_a_turn_shows_what_the_model_saw_and_said(stepper: ReplayStepper) -> None:
    """The view holds the request's system card and messages, the response card and each call's result."""
    stepper.turn = 1
    view = stepper.current
    assert [m["role"] for m in view["messages"]] == ["system", "user", "assistant", "user"]
    assert view["response"]["role"] == "assistant"
    assert [i["kind"] for i in view["response"]["items"]] == ["tool_use"]
    (call,) = view["tools"]
    assert (call["name"], call["id"], call["status"]) == ("send_note", "t3", "answered")
    assert call["result"]["kind"] == "tool_result"
    assert call["result"]["tool_use_id"] == "t3"
    stepper.turn = 0
    fetch = view_tool(stepper, "t2")
    assert fetch["result"]["items"][0]["kind"] == "fence"  # untrusted web text stays fenced
    assert "usage" in stepper.current
    assert stepper.current["usage"] == "120 in · 31 out"


def view_tool(stepper: ReplayStepper, call_id: str) -> dict[str, object]:
    """The current turn's tool entry for ``call_id``."""
    return next(t for t in stepper.current["tools"] if t["id"] == call_id)


def test_static_fallback_is_the_final_transcript_and_a_turn_table(stepper: ReplayStepper) -> None:
    """The text/html fallback shows the final answer and one row per turn, escaped and sanitizer-safe."""
    bundle = stepper._repr_mimebundle_()
    assert bundle is not None
    data = bundle[0]
    html = data["text/html"]
    assert "application/vnd.jupyter.widget-view+json" in data
    assert "It is sunny in Lyon" in html
    assert html.count("<tr>") == 4  # header + 3 turns
    assert "send_note t3 (answered)" in html
    assert "301 in · 17 out" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script" not in html
    assert "<style" not in html
    assert " id=" not in html
    assert unsafe_parts(html) == []
    assert data["text/plain"] == "ReplayStepper('weather-run', 3 turns, showing turn 1)"


def test_repr_is_deterministic(journal: Journal) -> None:
    """Two steppers over the same run have the same text repr (nbval compares it)."""
    execution_id = journal.import_jsonl(RECORDING)
    assert repr(ReplayStepper(journal, execution_id)) == repr(ReplayStepper(journal, execution_id))


async def test_a_parked_run_shows_the_call_awaiting_approval(journal: Journal) -> None:
    """Without a decision the approval call is shown as awaiting approval, its siblings with their outcomes."""
    provider = ScriptedProvider(
        [
            {
                "tool_calls": [
                    {"id": "t3", "name": "send_note", "input": {}},
                    {"id": "t4", "name": "weather", "input": {}},
                ]
            }
        ]
    )
    result = await agent_loop(
        journal.execution("p"), provider, TOOLS, [{"role": "user", "content": "go"}]
    )
    assert result.status == "parked"
    (turn,) = ReplayStepper(journal, "p").turns
    assert [t.status for t in turn.tools] == ["awaiting approval", "not run"]


def test_tool_outcomes_show_when_no_later_request_carries_them(journal: Journal) -> None:
    """A run cut short after its tools ran (a crash) shows each tool step's journaled outcome."""
    lines = RECORDING.read_text(encoding="utf-8").splitlines()
    cut = next(n for n, line in enumerate(lines) if '"#turn:1:model"' in line)
    execution_id = journal.import_jsonl(io.StringIO("\n".join(lines[:cut]) + "\n"))
    stepper = ReplayStepper(journal, execution_id)
    (turn,) = stepper.turns
    assert [t.status for t in turn.tools] == ["ran", "ran"]
    assert turn.tools[0].outcome == {"ok": {"sky": "sunny", "celsius": 18}}
    weather = view_tool(stepper, "t1")["result"]
    assert isinstance(weather, dict)
    assert '"celsius": 18' in weather["text"]


async def test_a_failed_model_call_is_a_turn_with_its_error(journal: Journal) -> None:
    """A model step that raised is shown as a failed turn carrying the journaled code and message."""
    provider = ScriptedProvider([{"tool_calls": [{"id": "t1", "name": "weather", "input": {}}]}])
    with pytest.raises(LoomError):
        await agent_loop(
            journal.execution("f"), provider, TOOLS, [{"role": "user", "content": "go"}]
        )
    stepper = ReplayStepper(journal, "f")
    first, failed = stepper.turns
    assert first.tools[0].status == "answered"  # the failed call's request carried the result
    assert failed.stop_reason == "failed"
    assert failed.error is not None
    assert failed.error["code"] == "script_exhausted"
    stepper.turn = 1
    assert stepper.current["error"].startswith("script_exhausted: ")
    assert stepper.current["response"] is None


def test_an_unknown_execution_is_refused(journal: Journal) -> None:
    """A stepper over an id the journal never saw raises a JournalError saying how to list runs."""
    with pytest.raises(JournalError) as caught:
        ReplayStepper(journal, "nope")
    assert caught.value.code == "unknown_execution"
    assert "journal.executions()" in caught.value.message


def test_the_esm_reuses_the_transcript_front_end() -> None:
    """The stepper's front end carries TranscriptDom once and exports only its own widget."""
    esm = ReplayStepper._esm
    assert esm.count("class TranscriptDom") == 1
    assert esm.count("export default") == 1
    assert "innerHTML" not in esm


async def test_media_requests_are_answered_per_turn(stepper: ReplayStepper) -> None:
    """An on-demand media request for a key the turn does not have gets a clear 'unavailable'."""
    reply = stepper.answer({"ticket": "1", "type": "full", "key": "0.0", "turn": 0})
    assert reply == {"ticket": "1", "type": "full", "unavailable": "no such media in this turn"}


def test_tools_in_recording_are_the_declared_ones() -> None:
    """The recording's tools are defined once (the fixture module), so the test tools cannot drift."""
    assert [t.name for t in TOOLS] == ["weather", "web_fetch", "send_note"]
    assert all(isinstance(t, ToolDefinition) for t in TOOLS)


def test_a_turn_without_reported_usage_says_so() -> None:
    """Offline providers report no tokens; the stepper says "not reported" rather than "0 in · 0 out"."""
    from loom_nb.content import LlmRequest, LlmResponse, Message
    from loom_nb.render._replay import _usage
    from loom_nb.render._turns import TurnRecord

    request = LlmRequest(messages=[Message(role="user", content="hi")])
    silent = TurnRecord(index=0, step_id="#turn:0:model", request=request, response=LlmResponse())
    assert _usage(silent) == "not reported"
    counted = TurnRecord(
        index=0,
        step_id="#turn:0:model",
        request=request,
        response=LlmResponse(usage={"input_tokens": 3, "output_tokens": 0}),  # type: ignore[arg-type]
    )
    assert _usage(counted) == "3 in · 0 out"
