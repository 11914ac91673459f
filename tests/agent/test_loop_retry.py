"""Calling agent_loop again on the same Execution object after a failure retries from the log."""

from __future__ import annotations

from typing import Any

import pytest

from loom_nb.agent import ToolDefinition, agent_loop
from loom_nb.capabilities import Capabilities
from loom_nb.content import LlmRequest, LlmResponse
from loom_nb.errors import AgentError
from loom_nb.journal import Journal
from loom_nb.providers import ScriptedProvider
from tests.agent.conftest import step_ids


class _FailsOnce:
    """Wraps a ScriptedProvider; its ``fail_on``-th call raises before reaching the script."""

    def __init__(self, inner: ScriptedProvider, fail_on: int) -> None:
        self.inner = inner
        self.calls = 0
        self.fail_on = fail_on

    @property
    def capabilities(self) -> Capabilities:
        return self.inner.capabilities

    async def complete(self, request: LlmRequest) -> LlmResponse:
        self.calls += 1
        if self.calls == self.fail_on:
            raise RuntimeError("transient provider failure")
        return await self.inner.complete(request)

    async def stream(self, request: LlmRequest) -> Any:
        raise NotImplementedError


async def test_retry_on_the_same_execution_object_resumes_from_the_log(journal: Journal) -> None:
    """A retry on the same object replays completed steps and re-runs only the failed turn."""
    ran: list[Any] = []

    def record(value: Any) -> dict[str, int]:
        ran.append(value)
        return {"ok": 1}

    tool = ToolDefinition("f", "record a call", fn=record)
    script = ScriptedProvider(
        [{"tool_calls": [{"id": "a", "name": "f", "input": {}}]}, {"text": "done"}]
    )
    provider = _FailsOnce(script, fail_on=2)
    execution = journal.execution("retry")
    messages = [{"role": "user", "content": "go"}]
    with pytest.raises(RuntimeError, match="transient"):
        await agent_loop(execution, provider, [tool], messages)  # type: ignore[arg-type]
    result = await agent_loop(execution, provider, [tool], messages)  # type: ignore[arg-type]
    assert result.status == "completed"
    assert result.turns == 2
    assert len(ran) == 1
    assert step_ids(journal, "retry") == ["#turn:0:model", "#turn:0:tool:a", "#turn:1:model"]
    # A fresh replay of the log needs neither the provider nor the tool.
    replayed = await agent_loop(journal.execution("retry"), ScriptedProvider([]), [tool], messages)
    assert replayed.messages == result.messages
    assert len(ran) == 1


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"tools": None}, "invalid_argument"),
        ({"tools": ToolDefinition("f", "d", fn=lambda v: v)}, "invalid_argument"),
        ({"messages": None}, "invalid_argument"),
        ({"execution": None}, "invalid_argument"),
        ({"compaction": {"after_messages": 1}}, "invalid_argument"),
        ({"system": 5}, "invalid_argument"),
    ],
)
async def test_bad_loop_arguments_are_agent_errors(
    journal: Journal, arguments: dict[str, Any], code: str
) -> None:
    """A wrong-typed tools, messages, execution, compaction or system is an AgentError, not a bare error."""
    provider = ScriptedProvider([{"text": "unused"}])
    call: dict[str, Any] = {
        "execution": journal.execution("bad"),
        "provider": provider,
        "tools": [],
        "messages": [{"role": "user", "content": "hi"}],
    }
    call.update(arguments)
    with pytest.raises(AgentError) as info:
        await agent_loop(**call)
    assert info.value.code == code
    assert provider.requests == []
