"""Approval decisions: where they come from and how they are digested."""

from __future__ import annotations

from typing import Any

import pytest

from loom_nb.agent._approval import ask, digest_of, normalize_decision, refusal_of
from loom_nb.content import ToolCall
from loom_nb.errors import ConfigurationError

DIGEST = digest_of(2, ToolCall(id="c1", name="delete", input={"table": "t"}))


def test_digest_names_turn_call_tool_and_input() -> None:
    """The approver sees the turn, the call id, the tool and the screened input."""
    assert DIGEST == {"turn": 2, "id": "c1", "name": "delete", "input": {"table": "t"}}


async def test_ask_reads_mappings_callables_and_coroutines() -> None:
    """A decision comes from a mapping by call id, a sync callable or an async callable."""

    async def later(digest: dict[str, Any]) -> bool:
        return digest["name"] == "delete"

    assert await ask({"c1": False}, DIGEST) is False
    assert await ask({"other": True}, DIGEST) is None
    assert await ask(lambda d: {"approved": True}, DIGEST) == {"approved": True}
    assert await ask(later, DIGEST) is True
    assert await ask(None, DIGEST) is None


async def test_ask_refuses_a_non_approver() -> None:
    """Something that is neither callable nor a mapping is a configuration error."""
    with pytest.raises(ConfigurationError) as info:
        await ask(42, DIGEST)  # type: ignore[arg-type]
    assert info.value.code == "invalid_approver"


@pytest.mark.parametrize(
    ("decision", "normalized"),
    [
        (True, {"approved": True, "reason": None}),
        (False, {"approved": False, "reason": None}),
        ({"approved": False, "reason": "too risky"}, {"approved": False, "reason": "too risky"}),
        ({"approved": True}, {"approved": True, "reason": None}),
        ("yes", {"undigestible": "str"}),
        (1, {"undigestible": "int"}),
        ({"approved": "yes"}, {"undigestible": "dict"}),
        ({"approved": True, "extra": 1}, {"undigestible": "dict"}),
        ({"approved": True, "reason": 3}, {"undigestible": "dict"}),
    ],
)
def test_normalize_decision(decision: Any, normalized: dict[str, Any]) -> None:
    """Only a bool or {"approved": bool[, "reason": str]} is digestible; anything else never means yes."""
    assert normalize_decision(decision) == normalized


def test_refusal_of_declined_and_undigestible() -> None:
    """An approved decision runs the call; a decline or an undigestible one becomes an error reason."""
    assert refusal_of({"approved": True, "reason": None}) is None
    declined = refusal_of({"approved": False, "reason": "no"})
    assert declined is not None
    assert declined[0] == "approval_declined"
    assert "no" in declined[1]
    undigestible = refusal_of({"undigestible": "str"})
    assert undigestible is not None
    assert undigestible[0] == "undigestible_approval"
