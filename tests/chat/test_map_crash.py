"""A map of 1,000 items SIGKILLed around item 600 and resumed in a new process: no finished item is
called again, only the calls in flight at the kill run twice, and every result is there."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from loom_nb import Journal
from loom_nb.journal._outcomes import step_outcomes

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ITEMS = 1000
CONCURRENCY = 8


def _start(journal: Path, calls: Path, *hang_after: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.chat.map_worker", str(journal), str(calls)]
        + [str(n) for n in hang_after],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_a_map_killed_at_item_600_resumes_without_paying_twice(tmp_path: Path) -> None:
    """SIGKILL mid-map, then the same map in a new process: each item is answered once, except
    those whose call was in flight at the kill (at most the concurrency), and all 1,000 are there."""
    journal, first_calls, second_calls = (
        tmp_path / "j.sqlite",
        tmp_path / "calls-1",
        tmp_path / "calls-2",
    )
    # Calls after the 600th hang: the map waits there for the kill, however late the test,
    # slowed by a loaded machine, sees the 600 calls (it could otherwise have run to the end).
    worker = _start(journal, first_calls, 600)
    deadline = time.monotonic() + 300
    while len(_lines(first_calls)) < 600:
        assert worker.poll() is None, worker.communicate()
        assert time.monotonic() < deadline, "the worker made no progress"
        time.sleep(0.002)
    worker.send_signal(signal.SIGKILL)
    worker.wait(timeout=30)
    assert worker.returncode == -signal.SIGKILL

    before = _lines(first_calls)
    assert 600 <= len(before) < ITEMS
    with Journal(str(journal)) as opened:
        map_ids = [
            s.execution_id for s in opened.executions() if s.execution_id.startswith("crashy/map-")
        ]
        map_id = min(map_ids, key=len)  # the map itself; its items are <map>/<i>
        outcomes = step_outcomes(opened, [f"{map_id}/{i}" for i in range(ITEMS)])
    finished = {
        f"q{i}"
        for i in range(ITEMS)
        if outcomes.get(f"{map_id}/{i}", None) is not None
        and outcomes[f"{map_id}/{i}"].state == "completed"
    }
    assert len(finished) >= 590  # nearly every call made had finished

    resumed = _start(journal, second_calls)
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary == {"answered": ITEMS, "errors": 0, "served": len(finished)}

    after = _lines(second_calls)
    assert not set(after) & finished  # no finished item was called again
    assert sorted(set(before) | set(after)) == sorted(f"q{i}" for i in range(ITEMS))
    twice = set(before) & set(after)  # called in both processes: in flight at the kill
    assert twice == set(before) - finished
    assert len(twice) <= CONCURRENCY
    assert Counter(after).most_common(1)[0][1] == 1  # the resume called each item once
    assert len(after) == ITEMS - len(finished)
    print(
        f"killed after {len(before)} calls: {len(finished)} finished, {len(twice)} in flight ran twice"
    )
