"""The journal on PostgreSQL (issue 16): ``Journal("postgresql://...")``, through psycopg 3.

Only the storage differs from the SQLite journal: ``PostgresJournal`` subclasses ``Journal`` and
replaces its connection (``_connect``) and error classes, so events, replay, divergence, claim
checks, leases, ordinals, forks, recordings and GC scanning are the same code, running the same
portable SQL, on both. The dialect differences live in ``loom_nb._pg``, below the journal and
the store, which share the database: ``%s`` placeholders, an identity column for ``seq``, a
trigger function for append-only, an advisory lock where SQLite takes its one write lock
(``BEGIN IMMEDIATE``), and the migrations, checked at open.

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
from typing import Any, ClassVar

import psycopg

from loom_nb._pg import NOTIFY_CHANNEL, Pool, first_line, is_postgres_url, open_pool, redact
from loom_nb.errors import ConfigurationError, JournalError
from loom_nb.journal._journal import Journal

__all__ = ["PostgresJournal"]


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
        return f"Journal({redact(self._path)!r})"

    def _reading(self) -> contextlib.AbstractContextManager[Any]:
        """A pooled connection for this thread, no lock: the server isolates concurrent reads."""
        conn: Pool = self._conn
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

    @property
    def _pg_pool(self) -> Pool:
        """The connection pool, which an S3 store's tenant index shares."""
        pool: Pool = self._conn
        return pool


class _Scope:
    """A write scope: the execution's lock, then the thread's pooled-connection scope."""

    __slots__ = ("_lock", "_pooled")

    def __init__(self, lock: threading.Lock, pooled: Pool) -> None:
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


class _Listener:
    """A connection of its own that LISTENs for appends (the watch thread waits on it)."""

    def __init__(self, journal: PostgresJournal) -> None:
        try:
            self._conn = psycopg.connect(journal.path, autocommit=True)
            self._conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
        except psycopg.Error as exc:
            raise JournalError(
                f"cannot follow the journal at {redact(journal.path)}: {first_line(exc)}.",
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
