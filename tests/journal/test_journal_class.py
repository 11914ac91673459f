"""A class on one PostgreSQL (issue 33): 300 kernels through PgBouncer, and what happens without it.

300 student kernels are six processes of fifty kernels, each holding its journal open for the
session, as in a classroom; each has a conversation of eight turns. Through PgBouncer in
transaction mode (a pool of 10 server connections) every turn is journaled. Directly against a
server with fewer connection slots than kernels (here a role's CONNECTION LIMIT, so the test
needs no server of its own), the kernels that find no slot get ``journal_too_many_connections``
with the remedy, never SQLite's advice.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests import services
from tests.conftest import JournalBackend, pooler_or_unavailable

sys.path.insert(0, str(Path(__file__).parent))

from class_worker import run_class

PROCESSES = 6
KERNELS = 50
TURNS = 8


@pytest.fixture
def bounced(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JournalBackend]:
    """Journals through the run's PgBouncer, each in a database of its own."""
    pooler = pooler_or_unavailable(request)
    backend = JournalBackend("pgbouncer", tmp_path, pooler.server, pooler)
    yield backend
    backend.close()


def _server_backends(direct_url: str) -> int:
    """How many server connections the database of ``direct_url`` has (besides the asker's)."""
    with psycopg.connect(direct_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.slow
def test_300_kernels_through_pgbouncer_journal_every_turn(bounced: JournalBackend) -> None:
    """6 processes x 50 open journals x 8 turns through a pool of 10: no failure, every turn in the log."""
    url = bounced.url("class")
    held: list[int] = []
    reports = run_class(
        url,
        processes=PROCESSES,
        kernels=KERNELS,
        turns=TURNS,
        held=lambda _count: held.append(_server_backends(bounced.direct_url("class"))),
    )
    failures = [f for report in reports for f in report["failures"]]
    assert failures == []
    assert sum(report["opened"] for report in reports) == PROCESSES * KERNELS
    assert sum(report["turns"] for report in reports) == PROCESSES * KERNELS * TURNS
    # 300 kernels held their journals open on at most the pooler's 10 server connections.
    assert held[0] <= 10
    with psycopg.connect(bounced.direct_url("class")) as conn:
        executions, completed = conn.execute(
            "SELECT count(DISTINCT execution_id), "
            "count(*) FILTER (WHERE kind = 'step_completed') FROM events"
        ).fetchone() or (0, 0)
    assert executions == PROCESSES * KERNELS
    assert completed >= PROCESSES * KERNELS * TURNS  # at least one journaled step per turn


@pytest.fixture
def limited(postgres_service: str | None) -> Iterator[str]:
    """A URL as a role that may hold only 40 connections, with a password in it, on a fresh schema.

    The server trusts loopback connections, so the password is never checked: it is there to be
    kept out of every message.
    """
    if postgres_service is None:
        services.unavailable(f"PostgreSQL at {services.postgres_url()} is not reachable")
    assert postgres_service is not None
    role = f"loom_class_{uuid.uuid4().hex[:10]}"
    try:
        with psycopg.connect(postgres_service, autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD 's3cret-word' CONNECTION LIMIT 40")
            conn.execute(f"CREATE SCHEMA {role} AUTHORIZATION {role}")
    except psycopg.errors.InsufficientPrivilege as exc:
        pytest.skip(f"the test user may not create a role: {exc}")
    parts = postgres_service.split("://", 1)[1].split("@", 1)[-1]
    url = f"postgresql://{role}:s3cret-word@{parts}"
    separator = "&" if "?" in url else "?"
    yield f"{url}{separator}options=-csearch_path%3D{role}"
    with psycopg.connect(postgres_service, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,)
        )
        conn.execute(f"DROP SCHEMA {role} CASCADE")
        conn.execute(f"DROP ROLE {role}")


@pytest.mark.slow
def test_the_class_directly_on_too_few_connections_says_so_and_how_to_fix_it(
    limited: str,
) -> None:
    """Directly against 40 slots, the kernels left out get journal_too_many_connections and the
    remedy (a pooler, max_connections, listen_url); those that opened journal every turn."""
    from loom_nb.journal import Journal

    Journal(limited).close()  # the schema, migrated once
    reports = run_class(limited, processes=PROCESSES, kernels=KERNELS, turns=2)
    failures: list[dict[str, Any]] = [f for report in reports for f in report["failures"]]
    opened = sum(report["opened"] for report in reports)
    assert failures, "300 kernels cannot all hold one of 40 connections"
    assert opened + len(failures) == PROCESSES * KERNELS
    assert opened <= 40
    assert {f["at"] for f in failures} == {"open"}
    assert {f["code"] for f in failures} == {"journal_too_many_connections"}
    for f in failures:
        assert "PgBouncer" in f["message"]
        assert "max_connections" in f["message"]
        assert "listen_url" in f["message"]
        assert "s3cret-word" not in f["message"]
        assert "disk" not in f["message"]
    assert sum(report["turns"] for report in reports) == opened * 2
