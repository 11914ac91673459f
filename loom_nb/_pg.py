"""The PostgreSQL database the journal and the S3 store's tenant index share (issue 16), through psycopg 3.

One database holds both: the journal's ``events``, ``leases`` and ``content_pins`` and the store's
``loom_store_tenants``. Whichever opens it first applies the migrations (``_pg_migrations``), so
either may be the first to open a database.

Connections. ``open_pool`` returns a ``Pool`` (psycopg_pool) that looks like one DB-API
connection speaking the journal's SQL (``?`` placeholders): each statement, or each ``with pool:``
scope, borrows a connection, so a transaction stays on its connection and threads working on
different executions run side by side. ``BEGIN`` also takes one transaction-scoped advisory lock,
the journal's write lock, where SQLite takes its one write lock (``BEGIN IMMEDIATE``).

Poolers (issue 33). The same code runs behind a transaction pooler such as PgBouncer, where
consecutive transactions of one client connection may run on different server sessions, so
nothing here keeps state in a session: no server-side prepared statements (psycopg's
``prepare_threshold=None``; psycopg would otherwise prepare a statement run five times, and the
next client of that server session would collide with it), no session ``SET`` (the durability
setting is ``set_config(..., true)``, a ``SET LOCAL``, in each writing transaction; a lone write
is sent with it as one simple query, which the server runs as one transaction, still one round
trip), and only transaction-scoped advisory locks (the write lock, the migrations). The leases
are rows. Only LISTEN needs a session; the journal's watch takes a direct connection for it
(``listen_url``).

A connection that reaches its server session directly is told apart when it is made: the
process id the server announced at start-up (``BackendKeyData``) is that session's own
``pg_backend_pid()``, where a transaction pooler announces one of its own making (PgBouncer:
random). Such a connection is a session nobody else gets, so it keeps the durability setting
in the session and prepares what it runs repeatedly (psycopg's default, a statement's fifth
run): a lone write is then one prepared INSERT, which the server neither parses nor plans
again (a journal step's append costs about two thirds of the simple query's server and client
time here, ``benchmarks/bench_backends.py``), sent on one cursor the connection keeps for writes
that return no rows. Through a pooler nothing changes.

What a failed connection means, and its remedy, is ``loom_nb._pg_errors``.

This module sits below the store and the journal (DESIGN.md, "Layers") so that both can use it
without one importing the other. Importing it needs psycopg and psycopg-pool.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from loom_nb._pg_errors import explain
from loom_nb._pg_migrations import NOTIFY_CHANNEL, PG_MIGRATIONS, migrate
from loom_nb.errors import JournalError

__all__ = [
    "CONNECT_OPTIONS",
    "NOTIFY_CHANNEL",
    "PG_MIGRATIONS",
    "WRITE_LOCK",
    "Pool",
    "connection_error",
    "first_line",
    "is_postgres_url",
    "location",
    "open_pool",
    "redact",
]

WRITE_LOCK = 0x6C6F6F6D_7772
"""The advisory lock ``BEGIN`` takes: the journal's write lock (SQLite's BEGIN IMMEDIATE)."""


CONNECT_OPTIONS: dict[str, Any] = {"autocommit": True, "prepare_threshold": None}
"""How every connection to the database is made: autocommit, and never a prepared statement
(a transaction pooler hands the next transaction another server session)."""

_SETTING = "SELECT set_config('synchronous_commit', %s, true)"
_SESSION_SETTING = "SELECT set_config('synchronous_commit', %s, false)"
_PREPARE_THRESHOLD = 5
"""On a direct connection, the run of a statement that prepares it (psycopg's own default)."""
_BEGIN_WRITE = "BEGIN; SELECT set_config('synchronous_commit', %s, true), pg_advisory_xact_lock(%s)"
_WRITES = ("INSERT", "UPDATE", "DELETE")
_SLICE = 0.25  # seconds between looks at why the pool has no connection to give


def is_postgres_url(target: object) -> bool:
    """Whether ``target`` names a PostgreSQL database (``postgresql://`` or ``postgres://``)."""
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


def open_pool(url: str, *, synchronous: str, timeout: float, size: int) -> Pool:
    """Migrate the database at ``url`` and open a pool of up to ``size`` connections to it.

    The journal's own connections, and the content store's PostgreSQL index when it is given a
    URL (the schema, migrations included, is one for both). ``url`` may go through a
    transaction pooler: see the module's docstring.
    """
    commit = "on" if synchronous == "FULL" else "off"
    connect_timeout = max(1, round(timeout))
    where = redact(url)
    failures: list[BaseException] = []
    live = _Live()

    class Recorded(psycopg.Connection[Any]):
        """A pooled connection that counts itself, and keeps why it could not be made, so a
        wait for one can say why there is none."""

        @classmethod
        def connect(cls, conninfo: str = "", **kwargs: Any) -> Any:
            try:
                conn = super().connect(conninfo, **kwargs)
            except psycopg.Error as exc:
                failures[:] = [exc]
                raise
            failures.clear()
            live.add(1)
            conn._counted = True
            # Behind a pooler a server session may still LISTEN for an earlier client: drop
            # what it forwards here instead of queueing it for a notifies() never called.
            conn.add_notify_handler(_ignore)
            try:
                conn.loom_writes = _settle_direct(conn, commit)
            except BaseException:
                conn.close()
                raise
            return conn

        loom_writes: psycopg.Cursor[Any] | None = None
        """A direct connection's one cursor for its writes that return no rows (an append, a
        lease's renewal), made with it; None through a pooler (``_settle_direct``)."""

        @property
        def loom_direct(self) -> bool:
            """Whether this connection is its server session's only client."""
            return self.loom_writes is not None

        def close(self) -> None:
            if getattr(self, "_counted", False):  # once, even if the server closed it first
                self._counted = False
                live.add(-1)
            super().close()

    pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
        url,
        connection_class=Recorded,
        min_size=1,
        max_size=size,
        kwargs={**CONNECT_OPTIONS, "connect_timeout": connect_timeout},
        timeout=timeout,
        name="loom-journal",
        num_workers=1,
        open=False,
    )
    pool.open(wait=False)
    opened = Pool(
        pool, where, location(url), commit=commit, failures=failures, live=live, timeout=timeout
    )
    try:
        # The pool's first connection applies the migrations: an unreachable or full server
        # fails here at once, with libpq's reason (Pool.getconn).
        conn = opened.getconn()
        try:
            with conn.transaction(), conn.cursor() as cur:
                migrate(cur)
        finally:
            pool.putconn(conn)
    except psycopg.Error as exc:
        pool.close()
        explained = explain(exc, where=where, connecting=False)
        if explained is not None:
            raise JournalError(explained[1], code=_CODES[explained[0]], path=where) from exc
        raise JournalError(
            f"cannot open the journal at {where}: {first_line(exc)}. Check that the user may "
            "create tables in the database (or its search_path schema).",
            code="journal_unavailable",
            path=where,
        ) from exc
    except BaseException:
        pool.close()
        raise
    return opened


_CODES = {
    "unavailable": "journal_unavailable",
    "too_many_connections": "journal_too_many_connections",
    "pooler_error": "journal_pooler_error",
    "connection_lost": "journal_connection_lost",
}
"""The journal's error code for each kind of connection failure (``loom_nb._pg_errors``)."""


def connection_error(
    exc: BaseException, *, where: str, connecting: bool, doing: str = "read"
) -> JournalError:
    """The ``JournalError`` for a failed connection or statement, by what went wrong.

    A connection failure gets its own code (``journal_unavailable``,
    ``journal_too_many_connections``, ``journal_pooler_error``, ``journal_connection_lost``)
    and remedy; anything else is ``journal_unavailable`` (connecting) or ``journal_write_failed``
    / ``journal_unavailable`` (a statement the server refused), with the server's reason.
    """
    explained = explain(exc, where=where, connecting=connecting, doing=doing)
    if explained is not None:
        kind, message = explained
        return JournalError(message, code=_CODES[kind], path=where)
    if connecting:
        return JournalError(
            f"cannot open the journal at {where}: {first_line(exc)}.",
            code="journal_unavailable",
            path=where,
        )
    if doing == "write":
        return JournalError(
            f"the journal at {where} could not be written: {first_line(exc)}. The server "
            "refused the statement; check its log, and that the user may write the journal's "
            "tables.",
            code="journal_write_failed",
            path=where,
        )
    return JournalError(
        f"the journal at {where} could not be read: {first_line(exc)}. Check the server's log, "
        "and that the user may read the journal's tables.",
        code="journal_unavailable",
        path=where,
    )


class Pool:
    """A connection pool, looking like one connection: ``execute`` runs on the thread's borrowed one.

    Inside ``with pool:`` (nested scopes are one) the thread's first statement borrows a pooled
    connection and keeps it until the scope ends, so a transaction's statements stay on one
    connection and a scope that runs no statement (a step whose lease is already held) borrows
    nothing. A statement outside any scope borrows a connection for itself and returns its rows
    already fetched. ``commit`` is the ``synchronous_commit`` every writing transaction sets.
    """

    def __init__(
        self,
        pool: ConnectionPool[psycopg.Connection[Any]],
        where: str,
        place: str,
        *,
        commit: str = "off",
        failures: list[BaseException] | None = None,
        live: _Live | None = None,
        timeout: float = 30.0,
    ) -> None:
        self._pool = pool
        self._where = where
        self._commit = commit
        self._failures = [] if failures is None else failures
        self._live = _Live() if live is None else live
        self._timeout = timeout
        self._local = threading.local()
        # Closes a pool nobody closed once this wrapper is collected: before psycopg_pool's
        # own __del__, which fails where a collection runs in one of the pool's threads.
        self._closer = weakref.finalize(self, _close, pool)
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

    def getconn(self) -> psycopg.Connection[Any]:
        """A connection from the pool, waiting up to the timeout while others are busy.

        A pool that holds no connection at all and fails to make one says why at once (the
        server is full, the pooler refuses, nothing listens) instead of waiting out the
        timeout; a pool with connections of its own waits for one to come back.
        """
        deadline = time.monotonic() + self._timeout
        look = 0.02
        while True:
            left = deadline - time.monotonic()
            look = min(look * 2, _SLICE)  # soon at first: a failed connection is known in ms
            try:
                return self._pool.getconn(timeout=max(0.01, min(look, left)))
            except PoolTimeout as exc:
                failure = self._failures[0] if self._failures else None
                if failure is not None and not self._live.count:
                    raise connection_error(failure, where=self._where, connecting=True) from exc
                if left > _SLICE:
                    continue
                if failure is not None:
                    raise connection_error(failure, where=self._where, connecting=True) from exc
                raise JournalError(
                    f"no connection to the journal at {self._where} came free in "
                    f"{self._timeout:g} s: every connection of the pool is busy. Give the "
                    "journal a larger pool_size, or let fewer threads use it at once.",
                    code="journal_unavailable",
                    path=self._where,
                ) from exc
            except psycopg.Error as exc:
                raise connection_error(exc, where=self._where, connecting=True) from exc

    def _borrowed(self) -> _Connection:
        conn: _Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        conn = self._local.conn = _Connection(self.getconn(), self._commit)
        return conn

    def drop_broken(self) -> bool:
        """Give back this thread's connection if it is broken (the scope borrows a new one next);
        whether there was one. Never inside a nested scope (a read within a write's
        transaction): what ran before on the broken connection would not be on the new one."""
        conn: _Connection | None = getattr(self._local, "conn", None)
        if conn is None or not conn.raw.closed or getattr(self._local, "depth", 0) > 1:
            return False
        self._give_back()
        return True

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
        self._closer()


def _close(pool: ConnectionPool[psycopg.Connection[Any]]) -> None:
    """Close ``pool``, stopping its threads; from one of them, in a thread of its own.

    A ``Pool`` nobody closed is closed when it is collected, and a collection runs in whichever
    thread happens to trigger it, the pool's own worker or scheduler included: a thread that
    cannot join itself hands the close to a new one (psycopg_pool names its threads after the
    pool).
    """
    if threading.current_thread().name.startswith(f"{pool.name}-"):
        threading.Thread(target=pool.close, name="loom-pool-close", daemon=True).start()
    else:
        pool.close()


def _settle_direct(conn: psycopg.Connection[Any], commit: str) -> psycopg.Cursor[Any] | None:
    """When ``conn`` reaches its server session directly, settle the session for it and return
    the cursor its row-less writes run on (one for them all, not one per statement: about a
    seventh of a prepared append's time); None through a pooler.

    Directly, the process id the server announced at start-up is the session's own; a
    transaction pooler announces one of its own making (PgBouncer's is random), since its client
    has no one server session. A direct session keeps ``commit`` as its durability setting and
    prepares statements run repeatedly (see the module's docstring).
    """
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    if row is None or row[0] != conn.info.backend_pid:
        return None
    conn.execute(_SESSION_SETTING, (commit,))
    conn.prepare_threshold = _PREPARE_THRESHOLD
    return conn.cursor()


def _ignore(note: psycopg.Notify) -> None:
    """A notification on a journal's own connection: nobody waits for it there."""


class _Live:
    """How many connections a pool holds open (made and not yet closed)."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def add(self, delta: int) -> None:
        with self._lock:
            self.count += delta


class _Rows:
    """Rows fetched before their connection went back to the pool (``fetchall``/``fetchone``)."""

    def __init__(self, rows: list[Any]) -> None:
        self._rows = rows

    def fetchall(self) -> list[Any]:
        rows, self._rows = self._rows, []
        return rows

    def fetchone(self) -> Any:
        return self._rows.pop(0) if self._rows else None


_TRANSLATED: dict[str, tuple[str, bool, bool]] = {}
"""The journal's statements with ``%s`` placeholders, whether each writes, and whether it writes
and returns no rows, by their ``?`` form
(a fixed, small set)."""


class _Connection:
    """A psycopg connection speaking the journal's SQL: ``?`` placeholders, ``BEGIN`` as the write lock.

    SQLite's ``BEGIN IMMEDIATE`` takes the database's one write lock before a read-then-write
    transaction (taking a lease, opening a new execution, a fork); here the same transactions
    take one transaction-scoped advisory lock, so they serialize exactly as they do on SQLite.
    Plain appends (one INSERT, one commit) take no lock: the (execution_id, ordinal) uniqueness
    orders them, as on SQLite. Every writing transaction sets the durability for itself (a lone
    write is sent with its setting as one simple query, one transaction), so no setting outlives
    it on a pooler's server session; a direct connection (``_settle_direct``) has it in its
    session already and sends a lone write as itself, prepared once it has run a few times.
    """

    def __init__(self, conn: psycopg.Connection[Any], commit: str = "off") -> None:
        self._conn = conn
        self._commit = commit
        # A direct connection's cursor for row-less writes (``_settle_direct``), else None.
        self._writes: psycopg.Cursor[Any] | None = getattr(conn, "loom_writes", None)

    @property
    def raw(self) -> psycopg.Connection[Any]:
        """The psycopg connection."""
        return self._conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        conn = self._conn
        if sql == "BEGIN":
            # One round trip: the transaction, its durability and the write lock.
            cursor = psycopg.ClientCursor(conn)
            cursor.execute(_BEGIN_WRITE, (self._commit, WRITE_LOCK))
            return cursor
        if sql == "START TRANSACTION":
            # A work queue's transaction (journal/_work.py): its durability, not the write lock.
            cursor = psycopg.ClientCursor(conn)
            cursor.execute("START TRANSACTION; " + _SETTING, (self._commit,))
            return cursor
        translated, writes, silent = self._translate(sql)
        if self._writes is not None:  # direct: the session holds the setting, and a statement
            # run often is prepared; one with nothing to read back runs on the writes' cursor
            return (self._writes if silent else conn).execute(translated, params)
        if writes and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            # A lone write: the setting and the statement as one simple query, which the server
            # runs as one transaction (rolled back whole on an error), in one round trip.
            cursor = psycopg.ClientCursor(conn)
            cursor.execute(_SETTING + "; " + translated, (self._commit, *params))
            return cursor
        return conn.execute(translated, params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        conn = self._conn
        translated, _, _ = self._translate(sql)
        if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            with conn.transaction(), conn.cursor() as cur:
                cur.execute(_SETTING, (self._commit,))
                cur.executemany(translated, rows)
            return
        with conn.cursor() as cur:
            cur.executemany(translated, rows)

    def close(self) -> None:
        self._conn.close()

    def _translate(self, sql: str) -> tuple[str, bool, bool]:
        translated = _TRANSLATED.get(sql)
        if translated is None:
            # The journal's statements hold no literal '?' or '%': placeholders only.
            writes = sql.lstrip()[:6].upper() in _WRITES
            silent = writes and "RETURNING" not in sql.upper()
            translated = _TRANSLATED[sql] = (sql.replace("?", "%s"), writes, silent)
        return translated


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
