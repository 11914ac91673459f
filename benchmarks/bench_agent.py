"""Benchmark: what the agent loop adds on top of the journaled model calls it is made of.

A 40-turn run (one tool call per turn) on a ScriptedProvider and an in-memory journal, three ways:

- baseline: the same 40 model calls and 40 tool steps made directly with ``create_llm_effect`` and
  ``execution.execute`` over the same growing transcript (no screening, menu, result building,
  approvals or compaction checks);
- agent: ``agent_loop`` doing the run live;
- replay: ``agent_loop`` on the finished journal (every step served from the log).

Printed: turns per second for each and the ratios agent/baseline (the loop's own overhead; target
at most 1.5x) and replay/live speed-up, with the replay bound ``live / (agent - baseline)``:
replay runs the loop's own code again (the log serves only the steps), so no replay of this
loop is faster than that, whatever serving a step costs. Run: ``python benchmarks/bench_agent.py`` (a few seconds).

Then the long-run check (issue 15): the same one-tool-call-per-turn run at 10, 100, 300 and 1,000
turns, live and replayed, with the bytes journaled per turn; once with a trusted tool and once
with an untrusted one (every result fenced, as a web-reading agent's are). Targets: per-turn live time and
journal bytes per turn flat within 2x of the 10-turn run (linear cost overall), replay >= 5x
faster than live at every size. ``--check`` runs only 10 and 300 turns and exits non-zero when a
flatness ratio is over 2x (ratios, not absolute times, so a slow machine passes as long as the
cost stays linear). It is a timing check, so it is run here and not by the unit tests: a loaded
machine can stall one measurement. tests/guard/test_incremental.py checks the same runs by
counting their work (Python calls per turn, journal bytes per turn), which no load changes.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from typing import Any

from _report import Row, emit, quick

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
ROUNDS = 3 if quick() else 5
ROWS: list[Row] = []
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
    ROWS.append(Row(f"agent loop / hand-threaded, {TURNS} turns", live / base, 1.5, "<="))
    # Replay re-executes the loop's code and the log serves its steps (ADR decision 10), so the
    # loop's own work per turn (what agent costs over the hand-threaded baseline: screening,
    # planning, tool-input validation, result building, transcript growth) is paid again on
    # replay even if serving a step from the log cost nothing.
    own = live - base
    if own > 0:
        bound = live / own
        print(
            f"replay bound: live / (agent - baseline) = {bound:.1f}x: the loop's own code "
            f"({own / TURNS * 1e3:.3f} ms/turn) runs again on replay, so no replay of this loop "
            f"beats {bound:.1f}x here; the measured {live / replay:.1f}x is "
            f"{(live / replay) / bound:.0%} of it"
            + (" (a 5x target is above this bound)" if bound < 5 else "")
        )
        ROWS.append(
            Row(f"replay speed-up, {TURNS} turns", live / replay, bound, ">=", "bound", 0.8)
        )


FETCH = ToolDefinition(
    "tick",
    "Fetch a page (its text is untrusted, so every result is fenced)",
    fn=lambda v: f"page {v['n']}: some text from the web, with a </untrusted> look-alike",
    input_schema=TICK.spec.input_schema,
    untrusted=True,
)
"""The same tool as TICK, but its output is untrusted: each turn adds a result the guard fences."""


def _long_script(turns: int) -> list[Any]:
    calls = [
        {"tool_calls": [{"id": f"c{i}", "name": "tick", "input": {"n": i}}]}
        for i in range(turns - 1)
    ]
    return [*calls, {"text": "done"}]


def long_run(turns: int, rounds: int, tool: ToolDefinition) -> tuple[float, float, float]:
    """(live ms per turn, replay ms per turn, journal bytes per turn), best of ``rounds``."""
    lives, replays = [], []
    per_turn_bytes = 0.0
    for i in range(rounds):
        journal = Journal(":memory:")
        run_id = f"long-{i}"

        async def go(
            provider: ScriptedProvider, run_id: str = run_id, journal: Journal = journal
        ) -> None:
            result = await agent_loop(
                journal.execution(run_id), provider, [tool], START, max_turns=turns
            )
            assert result.status == "completed", result.status

        start = time.perf_counter()
        asyncio.run(go(ScriptedProvider(_long_script(turns))))
        lives.append(time.perf_counter() - start)
        start = time.perf_counter()
        asyncio.run(go(ScriptedProvider([])))
        replays.append(time.perf_counter() - start)
        stored = journal._conn.execute(
            "SELECT SUM(LENGTH(payload)) FROM events WHERE execution_id = ?", (run_id,)
        ).fetchone()[0]
        per_turn_bytes = stored / turns
        journal.close()
    return min(lives) / turns * 1000, min(replays) / turns * 1000, per_turn_bytes


def long_runs(sizes: tuple[int, ...]) -> bool:
    """Print the long-run tables (trusted and untrusted tool results); whether both stayed within 2x."""
    return all([_long_runs(sizes, TICK, "trusted"), _long_runs(sizes, FETCH, "untrusted")])


def _long_runs(sizes: tuple[int, ...], tool: ToolDefinition, kind: str) -> bool:
    print(f"tool results {kind}:")
    print(
        f"{'turns':>6} {'live ms/turn':>13} {'replay ms/turn':>15} {'bytes/turn':>11} {'replay x':>9}"
    )
    base: tuple[float, float, float] | None = None
    flat = True
    for turns in sizes:
        rounds = max(5, 3000 // (turns * 10))
        live, replay, size = long_run(turns, rounds, tool)
        print(f"{turns:>6} {live:>13.3f} {replay:>15.3f} {size:>11.0f} {live / replay:>8.1f}x")
        if base is None:
            base = (live, replay, size)
            continue
        ratios = (live / base[0], size / base[2])
        print(
            f"{'':>6} vs {sizes[0]} turns: live {ratios[0]:.2f}x, bytes {ratios[1]:.2f}x (target <= 2x)"
        )
        flat = flat and all(r <= 2.0 for r in ratios)
        ROWS.append(Row(f"{kind}: live ms/turn, {turns} / {sizes[0]} turns", ratios[0], 2.0, "<="))
        ROWS.append(Row(f"{kind}: bytes/turn, {turns} / {sizes[0]} turns", ratios[1], 2.0, "<="))
    return flat


if __name__ == "__main__":
    if "--check" in sys.argv:
        # A shared CI machine can stall one measurement; a real regression fails twice.
        sys.exit(0 if long_runs((10, 300)) or long_runs((10, 300)) else 1)
    main()
    print()
    long_runs((10, 300) if quick() else (10, 100, 300, 1000))
    emit(ROWS)
