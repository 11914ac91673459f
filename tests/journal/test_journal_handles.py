"""One writer per execution between Journal handles of one process (issue 30, item 2).

Two ``Journal`` objects on the same database in one process (two notebooks' cells, a widget and
a cell) are two writers: the lease's holder is the journal handle, not the process, so the second
is refused with ``execution_busy`` before it runs anything, exactly as a second process is. A
handle that was closed, or dropped and collected, holds nothing: another takes over at once.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from loom_nb import ExecutionBusyError
from loom_nb.journal import Journal
from tests.conftest import JournalBackend


def _never(_: Any) -> Any:
    raise AssertionError("a refused step must not run")


async def test_a_second_handle_is_refused_while_the_first_runs_a_step(
    journal_backend: JournalBackend,
) -> None:
    """Two asyncio tasks, one Journal handle each: while the first's step is in flight, the
    second's run of the same execution is refused (execution_busy) and its function never runs."""
    first = journal_backend.open("shared")
    second = journal_backend.open("shared")
    entered = asyncio.Event()
    release = asyncio.Event()

    async def slow(x: int) -> int:
        entered.set()
        await release.wait()
        return x + 1

    running = asyncio.create_task(first.execution("x").execute("step", slow, 1))
    await asyncio.wait_for(entered.wait(), 10)

    async def intruder() -> Any:
        return await second.execution("x").execute("step", _never, 1)

    with pytest.raises(ExecutionBusyError) as info:
        await asyncio.create_task(intruder())
    assert info.value.code == "execution_busy"
    assert "this process" in info.value.message
    release.set()
    assert await asyncio.wait_for(running, 10) == 2
    kinds = [e.kind for e in first.events("x")]
    assert kinds == ["execution_started", "step_started", "step_completed"]
    # The holder goes on; the other handle is still refused while the lease is held.
    other = second.execution("x")
    assert await other.execute("step", _never, 1) == 2  # replaying writes nothing: allowed
    with pytest.raises(ExecutionBusyError):
        await other.execute("next", _never, 2)
    mine = first.execution("x")
    assert await mine.execute("step", _never, 1) == 2
    assert await mine.execute("next", lambda v: v * 3, 2) == 6


def test_threads_on_their_own_handles_run_a_sync_step_once(
    journal_backend: JournalBackend,
) -> None:
    """Four threads, each with its own Journal on the same database, race one sync step: it runs
    once, every other thread gets execution_busy."""
    handles = [journal_backend.open("shared") for _ in range(4)]
    handles[0].execution("race")  # started once, so every handle opens the same run
    ran: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(handles))
    outcomes: list[Any] = [None] * len(handles)

    def send(index: int) -> str:
        with lock:
            ran.append(index)
        time.sleep(0.3)  # slow: the others arrive while it runs
        return "sent"

    def racer(index: int) -> None:
        execution = handles[index].execution("race")
        barrier.wait()
        try:
            outcomes[index] = asyncio.run(execution.execute("email", send, index))
        except BaseException as exc:
            outcomes[index] = exc

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(len(handles))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(ran) == 1, f"the step ran {len(ran)} times: {outcomes!r}"
    assert outcomes.count("sent") == 1
    refused = [o for o in outcomes if o != "sent"]
    assert len(refused) == len(handles) - 1
    assert all(isinstance(o, ExecutionBusyError) for o in refused), refused
    kinds = [e.kind for e in handles[0].events("race")]
    assert kinds == ["execution_started", "step_started", "step_completed"]


@pytest.mark.parametrize("how", ["closed", "collected"])
async def test_a_handle_closed_or_collected_holds_nothing(
    journal_backend: JournalBackend, how: str
) -> None:
    """A handle that held the lease and was closed (or dropped and collected, a cell run again)
    does not block another handle of the process: it takes over at once, not after the ttl."""
    first: Journal | None = journal_backend.open("shared", lease_ttl=3600)
    assert first is not None
    assert await first.execution("x").execute("a", lambda v: v, 1) == 1
    if how == "closed":
        first.close()
    else:
        journal_backend._opened.remove(first)
        first = None
        gc.collect()
    second = journal_backend.open("shared", lease_ttl=3600)
    again = second.execution("x")
    assert await again.execute("a", _never, 1) == 1  # served from the log
    assert await again.execute("b", lambda v: v + 1, 1) == 2


def test_open_journal_fixture_gives_distinct_handles(open_journal: Callable[..., Journal]) -> None:
    """The fixture's named journals are distinct objects on one database (what the tests above rely on)."""
    assert open_journal("a") is not open_journal("a")
