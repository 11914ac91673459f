"""The journal's SQLite schema, as an ordered list of small migrations.

Each migration is a function that takes a connection and issues DDL; ``migrate`` runs, inside
one transaction, every migration whose name is not yet in ``loom_journal_migrations``. A new
schema change is one more function appended to ``MIGRATIONS``, never an edit to an old one, so
a journal file written by an older version upgrades in place.

The log is append-only by construction, not by convention: triggers refuse UPDATE and DELETE on
``events``. The columns are plain SQL types (integer, text, real) so the same shape ports to
PostgreSQL; the triggers and pragmas are the only SQLite-specific parts and live here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime

__all__ = ["MIGRATIONS", "migrate"]


def m001_events(conn: sqlite3.Connection) -> None:
    """The append-only event log, one row per event, ordered by ``seq``."""
    conn.execute(
        """
        CREATE TABLE events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            execution_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            step_id TEXT,
            position INTEGER,
            payload TEXT NOT NULL,
            created TEXT NOT NULL
        )
        """
    )
    conn.execute("CREATE INDEX events_by_execution ON events (execution_id, seq)")


def m002_append_only(conn: sqlite3.Connection) -> None:
    """Refuse UPDATE and DELETE on ``events``: history is never rewritten."""
    for action in ("UPDATE", "DELETE"):
        conn.execute(
            f"""
            CREATE TRIGGER events_no_{action.lower()} BEFORE {action} ON events
            BEGIN SELECT RAISE(ABORT, 'the journal is append-only'); END
            """
        )


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [m001_events, m002_append_only]
"""Every migration, oldest first; the function name is the migration's identity."""


def migrate(conn: sqlite3.Connection) -> list[str]:
    """Apply the migrations this database lacks, in order, in one transaction; return their names.

    The connection must be in autocommit mode (``isolation_level=None``). ``BEGIN IMMEDIATE``
    takes the write lock first, so two processes opening a new journal at once cannot both
    create the tables.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS loom_journal_migrations "
            "(name TEXT PRIMARY KEY, applied TEXT NOT NULL)"
        )
        done = {row[0] for row in conn.execute("SELECT name FROM loom_journal_migrations")}
        applied: list[str] = []
        for migration in MIGRATIONS:
            if migration.__name__ in done:
                continue
            migration(conn)
            conn.execute(
                "INSERT INTO loom_journal_migrations (name, applied) VALUES (?, ?)",
                (migration.__name__, datetime.now(UTC).isoformat()),
            )
            applied.append(migration.__name__)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return applied
