"""The divergence policy: the three modes, the two refusals and what a warn-mode divergence journals."""

from __future__ import annotations

import json

import pytest

from loom_nb.errors import JournalError, ReplayDivergenceError
from loom_nb.journal._divergence import (
    changed_input,
    changed_input_payload,
    check_divergence,
    diverged,
    diverged_payload,
)


def test_only_the_three_modes_are_accepted() -> None:
    """fail, ignore_inputs and warn pass; anything else is invalid_argument."""
    for mode in ("fail", "ignore_inputs", "warn"):
        check_divergence(mode)
    for bad in ("Fail", None, 1):
        with pytest.raises(JournalError) as info:
            check_divergence(bad)
        assert info.value.code == "invalid_argument"


def test_another_step_id_names_both_and_the_remedies() -> None:
    """A step-id divergence is replay_divergence with the position, both labels and what to do."""
    error = diverged("e", 3, "a", "b")
    assert isinstance(error, ReplayDivergenceError)
    assert error.code == "replay_divergence"
    assert error.details == {"expected": "a", "actual": "b", "position": 3, "execution_id": "e"}
    assert "divergence='warn'" in error.message
    assert "execution.fork" in error.message


def test_a_changed_input_is_input_changed_with_both_hashes() -> None:
    """A changed input is input_changed, showing the hashes' prefixes and the ignore_inputs remedy."""
    expected, actual = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    error = changed_input("e", "s", 2, expected, actual)
    assert error.code == "input_changed"
    assert error.details["expected"] == expected
    assert error.details["actual"] == actual
    assert expected[:19] in error.message
    assert "divergence='ignore_inputs'" in error.message


def test_warn_mode_payloads_are_canonical_json() -> None:
    """The divergence events' payloads name what the log had and what the code asked (sorted keys)."""
    assert diverged_payload("a", "b") == '{"actual":"b","expected":"a"}'
    assert json.loads(changed_input_payload("s", "h1", "h2")) == {
        "actual": "s",
        "expected": "s",
        "input_hash": "h2",
        "recorded": "h1",
    }
