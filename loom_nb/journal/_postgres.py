"""The journal on PostgreSQL (issue 16): ``Journal("postgresql://...")``, through psycopg 3 and a pool.

Only the storage differs from the SQLite journal: ``PostgresJournal`` subclasses ``Journal`` and
replaces the methods that talk SQL (opening, reading rows, appending, transactions), so events,
replay, divergence, claim checks, recordings and GC scanning are the same code on both. The SQL
is the same shape too (one ``events`` table, same columns, same ``created`` text), with the few
dialect differences kept here: ``%s`` placeholders, an identity column for ``seq``, a trigger
function for append-only, and advisory locks where SQLite takes its one write lock.

Migrations are the same ordered list of named steps as SQLite's (``m001_events``,
``m002_append_only``) plus the PostgreSQL-only ``m003_notify``, recorded in
``loom_journal_migrations`` and checked at open under an advisory lock, so two processes opening a
new database at once do not both create it; a database with a migration this code does not know
(a newer loom_nb wrote it) is refused (``journal_too_new``).

Live viewers. An insert into ``events`` NOTIFYs the channel ``loom_journal`` with the execution
id (a trigger, so imports and every writer notify, in the same transaction as the insert: a
notification is only delivered once the rows are visible). ``journal.watch(execution_id, ...)``
LISTENs on a connection of its own and reads what was appended since it last looked.

Durability. ``synchronous="NORMAL"`` (the default, as for SQLite) sets ``synchronous_commit=off``
for the journal's connections: a commit is atomic and crash-safe, and a server crash may lose the
last few commits, never corrupt the log. ``"FULL"`` waits for the WAL flush on every commit.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from loom_nb.errors import ConfigurationError, JournalError
from loom_nb.journal._claims import DEFAULT_CLAIM_THRESHOLD
from loom_nb.journal._codec import decode
from loom_nb.journal._journal import Journal, Row, now_iso

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

    from loom_nb.store import ContentStore

__all__ = ["NOTIFY_CHANNEL", "PG_MIGRATIONS", "PostgresJournal", "is_postgres_url"]

NOTIFY_CHANNEL = "loom_journal"
"""The LISTEN/NOTIFY channel an append announces its execution id on."""

_FROM = "SELECT seq, execution_id, kind, step_id, position, payload, created FROM events"
_INSERT = (
    "INSERT INTO events (execution_id, kind, step_id, position, payload, created) "
    "VALUES (%s, %s, %s, %s, %s, %s)"
)
_SELECT = _FROM + " WHERE execution_id = %s ORDER BY seq"
_MIGRATION_LOCK = 0x6C6F6F6D  # "loom": the advisory lock migrations run under


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


def _m003_notify(cur: psycopg.Cursor[Any]) -> None:
    cur.execute(
        f"""
        CREATE FUNCTION loom_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_notify('{NOTIFY_CHANNEL}', NEW.execution_id); RETURN NULL; END $$
        """
    )
    cur.execute(
        "CREATE TRIGGER events_notify AFTER INSERT ON events "
        "FOR EACH ROW EXECUTE FUNCTION loom_events_notify()"
    )


PG_MIGRATIONS: list[tuple[str, Callable[[psycopg.Cursor[Any]], None]]] = [
    ("m001_events", _m001_events),
    ("m002_append_only", _m002_append_only),
    ("m003_notify", _m003_notify),
]
"""The PostgreSQL schema, oldest first; names shared with the SQLite list mean the same shape."""


class PostgresJournal(Journal):
    """The append-only journal on PostgreSQL; ``Journal("postgresql://...")`` returns one.

    ``url`` is a libpq connection URL (``postgresql://user@host:5432/db``; add
    ``?options=-csearch_path%3Dschema`` to use a schema other than the default). ``pool_size``
    connections are shared by the threads of the process. Everything else is as ``Journal``.
    """

    def __init__(
        self,
        path: str,
        *,
        store: ContentStore | None = None,
        claim_threshold: int = DEFAULT_CLAIM_THRESHOLD,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        timeout: float = 30.0,
        pool_size: int = 4,
    ) -> None:
        if not is_postgres_url(path):
            raise ConfigurationError(
                f"a PostgreSQL journal takes a postgresql:// URL, not {path!r}.",
                code="invalid_journal_url",
            )
        if synchronous not in ("NORMAL", "FULL"):
            raise JournalError(
                f"synchronous must be 'NORMAL' or 'FULL', not {synchronous!r}.",
                code="invalid_argument",
            )
        if (
            isinstance(claim_threshold, bool)
            or not isinstance(claim_threshold, int)
            or claim_threshold < 0
        ):
            raise JournalError(
                f"claim_threshold must be a non-negative int of bytes, not {claim_threshold!r}.",
                code="invalid_argument",
            )
        if (
            isinstance(pool_size, bool)
            or not isinstance(pool_size, int)
            or not 1 <= pool_size <= 64
        ):
            raise JournalError(
                f"pool_size must be an int from 1 to 64, not {pool_size!r}.",
                code="invalid_argument",
            )
        try:
            import psycopg
            from psycopg_pool import ConnectionPool
        except ImportError as exc:  # pragma: no cover - the optional dependency is missing
            raise ConfigurationError(
                "a PostgreSQL journal needs psycopg and psycopg-pool: pip install 'loom_nb[postgres]'.",
                code="backend_not_installed",
            ) from exc
        self._path = path
        self.store = store
        self.claim_threshold = claim_threshold
        self.synchronous = synchronous
        self._lock = threading.Lock()  # kept for the base class; the pool serializes nothing
        self._local = threading.local()
        self._psycopg = psycopg
        commit = "on" if synchronous == "FULL" else "off"

        def configure(conn: psycopg.Connection[Any]) -> None:
            conn.execute(f"SET synchronous_commit = {commit}")

        self._pool: ConnectionPool[Any] = ConnectionPool(
            path,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True, "connect_timeout": max(1, int(timeout))},
            configure=configure,
            timeout=timeout,
            open=False,
            name="loom_nb-journal",
        )
        try:
            self._pool.open(wait=True, timeout=timeout)
            with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
                _migrate(cur)
        except Exception as exc:
            with contextlib.suppress(Exception):
                self._pool.close()
            if isinstance(exc, JournalError):
                raise
            raise JournalError(
                f"cannot open the journal at {_redact(path)}: {_first_line(exc)}. Check that the "
                "server is up, the database exists and the user may create tables in it.",
                code="journal_unavailable",
                path=_redact(path),
            ) from exc

    def __repr__(self) -> str:
        return f"Journal({_redact(self._path)!r})"

    # -- storage: the methods of Journal that talk SQL ------------------------------------

    def _open_rows(self, execution_id: str, principal: dict[str, Any] | None) -> list[Row]:
        cur = self._local.cursor
        # Two processes opening the same new execution: one inserts execution_started.
        cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (execution_id,))
        cur.execute(_SELECT, (execution_id,))
        rows: list[Row] = cur.fetchall()
        if not rows:
            from loom_nb.journal._codec import dumps

            payload = dumps({"principal": principal})
            cur.execute(
                _INSERT, (execution_id, "execution_started", None, None, payload, now_iso())
            )
            cur.execute(_SELECT, (execution_id,))
            rows = cur.fetchall()
        if rows[0][2] != "execution_started":
            raise JournalError(
                f"execution {execution_id!r}: its first event is {rows[0][2]!r}, not "
                "execution_started; the journal is damaged.",
                code="journal_corrupt",
            )
        return rows

    def events(self, execution_id: str, *, resolve_claims: bool = True) -> list[Any]:
        """Every event of an execution, in order, with payloads decoded (see ``Journal.events``)."""
        rows = self._query(_SELECT, (execution_id,))
        return [self._event(row, resolve_claims=resolve_claims) for row in rows]

    def _summary_rows(self) -> list[Any]:
        return self._query(
            "SELECT execution_id, kind, step_id, position, "
            "CASE WHEN kind = 'execution_started' THEN payload ELSE '' END, created "
            "FROM events ORDER BY seq"
        )

    def executions(self) -> list[Any]:
        """A summary of every execution in the journal, oldest first."""
        return self._summaries(self._summary_rows())

    def iter_payloads(self) -> Iterator[Any]:
        """Every event's JSON payload as stored (what content GC scans)."""
        last = 0
        while True:
            batch = self._query(
                "SELECT seq, payload FROM events WHERE seq > %s ORDER BY seq LIMIT 500", (last,)
            )
            if not batch:
                return
            for seq, text in batch:
                yield decode(text, where=f"event {seq}")
            last = batch[-1][0]

    def events_after(self, execution_id: str, seq: int) -> list[Any]:
        """The events of an execution with ``seq`` greater than the given one, in order."""
        rows = self._query(
            _FROM + " WHERE execution_id = %s AND seq > %s ORDER BY seq",
            (execution_id, seq),
        )
        return [self._event(row, resolve_claims=True) for row in rows]

    def _append(
        self, execution_id: str, kind: str, step_id: str | None, position: int | None, payload: str
    ) -> None:
        self._write(_INSERT, [(execution_id, kind, step_id, position, payload, now_iso())])

    def _append_pair(
        self,
        execution_id: str,
        first: tuple[str, str | None, int | None, str],
        second: tuple[str, str | None, int | None, str],
    ) -> None:
        created = now_iso()
        self._write(
            _INSERT + ", (%s, %s, %s, %s, %s, %s)",
            [(execution_id, *first, created, execution_id, *second, created)],
        )

    def _append_rows(
        self, rows: Iterable[tuple[str, str, str | None, int | None, str, str]]
    ) -> None:
        self._write(_INSERT, list(rows), many=True)

    def _transaction(self, body: Any, *, what: str) -> Any:
        try:
            with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
                self._local.cursor = cur
                try:
                    return body()
                finally:
                    self._local.cursor = None
        except self._psycopg.Error as exc:
            raise self._error(exc, "written") from exc

    def close(self) -> None:
        """Close the pool's connections (the journal cannot be used afterwards)."""
        self._pool.close()

    # -- live viewers ---------------------------------------------------------------------

    def _listen(self) -> _Listener:
        return _Listener(self)

    # -- internals ------------------------------------------------------------------------

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        try:
            with self._pool.connection() as conn, conn.cursor() as cur:
                cur.execute(sql, params)
                rows: list[Any] = cur.fetchall()
                return rows
        except self._psycopg.Error as exc:
            raise self._error(exc, "read") from exc

    def _write(self, sql: str, rows: list[tuple[Any, ...]], *, many: bool = False) -> None:
        try:
            with self._pool.connection() as conn:
                if many:
                    with conn.transaction(), conn.cursor() as cur:
                        cur.executemany(sql, rows)
                else:
                    conn.execute(sql, rows[0])
        except self._psycopg.Error as exc:
            raise self._error(exc, "written") from exc

    def _error(self, exc: BaseException, how: str) -> JournalError:
        return JournalError(
            f"the journal at {_redact(self._path)} could not be {how} ({_first_line(exc)}). "
            "Check that the server is up and reachable, then retry.",
            code="journal_write_failed" if how == "written" else "journal_unavailable",
        )


class _Listener:
    """A connection of its own that LISTENs for appends (the watch thread waits on it)."""

    def __init__(self, journal: PostgresJournal) -> None:
        import psycopg

        self._psycopg = psycopg
        try:
            self._conn = psycopg.connect(journal._path, autocommit=True)
            self._conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
        except psycopg.Error as exc:
            raise journal._error(exc, "read") from exc

    def wait(self, execution_id: str, timeout: float) -> bool:
        """Block until an append to ``execution_id`` is announced (True) or ``timeout`` passes."""
        try:
            for note in self._conn.notifies(timeout=timeout, stop_after=1):
                if note.payload == execution_id:
                    return True
        except self._psycopg.Error:
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
