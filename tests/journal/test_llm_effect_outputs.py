"""A live model call's response as journaled: its own JSON, read back equal, else the general way.

``create_llm_effect`` journals a response as pydantic's JSON of it (``model_output``) and returns
what a replay builds from that text: the response itself when its values are plain JSON in their
own types (``_reads_back``), else the text validated again, so the live answer equals its replay,
with a tool call's input and ``provider_data`` in the order the vendor sent them. A response that
does not read back equal from that JSON takes the canonical JSON every step uses, which writes
what pydantic dumps as JSON values and escapes a lone surrogate, exactly as before.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from loom_nb.capabilities import Capabilities
from loom_nb.content import LlmRequest, LlmResponse, Message, ReasoningPart, ToolCall, Usage
from loom_nb.journal import Journal, create_llm_effect
from loom_nb.journal._requests import _reads_back


class Answering:
    """A provider that answers every call with the response it was given (none: it must not be
    called, as on a replay)."""

    capabilities = Capabilities()

    def __init__(self, response: LlmResponse | None) -> None:
        self.response = response

    async def complete(self, request: LlmRequest, **_: Any) -> LlmResponse:
        if self.response is None:
            raise AssertionError("a replayed step must not call the provider")
        return self.response


REQUEST = LlmRequest(messages=[Message(role="user", content="go")])


async def _live_and_replayed(
    journal: Journal, response: LlmResponse, output_type: type[BaseModel] | None = None
) -> tuple[LlmResponse, LlmResponse, dict[str, Any]]:
    """The live answer, the replayed one and the step's journaled output (as stored)."""
    live = await create_llm_effect(Answering(response), output_type=output_type)(
        journal.execution("x"), "#m", REQUEST
    )
    replayed = await create_llm_effect(Answering(None), output_type=output_type)(
        journal.execution("x"), "#m", REQUEST
    )
    completed = [e for e in journal.events("x") if e.kind == "step_completed"]
    return live, replayed, completed[0].payload["output"]


def _keys(response: LlmResponse) -> tuple[list[str], list[str], list[str]]:
    inner = response.provider_data["usage"]
    return list(response.provider_data), list(inner), list(response.tool_calls[0].input)


async def test_a_response_is_journaled_as_its_own_json_in_the_vendors_key_order(
    open_journal: Callable[..., Journal],
) -> None:
    sent = LlmResponse(
        content="done",
        tool_calls=[ToolCall(id="c1", name="send", input={"to": "ana", "body": "hi", "at": 3})],
        stop_reason="tool_use",
        model="m-1",
        provider_data={"zeta": 1, "usage": {"out": 2, "in": 1}, "alpha": [1.5, None]},
    )
    live, replayed, journaled = await _live_and_replayed(open_journal(), sent)
    assert live == sent
    assert replayed == sent
    assert live is sent  # plain JSON in its own types: it reads back as itself
    # The order the vendor wrote, live and replayed alike (not sorted).
    assert (
        _keys(live)
        == _keys(replayed)
        == (["zeta", "usage", "alpha"], ["out", "in"], ["to", "body", "at"])
    )
    assert list(journaled["provider_data"]) == ["zeta", "usage", "alpha"]
    assert LlmResponse.model_validate(journaled) == sent


@pytest.mark.parametrize(
    ("data", "read"),
    [
        ({"score": float("nan")}, {"score": None}),
        ({"score": float("inf")}, {"score": None}),
        ({"when": datetime.datetime(2026, 1, 2)}, {"when": "2026-01-02T00:00:00"}),
    ],
)
async def test_a_response_its_json_changes_is_journaled_the_general_way(
    open_journal: Callable[..., Journal], data: dict[str, Any], read: dict[str, Any]
) -> None:
    """pydantic's JSON writes a non-finite float as null and a datetime as its ISO text, so such a
    response does not read back equal: it takes the canonical JSON every pydantic output takes
    (the same JSON values), and the live answer is still exactly its replay."""
    sent = LlmResponse(content="x", provider_data=data)
    live, replayed, journaled = await _live_and_replayed(open_journal(), sent)
    assert live.provider_data == replayed.provider_data == journaled["provider_data"] == read
    assert live == replayed
    assert list(journaled) == sorted(journaled)  # the canonical JSON: keys sorted


async def test_a_lone_surrogate_is_stored_escaped_and_reads_back_equal(
    open_journal: Callable[..., Journal],
) -> None:
    sent = LlmResponse(content="cut \ud83d here", provider_data={"note": "\udcff"})
    live, replayed, _ = await _live_and_replayed(open_journal(), sent)
    assert live == replayed == sent


class Verdict(BaseModel):
    ok: bool
    reason: str


async def test_a_structured_answer_is_validated_live_and_on_replay(
    open_journal: Callable[..., Journal],
) -> None:
    """``output`` is never serialized: such a response takes the general way, and the effect
    validates ``output`` from the text on both sides."""
    text = json.dumps({"reason": "fine", "ok": True})
    sent = LlmResponse(content=text, output=Verdict(ok=True, reason="fine"))
    live, replayed, journaled = await _live_and_replayed(open_journal(), sent, Verdict)
    assert live.output == replayed.output == Verdict(ok=True, reason="fine")
    assert "output" not in journaled


class Text(str):
    """A str subclass: equal to its text, but JSON reads it back as a plain str."""


async def test_a_response_equal_only_after_validation_is_returned_as_the_log_reads_it(
    open_journal: Callable[..., Journal],
) -> None:
    sent = LlmResponse.model_construct(
        content=Text("done"), stop_reason="end_turn", usage=Usage(), provider_data={}
    )
    live, replayed, _ = await _live_and_replayed(open_journal(), sent)
    assert live == replayed == sent
    assert live is not sent
    assert type(live.content) is str


@pytest.mark.parametrize(
    "sent",
    [
        LlmResponse.model_construct(stop_reason="weird"),
        LlmResponse.model_construct(content=5),
        LlmResponse.model_construct(usage=Usage.model_construct(input_tokens=True)),
        LlmResponse.model_construct(model=Text("m")),
        LlmResponse.model_construct(reasoning=None),
        LlmResponse(reasoning=[ReasoningPart(text="hm")]),
        LlmResponse(provider_data={"n": (1, 2)}),
        LlmResponse(provider_data={"n": float("nan")}),
        LlmResponse(provider_data={"n": {1: "a"}}),
        LlmResponse(tool_calls=[ToolCall(id="c", name="f", input={"at": float("-inf")})]),
        LlmResponse(tool_calls=[ToolCall.model_construct(id="c", name="f", input=[1])]),
        LlmResponse(
            tool_calls=[
                ToolCall.model_construct(id="c", name="f", input={}, provider_data={"s": 1})
            ]
        ),
        LlmResponse(
            tool_calls=[
                ToolCall.model_construct(
                    id="c", name="f", input={}, provider_data={"s": {"t": "u"}}
                )
            ]
        ),
    ],
)
def test_a_response_not_made_of_its_own_types_is_not_taken_as_reading_back(
    sent: LlmResponse,
) -> None:
    assert not _reads_back(sent)


def test_the_fields_the_check_knows_are_the_responses_fields() -> None:
    """``_reads_back`` names every field of a response and of a tool call: a field added to
    either must be taught to it (else a value JSON changes could be returned as is)."""
    assert set(LlmResponse.model_fields) == {
        "content",
        "tool_calls",
        "stop_reason",
        "usage",
        "model",
        "provider_data",
        "output",
        "reasoning",
        "provider",
    }
    assert set(ToolCall.model_fields) == {"id", "name", "input", "provider_data"}
    assert all(field.annotation is int for field in Usage.model_fields.values())


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=4)
    | st.builds(Text, st.text(max_size=3))
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=3) | st.integers(), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(
    data=st.dictionaries(st.text(max_size=3), _VALUES, max_size=3),
    tool_input=st.dictionaries(st.text(max_size=3), _VALUES, max_size=3),
)
def test_a_response_taken_as_reading_back_reads_back_equal(
    data: dict[str, Any], tool_input: dict[str, Any]
) -> None:
    sent = LlmResponse(
        content="x",
        provider_data=data,
        tool_calls=[ToolCall(id="c", name="f", input=tool_input)],
    )
    if _reads_back(sent):
        assert LlmResponse.model_validate_json(sent.model_dump_json()) == sent
