"""Benchmark: what the agent loop adds on top of the journaled model calls it is made of.

A 40-turn run (one tool call per turn) on a ScriptedProvider and an in-memory journal, three ways:

- baseline: the same 40 model calls and 40 tool steps made directly with ``create_llm_effect`` and
  ``execution.execute`` over the same growing transcript (no screening, menu, result building,
  approvals or compaction checks);
- agent: ``agent_loop`` doing the run live;
- replay: ``agent_loop`` on the finished journal (every step served from the log).

Printed: turns per second for each and the ratios agent/baseline (the loop's own overhead; target
at most 1.5x) and replay/live speed-up. Run: ``python benchmarks/bench_agent.py`` (a few seconds).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from loom_nb.agent import Compaction, ToolDefinition, agent_loop
from loom_nb.content import (
    LlmRequest,
    Message,
    Part,
    ToolResultPart,
    assistant_message_of,
    canonical_json,
)
from loom_nb.journal import Journal, create_llm_effect
from loom_nb.providers import ScriptedProvider

TURNS = 40
ROUNDS = 5
START = [Message(role="user", content="Count up, one tool call per turn.")]


def _script() -> list[Any]:
    calls = [
        {"tool_calls": [{"id": f"c{i}", "name": "tick", "input": {"n": i}}]}
        for i in range(TURNS - 1)
    ]
    return [*calls, {"text": "done"}]


TICK = ToolDefinition(
    "tick",
    "Count",
    fn=lambda v: {"n": v["n"], "note": "ok"},
    input_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
)


async def baseline(journal: Journal, run_id: str) -> None:
    """The same model calls and tool steps, threaded by hand."""
    execution = journal.execution(run_id)
    effect = create_llm_effect(ScriptedProvider(_script()))
    transcript = list(START)
    for turn in range(TURNS):
        request = LlmRequest(messages=transcript, tools=[TICK.spec])
        response = await effect(execution, f"#turn:{turn}:model", request)
        transcript.append(assistant_message_of(response))
        if not response.tool_calls:
            break
        answers: list[Part] = []
        for call in response.tool_calls:
            out = await execution.execute(f"#turn:{turn}:tool:{call.id}", TICK.fn, call.input)
            answers.append(
                ToolResultPart(
                    tool_use_id=call.id, content=canonical_json({"tool": call.name, "result": out})
                )
            )
        transcript.append(Message(role="user", content=answers))


async def agent(
    journal: Journal, run_id: str, provider: ScriptedProvider, compaction: Compaction | None = None
) -> None:
    """The run through agent_loop."""
    result = await agent_loop(
        journal.execution(run_id), provider, [TICK], START, max_turns=TURNS, compaction=compaction
    )
    assert result.status == "completed", result.status


def timed(label: str, make: Any) -> float:
    samples = []
    for i in range(ROUNDS):
        journal = Journal(":memory:")
        start = time.perf_counter()
        asyncio.run(make(journal, f"{label}-{i}"))
        samples.append(time.perf_counter() - start)
        journal.close()
    best = min(samples)
    print(
        f"{label:>10}: {TURNS / best:8.1f} turns/s  (best of {ROUNDS}, median {statistics.median(samples) * 1000:.1f} ms)"
    )
    return best


def main() -> None:
    base = timed("baseline", baseline)
    live = timed("agent", lambda j, r: agent(j, r, ScriptedProvider(_script())))

    replays = []
    for i in range(ROUNDS):
        journal = Journal(":memory:")
        asyncio.run(agent(journal, f"r{i}", ScriptedProvider(_script())))
        start = time.perf_counter()
        asyncio.run(agent(journal, f"r{i}", ScriptedProvider([])))
        replays.append(time.perf_counter() - start)
        journal.close()
    replay = min(replays)
    print(f"{'replay':>10}: {TURNS / replay:8.1f} turns/s  (best of {ROUNDS})")
    print(f"agent loop overhead: {live / base:.2f}x the hand-threaded baseline (target <= 1.5x)")
    print(f"replay speed-up: {live / replay:.1f}x live")


if __name__ == "__main__":
    main()
