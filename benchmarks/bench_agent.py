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
loop is faster than that, whatever serving a step costs. Target (issue 31): replay reaches at
least 0.8 of that bound, at 40 and at 1,000 turns; both are printed with the ratio to the bound
and to the target. Two tighter bounds follow, for a replay that still checks and reads what it
serves: "with input checks" adds the hashes a replay owes every step (each message's canonical
JSON and SHA-256 chained, each tool input hashed), done by hand; "with input checks and reads"
also adds fetching the execution's rows and parsing each recorded output (a model step's into
the ``LlmResponse`` it returns), by hand as well; "with ... a prefix check a step" adds, for every
model step, one identity pass over the part lists of the messages it sent (lengths and parts),
the least a replay owes to reuse what it hashed before when part lists are mutable. When 0.8 of
the plain bound is above the last one, no checking replay reaches the target on this machine,
and the benchmark says so.
Run: ``python benchmarks/bench_agent.py`` (under a minute).

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
import hashlib
import json
import statistics
import sys
import time
from functools import reduce
from operator import iconcat, is_
from typing import Any

from _report import Row, emit, quick

from loom_nb.agent import Compaction, ToolDefinition, agent_loop
from loom_nb.content import (
    LlmRequest,
    LlmResponse,
    Message,
    Part,
    ToolResultPart,
    ToolUsePart,
    assistant_message_of,
    canonical_json,
)
from loom_nb.journal import Journal, create_llm_effect
from loom_nb.journal._sql import SELECT
from loom_nb.providers import ScriptedProvider

TURNS = 40
ROUNDS = 3 if quick() else 5
ROWS: list[Row] = []
START = [Message(role="user", content="Count up, one tool call per turn.")]


BOUND_TARGET = 0.8
"""Replay speed-up over live, as a share of the bound live / (agent - baseline) (issue 31)."""


def _script(turns: int = TURNS) -> list[Any]:
    calls = [
        {"tool_calls": [{"id": f"c{i}", "name": "tick", "input": {"n": i}}]}
        for i in range(turns - 1)
    ]
    return [*calls, {"text": "done"}]


TICK = ToolDefinition(
    "tick",
    "Count",
    fn=lambda v: {"n": v["n"], "note": "ok"},
    input_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
)


async def baseline(journal: Journal, run_id: str, turns: int = TURNS) -> None:
    """The same model calls and tool steps, threaded by hand."""
    execution = journal.execution(run_id)
    effect = create_llm_effect(ScriptedProvider(_script(turns)))
    transcript = list(START)
    for turn in range(turns):
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
    journal: Journal,
    run_id: str,
    provider: ScriptedProvider,
    compaction: Compaction | None = None,
    turns: int = TURNS,
) -> list[Message]:
    """The run through agent_loop; its transcript."""
    result = await agent_loop(
        journal.execution(run_id), provider, [TICK], START, max_turns=turns, compaction=compaction
    )
    assert result.status == "completed", result.status
    return list(result.messages)


def input_checks(transcript: list[Message]) -> float:
    """Seconds to do by hand the input check a replay owes each step, and nothing else: every
    message's canonical JSON and SHA-256 chained (what a model step's input hash covers, each
    message once), and each tool call's input encoded and hashed (a tool step's input hash)."""
    start = time.perf_counter()
    chain = ""
    for message in transcript:
        digest = hashlib.sha256(canonical_json(message).encode()).hexdigest()
        chain = hashlib.sha256((chain + digest).encode()).hexdigest()
        if message.role == "assistant" and isinstance(message.content, list):
            for part in message.content:
                if isinstance(part, ToolUsePart):
                    hashlib.sha256(canonical_json(part.input).encode()).hexdigest()
    return time.perf_counter() - start


def prefix_checks(transcript: list[Message]) -> float:
    """Seconds to look, by hand, once for every model step, at each part list of the messages
    that step sent: its length and each part's identity, the least a replay owes to know that a
    prefix it hashed on an earlier step still holds what it hashed. Part lists are mutable
    (``msg.content.append(...)``) and no caller's value is compared by ``__eq__`` (issue 30), so
    the cheapest sound check of a mutable prefix is one identity pass over it; the alternative,
    hashing every message again, costs more. Generous: the tool inputs (mutable dicts a checking
    replay must also look at) are left out."""
    lists = [m.content for m in transcript if isinstance(m.content, list)]
    flat = [part for parts in lists for part in parts]
    lens = [len(parts) for parts in lists]
    ends = []  # for each model step: how many lists and parts its messages held
    held, parts = 0, 0
    for message in transcript:
        if message.role == "user":
            ends.append((held, parts))
        if isinstance(message.content, list):
            held, parts = held + 1, parts + len(message.content)
    start = time.perf_counter()
    for held, parts in ends:
        sent = lists[:held]
        assert list(map(len, sent)) == lens[:held]
        assert all(map(is_, reduce(iconcat, sent, []), flat[:parts]))
    return time.perf_counter() - start


def reads(journal: Journal, run_id: str) -> float:
    """Seconds to do by hand the reading a replay owes: the execution's rows fetched, and each
    recorded step output parsed, a model step's validated into the ``LlmResponse`` replay returns.
    Generous to the replay: each output's JSON text is cut out of its row before the clock starts
    (a real replay must find it in the row first)."""
    conn = journal._conn
    outputs = []
    for kind, step_id, payload in conn.execute(
        "SELECT kind, step_id, payload FROM events WHERE execution_id = ? ORDER BY seq", (run_id,)
    ).fetchall():
        if kind == "step_completed":
            text = json.dumps(json.loads(payload)["output"], sort_keys=True, separators=(",", ":"))
            outputs.append((step_id.endswith(":model"), text))
    start = time.perf_counter()
    conn.execute(SELECT, (run_id,)).fetchall()
    for is_model, text in outputs:
        value = json.loads(text)
        if is_model:
            LlmResponse.model_validate(value)
    return time.perf_counter() - start


def replay_against_bound(turns: int, rounds: int) -> float:
    """Print baseline, live and replay at ``turns`` (interleaved rounds, best of each), the bound
    live / (agent - baseline) and the replay's share of it; return that share."""
    base, live, replay, check, read, scan = [], [], [], [], [], []
    for i in range(rounds):
        journal = Journal(":memory:")
        start = time.perf_counter()
        asyncio.run(baseline(journal, f"b{i}", turns))
        base.append(time.perf_counter() - start)
        start = time.perf_counter()
        transcript = asyncio.run(
            agent(journal, f"a{i}", ScriptedProvider(_script(turns)), turns=turns)
        )
        live.append(time.perf_counter() - start)
        start = time.perf_counter()
        asyncio.run(agent(journal, f"a{i}", ScriptedProvider([]), turns=turns))
        replay.append(time.perf_counter() - start)
        check.append(input_checks(transcript))
        read.append(reads(journal, f"a{i}"))
        scan.append(prefix_checks(transcript))
        journal.close()
    b, a, r, c, d, e = min(base), min(live), min(replay), min(check), min(read), min(scan)
    own = a - b
    bound = a / own if own > 0 else float("inf")
    share = (a / r) / bound
    print(
        f"{turns:>6} turns: baseline {b / turns * 1e3:.3f}, agent {a / turns * 1e3:.3f}, replay "
        f"{r / turns * 1e3:.3f} ms/turn; replay {a / r:.2f}x live, bound {bound:.2f}x, "
        f"ratio to bound {share:.2f} (target >= {BOUND_TARGET}: ratio to target "
        f"{share / BOUND_TARGET:.2f}, {'met' if share >= BOUND_TARGET else 'NOT met'})"
    )
    # A replay also owes every step its input check (an edited transcript must diverge): the
    # loop's own code plus those hashes, done by hand, is the least any checking replay costs.
    checked = a / (own + c) if own + c > 0 else float("inf")
    print(
        f"{'':>6}        with the input checks (by hand {c / turns * 1e3:.3f} ms/turn): bound "
        f"{checked:.2f}x, ratio to it {(a / r) / checked:.2f}"
    )
    # It also owes reading what it serves: the rows, and each output parsed into what it returns.
    served = a / (own + c + d) if own + c + d > 0 else float("inf")
    print(
        f"{'':>6}        with the input checks and the reads (by hand {d / turns * 1e3:.3f} "
        f"ms/turn): bound {served:.2f}x, ratio to it {(a / r) / served:.2f}"
    )
    # And, each step, a look at the prefix it reuses (a transcript's part lists are mutable).
    scanned = a / (own + c + d + e) if own + c + d + e > 0 else float("inf")
    above = BOUND_TARGET * bound > scanned
    print(
        f"{'':>6}        with the input checks, the reads and a prefix check a step (by hand "
        f"{e / turns * 1e3:.3f} ms/turn): bound {scanned:.2f}x, ratio to it "
        f"{(a / r) / scanned:.2f}"
        + (
            f"; the target ({BOUND_TARGET} of {bound:.2f}x = {BOUND_TARGET * bound:.2f}x) is "
            "above it: no replay that checks its inputs and reads its log reaches the target here"
            if above
            else f"; the target ({BOUND_TARGET * bound:.2f}x) is below it"
        )
    )
    # The last bound is the least any checking replay costs: the target is judged against it.
    ROWS.append(
        Row(f"replay / live, {turns} turns", a / r, bound, ">=", "bound", BOUND_TARGET, scanned)
    )
    ROWS.append(
        Row(
            f"replay / live, {turns} turns, vs bound with input checks", a / r, checked, "", "bound"
        )
    )
    ROWS.append(
        Row(
            f"replay / live, {turns} turns, vs bound with input checks and reads",
            a / r,
            served,
            "",
            "bound",
        )
    )
    ROWS.append(
        Row(
            f"replay / live, {turns} turns, vs bound with checks, reads, prefix checks",
            a / r,
            scanned,
            "",
            "bound",
        )
    )
    return share


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
        # Shown, not judged: the target is judged once, on the interleaved rounds of
        # replay_against_bound (the same ratio at the same size, beside the bounds of a replay
        # that checks and reads what it serves).
        ROWS.append(Row(f"replay speed-up, {TURNS} turns", live / replay, bound, "", "bound"))


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
    if "--bound" in sys.argv:  # only the replay-against-bound lines
        replay_against_bound(TURNS, ROUNDS)
        replay_against_bound(1000, 3)
        sys.exit(0)
    if "--check" in sys.argv:
        # A shared CI machine can stall one measurement; a real regression fails twice.
        sys.exit(0 if long_runs((10, 300)) or long_runs((10, 300)) else 1)
    main()
    print()
    print(f"replay against its bound (target: at least {BOUND_TARGET} of it):")
    replay_against_bound(TURNS, ROUNDS)
    replay_against_bound(300 if quick() else 1000, 3)
    print()
    long_runs((10, 300) if quick() else (10, 100, 300, 1000))
    emit(ROWS)
