"""Scalars are journaled exactly as the canonical encoder writes them (a fast path skips it)."""

from __future__ import annotations

import enum
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loom_nb.errors import StepOutputError
from loom_nb.journal._codec import encode_text, encode_value


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class Level(enum.IntEnum):
    HIGH = 3


@given(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text()))
def test_a_scalar_encodes_as_the_canonical_encoder_writes_it(value: Any) -> None:
    if value in (float("inf"), float("-inf")):
        with pytest.raises(StepOutputError):
            encode_text(value, step_id="s")
        return
    assert encode_text(value, step_id="s") == _canonical(value)
    text, decoded = encode_value(value, step_id="s")
    assert text == _canonical(value)
    assert decoded == json.loads(text)
    assert type(decoded) is type(json.loads(text))


def test_an_int_subclass_and_a_huge_int_take_the_encoder_path() -> None:
    assert encode_text(Level.HIGH, step_id="s") == _canonical(Level.HIGH) == "3"
    with pytest.raises(StepOutputError) as raised:
        encode_text(10**5000, step_id="s", what="input")  # past Python's int digit limit
    assert raised.value.code == "step_input_not_json"


_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text()),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=15,
)


@given(_json)
def test_values_encode_as_the_canonical_encoder_writes_them_or_fail_alike(value: Any) -> None:
    try:
        expected: Any = json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    except ValueError:
        expected = StepOutputError
    if expected is StepOutputError:
        with pytest.raises(StepOutputError):
            encode_text(value, step_id="s")
    else:
        assert encode_text(value, step_id="s") == expected


def test_a_cycle_is_refused_as_not_json() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(StepOutputError) as raised:
        encode_text(cycle, step_id="s")
    assert raised.value.code == "step_output_not_json"
    assert "Circular reference" in raised.value.message
