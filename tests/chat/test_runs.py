"""The decisions chat.approve and chat.decide take, and the states the views show for them."""

from __future__ import annotations

import pytest

from loom_nb.chat._runs import check_decision, decision_table, state_of
from loom_nb.errors import ConfigurationError


def test_a_bool_decides_every_pending_call_and_a_mapping_is_taken_as_given() -> None:
    """approve(True/False) covers the pending calls; a mapping is copied; anything else refused."""
    assert decision_table(False, "no", ["a", "b"]) == {
        "a": {"approved": False, "reason": "no"},
        "b": {"approved": False, "reason": "no"},
    }
    given = {"a": True}
    assert decision_table(given, None, ["a", "b"]) == given
    with pytest.raises(ConfigurationError) as bad:
        decision_table("yes", None, ["a"])  # type: ignore[arg-type]
    assert bad.value.code == "invalid_argument"
    with pytest.raises(ConfigurationError):
        decision_table(True, 3, ["a"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call_id", "approved", "reason", "code"),
    [
        (1, True, None, "invalid_argument"),
        ("zz", True, None, "nothing_parked"),
        ("a", "yes", None, "invalid_argument"),
        ("a", True, 5, "invalid_argument"),
    ],
)
def test_a_single_decision_names_a_pending_call_and_is_a_bool(
    call_id: object, approved: object, reason: object, code: str
) -> None:
    """decide() refuses an unknown call, a non-string id, a non-bool decision, a non-str reason."""
    with pytest.raises(ConfigurationError) as refused:
        check_decision(call_id, approved, reason, {"a"})
    assert refused.value.code == code
    check_decision("a", False, "because", {"a"})


def test_journaled_decisions_become_view_states() -> None:
    """Pending, approved, declined and malformed decisions map to the four view states."""
    assert state_of({"pending": True}, "x") == {"state": "awaiting", "by": None, "reason": None}
    assert state_of({"approved": True, "reason": 1}, "me") == {
        "state": "approved",
        "by": "me",
        "reason": None,
    }
    assert state_of({"approved": False, "reason": "no"}, "me")["state"] == "declined"
    assert state_of("maybe", "me")["state"] == "undecidable"
