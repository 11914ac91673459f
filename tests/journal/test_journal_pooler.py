"""The journal behind a transaction pooler, and watches that never stall (issues 30 and 33).

Through PgBouncer in transaction mode, consecutive transactions of one client run on different
server sessions: the journal prepares no statement and keeps no setting in a session (straight
at the server, where a connection is its session's only client, it does both). A watch
LISTENs on one connection per process; through the pooler without ``listen_url`` notifications
cannot arrive, and it polls; with ``listen_url`` (a direct connection) it hears each append in
milliseconds; a listening connection that is terminated is made again and nothing is missed.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from loom_nb._pg import PG_MIGRATIONS
from loom_nb.errors import JournalError, LoomError
from loom_nb.journal import Journal
from loom_nb.journal._listener import application_name, hub_for
from tests import services
from tests.conftest import JournalBackend, pooler_or_unavailable


@pytest.fixture
def bounced(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JournalBackend]:
    """Journals through the run's PgBouncer, each in a database of its own."""
    pooler = pooler_or_unavailable(request)
    backend = JournalBackend("pgbouncer", tmp_path, pooler.server, pooler)
    yield backend
    backend.close()


@pytest.fixture(params=["postgres", "pgbouncer"])
def pg(
    request: pytest.FixtureRequest, postgres_service: str | None, tmp_path: Path
) -> Iterator[JournalBackend]:
    """PostgreSQL journals directly, and through PgBouncer with a direct ``listen_url``."""
    if postgres_service is None:
        services.unavailable(f"PostgreSQL at {services.postgres_url()} is not reachable")
    pooler = pooler_or_unavailable(request) if request.param == "pgbouncer" else None
    backend = JournalBackend(request.param, tmp_path, postgres_service, pooler)
    yield backend
    backend.close()


def _double(x: int) -> int:
    return x * 2


def _until(condition: Callable[[], bool], timeout: float) -> bool:
    """Whether ``condition()`` became true within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


class Arrivals:
    """A watch callback that notes when each step's completion arrived."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.completed: dict[str, float] = {}
        self._lock = threading.Lock()

    def __call__(self, event: Any) -> None:
        with self._lock:
            self.events.append(event)
            if event.kind == "step_completed":
                self.completed[event.step_id] = time.monotonic()

    def have(self, *steps: str) -> bool:
        with self._lock:
            return all(step in self.completed for step in steps)


def test_many_steps_on_many_journals_through_the_pooler_prepare_nothing(
    bounced: JournalBackend,
) -> None:
    """Three journals interleaving 12 steps each on a pool of server sessions: no prepared
    statement of one client meets another (psycopg would prepare after five runs)."""
    journals = [bounced.open("j") for _ in range(3)]
    executions = [j.execution(f"run-{i}") for i, j in enumerate(journals)]

    async def run() -> None:
        for step in range(12):
            for execution in executions:
                assert await execution.execute(f"s{step}", _double, step) == step * 2

    asyncio.run(run())
    assert all(len(journals[0].events(f"run-{i}")) == 25 for i in range(3))


def test_a_pooled_connection_keeps_no_session_state(bounced: JournalBackend) -> None:
    """Through the pooler, after steps, the journal's connection holds no prepared statement and
    no session setting; a writing transaction sets the durability for itself."""
    journal = bounced.open("j", pool_size=1)
    execution = journal.execution("r")
    for step in range(8):
        asyncio.run(execution.execute(f"s{step}", _double, step))
    pool = journal._pg_pool
    with psycopg.connect(bounced.direct_url("j")) as fresh:
        default = fresh.execute("SHOW synchronous_commit").fetchone()
    assert default == ("on",)  # the server's own: a setting kept in a session would show
    with pool:
        assert not pool._borrowed().raw.loom_direct  # type: ignore[attr-defined]
        assert pool.execute("SELECT count(*) FROM pg_prepared_statements").fetchone() == (0,)
        assert pool.execute("SHOW synchronous_commit").fetchone() == default
        pool.execute("BEGIN")
        assert pool.execute("SHOW synchronous_commit").fetchone() == ("off",)
        pool.execute("ROLLBACK")


@pytest.mark.parametrize("pg", ["postgres"], indirect=True)
@pytest.mark.parametrize("synchronous", ["NORMAL", "FULL"])
def test_a_direct_connection_keeps_its_setting_and_prepares_its_appends(
    pg: JournalBackend, synchronous: str
) -> None:
    """Straight at the server, the connection is its session's only client (the process id the
    server announced is the session's own): it keeps the durability in the session, and a
    step's append, run more than five times, is one prepared INSERT."""
    journal = pg.open("j", pool_size=1, synchronous=synchronous)
    execution = journal.execution("r")
    for step in range(8):
        asyncio.run(execution.execute(f"s{step}", _double, step))
    pool = journal._pg_pool
    with pool:
        raw = pool._borrowed().raw
        assert raw.loom_direct  # type: ignore[attr-defined]
        appends = raw.loom_writes  # type: ignore[attr-defined]  # the row-less writes' one cursor
        asyncio.run(execution.execute("s8", _double, 8))
        assert raw.loom_writes is appends  # type: ignore[attr-defined]
        assert appends.rowcount == 2  # the step's start and outcome, in one INSERT
        assert pool.execute("SELECT pg_backend_pid()").fetchone() == (raw.info.backend_pid,)
        expected = ("on",) if synchronous == "FULL" else ("off",)
        assert pool.execute("SHOW synchronous_commit").fetchone() == expected
        prepared = [
            row[0]
            for row in pool.execute("SELECT statement FROM pg_prepared_statements").fetchall()
        ]
    assert any(text.startswith("INSERT INTO events") for text in prepared), prepared
    assert len(journal.events("r")) == 19


def test_a_watch_through_the_pooler_without_listen_url_polls_and_sees_every_append(
    bounced: JournalBackend,
) -> None:
    """No notification can cross the pooler: the watch says it polls, and still sees all five
    appends, each within about a poll (1 s by default)."""
    writer = bounced.open("j", listen_url=None)
    viewer = Journal(bounced.url("j"))  # the journal's own URL only: no listen_url
    execution = writer.execution("live")
    seen = Arrivals()
    with viewer.watch("live", seen) as watch:
        steps = []
        for i in range(5):
            started = time.monotonic()
            asyncio.run(execution.execute(f"step-{i}", _double, i))
            steps.append(f"step-{i}")
            assert _until(lambda: seen.have(*steps), 5), f"step {i} never reached the viewer"
            assert seen.completed[f"step-{i}"] - started < 2.5
        hub = hub_for(bounced.url("j"))
        assert hub is not None
        # It gives up listening through the pooler and closes that connection. With the pool
        # idle, PgBouncer hands the hub's two connections its last-used session (LIFO) and the
        # hub sees the pooler before it LISTENs; with the pool busy (other clients of the same
        # PgBouncer) the two can land on different sessions, the hub LISTENs once and its probe
        # notification, never answered, tells it. Either way it ends deaf, at most one try.
        assert _until(lambda: hub.deaf, 6)
        assert hub.connects <= 1
        assert watch.mode == "poll"
        assert watch.error is None
    viewer.close()
    kinds = [(e.kind, e.step_id) for e in seen.events]
    assert kinds == [("execution_started", None)] + [
        (kind, f"step-{i}") for i in range(5) for kind in ("step_started", "step_completed")
    ]


def test_a_watch_with_listen_url_hears_each_append_within_100_ms_median(
    bounced: JournalBackend,
) -> None:
    """Writes through the pooler, LISTEN on a direct connection: 20 appends, median latency under
    100 ms, with a 30 s poll so only notifications can deliver that fast."""
    writer = bounced.open("j")
    viewer = bounced.open("j")  # listen_url: the direct URL
    assert viewer.listen_url == bounced.direct_url("j")
    execution = writer.execution("live")
    seen = Arrivals()
    latencies = []
    with viewer.watch("live", seen, poll=30) as watch:
        assert _until(lambda: watch.mode == "notify", 5)
        for i in range(20):
            started = time.monotonic()
            asyncio.run(execution.execute(f"step-{i}", _double, i))
            assert _until(lambda step=f"step-{i}": seen.have(step), 5)
            latencies.append(seen.completed[f"step-{i}"] - started)
    assert statistics.median(latencies) < 0.1, latencies


def _terminate(direct_url: str, pid: int) -> None:
    with psycopg.connect(direct_url, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))


def test_a_terminated_listening_connection_comes_back_and_nothing_is_missed(
    pg: JournalBackend,
) -> None:
    """pg_terminate_backend on the watch's listener: appends made while it was gone arrive when it
    reconnects (with a 30 s poll, not by polling), and later ones are heard live again."""
    writer = pg.open("j")
    viewer = pg.open("j")
    execution = writer.execution("live")
    seen = Arrivals()
    listen_at = viewer.listen_url or pg.url("j")
    with viewer.watch("live", seen, poll=30) as watch:
        hub = hub_for(listen_at)
        assert hub is not None
        assert _until(lambda: watch.mode == "notify", 5)
        first = hub.backend_pid
        assert first is not None
        _terminate(pg.direct_url("j"), first)
        for i in range(3):  # while the listener is gone or coming back
            asyncio.run(execution.execute(f"gap-{i}", _double, i))
        assert _until(lambda: seen.have("gap-0", "gap-1", "gap-2"), 10)
        assert _until(lambda: hub.connects >= 2 and watch.mode == "notify", 10)
        assert hub.backend_pid not in (None, first)
        started = time.monotonic()
        asyncio.run(execution.execute("after", _double, 9))
        assert _until(lambda: seen.have("after"), 5)
        assert seen.completed["after"] - started < 1.0
        assert watch.error is None
    assert [e.step_id for e in seen.events if e.kind == "step_completed"] == [
        "gap-0",
        "gap-1",
        "gap-2",
        "after",
    ]


def _listeners(direct_url: str) -> int:
    """How many sessions of this process LISTEN on the server (a pooler's sessions run other
    statements under the same application name, so only LISTEN counts)."""
    with psycopg.connect(direct_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE application_name = %s AND query LIKE 'LISTEN %%'",
            (application_name(),),
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_the_watches_of_a_process_share_one_listening_connection(pg: JournalBackend) -> None:
    """Six watches on three executions from two journals: one listening connection, closed
    with the last watch."""
    journals = [pg.open("j"), pg.open("j")]
    watches = [
        journals[i % 2].watch(f"run-{i % 3}", lambda _event: None, poll=30) for i in range(6)
    ]
    try:
        assert _until(lambda: all(w.mode == "notify" for w in watches), 5)
        assert _listeners(pg.direct_url("j")) == 1
    finally:
        for watch in watches:
            watch.stop()
    assert _until(lambda: _listeners(pg.direct_url("j")) == 0, 5)


async def test_a_connection_lost_mid_write_says_so_and_the_step_runs_again_on_resume(
    postgres_service: str | None,
) -> None:
    """The server ends the journal's connection between steps: the next step's write is
    journal_connection_lost (not SQLite's advice, no password shown), and reopening the
    execution runs that step again while the first is served from the log."""
    if postgres_service is None:
        services.unavailable(f"PostgreSQL at {services.postgres_url()} is not reachable")
    assert postgres_service is not None
    url, schema = services.fresh_schema_url(postgres_service)
    secret = url.replace("postgresql://postgres@", "postgresql://postgres:s3cret-word@")
    assert secret != url
    calls: list[int] = []

    def step(x: int) -> int:
        calls.append(x)
        return x + 1

    journal = Journal(secret, pool_size=1)
    try:
        execution = journal.execution("r")
        assert await execution.execute("a", step, 1) == 2
        pid = journal._pg_pool.execute("SELECT pg_backend_pid()").fetchone()[0]
        _terminate(postgres_service, pid)
        with pytest.raises(JournalError) as info:
            await execution.execute("b", step, 2)
        assert info.value.code == "journal_connection_lost"
        assert "lost" in info.value.message
        assert "runs again" in info.value.message
        assert "s3cret-word" not in info.value.message
        assert "disk" not in info.value.message
        resumed = journal.execution("r")
        assert await resumed.execute("a", step, 1) == 2  # served from the log
        assert await resumed.execute("b", step, 2) == 3  # runs again
        assert calls == [1, 2, 2]
    finally:
        journal.close()
        services.drop_schema(postgres_service, schema)


def test_a_read_on_a_connection_the_server_ended_is_tried_once_more(
    pg: JournalBackend,
) -> None:
    """The server ends the journal's idle connection: the next read runs again on a new one
    (reading changes nothing), where a write says the connection was lost."""
    journal = pg.open("j", pool_size=1)
    asyncio.run(journal.execution("r").execute("a", _double, 1))
    _end_sessions(pg, "j", journal._backend)
    assert [e.kind for e in journal.events("r")][-1] == "step_completed"
    assert len(journal.executions()) == 1


def _end_sessions(pg: JournalBackend, name: str, backend: Any) -> None:
    """End the server session behind the journal's connection: directly, the one its borrowed
    connection is on (the database is shared with other tests); behind PgBouncer, every session
    on the test's own database but the one asking."""
    with psycopg.connect(pg.direct_url(name), autocommit=True) as conn:
        if pg.name == "postgres":
            pid = backend.conn.execute("SELECT pg_backend_pid()").fetchall()[0][0]
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        else:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND datname = current_database()"
            )


def test_a_read_finding_broken_connections_again_and_again_tries_up_to_four(
    pg: JournalBackend,
) -> None:
    """Each of a read's first three tries finds its connection's server session ended (a
    restarted server behind a pooler hands out its dead sessions one by one): the fourth
    answers; a read whose every try fails says the connection was lost, after four."""
    journal = pg.open("j", pool_size=1)
    backend = journal._backend
    asyncio.run(journal.execution("r").execute("a", _double, 1))
    tries: list[int] = []

    def read_after_ending(times: int) -> Any:
        def query() -> Any:
            tries.append(1)
            if len(tries) <= times:
                _end_sessions(pg, "j", backend)
            return backend.conn.execute("SELECT count(*) FROM events").fetchall()

        with backend.reading():
            return backend.read(query)

    assert read_after_ending(3)[0][0] >= 1
    if pg.name == "postgres":  # behind PgBouncer a try may get a fresh session at once
        assert len(tries) == 4
    assert 1 <= len(tries) <= 4
    if pg.name == "postgres":
        tries.clear()
        with pytest.raises(JournalError) as info:
            read_after_ending(10)
        assert info.value.code == "journal_connection_lost"
        assert len(tries) == 4
    journal.close()


def test_journals_opening_a_new_database_at_once_migrate_it_once(pg: JournalBackend) -> None:
    """Eight journals opened at the same moment on an empty database (through the pooler too):
    every one opens, and each migration is recorded once (a transaction-scoped lock orders them)."""
    url = pg.url("fresh")
    barrier = threading.Barrier(8)
    opened: list[Any] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        barrier.wait()
        try:
            opened.append(Journal(url))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for journal in opened:
        journal.close()
    assert errors == []
    assert len(opened) == 8
    with psycopg.connect(pg.direct_url("fresh")) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM loom_journal_migrations").fetchall()]
    assert sorted(names) == sorted(name for name, _ in PG_MIGRATIONS)


def test_options_in_the_url_through_pgbouncer_is_a_pooler_error_with_the_remedy(
    bounced: JournalBackend,
) -> None:
    """PgBouncer passes no ?options= (a search_path): journal_pooler_error saying what to do."""
    url = bounced.url("j") + "?options=-csearch_path%3Delsewhere"
    with pytest.raises(JournalError) as info:
        Journal(url, timeout=5)
    assert info.value.code == "journal_pooler_error"
    assert "search_path" in info.value.message
    assert "ALTER ROLE" in info.value.message


def test_a_read_failure_names_the_server_without_its_password(
    postgres_service: str | None,
) -> None:
    """A read the server refuses is journal_unavailable with its reason; the URL's password is
    not in the message or its details."""
    if postgres_service is None:
        services.unavailable(f"PostgreSQL at {services.postgres_url()} is not reachable")
    assert postgres_service is not None
    url, schema = services.fresh_schema_url(postgres_service)
    secret = url.replace("postgresql://postgres@", "postgresql://postgres:s3cret-word@")
    journal = Journal(secret)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ALTER TABLE events RENAME TO events_moved")
        with pytest.raises(JournalError) as info:
            journal.events("r")
        assert info.value.code == "journal_unavailable"
        assert "events" in info.value.message
        assert "s3cret-word" not in info.value.message
        assert "s3cret-word" not in repr(info.value.details)
    finally:
        journal.close()
        services.drop_schema(postgres_service, schema)


def test_listen_url_is_postgresql_only_and_read_from_the_environment(
    pg: JournalBackend, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """listen_url on a SQLite journal is refused; a PostgreSQL journal takes
    $LOOM_JOURNAL_LISTEN_URL when not given one; a URL that is not PostgreSQL's is refused."""
    with pytest.raises(JournalError) as refused:
        Journal(str(tmp_path / "j.sqlite"), listen_url=pg.direct_url("j"))
    assert refused.value.code == "invalid_argument"
    monkeypatch.setenv("LOOM_JOURNAL_LISTEN_URL", pg.direct_url("j"))
    journal = Journal(pg.url("j"))
    assert journal.listen_url == pg.direct_url("j")
    journal.close()
    with pytest.raises(LoomError) as wrong:
        Journal(pg.url("j"), listen_url="http://not-a-database")
    assert wrong.value.code == "invalid_journal_url"


def test_a_watch_retries_a_look_that_failed_on_the_connection() -> None:
    """A look that fails on the connection (lost, refused, the pooler) is kept in watch.trouble
    and retried at the next poll; the watch goes on and delivers; any other error ends it."""
    from loom_nb.journal import JournalWatch
    from loom_nb.journal._watch import PollListener

    class Flaky:
        """A journal whose first two looks fail on the connection, then one with an event."""

        def __init__(self, then: BaseException | None) -> None:
            self.looks = 0
            self._then = then

        def _listen(self, execution_id: str) -> PollListener:
            return PollListener()

        def events_after(self, execution_id: str, seq: int, **_: Any) -> list[Any]:
            self.looks += 1
            if self.looks <= 2:
                raise JournalError("lost", code="journal_connection_lost")
            if self.looks == 3 and self._then is not None:
                raise self._then
            return [type("E", (), {"seq": 1})()] if self.looks == 3 else []

    flaky = Flaky(None)
    got: list[Any] = []
    watch = JournalWatch(flaky, "r", got.append, poll=0.02)  # type: ignore[arg-type]
    try:
        assert _until(lambda: len(got) == 1, 5)
        assert watch.running
        assert watch.trouble is None
        assert watch.error is None
    finally:
        watch.stop()
    broken = Flaky(JournalError("damaged", code="journal_corrupt"))
    ended = JournalWatch(broken, "r", got.append, poll=0.02)  # type: ignore[arg-type]
    assert _until(lambda: not ended.running, 5)
    assert isinstance(ended.error, JournalError)
    assert ended.error.code == "journal_corrupt"
    assert isinstance(ended.trouble, JournalError)
    assert ended.trouble.code == "journal_connection_lost"
