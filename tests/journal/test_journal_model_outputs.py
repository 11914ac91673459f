"""A step returning a pydantic model: the live output is exactly what a replay reads back.

Equal as values, of the same plain types, and with the same key order (a replay decodes the
journaled canonical text, whose keys are sorted: a live value in the model's field order would
show differently, in a notebook's saved output for one), for values pydantic converts on the way
(string subclasses, tuples, non-string keys, floats, lone surrogates, nested models).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from loom_nb.errors import StepOutputError
from loom_nb.journal import Journal


class Tag(str):
    """A string subclass a caller might put in a model."""


class Inner(BaseModel):
    label: str
    weight: float


class Outcome(BaseModel):
    name: str
    data: dict[str, Any]
    inner: Inner | None = None


def _plain(value: Any) -> bool:
    """Whether ``value`` is made only of the exact types ``json.loads`` returns."""
    if type(value) is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())
    if type(value) is list:
        return all(map(_plain, value))
    return type(value) in (str, int, float, bool, type(None))


def _shown(value: Any) -> str:
    """How a value reads, key order included."""
    return json.dumps(value, ensure_ascii=False)


def never(_: Any) -> Any:
    raise AssertionError("a replayed step must not call its fn")


def _run_and_replay(model: Outcome) -> tuple[Any, Any, Any]:
    journal = Journal()

    async def go() -> tuple[Any, Any]:
        live = await journal.execution("r").execute("s", lambda _: model)
        replayed = await journal.execution("r").execute("s", never)
        return live, replayed

    live, replayed = asyncio.run(go())
    recorded = journal.events("r")[-1].payload["output"]
    journal.close()
    return live, replayed, recorded


def test_awkward_values_come_back_plain_and_equal_to_the_replay() -> None:
    cut = json.loads('"half an emoji: \\ud83d"')
    model = Outcome(
        name=Tag("tagged"),
        data={
            "zeta": "first in the model, last in the journal",
            "tag": Tag("t"),
            "pair": (1, 2),
            "keys": {1: "one", (2, 3): "two-three"},
            "big": 10**30,
            "float": 1e16,
            "negative zero": -0.0,
            "cut": cut,
            "set": {4},
        },
        inner=Inner(label="x", weight=0.1),
    )
    live, replayed, recorded = _run_and_replay(model)
    assert live == replayed == recorded
    assert _shown(live) == _shown(replayed) == _shown(recorded)
    assert _plain(live)
    assert _plain(replayed)
    assert live["data"]["keys"] == {"1": "one", "2,3": "two-three"}
    assert live["data"]["pair"] == [1, 2]
    assert live["data"]["cut"] == cut


def test_a_model_that_cannot_be_dumped_is_a_step_output_error() -> None:
    model = Outcome(name="n", data={"raw": b"\xff\xfe"})  # bytes that are not UTF-8
    journal = Journal()

    async def go() -> None:
        await journal.execution("r").execute("s", lambda _: model)

    with pytest.raises(StepOutputError) as raised:
        asyncio.run(go())
    assert raised.value.code == "step_output_not_json"
    journal.close()


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
    st.text().map(Tag),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=5), inner, max_size=4),
        st.dictionaries(st.integers(), inner, max_size=3),
    ),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None)
@given(data=st.dictionaries(st.text(max_size=6), _values, max_size=5), name=st.text())
def test_any_model_output_equals_its_decoded_text_and_its_replay(
    data: dict[str, Any], name: str
) -> None:
    try:
        model = Outcome(name=name, data=data)
        model.model_dump(mode="json")
    except ValueError:  # pydantic refuses some key collisions; not the journal's concern
        return
    live, replayed, recorded = _run_and_replay(model)
    assert live == replayed == recorded
    assert _shown(live) == _shown(replayed) == _shown(recorded)
    assert _plain(live)
