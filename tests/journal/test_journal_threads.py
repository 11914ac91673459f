"""One writer per execution within a process too: threads racing on a sync step of one execution."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from loom_nb import ExecutionBusyError
from loom_nb.journal import Execution, Journal

RACERS = 4


def _race(runs: list[Callable[[], Any]]) -> list[Any]:
    """Start ``runs`` on threads released together; return what each returned or raised."""
    barrier = threading.Barrier(len(runs))
    outcomes: list[Any] = [None] * len(runs)

    def racer(index: int) -> None:
        barrier.wait()
        try:
            outcomes[index] = runs[index]()
        except BaseException as exc:
            outcomes[index] = exc

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(len(runs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return outcomes


def _sending(sent: list[str], lock: threading.Lock) -> Callable[[str], str]:
    def send(address: str) -> str:
        with lock:
            sent.append(address)
        time.sleep(0.2)  # a slow sync step: the others arrive while it runs
        return f"sent to {address}"

    return send


def _step(execution: Execution, send: Callable[[str], str]) -> Callable[[], Any]:
    return lambda: asyncio.run(execution.execute("email", send, "u@x"))


def _check(outcomes: list[Any], sent: list[str]) -> None:
    assert sent == ["u@x"], f"the step ran {len(sent)} times: {outcomes!r}"
    assert outcomes.count("sent to u@x") == 1
    refused = [o for o in outcomes if o != "sent to u@x"]
    assert refused
    assert all(isinstance(o, ExecutionBusyError) for o in refused), refused
    assert all(o.code == "execution_busy" for o in refused)
    assert any(o.details.get("reason") == "in_process" for o in refused)


@pytest.mark.parametrize("rounds", range(3))
def test_threads_with_their_own_execution_objects_run_a_sync_step_once(
    open_journal: Callable[..., Journal], rounds: int
) -> None:
    """Each thread opens the execution itself (a notebook cell and a widget callback): one runs the step, the others get execution_busy before running it."""
    journal = open_journal()
    executions = [journal.execution(f"threads-{rounds}") for _ in range(RACERS)]
    sent: list[str] = []
    send = _sending(sent, threading.Lock())
    outcomes = _race([_step(e, send) for e in executions])
    _check(outcomes, sent)
    # The log holds the step once, and a fresh object replays it without running anything.
    fresh = journal.execution(f"threads-{rounds}")
    assert asyncio.run(fresh.execute("email", _never, "u@x")) == "sent to u@x"
    assert [e.kind for e in journal.events(f"threads-{rounds}")] == [
        "execution_started",
        "step_started",
        "step_completed",
    ]


def test_threads_sharing_one_execution_object_run_a_sync_step_once(
    open_journal: Callable[..., Journal],
) -> None:
    """Two threads on the same Execution object: the step runs once; the other call is refused without running."""
    journal = open_journal()
    execution = journal.execution("shared")
    sent: list[str] = []
    send = _sending(sent, threading.Lock())
    outcomes = _race([_step(execution, send), _step(execution, send)])
    _check(outcomes, sent)


def test_a_completion_from_another_thread_waits_for_no_one_and_is_refused_mid_step(
    open_journal: Callable[..., Journal],
) -> None:
    """While one thread's step runs, another object's append (a completion) is refused, so the step's outcome still lands."""
    journal = open_journal()
    running = journal.execution("mid")
    other = journal.execution("mid")
    entered = threading.Event()
    release = threading.Event()

    def slow(x: int) -> int:
        entered.set()
        release.wait(10)
        return x + 1

    worker = threading.Thread(target=lambda: asyncio.run(running.execute("s", slow, 1)))
    worker.start()
    assert entered.wait(10)
    with pytest.raises(ExecutionBusyError) as info:
        asyncio.run(other.complete("done"))
    assert info.value.code == "execution_busy"
    release.set()
    worker.join(10)
    assert [e.kind for e in journal.events("mid")][-1] == "step_completed"


def test_steps_in_sequence_from_different_threads_are_fine(
    open_journal: Callable[..., Journal],
) -> None:
    """The claim lasts only while a step runs: a thread opening the execution after another's step goes on."""
    journal = open_journal()
    first = journal.execution("seq")
    done = _race([lambda: asyncio.run(first.execute("a", lambda x: x, 1))])
    assert done == [1]
    second = journal.execution("seq")
    assert _race([lambda: asyncio.run(second.execute("a", _never, 1))]) == [1]
    assert _race([lambda: asyncio.run(second.execute("b", lambda x: x * 2, 2))]) == [4]


def _never(_: Any) -> Any:
    raise AssertionError("a served or refused step must not run")
