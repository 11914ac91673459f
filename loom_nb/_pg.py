"""The PostgreSQL database the journal and the S3 store's tenant index share (issue 16), through psycopg 3.

One database holds both: the journal's ``events``, ``leases`` and ``content_pins`` and the
store's ``loom_store_tenants``. Whichever opens it first applies the migrations, an ordered list
of named steps (``m001_events`` ... ``m004_leases``, the same shapes as SQLite's, then the
PostgreSQL-only ``pg001_notify`` and ``pg002_store_tenants``, then ``m005_content_pins``,
SQLite's shape again), recorded in ``loom_journal_migrations`` and checked under an advisory
lock, so two processes opening a new database at once do not both create it; a database with a
migration this code does not know (a newer loom_nb wrote it) is refused (``journal_too_new``).
The list is one for both users: either may be the first to open a database.

Connections. ``open_pool`` returns a ``Pool`` (psycopg_pool) that looks like one DB-API
connection speaking the journal's SQL (``?`` placeholders): each statement, or each ``with pool:``
scope, borrows a connection, so a transaction stays on its connection and threads working on
different executions run side by side. ``BEGIN`` also takes one transaction-scoped advisory lock,
the journal's write lock, where SQLite takes its one write lock (``BEGIN IMMEDIATE``).

This module sits below the store and the journal (DESIGN.md, "Layers") so that both can use it
without one importing the other. Importing it needs psycopg and psycopg-pool.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg_pool import ConnectionPool

from loom_nb.errors import JournalError

__all__ = [
    "NOTIFY_CHANNEL",
    "PG_MIGRATIONS",
    "WRITE_LOCK",
    "Pool",
    "first_line",
    "is_postgres_url",
    "location",
    "open_pool",
    "redact",
]

NOTIFY_CHANNEL = "loom_journal"
"""The LISTEN/NOTIFY channel an append announces its execution id on (written out in pg001_notify)."""

WRITE_LOCK = 0x6C6F6F6D_7772
"""The advisory lock ``BEGIN`` takes: the journal's write lock (SQLite's BEGIN IMMEDIATE)."""

_MIGRATION_LOCK = 0x6C6F6F6D  # "loom": the advisory lock migrations run under


def is_postgres_url(target: object) -> bool:
    """Whether ``target`` names a PostgreSQL database (``postgresql://`` or ``postgres://``)."""
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


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


PG_MIGRATIONS: list[tuple[str, Callable[[psycopg.Cursor[Any]], None]]] = [
    ("m001_events", _m001_events),
    ("m002_append_only", _m002_append_only),
    ("m003_event_ordinal", _m003_event_ordinal),
    ("m004_leases", _m004_leases),
    ("pg001_notify", _pg001_notify),
    ("pg002_store_tenants", _pg002_store_tenants),
    ("m005_content_pins", _m005_content_pins),
]
"""The PostgreSQL schema, oldest first; names shared with the SQLite list mean the same shape."""


def open_pool(url: str, *, synchronous: str, timeout: float, size: int) -> Pool:
    """Migrate the database at ``url`` and open a pool of up to ``size`` connections to it.

    The journal's own connections, and the content store's PostgreSQL index when it is given a
    URL (the schema, migrations included, is one for both).
    """
    commit = "on" if synchronous == "FULL" else "off"
    connect_timeout = max(1, round(timeout))
    try:
        # The first connection is made directly, so an unreachable server fails at once with
        # libpq's reason; it applies the migrations and is then closed.
        conn = psycopg.connect(url, autocommit=True, connect_timeout=connect_timeout)
    except psycopg.Error as exc:
        raise JournalError(
            f"cannot open the journal at {redact(url)}: {first_line(exc)}. Check "
            "that the server is up and the database exists.",
            code="journal_unavailable",
            path=redact(url),
        ) from exc
    try:
        with conn.transaction(), conn.cursor() as cur:
            _migrate(cur)
    except BaseException as exc:
        conn.close()
        if isinstance(exc, psycopg.Error):
            raise JournalError(
                f"cannot open the journal at {redact(url)}: {first_line(exc)}. Check "
                "that the user may create tables in the database (or its search_path schema).",
                code="journal_unavailable",
                path=redact(url),
            ) from exc
        raise
    conn.close()

    def configure(pooled: psycopg.Connection[Any]) -> None:
        pooled.execute(f"SET synchronous_commit = {commit}")

    pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
        url,
        min_size=1,
        max_size=size,
        kwargs={"autocommit": True, "connect_timeout": connect_timeout},
        configure=configure,
        timeout=timeout,
        name="loom-journal",
        num_workers=1,
        open=False,
    )
    try:
        pool.open(wait=True, timeout=max(1.0, timeout))
    except psycopg.Error as exc:
        pool.close()
        raise JournalError(
            f"cannot open the journal at {redact(url)}: {first_line(exc)}.",
            code="journal_unavailable",
            path=redact(url),
        ) from exc
    return Pool(pool, redact(url), location(url))


class Pool:
    """A connection pool, looking like one connection: ``execute`` runs on the thread's borrowed one.

    Inside ``with pool:`` (nested scopes are one) the thread's first statement borrows a pooled
    connection and keeps it until the scope ends, so a transaction's statements stay on one
    connection and a scope that runs no statement (a step whose lease is already held) borrows
    nothing. A statement outside any scope borrows a connection for itself and returns its rows
    already fetched.
    """

    def __init__(
        self, pool: ConnectionPool[psycopg.Connection[Any]], where: str, place: str
    ) -> None:
        self._pool = pool
        self._where = where
        self._local = threading.local()
        self.location = place
        """``host:port`` of the server (no user, no password), for messages."""

    def __enter__(self) -> None:
        """Open this thread's scope (``with pool:``; nested scopes are one)."""
        local = self._local
        local.depth = getattr(local, "depth", 0) + 1

    def __exit__(self, *exc: object) -> None:
        local = self._local
        local.depth -= 1
        if local.depth == 0:
            self._give_back()

    def _borrowed(self) -> _Connection:
        conn: _Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        try:
            raw = self._pool.getconn()
        except psycopg.Error as exc:
            raise JournalError(
                f"no connection to the journal at {self._where}: {first_line(exc)}. Check that "
                "the server is up, or give the journal a larger pool_size if every connection is "
                "busy.",
                code="journal_unavailable",
                path=self._where,
            ) from exc
        conn = self._local.conn = _Connection(raw)
        return conn

    def _give_back(self) -> None:
        conn: _Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            self._local.conn = None
            self._pool.putconn(
                conn.raw
            )  # rolled back first if left in a transaction; dropped if broken

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        if getattr(self._local, "depth", 0):
            return self._borrowed().execute(sql, params)
        with self:
            cursor = self._borrowed().execute(sql, params)
            return _Rows(cursor.fetchall() if cursor.description is not None else [])

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with self:
            self._borrowed().executemany(sql, rows)

    def close(self) -> None:
        self._pool.close()


class _Rows:
    """Rows fetched before their connection went back to the pool (``fetchall``/``fetchone``)."""

    def __init__(self, rows: list[Any]) -> None:
        self._rows = rows

    def fetchall(self) -> list[Any]:
        rows, self._rows = self._rows, []
        return rows

    def fetchone(self) -> Any:
        return self._rows.pop(0) if self._rows else None


_TRANSLATED: dict[str, str] = {}
"""The journal's statements with ``%s`` placeholders, by their ``?`` form (a fixed, small set)."""


class _Connection:
    """A psycopg connection speaking the journal's SQL: ``?`` placeholders, ``BEGIN`` as the write lock.

    SQLite's ``BEGIN IMMEDIATE`` takes the database's one write lock before a read-then-write
    transaction (taking a lease, opening a new execution, a fork); here the same transactions
    take one transaction-scoped advisory lock, so they serialize exactly as they do on SQLite.
    Plain appends (one INSERT, one commit) take no lock: the (execution_id, ordinal) uniqueness
    orders them, as on SQLite.
    """

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    @property
    def raw(self) -> psycopg.Connection[Any]:
        """The psycopg connection."""
        return self._conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        if sql == "BEGIN":
            self._conn.execute("BEGIN")
            return self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
        return self._conn.execute(self._translate(sql), params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with self._conn.cursor() as cur:
            cur.executemany(self._translate(sql), rows)

    def close(self) -> None:
        self._conn.close()

    def _translate(self, sql: str) -> str:
        translated = _TRANSLATED.get(sql)
        if translated is None:
            # The journal's statements hold no literal '?' or '%': placeholders only.
            translated = _TRANSLATED[sql] = sql.replace("?", "%s")
        return translated


def _migrate(cur: psycopg.Cursor[Any]) -> list[str]:
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


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (libpq's are several), or its type's name."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def redact(url: str) -> str:
    """The URL without a password, for messages and reprs."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "postgresql://..."
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = (parts.username or "") + ":***"
    return urlunsplit(parts._replace(netloc=f"{user}@{netloc[-1]}"))


def location(url: str) -> str:
    """``host:port`` of a libpq URL (no user, no password), for messages."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or "localhost"
        port = parts.port or 5432
    except ValueError:
        return "postgresql"
    return f"{host}:{port}"
