"""Worker processes sharing one work queue, SIGKILLed mid-item (issue 32): no item twice, none lost.

Each worker (``work_worker.py``) runs every item it claims as one journaled step standing for a
provider call, logging the call's start and end in a file shared by all of them. Some workers
SIGKILL themselves in the middle of a call. What must hold at the end, on SQLite, on PostgreSQL
and through PgBouncer:

- every item is done in the queue, and its execution journaled exactly one completed ``call``;
- a call completed twice only for an item a killed worker was in the middle of (its end was
  logged but its step never journaled), never for an item a live worker finished;
- the item a killed worker was calling went back to the pool (at once: the workers share a host
  and its pid is gone) and was finished by another worker (attempts > 1).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import JournalBackend

WORKER = Path(__file__).with_name("work_worker.py")
ROOT = Path(__file__).resolve().parents[2]


def _spawn(url: str, queue: str, calls: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, str(WORKER), url, queue, str(calls), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _state(pid: int) -> str:
    """A process's state letter (``T`` once stopped)."""
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[-1].split()[0]


def _run_workers(
    journal_backend: JournalBackend, tmp_path: Path, *, items: int, workers: list[list[str]]
) -> tuple[Any, list[tuple[str, str, int]], list[dict[str, Any]], set[int]]:
    """Fill a queue, run the workers to the end; return the journal, the call log, the reports
    of the workers that lived, and the pids of those killed."""
    journal = journal_backend.open("work")
    queue = journal.work_queue("map-1")
    assert queue.add([f"item-{n:04d}" for n in range(items)]) == items
    calls = tmp_path / "calls.log"
    url = journal_backend.url("work")
    procs = [_spawn(url, "map-1", calls, *extra) for extra in workers]
    deadline = time.monotonic() + 300  # Python start-ups and first calls, on a loaded machine
    while len(list(tmp_path.glob("calls.log.ready.*"))) < len(procs):
        assert time.monotonic() < deadline, "the workers did not start"
        assert all(proc.poll() is None for proc in procs), [p.communicate() for p in procs]
        time.sleep(0.02)
    (tmp_path / "calls.log.go").touch()
    # Every call waits until each worker has the calls out it needs: its kill_at, or one.
    needs = [
        int(extra[extra.index("--kill-at") + 1]) if "--kill-at" in extra else 1 for extra in workers
    ]
    while True:
        started = Counter(line.split()[2] for line in _lines(calls) if line.startswith("start"))
        if all(
            p.poll() is not None or started[str(p.pid)] >= n
            for p, n in zip(procs, needs, strict=True)
        ):
            break
        assert time.monotonic() < deadline, ("the workers did not reach their calls", started)
        time.sleep(0.02)
    (tmp_path / "calls.log.open").touch()
    reports, killed = [], set()
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        if proc.returncode == -9:
            killed.add(proc.pid)
            continue
        assert proc.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))
    log = []
    for line in _lines(calls):
        what, item, pid = line.split()
        log.append((what, item, int(pid)))
    return journal, log, reports, killed


def _check(journal: Any, log: list[tuple[str, str, int]], items: int, killed: set[int]) -> None:
    queue = journal.work_queue("map-1")
    states = queue.items()
    assert len(states) == items
    assert all(state.state == "done" for state in states), [s for s in states if s.state != "done"]
    for state in states:
        events = journal.events(f"map-1/{state.item}", resolve_claims=False)
        completed = [e for e in events if e.kind == "step_completed"]
        assert len(completed) == 1, (state.item, [e.kind for e in events])
        assert events[-1].kind == "completed"
    ends = Counter(item for what, item, _ in log if what == "end")
    assert set(ends) == {state.item for state in states}  # none lost
    for item, count in ends.items():
        if count > 1:  # only an item a killed worker was calling may have been called twice
            by = [pid for what, it, pid in log if what == "end" and it == item]
            assert len([pid for pid in by if pid not in killed]) == 1, (item, by, killed)
    # Every call a killed worker started and never finished was taken over by another.
    attempts = {state.item: state.attempts for state in states}
    for pid in killed:
        started = {it for what, it, p in log if what == "start" and p == pid}
        ended = {it for what, it, p in log if what == "end" and p == pid}
        cut = started - ended
        assert cut, f"worker {pid} was killed outside a call"
        for item in cut:
            assert attempts[item] >= 2, (item, attempts[item])


@pytest.mark.slow
@pytest.mark.parametrize("count", [2, 4])
def test_workers_share_a_queue_through_sigkills(
    journal_backend: JournalBackend, tmp_path: Path, count: int
) -> None:
    """Two or four worker processes, half of them SIGKILLed mid-call, finish every item once."""
    if journal_backend.name == "pgbouncer" and count == 4:
        pytest.skip("the pooler runs the two-worker case; four are the direct server's")
    items = 240
    # A long lease: a live worker starved of CPU (a loaded machine) keeps its items, where one it
    # outlived would be called again by another worker, a double call this test rightly counts
    # against the queue. A killed worker's claims are free at once (same host, its pid gone).
    lease = ["--lease", "60"]
    workers = [[*lease, "--kill-at", str(2 + n)] if n % 2 == 0 else lease for n in range(count)]
    journal, log, reports, killed = _run_workers(
        journal_backend, tmp_path, items=items, workers=workers
    )
    assert len(killed) == count // 2
    assert sum(report["done"] for report in reports) >= items - 60  # the living did most
    _check(journal, log, items, killed)


@pytest.mark.slow
@pytest.mark.parametrize("when", ["after", "before"])
def test_a_stalled_worker_cannot_complete_an_item_taken_over(
    journal_backend: JournalBackend, tmp_path: Path, when: str
) -> None:
    """A worker stalled (SIGSTOP) in the middle of an item loses its lease; another worker takes
    the item over and journals its step. Continued, the first is refused by its claim's fence:
    stalled with its call out (``after`` its step's start was journaled), the call ends but its
    outcome is not journaled (two calls, one completed step); stalled ``before``, its step's
    start is refused at the call's first suspension, before the call goes out (one call)."""
    if journal_backend.name == "pgbouncer":
        pytest.skip("the fence's transactions are the same through the pooler (see above)")
    journal = journal_backend.open("work")
    queue = journal.work_queue("map-1")
    queue.add(["item-0000"])
    calls = tmp_path / "calls.log"
    (tmp_path / "calls.log.go").touch()
    (tmp_path / "calls.log.open").touch()
    url = journal_backend.url("work")
    lease = ["--lease", "0.5", "--concurrency", "1"]
    slow = _spawn(url, "map-1", calls, *lease, "--stop-at", "1", "--stop-when", when)
    try:
        deadline = time.monotonic() + 120
        while _state(slow.pid) != "T":  # it stopped itself in the middle of its item
            assert slow.poll() is None, slow.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.01)
        other = _spawn(url, "map-1", calls, *lease)
        out, err = other.communicate(timeout=120)
        assert other.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1])["done"] == 1
    finally:
        os.kill(slow.pid, signal.SIGCONT)
    out, err = slow.communicate(timeout=120)
    assert slow.returncode == 0, err
    stalled = json.loads(out.strip().splitlines()[-1])
    assert stalled["lost"] == ["item-0000"]
    assert stalled["done"] == 0
    ends = [line.split()[2] for line in calls.read_text().splitlines() if line.startswith("end")]
    assert ends == ([str(other.pid), str(slow.pid)] if when == "after" else [str(other.pid)])
    events = journal.events("map-1/item-0000", resolve_claims=False)
    completed = [e for e in events if e.kind == "step_completed"]
    assert len(completed) == 1  # the new holder's
    assert completed[0].payload["output"]["pid"] == other.pid
    assert queue.items()[0].state == "done"
    assert queue.items()[0].attempts == 2
