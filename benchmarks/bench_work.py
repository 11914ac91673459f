"""Benchmark: the work a Chat turn does, counted instead of timed (instructions, branches).

``bench_chat.py`` times a scripted Chat turn against the hand-written minimal journaled turn and
the bare ``provider.complete`` call. On a shared 2-core machine those times move by 10-30%
between runs (and the machine's speed itself can change by 2x within minutes), so a change that
saves 3% of a turn cannot be seen in them. This benchmark runs the same three workloads
(``bench_chat.baseline``, ``bench_chat._minimal_turns``, ``bench_chat.chat``) under Valgrind's
``cachegrind`` and counts, per turn, the instructions executed, the branches taken and the
branches its simulated predictor mispredicts. The counts are the same on every run of the same
code (hash seed fixed), so two checkouts compare exactly, whatever else the machine is doing.

A workload's per-turn count is the difference between two child processes that differ only in
the number of turns (``WARM`` + ``TURNS`` against ``WARM``), so interpreter start-up, imports
and first-call work cancel out; "steady" is that difference over ``TURNS``. "first turns" is
``WARM`` turns of a new chat (over a child that runs none) per turn: the opening of the chat's
execution, its writer lease and its first request are spread over them. That figure also
counts work that depends on the clock (under cachegrind a turn takes some 50 times longer, so
the lease is renewed more often than at full speed) and moves by about 10% between runs; the
steady counts do not depend on it.

Printed: the counts per turn of each workload and the ratios chat/minimal, minimal/bare and
chat/bare by each count, beside nothing timed. Mispredicted branches cost a modern core about
15-20 cycles each, so a ratio of mispredictions above the ratio of instructions says that a
turn's extra work is the kind a CPU runs slowly (the interpreter dispatching many small Python
functions) rather than more of the same work. These are information rows: the targets of issue
31 are timed, in ``bench_chat.py``.

Needs ``valgrind`` (Debian: ``apt-get install valgrind``); without it the benchmark says so and
hands back rows that say "not measured". Run: ``python benchmarks/bench_work.py`` (about a
minute: six children under cachegrind, two at a time).
"""

from __future__ import annotations

import asyncio
import gc
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _report import Row, emit

HERE = Path(__file__).resolve().parent
WORKLOADS = ("bare", "minimal", "chat")
WARM = 10
TURNS = 100
COUNTS = ("instructions", "branches", "mispredicted")
_PATTERNS = {
    "instructions": re.compile(r"I\s+refs:\s+([\d,]+)"),
    "branches": re.compile(r"Branches:\s+([\d,]+)"),
    "mispredicted": re.compile(r"Mispredicts:\s+([\d,]+)"),
}


def child(workload: str, turns: int) -> None:
    """Run ``turns`` turns of ``workload`` after the same warm-up every child makes."""
    sys.path[:0] = [str(HERE.parent), str(HERE)]  # this checkout's loom_nb, whatever is installed
    import bench_chat as b

    from loom_nb import Journal, ScriptedProvider

    async def run() -> None:
        # The same warm-up in every child: imports, pydantic's first validations, the journal's
        # statements, the guard's caches; then a collection, so each child starts alike.
        warm = Journal()
        await b.chat(3, warm, "warm")
        await b._minimal_turns(ScriptedProvider(b._script(3)), Journal(), 3, lambda: 0.0)
        await b.baseline(3)
        journal = Journal()  # made in every child, so its creation cancels out
        gc.collect()
        if turns == 0:
            return
        if workload == "chat":
            await b.chat(turns, journal, "counted")
        elif workload == "minimal":
            await b._minimal_turns(ScriptedProvider(b._script(turns)), journal, turns, lambda: 0.0)
        else:
            await b.baseline(turns)

    asyncio.run(run())


def count(workload: str, turns: int) -> dict[str, int]:
    """The counts of one child process under cachegrind."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(
        [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=no",
            "--branch-sim=yes",
            "--cachegrind-out-file=/dev/null",
            sys.executable,
            str(Path(__file__).resolve()),
            "--child",
            workload,
            str(turns),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"the {workload} child ({turns} turns) failed under valgrind:\n{done.stderr[-2000:]}"
        )
    counts: dict[str, int] = {}
    for name, pattern in _PATTERNS.items():
        found = pattern.search(done.stderr)
        if found is None:
            raise RuntimeError(f"valgrind printed no {name} count:\n{done.stderr[-2000:]}")
        counts[name] = int(found.group(1).replace(",", ""))
    return counts


def per_turn(runs: dict[tuple[str, int], dict[str, int]]) -> dict[str, dict[str, float]]:
    """Each workload's steady counts per turn, and a new chat's over its first ``WARM`` turns."""
    result: dict[str, dict[str, float]] = {}
    for workload in WORKLOADS:
        long, short = runs[(workload, WARM + TURNS)], runs[(workload, WARM)]
        result[workload] = {k: (long[k] - short[k]) / TURNS for k in COUNTS}
    none, first = runs[("chat", 0)], runs[("chat", WARM)]
    result["chat, first turns"] = {k: (first[k] - none[k]) / WARM for k in COUNTS}
    return result


def main() -> int:
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (Debian: apt-get install valgrind): nothing counted")
        emit([Row(f"chat / minimal by {name}, {TURNS} turns", None) for name in COUNTS])
        return 0
    jobs = [(w, n) for w in WORKLOADS for n in (WARM, WARM + TURNS)] + [("chat", 0)]
    with ThreadPoolExecutor(max_workers=max(1, min(2, os.cpu_count() or 1))) as pool:
        runs = dict(zip(jobs, pool.map(lambda job: count(*job), jobs), strict=True))
    table = per_turn(runs)
    print(
        f"per turn, turns {WARM + 1}-{WARM + TURNS} of a scripted conversation (steady), counted "
        "under cachegrind (same on every run of the same code)"
    )
    print(f"{'workload':>18} " + " ".join(f"{name:>14}" for name in COUNTS))
    for workload, counts in table.items():
        print(f"{workload:>18} " + " ".join(f"{counts[name]:>14,.0f}" for name in COUNTS))
    chat, minimal, bare = table["chat"], table["minimal"], table["bare"]
    rows: list[Row] = []
    for name in COUNTS:
        versus, least = chat[name] / minimal[name], minimal[name] / bare[name]
        whole = chat[name] / bare[name]
        print(
            f"by {name}: chat/minimal {versus:.2f}x, minimal/bare {least:.2f}x, "
            f"chat/bare {whole:.2f}x"
        )
        rows += [
            Row(f"chat / minimal by {name}, {TURNS} turns", versus),
            Row(f"minimal / bare by {name}, {TURNS} turns", least),
        ]
    first = table["chat, first turns"]["instructions"] / chat["instructions"]
    print(f"a new chat's first {WARM} turns: {first:.2f}x a steady turn's instructions each")
    rows.append(Row(f"chat: first {WARM} turns / steady turn by instructions", first))
    emit(rows)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]))
        sys.exit(0)
    sys.exit(main())
