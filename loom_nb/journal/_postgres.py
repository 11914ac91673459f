"""The journal on PostgreSQL (issue 16): ``Journal("postgresql://...")``, through psycopg 3.

Only the storage differs from the SQLite journal: ``PostgresJournal`` subclasses ``Journal`` and
replaces its connection (``_connect``) and error classes, so events, replay, divergence, claim
checks, leases, ordinals, forks, recordings and GC scanning are the same code, running the same
portable SQL, on both. The dialect differences are kept here: ``%s`` placeholders, an identity
column for ``seq``, a trigger function for append-only, and an advisory lock where SQLite takes
its one write lock (``BEGIN IMMEDIATE``).

Migrations are the same ordered list of named steps as SQLite's (``m001_events`` ...
``m004_leases``, each the same shape) plus the PostgreSQL-only ``pg001_notify``, recorded in
``loom_journal_migrations`` and checked at open under an advisory lock, so two processes opening a
new database at once do not both create it; a database with a migration this code does not know
(a newer loom_nb wrote it) is refused (``journal_too_new``).

Live viewers. An insert into ``events`` NOTIFYs the channel ``loom_journal`` with the execution
id (a trigger, so imports and every writer notify, in the same transaction as the insert: a
notification is only delivered once the rows are visible). ``journal.watch(execution_id, ...)``
LISTENs on a connection of its own and reads what was appended since it last looked.

Connections. A ``PostgresJournal`` holds a pool (psycopg_pool) of up to ``pool_size``
connections. Each read, and each write to an execution, borrows one for its statements (a
transaction stays on its connection), so threads of one process working on different executions
run side by side; writes to one execution queue on that execution's lock, where SQLite's journal
has its one lock for everything.

Durability. ``synchronous="NORMAL"`` (the default, as for SQLite) sets ``synchronous_commit=off``
for the journal's connections: a commit is atomic and crash-safe, and a server crash may lose the
last few commits, never corrupt the log. ``"FULL"`` waits for the WAL flush on every commit.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

import psycopg
from psycopg_pool import ConnectionPool

from loom_nb.errors import ConfigurationError, JournalError
from loom_nb.journal._journal import Journal

__all__ = ["NOTIFY_CHANNEL", "PG_MIGRATIONS", "PostgresJournal", "is_postgres_url", "open_pool"]

NOTIFY_CHANNEL = "loom_journal"
"""The LISTEN/NOTIFY channel an append announces its execution id on (written out in pg001_notify)."""

_MIGRATION_LOCK = 0x6C6F6F6D  # "loom": the advisory lock migrations run under
_WRITE_LOCK = 0x6C6F6F6D_7772  # the journal's write lock (SQLite's BEGIN IMMEDIATE)


def is_postgres_url(target: object) -> bool:
    """Whether ``target`` names a PostgreSQL journal (``postgresql://`` or ``postgres://``)."""
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


PG_MIGRATIONS: list[tuple[str, Callable[[psycopg.Cursor[Any]], None]]] = [
    ("m001_events", _m001_events),
    ("m002_append_only", _m002_append_only),
    ("m003_event_ordinal", _m003_event_ordinal),
    ("m004_leases", _m004_leases),
    ("pg001_notify", _pg001_notify),
    ("pg002_store_tenants", _pg002_store_tenants),
]
"""The PostgreSQL schema, oldest first; names shared with the SQLite list mean the same shape."""


class PostgresJournal(Journal):
    """The append-only journal on PostgreSQL; ``Journal("postgresql://...")`` returns one.

    ``path`` is a libpq connection URL (``postgresql://user@host:5432/db``; add
    ``?options=-csearch_path%3Dschema`` to use a schema other than the default). ``pool_size``
    is the most connections this journal opens (one is kept open; more are opened as threads need
    them, and a thread waits up to ``timeout`` seconds when all are busy). Every other argument is
    as for ``Journal``.
    """

    _Error: ClassVar[type[Exception]] = psycopg.Error
    _IntegrityError: ClassVar[type[Exception]] = psycopg.IntegrityError
    _BEGIN_WRITE: ClassVar[str] = "BEGIN"

    def __init__(
        self, path: str | os.PathLike[str] = ":memory:", *, pool_size: int = 4, **options: Any
    ) -> None:
        if (
            isinstance(pool_size, bool)
            or not isinstance(pool_size, int)
            or not 1 <= pool_size <= 64
        ):
            raise JournalError(
                f"pool_size must be an int from 1 to 64 (connections), not {pool_size!r}.",
                code="invalid_argument",
            )
        self.pool_size = pool_size
        """The most connections this journal's pool opens."""
        self._locks: dict[str, threading.Lock] = {}
        super().__init__(path, **options)
        # An S3 store given to this journal keeps its tenant index here (issue 16), unless it
        # was opened with an index of its own or its bucket records marker objects.
        follow = getattr(self.store, "_follow_journal", None)
        if follow is not None:
            follow(self)

    def __repr__(self) -> str:
        return f"Journal({_redact(self._path)!r})"

    def _reading(self) -> contextlib.AbstractContextManager[Any]:
        """A pooled connection for this thread, no lock: the server isolates concurrent reads."""
        conn: _Pooled = self._conn
        return conn

    def _writing(
        self, execution_id: str, *, database: bool = True
    ) -> contextlib.AbstractContextManager[Any]:
        """This execution's lock (its lease and in-process claims), and a pooled connection."""
        lock = self._locks.get(execution_id)
        if lock is None:
            lock = self._locks.setdefault(execution_id, threading.Lock())
        return _Scope(lock, self._conn) if database else lock

    def _disconnect(self) -> None:
        self._conn.close()

    def _connect(self, synchronous: str, timeout: float) -> Any:
        """Connect in autocommit mode, set the durability, and apply the migrations."""
        if not is_postgres_url(self._path):
            raise ConfigurationError(
                f"a PostgreSQL journal takes a postgresql:// URL, not {self._path!r}.",
                code="invalid_journal_url",
            )
        return open_pool(self._path, synchronous=synchronous, timeout=timeout, size=self.pool_size)

    def _listen(self) -> _Listener:
        return _Listener(self)


def open_pool(url: str, *, synchronous: str, timeout: float, size: int) -> _Pooled:
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
            f"cannot open the journal at {_redact(url)}: {_first_line(exc)}. Check "
            "that the server is up and the database exists.",
            code="journal_unavailable",
            path=_redact(url),
        ) from exc
    try:
        with conn.transaction(), conn.cursor() as cur:
            _migrate(cur)
    except BaseException as exc:
        conn.close()
        if isinstance(exc, psycopg.Error):
            raise JournalError(
                f"cannot open the journal at {_redact(url)}: {_first_line(exc)}. Check "
                "that the user may create tables in the database (or its search_path schema).",
                code="journal_unavailable",
                path=_redact(url),
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
            f"cannot open the journal at {_redact(url)}: {_first_line(exc)}.",
            code="journal_unavailable",
            path=_redact(url),
        ) from exc
    return _Pooled(pool, _redact(url))


class _Pooled:
    """The journal's pool, looking like one connection: ``execute`` runs on the thread's borrowed one.

    Inside ``with pooled:`` (nested scopes are one) the thread's first statement borrows a pooled
    connection and keeps it until the scope ends, so a transaction's statements stay on one
    connection and a scope that runs no statement (a step whose lease is already held) borrows
    nothing. A statement outside any scope borrows a connection for itself and returns its rows
    already fetched.
    """

    def __init__(self, pool: ConnectionPool[psycopg.Connection[Any]], where: str) -> None:
        self._pool = pool
        self._where = where
        self._local = threading.local()

    def __enter__(self) -> None:
        """Open this thread's scope (``with pooled:``; nested scopes are one)."""
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
                f"no connection to the journal at {self._where}: {_first_line(exc)}. Check that "
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


class _Scope:
    """A write scope: the execution's lock, then the thread's pooled-connection scope."""

    __slots__ = ("_lock", "_pooled")

    def __init__(self, lock: threading.Lock, pooled: _Pooled) -> None:
        self._lock = lock
        self._pooled = pooled

    def __enter__(self) -> None:
        self._lock.acquire()
        self._pooled.__enter__()

    def __exit__(self, *exc: object) -> None:
        try:
            self._pooled.__exit__()
        finally:
            self._lock.release()


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
            return self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (_WRITE_LOCK,))
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


class _Listener:
    """A connection of its own that LISTENs for appends (the watch thread waits on it)."""

    def __init__(self, journal: PostgresJournal) -> None:
        try:
            self._conn = psycopg.connect(journal.path, autocommit=True)
            self._conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
        except psycopg.Error as exc:
            raise JournalError(
                f"cannot follow the journal at {_redact(journal.path)}: {_first_line(exc)}.",
                code="journal_unavailable",
            ) from exc

    def wait(self, execution_id: str, timeout: float) -> bool:
        """Block until an append to ``execution_id`` is announced (True) or ``timeout`` passes."""
        try:
            for note in self._conn.notifies(timeout=timeout, stop_after=1):
                if note.payload == execution_id:
                    return True
        except psycopg.Error:
            return False
        return False

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._conn.close()


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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _redact(url: str) -> str:
    """The URL without a password, for messages and reprs."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return "postgresql://..."
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = (parts.username or "") + ":***"
    return urlunsplit(parts._replace(netloc=f"{user}@{netloc[-1]}"))
