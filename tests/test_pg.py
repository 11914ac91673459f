"""The PostgreSQL database the journal and the store index share: URLs, the pool, the schema."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from loom_nb._pg import (
    PG_MIGRATIONS,
    Pool,
    first_line,
    is_postgres_url,
    location,
    open_pool,
    redact,
)
from loom_nb.errors import JournalError
from tests import services


def test_urls_are_recognised_and_shown_without_a_password() -> None:
    """postgresql:// and postgres:// name a database; messages show host:port and no password."""
    assert is_postgres_url("postgresql://u@h/db")
    assert is_postgres_url("postgres://h/db")
    assert not is_postgres_url("sqlite.db")
    assert not is_postgres_url(None)
    assert redact("postgresql://u:secret@h:5433/db") == "postgresql://u:***@h:5433/db"
    assert redact("postgresql://u@h/db") == "postgresql://u@h/db"
    assert location("postgresql://u:secret@h:5433/db") == "h:5433"
    assert location("postgresql:///db") == "localhost:5432"
    assert first_line(ValueError("one\ntwo")) == "one"
    assert first_line(ValueError()) == "ValueError"


@pytest.fixture
def pg_url(postgres_service: str | None) -> Iterator[str]:
    """A URL of a fresh schema on the test server (dropped afterwards)."""
    if postgres_service is None:
        url = services.postgres_url()
        services.unavailable(services.postgres_reachable(url) or f"PostgreSQL at {url}")
    assert postgres_service is not None
    url, schema = services.fresh_schema_url(postgres_service)
    yield url
    services.drop_schema(postgres_service, schema)


def test_a_pool_migrates_and_speaks_question_marks(pg_url: str) -> None:
    """open_pool applies every migration once; statements take ? placeholders; scopes keep one connection."""
    pool = open_pool(pg_url, synchronous="NORMAL", timeout=5.0, size=2)
    assert isinstance(pool, Pool)
    names = [row[0] for row in pool.execute("SELECT name FROM loom_journal_migrations").fetchall()]
    assert sorted(names) == sorted(name for name, _ in PG_MIGRATIONS)
    assert pool.execute("SELECT ?::int + 1", (41,)).fetchone() == (42,)
    with pool:
        pool.execute("BEGIN")  # takes the journal's write lock too
        pool.execute("CREATE TEMP TABLE scoped (x int)")
        pool.execute("ROLLBACK")
    with pool:  # NORMAL: a writing transaction commits without waiting for the flush
        pool.execute("BEGIN")
        assert pool.execute("SHOW synchronous_commit").fetchone() == ("off",)
        pool.execute("ROLLBACK")
    pool.close()
    again = open_pool(pg_url, synchronous="FULL", timeout=5.0, size=1)  # nothing left to apply
    with again:  # each writing transaction sets it (a direct session keeps it too)
        again.execute("BEGIN")
        assert again.execute("SHOW synchronous_commit").fetchone() == ("on",)
        again.execute("ROLLBACK")
    again.close()


def test_an_unknown_migration_is_journal_too_new(pg_url: str) -> None:
    """A database recording a migration this code does not know is refused."""
    open_pool(pg_url, synchronous="NORMAL", timeout=5.0, size=1).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO loom_journal_migrations VALUES ('m999_future', 'now')")
    with pytest.raises(JournalError) as info:
        open_pool(pg_url, synchronous="NORMAL", timeout=5.0, size=1)
    assert info.value.code == "journal_too_new"


def test_a_pool_left_open_is_closed_when_collected_in_its_own_worker(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Pool nobody closed is closed when collected, even by a collection in one of its workers.

    psycopg_pool's own ``__del__`` joins the pool's threads, which fails in one of them ("cannot
    join current thread"): the pool is collected where the worker drops its last reference, or
    where a worker's allocation runs the cyclic collector.
    """
    import gc
    import threading
    import weakref

    from psycopg_pool import ConnectionPool

    trouble: list[BaseException | None] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda info: trouble.append(info.exc_value))
    monkeypatch.setattr(threading, "excepthook", lambda args: trouble.append(args.exc_value))
    dropped = threading.Event()
    collected = threading.Event()

    def in_the_worker(conn: psycopg.Connection[Any]) -> None:
        """Runs in the pool's worker as it makes its connection: collects the dropped Pool."""
        if dropped.wait(10):
            gc.collect()
            collected.set()

    raw: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
        pg_url, min_size=1, max_size=1, configure=in_the_worker, name="loom-left-open",
        num_workers=1, open=False,
    )  # fmt: skip
    watched = weakref.ref(raw)
    enabled = gc.isenabled()
    gc.disable()  # only the worker's collection may find the cycle
    try:
        raw.open(wait=False)
        pool = Pool(raw, "test", "test")
        pool.cycle = pool  # type: ignore[attr-defined]  # freed by the cyclic collector only
        del pool, raw
        dropped.set()
        assert collected.wait(10), "the worker never ran its collection"
        deadline = time.monotonic() + 10
        while watched() is not None and time.monotonic() < deadline:
            gc.collect()
            time.sleep(0.02)
        left = [t.name for t in threading.enumerate() if t.name.startswith("loom-left-open")]
        while left and time.monotonic() < deadline:
            time.sleep(0.02)
            left = [t.name for t in threading.enumerate() if t.name.startswith("loom-left-open")]
    finally:
        if enabled:
            gc.enable()
    assert trouble == []
    assert watched() is None, "the pool was never freed"
    assert left == [], f"the pool's threads still run: {left}"
