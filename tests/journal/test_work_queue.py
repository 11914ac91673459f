"""Work queues (issue 32): claims under a lease, settling, counts, the live follow and the fence.

Every test runs on SQLite, on PostgreSQL and through PgBouncer (``journal_backend``). Leases are
short and expired by waiting past them; no assertion is about how long anything took.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from loom_nb import ExecutionBusyError, JournalError
from loom_nb.journal import WorkCounts, work_items, worker_id
from tests.conftest import JournalBackend


def _queue(journal_backend: JournalBackend, items: int = 5, name: str = "q") -> Any:
    journal = journal_backend.open("work")
    queue = journal.work_queue(name)
    queue.add([f"i{n}" for n in range(items)])
    return queue


def test_add_is_idempotent_and_keeps_order(journal_backend: JournalBackend) -> None:
    """Adding keys again adds only the new ones; claims come in the order the keys were added."""
    journal = journal_backend.open("work")
    queue = journal.work_queue("q")
    assert queue.add(["b", "a", "c", "a"]) == 3
    assert queue.add(["c", "d", "b"]) == 1
    assert [item.item for item in queue.items()] == ["b", "a", "c", "d"]
    assert [claim.item for claim in queue.claim("w", limit=3)] == ["b", "a", "c"]
    assert queue.counts() == WorkCounts(pending=1, claimed=3)


def test_queues_are_separate(journal_backend: JournalBackend) -> None:
    """Two queues of one journal share no items."""
    journal = journal_backend.open("work")
    one, two = journal.work_queue("one"), journal.work_queue("two")
    one.add(["x", "y"])
    two.add(["x"])
    assert [c.item for c in two.claim("w", limit=5)] == ["x"]
    assert one.counts() == WorkCounts(pending=2)


def test_claims_never_overlap_and_expired_ones_return(journal_backend: JournalBackend) -> None:
    """A claimed item is not claimed again while its lease lives; once it expired it is, with
    a new token and its attempt counted."""
    queue = _queue(journal_backend)
    first = queue.claim("a", limit=2, lease=2)
    second = queue.claim("b", limit=5, lease=30)
    assert {c.item for c in first} == {"i0", "i1"}
    assert {c.item for c in second} == {"i2", "i3", "i4"}
    assert queue.claim("c", limit=5) == []
    time.sleep(max(0.0, first[0].lease_until - time.time()) + 0.1)
    assert queue.counts() == WorkCounts(pending=2, claimed=3)
    again = queue.claim("c", limit=5)
    assert [(c.item, c.attempt) for c in again] == [("i0", 2), ("i1", 2)]
    assert again[0].token != first[0].token


def test_a_dead_local_workers_claims_are_free_at_once(journal_backend: JournalBackend) -> None:
    """A claim of a worker of this host whose process is gone is claimable at once (no lease
    wait); a live one's, or another host's, waits for its lease."""
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    host = socket.gethostname()
    journal = journal_backend.open("work")
    gone, alive, far = (journal.work_queue(name) for name in ("gone", "alive", "far"))
    for queue in (gone, alive, far):
        queue.add(["x"])
    gone.claim(f"{host}:{int(dead.stdout)}:w", lease=60)
    alive.claim(f"{host}:{os.getpid()}:w", lease=60)
    far.claim(f"elsewhere:{int(dead.stdout)}:w", lease=60)
    assert [(c.item, c.attempt) for c in gone.claim(worker_id())] == [("x", 2)]
    assert alive.claim(worker_id()) == []
    assert far.claim(worker_id()) == []


def test_settling_needs_the_claim(journal_backend: JournalBackend) -> None:
    """complete/fail/release/extend work for the holder; a claim taken over is ``claim_lost``."""
    queue = _queue(journal_backend, 3)
    old = queue.claim("a", lease=0.2)[0]
    time.sleep(0.3)
    new = queue.claim("b", lease=30)[0]
    assert new.item == old.item
    for settle in (queue.complete, lambda c: queue.fail(c, "x"), queue.release):
        with pytest.raises(ExecutionBusyError) as caught:
            settle(old)
        assert caught.value.code == "claim_lost"
    assert queue.extend([old, new])
    assert queue.extend([old]) == []
    queue.complete(new)
    other = queue.claim("b", limit=2)
    queue.fail(other[0], "the model refused")
    queue.release(other[1])
    assert queue.counts() == WorkCounts(pending=1, done=1, failed=1)
    by_key = {item.item: item for item in queue.items()}
    assert by_key[other[0].item].error == "the model refused"
    assert by_key[other[1].item].attempts == 0  # a release is not an attempt
    assert queue.retry_failed() == [other[0].item]
    assert queue.counts() == WorkCounts(pending=2, done=1)


def test_a_late_complete_counts_when_nobody_took_over(journal_backend: JournalBackend) -> None:
    """A claim past its lease that no other worker claimed still completes (nobody else ran it)."""
    queue = _queue(journal_backend, 1)
    claim = queue.claim("a", lease=0.1)[0]
    time.sleep(0.2)
    queue.complete(claim)
    assert queue.counts() == WorkCounts(done=1)


def test_release_with_delay_and_max_attempts(journal_backend: JournalBackend) -> None:
    """A released item waits out its delay; an item whose claims all expired fails at the limit."""
    queue = _queue(journal_backend, 2)
    first, second = queue.claim("a", limit=2, lease=0.1)
    queue.release(first, delay=30)
    time.sleep(0.2)
    # ``second`` expired once (attempt 1 of 1): failed instead of claimed again.
    assert queue.claim("b", limit=5, max_attempts=1) == []
    items = {item.item: item for item in queue.items()}
    assert items[second.item].state == "failed"
    assert "lease expired 1 times" in (items[second.item].error or "")
    assert items[first.item].state == "pending"


def test_bad_arguments_are_refused(journal_backend: JournalBackend) -> None:
    """Limits, leases and keys are checked before any statement runs."""
    journal = journal_backend.open("work")
    with pytest.raises(JournalError):
        journal.work_queue("")
    queue = journal.work_queue("q")
    for bad in ({"limit": 0}, {"lease": -1}, {"limit": True}, {"max_attempts": 0}):
        with pytest.raises(JournalError) as caught:
            queue.claim("w", **bad)
        assert caught.value.code == "invalid_argument"
    with pytest.raises(JournalError):
        queue.add(["ok", ""])
    assert queue.counts() == WorkCounts()


def test_follow_sees_every_change_and_the_last_counts(journal_backend: JournalBackend) -> None:
    """A follow calls back with the counts as they change and with the final ones at stop."""
    queue = _queue(journal_backend, 3)
    seen: list[WorkCounts] = []
    changed = threading.Event()

    def note(counts: WorkCounts) -> None:
        seen.append(counts)
        changed.set()

    with queue.follow(note, poll=0.05) as follow:
        assert changed.wait(10)
        for claim in queue.claim("w", limit=3):
            changed.clear()
            queue.complete(claim)
            assert changed.wait(10)
    assert seen[0] == WorkCounts(pending=3)
    assert seen[-1] == WorkCounts(done=3)
    assert follow.error is None
    assert not follow.running


def test_follow_is_woken_by_a_notification(journal_backend: JournalBackend) -> None:
    """On PostgreSQL a change reaches the follow through LISTEN/NOTIFY (it polls rarely here)."""
    if journal_backend.name == "sqlite":
        pytest.skip("SQLite has no notifications: its follow polls")
    queue = _queue(journal_backend, 2)
    seen: list[WorkCounts] = []
    changed = threading.Event()
    follow = queue.follow(lambda c: (seen.append(c), changed.set()), poll=60)
    try:
        assert changed.wait(10)
        deadline = time.monotonic() + 10
        while follow.mode != "notify" and time.monotonic() < deadline:
            time.sleep(0.05)  # the hub's probe says when it hears notifications
        assert follow.mode == "notify"
        changed.clear()
        queue.complete(queue.claim("w")[0])
        while seen[-1] != WorkCounts(pending=1, done=1):  # the claim may wake it first
            assert changed.wait(20)  # far below the 60 s poll: woken by the change
            changed.clear()
    finally:
        follow.stop()


def test_a_lost_claim_cannot_journal_the_step(journal_backend: JournalBackend) -> None:
    """A worker whose claim was taken over while its step ran is refused at the step's outcome
    (``claim_lost``); the new holder runs the step, and the log holds one completed step."""
    journal = journal_backend.open("work")
    queue = journal.work_queue("q")
    queue.add(["x"])
    calls: list[str] = []

    async def main() -> None:
        taken_over = asyncio.Event()

        async def slow(value: int) -> int:
            calls.append("slow")
            await taken_over.wait()  # suspends: its start is journaled; the lease runs out
            return value

        claim = queue.claim("a", lease=0.1)[0]
        execution = journal.execution("q/x")
        with queue.fenced(claim, "q/x"):
            task = asyncio.ensure_future(execution.execute("call", slow, 1))
            await asyncio.sleep(0.2)
            taken = queue.claim("b", lease=30)
            taken_over.set()
            assert [c.item for c in taken] == ["x"]
            with pytest.raises(ExecutionBusyError) as caught:
                await task
            assert caught.value.code == "claim_lost"
        kinds = [e.kind for e in journal.events("q/x")]
        assert kinds == ["execution_started", "step_started"]
        again = journal.execution("q/x")
        with queue.fenced(taken[0], "q/x"):
            assert await again.execute("call", lambda v: calls.append("fast") or v, 1) == 1
        queue.complete(taken[0])

    asyncio.run(main())
    kinds = [e.kind for e in journal.events("q/x")]
    assert kinds.count("step_completed") == 1
    assert calls == ["slow", "fast"]


def test_a_lost_claim_is_refused_before_the_step_runs(journal_backend: JournalBackend) -> None:
    """A worker that reaches a step after its claim was taken over never calls the function."""
    journal = journal_backend.open("work")
    queue = journal.work_queue("q")
    queue.add(["x"])
    claim = queue.claim("a", lease=0.1)[0]
    time.sleep(0.2)
    queue.claim("b")

    async def main() -> None:
        execution = journal.execution("q/x")
        with queue.fenced(claim, "q/x"), pytest.raises(ExecutionBusyError) as caught:
            await execution.execute("call", lambda _: pytest.fail("ran"), 1)
        assert caught.value.code == "claim_lost"

    asyncio.run(main())


def test_an_item_this_process_still_runs_is_given_back_not_failed(
    journal_backend: JournalBackend,
) -> None:
    """A worker that stalled past its lease may claim an item it still runs: the fence refuses
    the second run (``execution_fenced``) and the item goes back untried, never failed."""
    from loom_nb.journal._work_loop import WorkReport, _one

    journal = journal_backend.open("work")
    queue = journal.work_queue("q")
    queue.add(["x"])
    first = queue.claim("w", lease=0.1)[0]

    async def main() -> WorkReport:
        report = WorkReport(worker="w")
        with queue.fenced(first, "q/x"):  # the earlier run, still going
            await asyncio.sleep(0.2)  # the first claim expires
            second = queue.claim("w", lease=30)
            assert [c.item for c in second] == ["x"]
            await _one(
                queue, second[0], lambda item: pytest.fail("ran"), lambda i: f"q/{i}", report, 0.2
            )
        return report

    report = asyncio.run(main())
    assert report.released == ["x"]
    assert report.failed == []
    (item,) = queue.items()
    assert item.state == "pending"
    assert item.error is None


def test_work_items_runs_everything_and_records_failures(journal_backend: JournalBackend) -> None:
    """One worker's loop runs every item once, a raising item failed with its error, the rest done."""
    journal = journal_backend.open("work")
    queue = journal.work_queue("m")
    queue.add([f"i{n:02d}" for n in range(12)])
    ran: list[str] = []
    flying = [0, 0]

    async def run(item: str) -> None:
        flying[0] += 1
        flying[1] = max(flying)
        try:
            execution = journal.execution(f"m/{item}")

            async def call(key: str) -> str:
                await asyncio.sleep(0.01)
                if key == "i05":
                    raise ValueError("bad input")
                ran.append(key)
                return key

            await execution.execute("call", call, item)
        finally:
            flying[0] -= 1

    report = asyncio.run(
        work_items(queue, run, execution_of=lambda i: f"m/{i}", concurrency=3, poll=0.05)
    )
    assert sorted(ran) == sorted(f"i{n:02d}" for n in range(12) if n != 5)
    assert report.failed == ["i05"]
    assert len(report.done) == 11
    assert flying[1] == 3  # concurrency honoured, and used
    assert queue.counts() == WorkCounts(done=11, failed=1)
    failed = next(item for item in queue.items() if item.state == "failed")
    assert failed.error == "ValueError: bad input"


def test_a_stalled_worker_does_not_take_its_own_running_item_again(
    journal_backend: JournalBackend,
) -> None:
    """A worker that stalled past its lease (a starved process) finds the item it is still
    running claimable when it wakes: it does not claim it a second time (that claim would fail
    the item for being fenced already); the heartbeat renews its claim and the item completes."""
    journal = journal_backend.open("work")
    queue = journal.work_queue("m")
    queue.add(["x"])
    lease = 0.2

    async def run(item: str) -> None:
        execution = journal.execution(f"m/{item}")

        async def call(key: str) -> str:
            await asyncio.sleep(0)  # its start is journaled
            time.sleep(2 * lease)  # noqa: ASYNC251 (the process stalls: no heartbeat, the lease runs out)
            await asyncio.sleep(0.05)  # the loop looks for work before the heartbeat renews
            return key

        await execution.execute("call", call, item)

    report = asyncio.run(
        work_items(
            queue, run, execution_of=lambda i: f"m/{i}", concurrency=2, lease=lease, poll=0.01
        )
    )
    assert (report.done, report.failed, report.lost) == (["x"], [], [])
    (item,) = queue.items()
    assert (item.state, item.attempts, item.error) == ("done", 1, None)
    kinds = [e.kind for e in journal.events("m/x")]
    assert kinds.count("step_completed") == 1
