"""The journal's SQLite schema, as an ordered list of small migrations.

Each migration is a function that takes a connection and issues DDL; ``migrate`` runs, inside
one transaction, every migration whose name is not yet in ``loom_journal_migrations``. A new
schema change is one more function appended to ``MIGRATIONS``, never an edit to an old one, so
a journal file written by an older version upgrades in place.

The log is append-only by construction, not by convention: triggers refuse UPDATE and DELETE on
``events``. The columns are plain SQL types (integer, text, real) so the same shape ports to
PostgreSQL; the triggers and pragmas are the only SQLite-specific parts and live here.

The shape another backend mirrors (issue 15):

- ``events(seq, execution_id, kind, step_id, position, payload, created, ordinal)``: ``ordinal``
  numbers an execution's events 0, 1, 2 ... and ``(execution_id, ordinal)`` is UNIQUE, so two
  writers can never interleave rows in one execution: the second insert of an ordinal fails.
- ``leases(execution_id PRIMARY KEY, token, host, pid, expires, acquired)``: who may write the
  execution (see ``_lease``). Unlike ``events``, a lease row is updated and deleted.
- ``content_pins(execution_id, position, address, created)``: the stored content a step in
  flight reads, written with its start and deleted with its outcome (see ``_content_pins``),
  looked up by address.
- ``work_items(queue, item, seq, state, worker, token, lease_until, attempts, error, updated)``:
  the items of work queues (issue 32, ``_work``), one row per queue and item, updated as workers
  claim, extend, complete and fail them.

A database that records a migration this code does not know was written by a newer loom_nb;
it is refused at open (``journal_too_new``) rather than written with an older idea of the shape.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime

from loom_nb.errors import JournalError

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


def _refuse(conn: sqlite3.Connection, action: str) -> None:
    conn.execute(
        f"""
        CREATE TRIGGER events_no_{action.lower()} BEFORE {action} ON events
        BEGIN SELECT RAISE(ABORT, 'the journal is append-only'); END
        """
    )


def m002_append_only(conn: sqlite3.Connection) -> None:
    """Refuse UPDATE and DELETE on ``events``: history is never rewritten."""
    for action in ("UPDATE", "DELETE"):
        _refuse(conn, action)


def m003_event_ordinal(conn: sqlite3.Connection) -> None:
    """Number each execution's events and make (execution_id, ordinal) unique: one writer's rows.

    Existing rows are numbered in ``seq`` order (the only time the append-only trigger is lifted,
    inside the migration's transaction).
    """
    conn.execute("ALTER TABLE events ADD COLUMN ordinal INTEGER")
    conn.execute("DROP TRIGGER events_no_update")
    conn.execute(
        "UPDATE events SET ordinal = (SELECT COUNT(*) FROM events AS earlier "
        "WHERE earlier.execution_id = events.execution_id AND earlier.seq < events.seq)"
    )
    _refuse(conn, "UPDATE")
    conn.execute("CREATE UNIQUE INDEX events_by_ordinal ON events (execution_id, ordinal)")


def m004_leases(conn: sqlite3.Connection) -> None:
    """The writer lease of each execution being run live (one row per execution)."""
    conn.execute(
        """
        CREATE TABLE leases (
            execution_id TEXT PRIMARY KEY,
            token TEXT NOT NULL,
            host TEXT NOT NULL,
            pid INTEGER NOT NULL,
            expires REAL NOT NULL,
            acquired TEXT NOT NULL
        )
        """
    )


def m005_content_pins(conn: sqlite3.Connection) -> None:
    """The content each step in flight reads (issue 30), so the content sweep keeps it."""
    conn.execute(
        """
        CREATE TABLE content_pins (
            execution_id TEXT NOT NULL,
            position INTEGER NOT NULL,
            address TEXT NOT NULL,
            created REAL NOT NULL,
            PRIMARY KEY (execution_id, position, address)
        )
        """
    )
    conn.execute("CREATE INDEX content_pins_by_address ON content_pins (address)")


def m006_work_items(conn: sqlite3.Connection) -> None:
    """Work queues (issue 32): items several workers claim under a lease (see ``_work``)."""
    conn.execute(
        """
        CREATE TABLE work_items (
            queue TEXT NOT NULL,
            item TEXT NOT NULL,
            seq INTEGER NOT NULL,
            state TEXT NOT NULL,
            worker TEXT,
            token TEXT,
            lease_until REAL NOT NULL,
            attempts INTEGER NOT NULL,
            error TEXT,
            updated REAL NOT NULL,
            PRIMARY KEY (queue, item)
        )
        """
    )
    conn.execute("CREATE INDEX work_items_by_state ON work_items (queue, state, seq)")


def m007_events_by_rowid(conn: sqlite3.Connection) -> None:
    """Number events by rowid, not ``AUTOINCREMENT``: the same ``seq`` values, one write less per row.

    ``AUTOINCREMENT`` only differs from a plain ``INTEGER PRIMARY KEY`` when the row with the
    largest ``seq`` is deleted (its number is then never used again), which the append-only
    triggers refuse; what it costs is an update of ``sqlite_sequence`` with every insert, about a
    fifth of a journaled step's SQL time. The table is rebuilt with every row and its ``seq``
    kept (once, inside the migration's transaction: a large journal takes a moment to open the
    first time), then its indexes and triggers are made again.
    """
    conn.execute(
        """
        CREATE TABLE events_by_rowid (
            seq INTEGER PRIMARY KEY,
            execution_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            step_id TEXT,
            position INTEGER,
            payload TEXT NOT NULL,
            created TEXT NOT NULL,
            ordinal INTEGER
        )
        """
    )
    conn.execute(
        "INSERT INTO events_by_rowid "
        "(seq, execution_id, kind, step_id, position, payload, created, ordinal) "
        "SELECT seq, execution_id, kind, step_id, position, payload, created, ordinal "
        "FROM events ORDER BY seq"
    )
    for action in ("update", "delete"):
        conn.execute(f"DROP TRIGGER events_no_{action}")
    conn.execute("DROP TABLE events")
    conn.execute("DELETE FROM sqlite_sequence WHERE name = 'events'")
    conn.execute("ALTER TABLE events_by_rowid RENAME TO events")
    conn.execute("CREATE INDEX events_by_execution ON events (execution_id, seq)")
    conn.execute("CREATE UNIQUE INDEX events_by_ordinal ON events (execution_id, ordinal)")
    m002_append_only(conn)


def m008_one_index_per_execution(conn: sqlite3.Connection) -> None:
    """Drop ``events_by_execution``: ``events_by_ordinal`` serves every read of one execution.

    Within an execution, ``ordinal`` order is ``seq`` order: an execution's rows are appended at
    its next ordinal by its one writer (a row another writer got in first makes the insert fail
    on the unique ``(execution_id, ordinal)``, it is never placed behind it), imports and forks
    insert theirs in ordinal order, and ``m003_event_ordinal`` numbered older rows in ``seq``
    order. So ``(execution_id, ordinal)`` finds an execution's events, in order, as the
    ``(execution_id, seq)`` index did, and every append kept two indexes up to date for one
    (measured: the journal's two-row step INSERT alone goes from 0.61x to 0.86x of a bare
    one-row insert loop's rate with the second index gone, ``benchmarks/bench_journal.py``).
    """
    conn.execute("DROP INDEX IF EXISTS events_by_execution")


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [
    m001_events,
    m002_append_only,
    m003_event_ordinal,
    m004_leases,
    m005_content_pins,
    m006_work_items,
    m007_events_by_rowid,
    m008_one_index_per_execution,
]
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
        unknown = sorted(done - {m.__name__ for m in MIGRATIONS})
        if unknown:
            raise JournalError(
                f"the journal was written by a newer loom_nb (it has migrations {unknown} this "
                "version does not know). Upgrade loom_nb to open it, or replay from a recording.",
                code="journal_too_new",
            )
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
