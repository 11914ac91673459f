"""The PostgreSQL schema the journal and the S3 store's index share, as ordered migrations (issue 16).

An ordered list of named steps (``m001_events`` ... ``m004_leases``, the same shapes as SQLite's,
then the PostgreSQL-only ``pg001_notify`` and ``pg002_store_tenants``, then
``m005_content_pins`` and ``m006_work_items``, SQLite's shapes again, then ``pg003_work_notify``
and ``pg004_listened_notify``: appends and work-queue changes notify only while a listener is
registered, then ``m008_one_index_per_execution``, SQLite's again), recorded in
``loom_journal_migrations`` and checked in one transaction under a transaction-scoped advisory
lock, so two processes opening a new database at once do not both create it, also behind a
transaction pooler (issue 33); a database with a migration this code does not know (a newer
loom_nb wrote it) is refused (``journal_too_new``). The list is one for both users: either may
be the first to open a database.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import psycopg

from loom_nb.errors import JournalError

__all__ = ["NOTIFY_CHANNEL", "PG_MIGRATIONS", "migrate"]

NOTIFY_CHANNEL = "loom_journal"
"""The LISTEN/NOTIFY channel an append announces its execution id on (written out in pg001_notify)."""

_MIGRATION_LOCK = 0x6C6F6F6D  # "loom": the advisory lock migrations run under


def _m001_events(cur: psycopg.Cursor[Any]) -> None:
    cur.execute(
        """
        CREATE TABLE events (
            seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            execution_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            step_id TEXT,
            position INTEGER,
            payload TEXT NOT NULL,
            created TEXT NOT NULL
        )
        """
    )
    cur.execute("CREATE INDEX events_by_execution ON events (execution_id, seq)")


def _m002_append_only(cur: psycopg.Cursor[Any]) -> None:
    cur.execute(
        """
        CREATE FUNCTION loom_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'the journal is append-only'; END $$
        """
    )
    cur.execute(
        "CREATE TRIGGER events_no_change BEFORE UPDATE OR DELETE OR TRUNCATE ON events "
        "FOR EACH STATEMENT EXECUTE FUNCTION loom_events_append_only()"
    )


def _m003_event_ordinal(cur: psycopg.Cursor[Any]) -> None:
    cur.execute("ALTER TABLE events ADD COLUMN ordinal INTEGER")
    cur.execute("ALTER TABLE events DISABLE TRIGGER events_no_change")
    cur.execute(
        "UPDATE events SET ordinal = (SELECT COUNT(*) FROM events AS earlier "
        "WHERE earlier.execution_id = events.execution_id AND earlier.seq < events.seq)"
    )
    cur.execute("ALTER TABLE events ENABLE TRIGGER events_no_change")
    cur.execute("CREATE UNIQUE INDEX events_by_ordinal ON events (execution_id, ordinal)")


def _m004_leases(cur: psycopg.Cursor[Any]) -> None:
    cur.execute(
        """
        CREATE TABLE leases (
            execution_id TEXT PRIMARY KEY,
            token TEXT NOT NULL,
            host TEXT NOT NULL,
            pid INTEGER NOT NULL,
            expires DOUBLE PRECISION NOT NULL,
            acquired TEXT NOT NULL
        )
        """
    )


def _pg001_notify(cur: psycopg.Cursor[Any]) -> None:
    # One notification per execution per INSERT statement (not per row): a step's pair of
    # events and a whole import announce themselves once.
    cur.execute(
        """
        CREATE FUNCTION loom_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('loom_journal', ids.execution_id)
            FROM (SELECT DISTINCT execution_id FROM inserted) AS ids;
            RETURN NULL;
        END $$
        """
    )
    cur.execute(
        "CREATE TRIGGER events_notify AFTER INSERT ON events REFERENCING NEW TABLE AS inserted "
        "FOR EACH STATEMENT EXECUTE FUNCTION loom_events_notify()"
    )


def _pg002_store_tenants(cur: psycopg.Cursor[Any]) -> None:
    # The S3 content store's per-tenant index when it lives here (S3ContentStore(index=...)):
    # one row per store, blob and tenant; times are microseconds since the epoch; ``nonce``
    # changes with every put, so an erase can tell a put that landed while it ran.
    cur.execute(
        """
        CREATE TABLE loom_store_tenants (
            store TEXT NOT NULL,
            digest TEXT NOT NULL,
            tenant TEXT NOT NULL,
            size BIGINT NOT NULL,
            created BIGINT NOT NULL,
            put BIGINT NOT NULL,
            nonce TEXT NOT NULL,
            PRIMARY KEY (store, digest, tenant)
        )
        """
    )


def _m005_content_pins(cur: psycopg.Cursor[Any]) -> None:
    # The content each step in flight reads (issue 30), so the content sweep keeps it.
    cur.execute(
        """
        CREATE TABLE content_pins (
            execution_id TEXT NOT NULL,
            position INTEGER NOT NULL,
            address TEXT NOT NULL,
            created DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (execution_id, position, address)
        )
        """
    )
    cur.execute("CREATE INDEX content_pins_by_address ON content_pins (address)")


def _m006_work_items(cur: psycopg.Cursor[Any]) -> None:
    # Work queues (issue 32): items several workers claim under a lease (journal/_work.py).
    cur.execute(
        """
        CREATE TABLE work_items (
            queue TEXT NOT NULL,
            item TEXT NOT NULL,
            seq INTEGER NOT NULL,
            state TEXT NOT NULL,
            worker TEXT,
            token TEXT,
            lease_until DOUBLE PRECISION NOT NULL,
            attempts INTEGER NOT NULL,
            error TEXT,
            updated DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (queue, item)
        )
        """
    )
    cur.execute("CREATE INDEX work_items_by_state ON work_items (queue, state, seq)")


def _pg003_work_notify(cur: psycopg.Cursor[Any]) -> None:
    # A change to a queue's items announces 'loom-work:<queue>' on the journal's channel, once
    # per queue per statement, so a progress bar following the counts wakes at once.
    cur.execute(
        """
        CREATE FUNCTION loom_work_notify() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('loom_journal', 'loom-work:' || names.queue)
            FROM (SELECT DISTINCT queue FROM changed) AS names;
            RETURN NULL;
        END $$
        """
    )
    for event in ("INSERT", "UPDATE"):
        cur.execute(
            f"CREATE TRIGGER work_items_{event.lower()}_notify AFTER {event} ON work_items "
            "REFERENCING NEW TABLE AS changed FOR EACH STATEMENT "
            "EXECUTE FUNCTION loom_work_notify()"
        )


def _pg004_listened_notify(cur: psycopg.Cursor[Any]) -> None:
    # NOTIFY serializes the commits of every notifying transaction on the server (PostgreSQL
    # holds one cluster-wide lock from pre-commit to the end of the commit, to keep the queue
    # in commit order), so concurrent writers queue there even when nobody listens. Each
    # process's listening connection now registers its backend here (``journal._listener``);
    # an append (or a work-queue change) notifies only while some listener is registered.
    cur.execute("CREATE TABLE loom_listeners (pid INTEGER PRIMARY KEY, since TEXT NOT NULL)")
    cur.execute(
        """
        CREATE OR REPLACE FUNCTION loom_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF EXISTS (SELECT 1 FROM loom_listeners) THEN
                PERFORM pg_notify('loom_journal', ids.execution_id)
                FROM (SELECT DISTINCT execution_id FROM inserted) AS ids;
            END IF;
            RETURN NULL;
        END $$
        """
    )
    # The work queues' announcements likewise (their follow listens through the same hub).
    cur.execute(
        """
        CREATE OR REPLACE FUNCTION loom_work_notify() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF EXISTS (SELECT 1 FROM loom_listeners) THEN
                PERFORM pg_notify('loom_journal', 'loom-work:' || names.queue)
                FROM (SELECT DISTINCT queue FROM changed) AS names;
            END IF;
            RETURN NULL;
        END $$
        """
    )


def _m008_one_index_per_execution(cur: psycopg.Cursor[Any]) -> None:
    # SQLite's m008: events_by_ordinal serves every read of one execution, in order (ordinal
    # order is seq order within an execution), so an append updates one index, not two.
    cur.execute("DROP INDEX IF EXISTS events_by_execution")


PG_MIGRATIONS: list[tuple[str, Callable[[psycopg.Cursor[Any]], None]]] = [
    ("m001_events", _m001_events),
    ("m002_append_only", _m002_append_only),
    ("m003_event_ordinal", _m003_event_ordinal),
    ("m004_leases", _m004_leases),
    ("pg001_notify", _pg001_notify),
    ("pg002_store_tenants", _pg002_store_tenants),
    ("m005_content_pins", _m005_content_pins),
    ("m006_work_items", _m006_work_items),
    ("pg003_work_notify", _pg003_work_notify),
    ("pg004_listened_notify", _pg004_listened_notify),
    ("m008_one_index_per_execution", _m008_one_index_per_execution),
]
"""The PostgreSQL schema, oldest first; names shared with the SQLite list mean the same shape."""


def migrate(cur: psycopg.Cursor[Any]) -> list[str]:
    """Apply the missing migrations in order, under an advisory lock, in the caller's transaction."""
    cur.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
    cur.execute(
        "CREATE TABLE IF NOT EXISTS loom_journal_migrations "
        "(name TEXT PRIMARY KEY, applied TEXT NOT NULL)"
    )
    cur.execute("SELECT name FROM loom_journal_migrations")
    done = {row[0] for row in cur.fetchall()}
    unknown = sorted(done - {name for name, _ in PG_MIGRATIONS})
    if unknown:
        raise JournalError(
            f"the journal was written by a newer loom_nb (it has migrations {unknown} this "
            "version does not know). Upgrade loom_nb to open it, or replay from a recording.",
            code="journal_too_new",
        )
    applied = []
    for name, migration in PG_MIGRATIONS:
        if name in done:
            continue
        migration(cur)
        cur.execute(
            "INSERT INTO loom_journal_migrations (name, applied) VALUES (%s, %s)",
            (name, datetime.now(UTC).isoformat()),
        )
        applied.append(name)
    return applied
