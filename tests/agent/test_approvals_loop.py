"""Approvals in the loop: park before the results message, resume with a decision, declines and undigestible answers."""

from __future__ import annotations

import json
from typing import Any

from loom_nb.agent import ToolDefinition, agent_loop
from loom_nb.content import Message, ToolResultPart
from loom_nb.journal import Journal
from loom_nb.providers import ScriptedProvider
from tests.agent.conftest import step_ids

START = [{"role": "user", "content": "clean up"}]


def _tools(ran: list[Any]) -> list[ToolDefinition]:
    return [
        ToolDefinition(
            "delete",
            "Delete rows",
            fn=lambda v: ran.append(("delete", v)) or "deleted",
            requires_approval=True,
        ),
        ToolDefinition("count", "Count rows", fn=lambda v: ran.append(("count", v)) or 7),
    ]


def _script() -> list[Any]:
    return [
        {
            "tool_calls": [
                {"id": "c1", "name": "count", "input": {}},
                {"id": "c2", "name": "delete", "input": {"t": "x"}},
            ]
        },
        {"text": "done"},
    ]


def _results(message: Message) -> list[ToolResultPart]:
    assert isinstance(message.content, list)
    return [p for p in message.content if isinstance(p, ToolResultPart)]


async def test_no_decision_parks_before_the_results_message(journal: Journal) -> None:
    """Without a decision the execution parks: no tool of the turn has run and the transcript ends on the assistant turn."""
    ran: list[Any] = []
    execution = journal.execution("run")
    result = await agent_loop(execution, ScriptedProvider(_script()), _tools(ran), START)
    assert result.status == "parked"
    assert execution.status == "parked"
    assert [m.role for m in result.messages] == ["user", "assistant"]
    assert result.pending_approvals == [
        {"turn": 0, "id": "c2", "name": "delete", "input": {"t": "x"}}
    ]
    assert ran == []
    assert execution.parked_payload == {"turn": 0, "pending": result.pending_approvals}


async def test_resume_with_approval_continues_the_same_run(journal: Journal) -> None:
    """Calling the loop again with a decision resumes: the model turn is served from the log and the tools run once."""
    ran: list[Any] = []
    provider = ScriptedProvider(_script())
    await agent_loop(journal.execution("run"), provider, _tools(ran), START)
    assert len(provider.requests) == 1
    result = await agent_loop(
        journal.execution("run"), provider, _tools(ran), START, approve={"c2": True}
    )
    assert result.status == "completed"
    assert len(provider.requests) == 2  # turn 0 was not asked again
    assert ran == [("count", {}), ("delete", {"t": "x"})]
    assert [p.is_error for p in _results(result.messages[2])] == [False, False]
    assert step_ids(journal, "run") == [
        "#turn:0:model",
        "#turn:0:approval:c2",
        "#turn:0:tool:c1",
        "#turn:0:tool:c2",
        "#turn:1:model",
    ]


async def test_resume_on_the_same_execution_object(journal: Journal) -> None:
    """The parked Execution object itself can be passed again with the decision."""
    ran: list[Any] = []
    provider = ScriptedProvider(_script())
    execution = journal.execution("run")
    await agent_loop(execution, provider, _tools(ran), START)
    still = await agent_loop(execution, provider, _tools(ran), START)
    assert still.status == "parked"
    assert ran == []
    result = await agent_loop(execution, provider, _tools(ran), START, approve=lambda d: True)
    assert result.status == "completed"
    assert execution.status == "completed"


async def test_declined_approval_is_an_error_result(journal: Journal) -> None:
    """A declined call is answered is_error with the reason and never runs; the others run."""
    ran: list[Any] = []
    provider = ScriptedProvider(_script())
    await agent_loop(journal.execution("run"), provider, _tools(ran), START)
    decision = {"c2": {"approved": False, "reason": "not on a Friday"}}
    result = await agent_loop(
        journal.execution("run"), provider, _tools(ran), START, approve=decision
    )
    count, delete = _results(result.messages[2])
    assert count.is_error is False
    assert delete.is_error is True
    assert isinstance(delete.content, str)
    error = json.loads(delete.content)["error"]
    assert error["type"] == "approval_declined"
    assert "not on a Friday" in error["message"]
    assert ran == [("count", {})]
    assert result.tool_calls[1].status == "declined"


async def test_undigestible_decision_is_an_error_result(journal: Journal) -> None:
    """A decision that is not a bool or {"approved": bool} is never taken as yes: is_error, not run."""
    ran: list[Any] = []
    result = await agent_loop(
        journal.execution("run"),
        ScriptedProvider(_script()),
        _tools(ran),
        START,
        approve=lambda d: "sure",
    )
    _, delete = _results(result.messages[2])
    assert delete.is_error is True
    assert isinstance(delete.content, str)
    assert json.loads(delete.content)["error"]["type"] == "undigestible_approval"
    assert ("delete", {"t": "x"}) not in ran


async def test_an_immediate_decision_does_not_park(journal: Journal) -> None:
    """An approver that answers at once (sync or async) lets the turn run without a park, journaled as a step."""

    async def approver(digest: dict[str, Any]) -> bool:
        return digest["name"] == "delete"

    ran: list[Any] = []
    execution = journal.execution("run")
    result = await agent_loop(
        execution, ScriptedProvider(_script()), _tools(ran), START, approve=approver
    )
    assert result.status == "completed"
    assert not any(e.kind == "parked" for e in journal.events("run"))
    assert "#turn:0:approval:c2" in step_ids(journal, "run")


async def test_replay_after_resume_needs_no_approver(journal: Journal) -> None:
    """A parked-then-resumed run replays from its log with divergence='fail' and no approver, tools not re-run."""
    ran: list[Any] = []
    provider = ScriptedProvider(_script())
    await agent_loop(journal.execution("run"), provider, _tools(ran), START)
    done = await agent_loop(
        journal.execution("run"), provider, _tools(ran), START, approve={"c2": True}
    )
    ran_before = list(ran)
    again = await agent_loop(
        journal.execution("run", divergence="fail"), ScriptedProvider([]), _tools(ran), START
    )
    assert again == done
    assert ran == ran_before


async def test_partial_decisions_stay_parked(journal: Journal) -> None:
    """With two calls pending, deciding only one keeps the run parked and lists the other."""
    tools = [ToolDefinition("delete", "D", fn=lambda v: "ok", requires_approval=True)]
    script: list[Any] = [
        {
            "tool_calls": [
                {"id": "a", "name": "delete", "input": {}},
                {"id": "b", "name": "delete", "input": {}},
            ]
        },
        {"text": "x"},
    ]
    provider = ScriptedProvider(script)
    first = await agent_loop(journal.execution("run"), provider, tools, START)
    assert [d["id"] for d in first.pending_approvals] == ["a", "b"]
    second = await agent_loop(journal.execution("run"), provider, tools, START, approve={"a": True})
    assert second.status == "parked"
    assert [d["id"] for d in second.pending_approvals] == ["a", "b"]
    third = await agent_loop(
        journal.execution("run"), provider, tools, START, approve={"a": True, "b": False}
    )
    assert third.status == "completed"
    assert [p.is_error for p in _results(third.messages[2])] == [False, True]
