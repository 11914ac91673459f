"""Journal backends: the URL picks PostgreSQL, migrations are checked at open, live viewers follow a run.

The journal's behaviour tests run on SQLite and PostgreSQL through ``open_journal``; these pin
what the backends themselves must get right.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from loom_nb._pg import PG_MIGRATIONS
from loom_nb.errors import JournalError
from loom_nb.journal import Journal
from loom_nb.journal._journal import PostgresJournal
from tests import services
from tests.conftest import JournalBackend, pooler_or_unavailable


@pytest.fixture(params=["postgres", "pgbouncer"])
def pg(
    request: pytest.FixtureRequest, postgres_service: str | None, tmp_path: Path
) -> Iterator[JournalBackend]:
    """PostgreSQL journals only (what these tests pin has no SQLite counterpart), directly and
    through PgBouncer."""
    if postgres_service is None:
        services.unavailable(f"PostgreSQL at {services.postgres_url()} is not reachable")
    pooler = pooler_or_unavailable(request) if request.param == "pgbouncer" else None
    backend = JournalBackend(request.param, tmp_path, postgres_service, pooler)
    yield backend
    backend.close()


def test_a_postgresql_url_opens_the_postgres_journal_with_its_migrations(
    pg: JournalBackend,
) -> None:
    """Journal('postgresql://...') is a PostgresJournal, and every migration is recorded once."""
    journal = pg.open("j")
    assert isinstance(journal, PostgresJournal)
    assert isinstance(journal, Journal)
    pg.open("j").close()  # a second open applies nothing twice
    with psycopg.connect(pg.url("j")) as conn:
        names = [
            r[0] for r in conn.execute("SELECT name FROM loom_journal_migrations ORDER BY name")
        ]
    assert names == sorted(name for name, _ in PG_MIGRATIONS)  # each once (listed by name)
    with psycopg.connect(pg.url("j")) as conn:
        indexes = [
            r[0]
            for r in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename = 'events' "
                "AND schemaname = current_schema() ORDER BY indexname"
            )
        ]
    assert indexes == ["events_by_ordinal", "events_pkey"]  # m008: one index per execution


def test_a_journal_written_by_a_newer_version_is_refused_at_open(pg: JournalBackend) -> None:
    """An unknown migration in the database: JournalError journal_too_new, nothing written."""
    pg.open("j").close()
    with psycopg.connect(pg.url("j"), autocommit=True) as conn:
        conn.execute("INSERT INTO loom_journal_migrations VALUES ('m999_future', 'later')")
    with pytest.raises(JournalError) as info:
        Journal(pg.url("j"))
    assert info.value.code == "journal_too_new"


async def test_the_events_table_is_append_only_on_the_server(pg: JournalBackend) -> None:
    """UPDATE and DELETE on events are refused by the database itself, not only by the code."""
    journal = pg.open("j")
    await journal.execution("r").execute("s", lambda x: x, 1)
    with psycopg.connect(pg.url("j"), autocommit=True) as conn:
        for statement in ("UPDATE events SET kind = 'x'", "DELETE FROM events"):
            with pytest.raises(psycopg.errors.RaiseException):
                conn.execute(statement)
    assert len(journal.events("r")) == 3


def test_two_processes_opening_a_new_execution_start_it_once(pg: JournalBackend) -> None:
    """Concurrent opens of the same new id (separate pools) journal one execution_started."""
    journals = [pg.open("j"), pg.open("j"), pg.open("j"), pg.open("j")]
    barrier = threading.Barrier(len(journals))

    def open_it(journal: Journal) -> None:
        barrier.wait()
        journal.execution("shared")

    threads = [threading.Thread(target=open_it, args=(j,)) for j in journals]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert [e.kind for e in journals[0].events("shared")] == ["execution_started"]


def test_an_unreachable_server_is_journal_unavailable_and_the_password_is_not_shown() -> None:
    """Nothing listening: JournalError journal_unavailable, with the URL's password redacted."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(JournalError) as info:
        Journal(f"postgresql://loom:s3cret@127.0.0.1:{port}/test", timeout=2)
    assert info.value.code == "journal_unavailable"
    assert "s3cret" not in info.value.message
    assert "127.0.0.1" in info.value.message


async def test_a_second_viewer_sees_a_live_runs_steps_as_they_land(
    journal_backend: JournalBackend,
) -> None:
    """watch() on another connection delivers each appended event once, in order, while the run goes on."""
    writer = journal_backend.open("j")
    viewer = journal_backend.open("j")
    execution = writer.execution("live")
    seen: list[Any] = []
    arrived = threading.Event()

    def on_event(event: Any) -> None:
        seen.append(event)
        if event.kind == "step_completed":
            arrived.set()

    # On PostgreSQL the poll is long: only LISTEN/NOTIFY can deliver within the wait below.
    poll = 30.0 if journal_backend.name == "postgres" else 0.05
    with viewer.watch("live", on_event, poll=poll) as watch:
        for i in range(3):
            arrived.clear()
            started = time.monotonic()
            await execution.execute(f"step-{i}", lambda x: x * 2, i)
            assert await asyncio.to_thread(arrived.wait, 5), f"step {i} never reached the viewer"
            assert time.monotonic() - started < 5
        assert watch.running
    assert not watch.running
    assert watch.error is None
    kinds = [(e.kind, e.step_id) for e in seen]
    assert kinds == [("execution_started", None)] + [
        (kind, f"step-{i}") for i in range(3) for kind in ("step_started", "step_completed")
    ]
    assert [e.seq for e in seen] == sorted({e.seq for e in seen})
    assert (seen[-1].payload["input"], seen[-1].payload["output"]) == (2, 4)


async def test_watch_without_a_callback_queues_events_after_a_seq(
    open_journal: Callable[..., Journal],
) -> None:
    """With no callback the events queue for get(); after_seq skips what the viewer already has."""
    journal = open_journal()
    execution = journal.execution("r")
    await execution.execute("a", lambda x: x, 1)
    already = journal.events("r")[-1].seq
    await execution.execute("b", lambda x: x, 2)
    with journal.watch("r", after_seq=already, poll=0.05) as watch:
        first = await asyncio.to_thread(watch.get, 5)
        second = await asyncio.to_thread(watch.get, 5)
        assert await asyncio.to_thread(watch.get, 0.2) is None
    assert first is not None
    assert second is not None
    assert (first.kind, first.step_id, second.kind) == ("step_started", "b", "step_completed")


async def test_events_after_a_seq_are_the_executions_later_events_in_order(
    open_journal: Callable[..., Journal],
) -> None:
    """Two executions written in turns: ``events_after`` from each of an execution's own seqs,
    from 0 and from the other execution's seqs gives exactly its events with a larger seq, in
    seq order (read through the ``(execution_id, ordinal)`` index, the only one left)."""
    journal = open_journal()
    executions = {run: journal.execution(run) for run in ("a", "b")}
    for turn, run in enumerate("abbaab"):
        await executions[run].execute(f"s{turn}", lambda x: x, turn)
    seqs = {run: [e.seq for e in journal.events(run)] for run in ("a", "b")}
    assert seqs["a"] == sorted(seqs["a"])
    assert not set(seqs["a"]) & set(seqs["b"])
    for run, own in seqs.items():
        other = seqs["b" if run == "a" else "a"]
        for after in [0, *own, *other]:
            found = [e.seq for e in journal.events_after(run, after)]
            assert found == [seq for seq in own if seq > after], (run, after)


def test_watch_arguments_are_checked(open_journal: Callable[..., Journal]) -> None:
    """A bad callback, poll or seq is a JournalError invalid_argument before any thread starts."""
    journal = open_journal()
    for kwargs in ({"callback": 3}, {"poll": 0}, {"after_seq": -1}, {"poll": True}):
        with pytest.raises(JournalError) as info:
            journal.watch("r", **kwargs)
        assert info.value.code == "invalid_argument"
    with pytest.raises(JournalError) as info:
        journal.watch("")
    assert info.value.code == "invalid_execution_id"


async def test_a_watch_shows_model_steps_whole_even_when_journaled_as_deltas(
    journal_backend: JournalBackend,
) -> None:
    """A viewer following an agent run sees each model step's full messages, from the start or mid-run."""
    from loom_nb.agent import ToolDefinition, agent_loop
    from loom_nb.content import Message
    from loom_nb.providers import ScriptedProvider

    tick = ToolDefinition(
        "tick",
        "Count",
        fn=lambda v: {"n": v["n"]},
        input_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
    )
    turns = [{"tool_calls": [{"id": f"c{i}", "name": "tick", "input": {"n": i}}]} for i in range(4)]
    writer = journal_backend.open("j")
    viewer = journal_backend.open("j")
    await agent_loop(
        writer.execution("run"),
        ScriptedProvider([*turns, {"text": "done"}]),
        [tick],
        [Message(role="user", content="count")],
        max_turns=6,
    )
    whole = [
        e
        for e in viewer.events("run")
        if e.kind == "step_completed" and e.step_id.endswith(":model")
    ]
    middle = next(e for e in viewer.events("run") if e.kind == "step_completed").seq
    for after in (0, middle):
        with viewer.watch("run", after_seq=after, poll=0.05) as watch:
            seen = []
            while (event := await asyncio.to_thread(watch.get, 2)) is not None:
                seen.append(event)
        models = [e for e in seen if e.kind == "step_completed" and e.step_id.endswith(":model")]
        assert [e.payload["input"] for e in models] == [
            e.payload["input"] for e in whole if e.seq > after
        ]
        assert all(isinstance(e.payload["input"]["messages"], list) for e in models)
    assert len(whole) == 5


# -- the connection pool: threads of one process on different executions ------------------------

_WRITE_LOCK = 0x6C6F6F6D_7772  # the journal's write lock (see loom_nb._pg)


def _holding_the_write_lock(url: str) -> psycopg.Connection[Any]:
    """Another session holding the journal's write lock: opening a new execution waits on it.

    A session lock: ``url`` must reach the server directly, not through a transaction pooler."""
    blocker = psycopg.connect(url, autocommit=True)
    blocker.execute("SELECT pg_advisory_lock(%s)", (_WRITE_LOCK,))
    return blocker


def test_threads_on_other_executions_do_not_wait_for_a_blocked_one(pg: JournalBackend) -> None:
    """One thread waits on the server (opening a new execution); the others read and run steps meanwhile."""
    journal = pg.open("j")
    running = journal.execution("running")
    asyncio.run(running.execute("warm", _add_one, 0))  # its lease is held: a step is one INSERT
    blocker = _holding_the_write_lock(pg.direct_url("j"))
    opened = threading.Event()

    def open_new() -> None:
        journal.execution("new")
        opened.set()

    waiter = threading.Thread(target=open_new)
    waiter.start()
    try:
        time.sleep(0.3)
        assert not opened.is_set()  # it is waiting on the server, holding a pooled connection
        results: list[Any] = []

        def others() -> None:
            results.append(asyncio.run(running.execute("meanwhile", _add_one, 41)))
            results.append(len(journal.events("running")))
            results.append(len(journal.executions()))

        other = threading.Thread(target=others)
        other.start()
        other.join(10)
        assert results == [42, 5, 1]
        assert not opened.is_set()
    finally:
        blocker.close()
        waiter.join(10)
    assert opened.is_set()
    assert {e.execution_id for e in journal.executions()} == {"running", "new"}


def test_a_full_pool_makes_threads_wait_and_then_reports_unavailable(pg: JournalBackend) -> None:
    """pool_size=1: a second thread waits for the connection; past the timeout it is journal_unavailable."""
    journal = pg.open("j", pool_size=1, timeout=1)
    assert journal.pool_size == 1
    journal.execution("old")
    blocker = _holding_the_write_lock(pg.direct_url("j"))
    waiter = threading.Thread(target=lambda: journal.execution("new"))
    waiter.start()
    try:
        time.sleep(0.3)
        with pytest.raises(JournalError) as info:
            journal.events("old")
        assert info.value.code == "journal_unavailable"
        assert "pool_size" in info.value.message
    finally:
        blocker.close()
        waiter.join(10)
    assert len(journal.events("old")) == 1  # the connection is back: reads work again


def test_pool_size_is_checked(pg: JournalBackend) -> None:
    """pool_size is an int from 1 to 64: anything else is invalid_argument before connecting."""
    for bad in (0, 65, 2.0, True, "4"):
        with pytest.raises(JournalError) as info:
            Journal(pg.url("j"), pool_size=bad)
        assert info.value.code == "invalid_argument"


def _add_one(x: int) -> int:
    return x + 1


def _listeners(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM loom_listeners").fetchone()
    return row[0] if row else -1


def _registered_soon(url: str) -> int:
    """The listeners registered once the watch's hub has registered (it does so on its thread)."""
    deadline = time.monotonic() + 10
    while _listeners(url) == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    return _listeners(url)


def _heard(ear: psycopg.Connection[Any], execution_id: str, seconds: float) -> int:
    """How many notifications for ``execution_id`` reach ``ear`` within ``seconds`` (the server
    may carry other journals' notifications on the same channel)."""
    return sum(n.payload == execution_id for n in ear.notifies(timeout=seconds))


async def test_appends_notify_only_while_a_listener_is_registered(pg: JournalBackend) -> None:
    """An append NOTIFYs while a watch's listener is registered, and not before it or after it
    stopped (NOTIFY serializes the commits of every writer on the server)."""
    journal = pg.open("j")
    run = f"quiet-{uuid.uuid4().hex[:8]}"
    execution = journal.execution(run)
    with psycopg.connect(pg.direct_url("j"), autocommit=True) as ear:
        ear.execute("LISTEN loom_journal")
        await execution.execute("a", lambda x: x, 1)
        assert _heard(ear, run, 0.5) == 0
        with journal.watch(run, lambda event: None, poll=30.0):
            assert await asyncio.to_thread(_registered_soon, pg.direct_url("j")) == 1
            await execution.execute("b", lambda x: x, 2)
            assert _heard(ear, run, 5) == 1  # one per append statement: the step's two events
        assert _listeners(pg.direct_url("j")) == 0
        await execution.execute("c", lambda x: x, 3)
        assert _heard(ear, run, 0.5) == 0


def test_a_listener_gone_without_its_goodbye_is_dropped_at_the_next_registration(
    pg: JournalBackend,
) -> None:
    """A row naming a backend that no longer exists goes when the next listener registers."""
    from loom_nb.journal._listener import _registered

    pg.open("j").close()
    with psycopg.connect(pg.direct_url("j"), autocommit=True) as conn:
        conn.execute("INSERT INTO loom_listeners (pid, since) VALUES (-7, 'then')")
        _registered(conn)
        rows = conn.execute("SELECT pid FROM loom_listeners ORDER BY pid").fetchall()
        assert rows == [(conn.info.backend_pid,)]
        conn.execute("DELETE FROM loom_listeners")
