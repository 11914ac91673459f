"""Model steps journal what changed since the previous one; hashes cover the whole request (issue 15)."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loom_nb.agent import ToolDefinition, agent_loop
from loom_nb.capabilities import Capabilities
from loom_nb.content import LlmRequest, Message, TextPart, ToolResultPart, ToolUsePart
from loom_nb.errors import ReplayDivergenceError
from loom_nb.journal import Journal, create_llm_effect
from loom_nb.journal._requests import DELTA_MARKER
from loom_nb.providers import ScriptedProvider
from tests.strategies import guard_transcripts

TICK = ToolDefinition(
    "tick",
    "Count",
    fn=lambda v: {"n": v["n"]},
    input_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
)
START = [Message(role="user", content="Count up, one tool call per turn.")]


def script(turns: int) -> list[Any]:
    calls = [
        {"tool_calls": [{"id": f"c{i}", "name": "tick", "input": {"n": i}}]}
        for i in range(turns - 1)
    ]
    return [*calls, {"text": "done"}]


async def run(journal: Journal, run_id: str, turns: int, **kwargs: Any) -> Any:
    provider = kwargs.pop("provider", None) or ScriptedProvider(script(turns))
    return await agent_loop(
        journal.execution(run_id, **kwargs), provider, [TICK], START, max_turns=turns
    )


def payload_bytes(path: Path, run_id: str) -> list[int]:
    conn = sqlite3.connect(path)
    rows = conn.execute(
        "SELECT LENGTH(payload) FROM events WHERE execution_id = ? AND kind = 'step_completed' "
        "AND step_id LIKE '%:model' ORDER BY seq",
        (run_id,),
    ).fetchall()
    conn.close()
    return [r[0] for r in rows]


async def test_model_steps_journal_deltas_that_do_not_grow(tmp_path: Path) -> None:
    """Each model step after the first journals only the turn's new messages: its row size does not grow with the transcript."""
    path = tmp_path / "j.sqlite"
    journal = Journal(path)
    result = await run(journal, "r", 60)
    assert result.status == "completed"
    sizes = payload_bytes(path, "r")
    assert len(sizes) == 60
    assert max(sizes[2:]) <= 1.2 * min(sizes[2:])
    raw = journal.events("r", expand_inputs=False)
    deltas = [
        e.payload["input"]["messages"]
        for e in raw
        if e.kind == "step_completed" and e.step_id.endswith(":model")
    ]
    assert isinstance(deltas[0], list)
    assert deltas[5][DELTA_MARKER]["keep"] == 9  # all of turn 4's messages
    assert len(deltas[5][DELTA_MARKER]["append"]) == 2


async def test_expanded_events_are_the_whole_requests() -> None:
    """journal.events() shows every model step's input as the full request the provider got."""
    journal = Journal()
    provider = ScriptedProvider(script(8))
    await run(journal, "r", 8, provider=provider)
    inputs = [
        e.payload["input"]
        for e in journal.events("r")
        if e.kind == "step_completed" and e.step_id.endswith(":model")
    ]
    assert len(inputs) == len(provider.requests) == 8
    for journaled, sent in zip(inputs, provider.requests, strict=True):
        assert LlmRequest.model_validate(journaled).messages == sent.messages


async def test_delta_recording_exports_imports_and_replays_exactly() -> None:
    """A recording keeps the deltas, imports back byte for byte, and replays with no provider calls."""
    journal = Journal()
    await run(journal, "r", 12)
    out = io.StringIO()
    journal.export_jsonl("r", out)
    assert DELTA_MARKER in out.getvalue()
    other = Journal()
    other.import_jsonl(io.StringIO(out.getvalue()))
    again = io.StringIO()
    other.export_jsonl("r", again)
    assert again.getvalue() == out.getvalue()
    replay = await run(other, "r", 12, provider=ScriptedProvider([]))
    assert replay.status == "completed"
    assert replay.turns == 12


async def test_edited_early_message_is_input_changed() -> None:
    """Replaying a model step whose transcript changed anywhere (even the first message) raises input_changed."""
    journal = Journal()
    execution = journal.execution("r")
    effect = create_llm_effect(ScriptedProvider([{"text": "a"}, {"text": "b"}]))
    first = Message(role="user", content="first")
    await effect(execution, "m0", LlmRequest(messages=[first]))
    follow = [first, Message(role="assistant", content="a"), Message(role="user", content="more")]
    await effect(execution, "m1", LlmRequest(messages=follow))
    replay = journal.execution("r")
    replayer = create_llm_effect(ScriptedProvider([]))
    await replayer(replay, "m0", LlmRequest(messages=[first]))
    edited = [Message(role="user", content="FIRST"), *follow[1:]]
    with pytest.raises(ReplayDivergenceError) as info:
        await replayer(replay, "m1", LlmRequest(messages=edited))
    assert info.value.code == "input_changed"
    # Equal content in new objects is the same input.
    same = journal.execution("r")
    await replayer(same, "m0", LlmRequest(messages=[Message(role="user", content="first")]))
    copy = [Message.model_validate(m.model_dump()) for m in follow]
    assert (await replayer(same, "m1", LlmRequest(messages=copy))).content == "b"


async def test_a_message_changed_in_place_is_journaled_as_changed() -> None:
    """A part appended in place to an already-journaled message is in the next step's journaled request and its hash."""
    journal = Journal()
    execution = journal.execution("r")
    provider = ScriptedProvider([{"text": "a"}, {"text": "b"}])
    effect = create_llm_effect(provider)
    first = Message(role="user", content=[TextPart(text="first")])
    await effect(execution, "m0", LlmRequest(messages=[first]))
    assert isinstance(first.content, list)
    first.content.append(TextPart(text="added later"))
    follow = [first, Message(role="assistant", content="a"), Message(role="user", content="more")]
    await effect(execution, "m1", LlmRequest(messages=follow))
    journaled = [
        e.payload["input"]
        for e in journal.events("r")
        if e.kind == "step_completed" and e.step_id == "m1"
    ]
    assert LlmRequest.model_validate(journaled[0]).messages == provider.requests[1].messages
    # Replaying with the message as first journaled is another input at m1.
    replayer = create_llm_effect(ScriptedProvider([]))
    replay = journal.execution("r")
    original = Message(role="user", content=[TextPart(text="first")])
    await replayer(replay, "m0", LlmRequest(messages=[original]))
    with pytest.raises(ReplayDivergenceError) as info:
        await replayer(replay, "m1", LlmRequest(messages=[original, *follow[1:]]))
    assert info.value.code == "input_changed"


async def test_a_tool_call_input_changed_in_place_is_journaled_as_changed() -> None:
    """A tool call's input edited in place after it was journaled is in the next step's journaled request."""
    journal = Journal()
    execution = journal.execution("r")
    provider = ScriptedProvider([{"text": "a"}, {"text": "b"}])
    effect = create_llm_effect(provider)
    call = ToolUsePart(id="c0", name="tick", input={"n": 1, "opts": {"k": [1]}})
    first = [
        Message(role="user", content="go"),
        Message(role="assistant", content=[call]),
        Message(role="user", content=[ToolResultPart(tool_use_id="c0", content="ok")]),
    ]
    await effect(execution, "m0", LlmRequest(messages=first))
    assert isinstance(call.input, dict)
    call.input["opts"]["k"].append(2)
    follow = [*first, Message(role="assistant", content="a"), Message(role="user", content="more")]
    await effect(execution, "m1", LlmRequest(messages=follow))
    journaled = [
        e.payload["input"]
        for e in journal.events("r")
        if e.kind == "step_completed" and e.step_id == "m1"
    ]
    assert LlmRequest.model_validate(journaled[0]).messages == provider.requests[1].messages


async def test_replay_on_a_provider_with_other_capabilities_diverges() -> None:
    """A run recorded on a provider declaring images replays on one that does not only by raising input_changed."""
    journal = Journal()
    images = Capabilities(image=["image/png"])
    await run(journal, "r", 3, provider=ScriptedProvider(script(3), capabilities=images))
    same = await run(journal, "r", 3, provider=ScriptedProvider([], capabilities=images))
    assert same.status == "completed"
    with pytest.raises(ReplayDivergenceError) as info:
        await run(journal, "r", 3, provider=ScriptedProvider([]))
    assert info.value.code == "input_changed"
    ignored = await run(journal, "r", 3, provider=ScriptedProvider([]), divergence="ignore_inputs")
    assert ignored.status == "completed"


async def test_fork_of_a_delta_run_expands_and_goes_on_live() -> None:
    """A fork at a model step of an agent run serves the prefix, and its expanded inputs are whole requests."""
    journal = Journal()
    await run(journal, "r", 6)
    parent = journal.execution("r")
    child = parent.fork("#turn:3:model", "c")
    result = await agent_loop(child, ScriptedProvider(script(6)[3:]), [TICK], START, max_turns=6)
    assert result.status == "completed"
    inputs = [
        e.payload["input"]
        for e in journal.events("c")
        if e.kind == "step_completed" and e.step_id.endswith(":model")
    ]
    assert [len(i["messages"]) for i in inputs] == [1, 3, 5, 7, 9, 11]


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_journaled_text_is_the_canonical_json_of_the_journaled_input(data: st.DataObject) -> None:
    """The step input assembled from the messages' hashing JSON equals encoding it from scratch."""
    from loom_nb.journal._codec import encode_text
    from loom_nb.journal._requests import model_input

    messages = list(data.draw(guard_transcripts(chaos=False)).messages)
    system = data.draw(st.none() | st.text(max_size=8) | st.just("NaN \u00e9"))
    temperature = data.draw(st.none() | st.floats(0, 2))
    request = LlmRequest(
        messages=messages,
        system=system,
        settings={"temperature": temperature} if temperature is not None else None,
        tools=[{"name": "tick", "description": "n\u00e9", "input_schema": {"type": "object"}}],
    )
    cut = data.draw(st.integers(0, len(messages)))
    first = model_input(request.model_copy(update={"messages": messages[:cut]}), None, 0, None)
    previous = first.base if cut else None
    for prepared in (first, model_input(request, previous, 1, Capabilities())):
        assert prepared.journaled_text("s").text == encode_text(prepared.journaled(), step_id="s")
