"""One writer per execution: real processes racing, SIGKILL of the holder, takeover, stale objects."""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loom_nb import ExecutionBusyError, JournalError, LoomError
from loom_nb.agent import agent_loop
from loom_nb.journal import Journal
from tests.conftest import JournalBackend

WORKER = Path(__file__).with_name("race_worker.py")
TURNS = 3


def never(_: Any) -> Any:
    raise AssertionError("a refused writer must not run the step")


def _rows(target: str | Path, sql: str) -> list[Any]:
    """Rows of a query on the journal's database, SQLite file or PostgreSQL URL."""
    if str(target).startswith("postgresql://"):
        import psycopg

        with psycopg.connect(str(target)) as pg:
            return pg.execute(sql).fetchall()
    conn = sqlite3.connect(target)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def race(
    tmp_path: Path,
    racers: int,
    kill_at: int = -1,
    target: str | None = None,
    *,
    overlap: bool = False,
) -> tuple[list[Any], list[str], str | Path]:
    """Start ``racers`` workers at once on one execution; return their reports and the emails sent.

    With ``overlap``, the lease holder waits in its first model call until another racer was
    refused, so they do race even when a loaded machine starts them far apart."""
    path: str | Path = target or tmp_path / "race.sqlite"
    sent = tmp_path / "sent.txt"
    Journal(path).close()
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(path), str(sent), str(TURNS), str(kill_at)]
            + (["overlap"] if overlap else []),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(racers)
    ]
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("sent.txt.ready.*"))) < racers and time.monotonic() < deadline:
        time.sleep(0.02)
    (tmp_path / "sent.txt.go").touch()
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=400)
        if proc.returncode == -9:
            reports.append("killed")
            continue
        assert proc.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))
    lines = sent.read_text().split() if sent.exists() else []
    return reports, lines, path


def assert_whole(path: str | Path) -> None:
    """The execution opens, is completed, has ordinals 0..n-1, and replays without a model."""
    ordinals = [r[0] for r in _rows(path, "SELECT ordinal FROM events ORDER BY seq")]
    assert ordinals == list(range(len(ordinals)))
    assert _rows(path, "SELECT COUNT(*) FROM leases")[0][0] == 0
    journal = Journal(path)
    execution = journal.execution("race")
    assert execution.status == "completed"
    sys.path.insert(0, str(WORKER.parent))
    from race_worker import TurnProvider, email_tool

    class Offline(TurnProvider):
        async def complete(self, request: Any, **_: Any) -> Any:
            raise AssertionError("a finished run replays from the log")

    result = asyncio.run(
        agent_loop(
            execution,
            Offline(TURNS, -1, ""),
            [email_tool(str(path) + ".unused")],
            [{"role": "user", "content": "send the emails"}],
            max_turns=TURNS + 2,
            approve=lambda _digest: True,
        )
    )
    assert result.status == "completed"
    journal.close()


@pytest.mark.slow
def test_racing_processes_send_each_approved_email_once(
    tmp_path: Path, journal_backend: JournalBackend
) -> None:
    """Four processes run the same execution at once: one writes at a time, each email is sent once, the log stays whole."""
    reports, lines, path = race(tmp_path, 4, target=journal_backend.url("race"), overlap=True)
    assert all(r["status"] == "completed" for r in reports)
    assert sum(r["busy"] for r in reports) >= 1
    assert Counter(lines) == {f"u{t}@x": 1 for t in range(TURNS)}
    assert_whole(path)


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", range(TURNS + 1))
def test_sigkilled_holder_is_taken_over_at_once(
    tmp_path: Path, kill_at: int, journal_backend: JournalBackend
) -> None:
    """The lease holder SIGKILLed mid-model-call at any turn: another racer takes over at once and sends every email once."""
    start = time.monotonic()
    reports, lines, path = race(tmp_path, 2, kill_at, target=journal_backend.url("race"))
    assert reports.count("killed") == 1
    assert all(r["status"] == "completed" for r in reports if r != "killed")
    assert Counter(lines) == {f"u{t}@x": 1 for t in range(TURNS)}
    # The lease lasts 900 s: finishing well before that means the dead pid was seen at once (not
    # at expiry), with room for a loaded machine that takes a minute to start two processes.
    assert time.monotonic() - start < 300
    assert_whole(path)


async def test_stale_execution_object_is_refused_before_running(
    open_journal: Callable[..., Journal],
) -> None:
    """An Execution opened before another one wrote the log gets ExecutionBusyError and does not run its step."""
    journal = open_journal()
    first = journal.execution("r")
    stale = journal.execution("r")
    await first.execute("a", lambda x: x, 1)
    with pytest.raises(ExecutionBusyError) as info:
        await stale.execute("b", never, 2)
    assert info.value.code == "execution_busy"
    assert info.value.details["reason"] == "log_moved"
    assert "Open it again" in info.value.message
    # The refused call left nothing behind, and a fresh object goes on.
    fresh = journal.execution("r")
    assert await fresh.execute("a", never, 1) == 1
    assert await fresh.execute("b", lambda x: x * 10, 2) == 20


def _lease(path: Path, host: str, pid: int, expires: float) -> None:
    conn = sqlite3.connect(path)
    conn.execute(
        "INSERT INTO leases (execution_id, token, host, pid, expires, acquired) "
        "VALUES ('r', 'other', ?, ?, ?, 'x')",
        (host, pid, expires),
    )
    conn.commit()
    conn.close()


async def test_live_lease_of_another_host_refuses_until_it_expires(tmp_path: Path) -> None:
    """A lease held on another host refuses with the holder named; once expired it is taken over."""
    path = tmp_path / "j.sqlite"
    Journal(path).execution("r")
    _lease(path, "elsewhere", 4242, time.time() + 0.6)
    journal = Journal(path)
    execution = journal.execution("r")
    with pytest.raises(ExecutionBusyError) as info:
        await execution.execute("s", never, 1)
    assert isinstance(info.value, LoomError)
    assert info.value.details["host"] == "elsewhere"
    assert "pid 4242" in info.value.message
    assert "fork" in info.value.message
    await asyncio.sleep(0.7)
    assert await execution.execute("s", lambda x: x + 1, 1) == 2
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT host FROM leases").fetchone() == (socket.gethostname(),)
    journal.close()
    assert conn.execute("SELECT COUNT(*) FROM leases").fetchone()[0] == 0  # given back on close


async def test_dead_pid_on_this_host_is_taken_over_before_expiry(tmp_path: Path) -> None:
    """A lease whose holder pid on this host has exited is taken over although it has not expired."""
    path = tmp_path / "j.sqlite"
    Journal(path).execution("r")
    done = subprocess.run(  # noqa: ASYNC221 (a finished process's pid is the point)
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    _lease(path, socket.gethostname(), int(done.stdout), time.time() + 3600)
    execution = Journal(path).execution("r")
    assert await execution.execute("s", lambda x: x, "mine") == "mine"


async def test_heartbeat_renews_the_lease_while_a_step_is_in_flight(tmp_path: Path) -> None:
    """A slow step keeps its lease: the heartbeat renews it past the ttl it started with."""
    path = tmp_path / "j.sqlite"
    journal = Journal(path, lease_ttl=0.3)
    execution = journal.execution("r")
    conn = sqlite3.connect(path)
    expiries: list[float] = []

    async def slow(x: int) -> int:
        for _ in range(5):
            await asyncio.sleep(0.2)
            expiries.append(conn.execute("SELECT expires FROM leases").fetchone()[0])
        return x

    started = time.time()
    assert await execution.execute("slow", slow, 3) == 3
    assert max(expiries) > started + 0.6
    await execution.complete(None)
    assert conn.execute("SELECT COUNT(*) FROM leases").fetchone()[0] == 0  # released


def test_a_journal_dropped_without_close_is_collected_with_its_heartbeat(tmp_path: Path) -> None:
    """The heartbeat holds its journal weakly: a journal a notebook drops (a cell run again) goes, and the thread ends."""
    import gc
    import threading
    import weakref

    journal = Journal(tmp_path / "j.sqlite", lease_ttl=0.3)
    execution = journal.execution("dropped")

    async def suspends(x: int) -> int:
        await asyncio.sleep(0.15)  # in flight long enough for the heartbeat to start and beat
        return x

    assert asyncio.run(execution.execute("s", suspends, 1)) == 1
    beat = journal._heartbeat
    assert beat is not None
    assert beat.is_alive()
    gone = weakref.ref(journal)
    del journal, execution
    gc.collect()
    assert gone() is None
    beat.join(5)
    assert not beat.is_alive()
    assert beat not in threading.enumerate()


def test_lease_ttl_is_validated() -> None:
    """A lease_ttl that is not a sensible number of seconds is a JournalError('invalid_argument')."""
    for bad in (0, -1, True, "30", float("nan")):
        with pytest.raises(JournalError) as info:
            Journal(lease_ttl=bad)  # type: ignore[arg-type]
        assert info.value.code == "invalid_argument"
