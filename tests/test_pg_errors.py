"""Connection failures by kind: each has its own code and remedy, and none gets SQLite's advice."""

from __future__ import annotations

import psycopg
import pytest

from loom_nb._pg import connection_error
from loom_nb._pg_errors import diagnose, explain

REFUSED = (
    'connection failed: connection to server at "127.0.0.1", port 1 failed: Connection refused'
)
TOO_MANY = (
    'connection failed: connection to server at "127.0.0.1", port 5432 failed: FATAL:  sorry, '
    "too many clients already"
)
ROLE_LIMIT = 'connection failed: FATAL:  too many connections for role "class"'
MAX_CLIENT = "connection failed: FATAL:  no more connections allowed (max_client_conn)"
OPTIONS = "connection failed: FATAL:  unsupported startup parameter: options"
NO_SERVER = "ERROR:  pgbouncer cannot connect to server"
WAITED = "ERROR:  query_wait_timeout"
LOST = "consuming input failed: server closed the connection unexpectedly"


@pytest.mark.parametrize(
    ("exc", "connecting", "kind"),
    [
        (psycopg.OperationalError(REFUSED), True, "unavailable"),
        (psycopg.OperationalError(TOO_MANY), True, "too_many_connections"),
        (psycopg.OperationalError(ROLE_LIMIT), True, "too_many_connections"),
        (psycopg.OperationalError(MAX_CLIENT), True, "pooler_error"),
        (psycopg.OperationalError(OPTIONS), True, "pooler_error"),
        (psycopg.OperationalError(NO_SERVER), False, "pooler_error"),
        (psycopg.OperationalError(WAITED), False, "pooler_error"),
        (
            psycopg.errors.DuplicatePreparedStatement('prepared statement "_pg3_0" already exists'),
            False,
            "pooler_error",
        ),
        (
            psycopg.errors.ProtocolViolation(
                'bind message supplies 14 parameters, but prepared statement "_pg3_0" requires 2'
            ),
            False,
            "pooler_error",
        ),
        (psycopg.OperationalError(LOST), False, "connection_lost"),
        (
            psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
            False,
            "connection_lost",
        ),
        (psycopg.OperationalError("the connection is closed"), False, "connection_lost"),
        (psycopg.errors.UniqueViolation("duplicate key"), False, None),
        (psycopg.errors.UndefinedTable('relation "events" does not exist'), False, None),
        (ValueError("not a database error"), False, None),
    ],
)
def test_each_failure_has_its_kind(exc: BaseException, connecting: bool, kind: str | None) -> None:
    """The kind comes from the SQLSTATE or, for a failed connection and the pooler, the words."""
    assert diagnose(exc, connecting=connecting) == kind


def test_each_kind_has_its_journal_code_and_remedy() -> None:
    """Full server: use a pooler or raise max_connections; pooler: its own setting; lost: resume re-runs."""
    where = "postgresql://loom:***@db:5432/class"
    full = connection_error(psycopg.OperationalError(TOO_MANY), where=where, connecting=True)
    assert full.code == "journal_too_many_connections"
    assert "PgBouncer" in full.message
    assert "max_connections" in full.message
    assert "listen_url" in full.message
    clients = connection_error(psycopg.OperationalError(MAX_CLIENT), where=where, connecting=True)
    assert clients.code == "journal_pooler_error"
    assert "max_client_conn" in clients.message
    options = connection_error(psycopg.OperationalError(OPTIONS), where=where, connecting=True)
    assert options.code == "journal_pooler_error"
    assert "search_path" in options.message
    lost = connection_error(
        psycopg.OperationalError(LOST), where=where, connecting=False, doing="write"
    )
    assert lost.code == "journal_connection_lost"
    assert "lost" in lost.message
    assert "runs again" in lost.message
    refused = connection_error(psycopg.OperationalError(REFUSED), where=where, connecting=True)
    assert refused.code == "journal_unavailable"
    for error in (full, clients, options, lost, refused):
        assert where in error.message
        assert "disk" not in error.message
        assert "locked" not in error.message


def test_a_statement_the_server_refused_is_not_a_connection_failure() -> None:
    """A refused write keeps journal_write_failed, with the server's reason and no SQLite advice."""
    refused = psycopg.errors.InsufficientPrivilege("permission denied for table events")
    assert explain(refused, where="h:5432", connecting=False) is None
    error = connection_error(refused, where="h:5432", connecting=False, doing="write")
    assert error.code == "journal_write_failed"
    assert "permission denied" in error.message
    assert "disk" not in error.message
