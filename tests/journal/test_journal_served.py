"""Replay serves a step by reading only its recorded output when the recorded input is exactly the
replayed one (``served_output``); anything else goes through the full read and the same checks."""

from __future__ import annotations

import json
from typing import Any

import pytest

import loom_nb.journal._execution as execution_module
from loom_nb.content import LlmRequest, Message, ToolSpec
from loom_nb.errors import ReplayDivergenceError
from loom_nb.journal import Journal, create_llm_effect
from loom_nb.journal._codec import text_hash
from loom_nb.journal._requests import model_input
from loom_nb.journal._served import NOT_SERVED, served_output
from loom_nb.providers import ScriptedProvider
from loom_nb.taint import Untrusted

HASH = "sha256:" + "ab" * 32


def _payload(input_text: str, digest: str, output: str) -> str:
    return '{"input":' + input_text + ',"input_hash":"' + digest + '","output":' + output + "}"


def test_an_exact_payload_serves_its_output() -> None:
    assert served_output(_payload('{"n":1}', HASH, '{"ok":[1,2]}'), '{"n":1}', HASH) == {
        "ok": [1, 2]
    }
    assert served_output(_payload('"x"', HASH, "null"), '"x"', HASH) is None


@pytest.mark.parametrize(
    "payload",
    [
        _payload('{"n":2}', HASH, "1"),  # another input
        _payload('{"n":1}', "sha256:" + "cd" * 32, "1"),  # another hash
        '{"claimed":["output"],' + _payload('{"n":1}', HASH, "1")[1:],  # claim-checked
        _payload('{"n":1}', HASH, "1")[:-1] + ',"zzz":1}',  # a field after the output
        _payload('{"n":1}', HASH, "1 "),  # not canonical
        _payload('{"n":1}', HASH, "[1,"),  # does not parse
        '{"input": {"n":1},"input_hash":"' + HASH + '","output":1}',
        None,
    ],
)
def test_anything_but_the_exact_payload_is_not_served(payload: str | None) -> None:
    assert served_output(payload, '{"n":1}', HASH) is NOT_SERVED


def test_a_lookalike_inside_the_input_is_not_taken_for_the_payloads_fields() -> None:
    """The recorded input holds the replayed hash and an output key of its own: only the whole
    input followed by the payload's own hash is a match."""
    inner = '{"input_hash":"' + HASH + '","output":"fake"}'
    recorded = _payload('{"a":' + inner + "}", "sha256:" + "cd" * 32, '"real"')
    assert served_output(recorded, '{"a":1}', HASH) is NOT_SERVED
    assert served_output(recorded, '{"a":' + inner + "}", HASH) is NOT_SERVED


def _copy(journal: Journal, source: str, target: str, change: Any) -> None:
    """Copy an execution under another id with each step's completed payload rewritten (an older
    or hand-made journal may lay a payload out otherwise)."""
    rows = journal._conn.execute(
        "SELECT kind, step_id, position, payload, created FROM events WHERE execution_id = ? "
        "ORDER BY seq",
        (source,),
    ).fetchall()
    journal._append_rows(
        (
            target,
            kind,
            step_id,
            position,
            change(payload) if kind == "step_completed" else payload,
            created,
        )
        for kind, step_id, position, payload, created in rows
    )


def _never(_: Any) -> Any:
    raise AssertionError("a replayed step must not call its fn")


async def test_a_payload_laid_out_otherwise_still_replays_and_still_checks() -> None:
    """A recorded payload that is not byte for byte what this version writes (spaces, another
    key order) is read whole: served when its hash matches, refused when it does not."""
    journal = Journal()
    await journal.execution("r").execute("s", lambda v: {"twice": v["n"] * 2}, {"n": 4})
    _copy(journal, "r", "spaced", lambda p: json.dumps(json.loads(p), indent=1))
    _copy(journal, "r", "reordered", lambda p: json.dumps(dict(reversed(json.loads(p).items()))))
    for copy in ("spaced", "reordered"):
        assert await journal.execution(copy).execute("s", _never, {"n": 4}) == {"twice": 8}
    with pytest.raises(ReplayDivergenceError) as info:
        await journal.execution("spaced").execute("s", _never, {"n": 5})
    assert info.value.code == "input_changed"
    assert info.value.details["expected"] == text_hash('{"n":4}')


async def test_a_replayed_model_step_never_parses_its_recorded_input(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Model steps and plain steps replayed with the recorded inputs read only their outputs; an
    edited transcript is still refused with input_changed."""
    journal = Journal()
    effect = create_llm_effect(ScriptedProvider([{"text": "a"}, {"text": "b"}]))
    transcript = [Message(role="user", content="hi")]
    execution = journal.execution("m")
    first = await effect(execution, "m0", LlmRequest(messages=transcript))
    transcript += [
        Message(role="assistant", content=first.content),
        Message(role="user", content="more"),
    ]
    await effect(execution, "m1", LlmRequest(messages=transcript))
    await execution.execute("t", lambda v: v, {"k": [1, 2]})

    def refuse(payload: str | None, where: str) -> dict[str, Any]:
        raise AssertionError(f"{where}: the whole payload was parsed")

    monkeypatch.setattr(execution_module, "recorded_fields", refuse)
    replay = journal.execution("m")
    served = create_llm_effect(ScriptedProvider([]))
    assert (await served(replay, "m0", LlmRequest(messages=transcript[:1]))).content == "a"
    assert (await served(replay, "m1", LlmRequest(messages=transcript))).content == "b"
    assert await replay.execute("t", _never, {"k": [1, 2]}) == {"k": [1, 2]}
    monkeypatch.undo()

    edited = [transcript[0], Message(role="assistant", content="edited"), transcript[2]]
    replay = journal.execution("m")
    await served(replay, "m0", LlmRequest(messages=edited[:1]))
    with pytest.raises(ReplayDivergenceError) as info:
        await served(replay, "m1", LlmRequest(messages=edited))
    assert info.value.code == "input_changed"


def test_the_rest_of_a_request_is_reused_only_while_its_bytes_are_the_same() -> None:
    """The tools, system and settings dump is taken from the previous model step only while their
    bytes are the same (an equal menu rebuilt counts): a schema changed in place or another
    system prompt is dumped again, and every hash equals the one made from scratch."""
    tool = ToolSpec(name="t", description="d", input_schema={"type": "object"})
    messages = [Message(role="user", content="hi")]
    caps = ScriptedProvider([]).capabilities
    previous = None
    requests = [
        lambda: LlmRequest(messages=messages, tools=[tool]),
        lambda: LlmRequest(messages=messages, tools=[tool]),  # the same objects: reused
        lambda: LlmRequest(messages=messages, tools=[tool], system="be brief"),
        lambda: LlmRequest(
            messages=messages, tools=[tool.model_copy(deep=True)], system="be brief"
        ),
        lambda: LlmRequest(messages=messages, tools=[tool], system=Untrusted("be brief")),
    ]
    for position, make in enumerate(requests):
        if position == 2:
            tool.input_schema["properties"] = {"n": {"type": "integer"}}  # changed in place
        request = make()
        prepared = model_input(request, previous, position, caps)
        assert prepared.input_hash == model_input(request, None, 0, caps).input_hash
        assert prepared.rest == request.model_dump(mode="json", exclude={"messages"})
        if position in (1, 3):  # the same objects, then an equal copy of the tool
            assert previous is not None
            assert prepared.rest is previous.rest
        elif previous is not None:
            assert prepared.rest is not previous.rest
        previous = prepared.base
