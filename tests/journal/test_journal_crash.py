"""Crash and resume: SIGKILL a run at a random step, resume it in a new process, same result."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from loom_nb.journal import Journal

WORKER = Path(__file__).with_name("crash_worker.py")
STEPS = 12
sys.path.insert(0, str(WORKER.parent))
from crash_worker import expected_result  # noqa: E402


def run_worker(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(WORKER), *map(str, args)], capture_output=True, text=True, timeout=60
    )


def snapshot(path: Path) -> list[tuple[int, str, str | None, int | None, object]]:
    journal = Journal(path)
    events = [(e.seq, e.kind, e.step_id, e.position, e.payload) for e in journal.events("crash")]
    journal.close()
    return events


@pytest.mark.slow
@pytest.mark.parametrize("seed", [11, 22, 33, 44, 55])
def test_sigkilled_run_resumes_to_the_same_result(tmp_path: Path, seed: int) -> None:
    """After a SIGKILL at a random step and phase, a new process finishes with the uninterrupted result.

    No completed step's fn runs twice (counted in a side-effect file), and the events written
    before the kill are kept unchanged with nothing duplicated after the resume.
    """
    rng = random.Random(seed)
    kill_at, phase = rng.randrange(STEPS), rng.choice(["before", "effect", "after"])
    journal_path, effects = tmp_path / "j.sqlite", tmp_path / "effects.txt"

    crashed = run_worker(journal_path, effects, STEPS, kill_at, phase)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    before = snapshot(journal_path)
    completed_before = {p for _, kind, _, p, _ in before if kind == "step_completed"}
    assert len(completed_before) == kill_at + (phase == "after")

    resumed = run_worker(journal_path, effects, STEPS)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == {"result": expected_result(STEPS)}

    runs = Counter(int(line) for line in effects.read_text().split())
    for position in completed_before:
        assert runs[position] == 1, f"completed step {position} ran again"
    assert sorted(runs) == list(range(STEPS))
    assert runs[kill_at] == (2 if phase == "effect" else 1)

    after = snapshot(journal_path)
    assert after[: len(before)] == before  # nothing lost or rewritten
    assert len({seq for seq, *_ in after}) == len(after)
    done = Counter(p for _, kind, _, p, _ in after if kind == "step_completed")
    assert done == Counter(range(STEPS))  # each step completed exactly once
    assert [kind for _, kind, *_ in after].count("completed") == 1
    starts = Counter(p for _, kind, _, p, _ in after if kind == "step_started")
    interrupted = (
        1 if (phase != "after" and kill_at % 2 == 1) else 0
    )  # async steps commit their start
    assert sum(starts.values()) == STEPS + interrupted


def test_completed_run_replays_in_a_new_process_without_effects(tmp_path: Path) -> None:
    """Running a completed execution again serves every step from the log: no effect, same result, no new event."""
    journal_path, effects = tmp_path / "j.sqlite", tmp_path / "effects.txt"
    assert run_worker(journal_path, effects, STEPS).returncode == 0
    before = snapshot(journal_path)
    again = run_worker(journal_path, effects, STEPS)
    assert json.loads(again.stdout) == {"result": expected_result(STEPS)}
    assert len(effects.read_text().split()) == STEPS
    assert snapshot(journal_path) == before


APPENDER = """
import asyncio, sys
from loom_nb.journal import Journal
async def main():
    journal = Journal(sys.argv[1])
    execution = journal.execution(sys.argv[2])
    for i in range(int(sys.argv[3])):
        async def step(x):
            await asyncio.sleep(0)
            return x
        await execution.execute(f"s{i}", step, i)
asyncio.run(main())
"""


def test_two_processes_appending_do_not_corrupt(tmp_path: Path) -> None:
    """Two processes appending to one journal at once leave both executions whole and in order."""
    path = tmp_path / "shared.sqlite"
    Journal(path).close()
    procs = [
        subprocess.Popen([sys.executable, "-c", APPENDER, str(path), name, "150"])
        for name in ("left", "right")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    journal = Journal(path)

    async def replay(name: str) -> list[object]:
        execution = journal.execution(name)
        return [await execution.execute(f"s{i}", lambda _: None, i) for i in range(150)]

    for name in ("left", "right"):
        assert asyncio.run(replay(name)) == list(range(150))
        assert len(journal.events(name)) == 1 + 2 * 150
