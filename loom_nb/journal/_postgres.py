"""The journal on PostgreSQL (issue 16): ``Journal("postgresql://...")``, through psycopg 3.

Only the storage differs from the SQLite journal: ``PostgresBackend`` fills the same backend
interface (``_backend``) as ``SqliteBackend``, so events, replay, divergence, claim checks,
leases, ordinals, forks, recordings and GC scanning are the same code, running the same portable
SQL, on both. The dialect differences live in ``loom_nb._pg``, below the journal and the store,
which share the database: ``%s`` placeholders, an identity column for ``seq``, a trigger
function for append-only, an advisory lock where SQLite takes its one write lock
(``BEGIN IMMEDIATE``), and the migrations, checked at open.

Live viewers. An insert into ``events`` NOTIFYs the channel ``loom_journal`` with the execution
id (a trigger, so imports and every writer notify, in the same transaction as the insert: a
notification is only delivered once the rows are visible). ``journal.watch(execution_id, ...)``
waits on the process's one listening connection (``_listener``), at ``listen_url`` when the
journal's URL goes through a transaction pooler, and looks every second whatever happens.

Connections. The backend holds a pool (psycopg_pool) of up to ``pool_size`` connections. Each
read, and each write to an execution, borrows one for its statements (a transaction stays on its
connection), so threads of one process working on different executions run side by side; writes
to one execution queue on that execution's lock, where SQLite's journal has its one lock for
everything.

Durability. ``synchronous="NORMAL"`` (the default, as for SQLite) sets ``synchronous_commit=off``
for the journal's connections: a commit is atomic and crash-safe, and a server crash may lose the
last few commits, never corrupt the log. ``"FULL"`` waits for the WAL flush on every commit.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar, Literal, TypeVar

import psycopg

from loom_nb._pg import Pool, connection_error, is_postgres_url, open_pool, redact
from loom_nb.errors import ConfigurationError, JournalError
from loom_nb.journal._backend import JournalBackend, Listener
from loom_nb.journal._listener import subscribe

__all__ = ["PostgresBackend"]

T = TypeVar("T")

READ_TRIES = 4
"""How many times a read runs on connections found broken, the first included."""
READ_PAUSE = 0.05
"""Seconds before the second try; doubled before each later one (0.35 s in all)."""


class PostgresBackend(JournalBackend):
    """A pool of up to ``pool_size`` connections to the database at ``path`` (a libpq URL).

    ``listen_url`` is where watches LISTEN (a direct connection to the same database when
    ``path`` goes through a transaction pooler); None listens at ``path``.
    """

    Error: ClassVar[type[Exception]] = psycopg.Error
    IntegrityError: ClassVar[type[Exception]] = psycopg.IntegrityError
    BEGIN_WRITE: ClassVar[str] = "BEGIN"
    watch_poll: ClassVar[float] = 1.0
    # Not BEGIN, which takes the journal's write lock: workers claiming items lock rows only.
    BEGIN_QUEUE: ClassVar[str] = "START TRANSACTION"
    SKIP_LOCKED: ClassVar[str] = " FOR UPDATE SKIP LOCKED"
    FOR_UPDATE: ClassVar[str] = " FOR UPDATE"

    def __init__(
        self,
        path: str,
        *,
        synchronous: str,
        timeout: float,
        pool_size: int,
        listen_url: str | None = None,
    ) -> None:
        for what, url in (("journal", path), ("listen_url", listen_url)):
            if url is not None and not is_postgres_url(url):
                raise ConfigurationError(
                    f"a PostgreSQL {what} takes a postgresql:// URL, not {redact(str(url))!r}.",
                    code="invalid_journal_url",
                )
        self.path = path
        self.where = redact(path)
        """The URL without its password, for messages."""
        self.listen_url = listen_url
        self._locks: dict[str, threading.Lock] = {}
        self.conn: Pool = open_pool(path, synchronous=synchronous, timeout=timeout, size=pool_size)

    def reading(self) -> contextlib.AbstractContextManager[Any]:
        """A pooled connection for this thread, no lock: the server isolates concurrent reads."""
        return self.conn

    def writing(
        self, execution_id: str, *, database: bool = True
    ) -> contextlib.AbstractContextManager[Any]:
        """This execution's lock (its lease and in-process claims), and a pooled connection."""
        lock = self._locks.get(execution_id)
        if lock is None:
            lock = self._locks.setdefault(execution_id, threading.Lock())
        return _Scope(lock, self.conn) if database else lock

    def listen(self, execution_id: str) -> Listener:
        """A subscription on this process's listening connection for ``listen_url`` (or the URL)."""
        return subscribe(self.listen_url or self.path, execution_id)

    def damaged(self, exc: BaseException) -> JournalError | None:
        """Never: the server answers for its own storage."""
        return None

    def read(self, query: Callable[[], T]) -> T:
        """Run a read; on a connection found broken (a restarted server, a terminated backend),
        again on a new one: a read changes nothing, so trying again is safe.

        Up to ``READ_TRIES`` times, a little later each time: a server that ended every session
        leaves a pooler (PgBouncer) holding several dead ones until it notices, and it may hand
        out one after another. A read inside a write's transaction is never moved to a new
        connection (``Pool.drop_broken`` refuses there): the transaction is lost with the first.
        """
        for attempt in range(READ_TRIES - 1):
            try:
                return super().read(query)
            except JournalError as exc:
                if exc.code != "journal_connection_lost" or not self.conn.drop_broken():
                    raise
            time.sleep(READ_PAUSE * 2**attempt)
        return super().read(query)

    def failure(self, exc: BaseException, *, doing: Literal["read", "write"]) -> JournalError:
        """What happened to the connection (lost, refused, the server full, the pooler), or the
        server's reason for refusing the statement; never SQLite's advice."""
        if isinstance(exc, JournalError):
            return exc
        return connection_error(exc, where=self.where, connecting=False, doing=doing)


class _Scope:
    """A write scope: the execution's lock, then the thread's pooled-connection scope."""

    __slots__ = ("_lock", "_pooled")

    def __init__(self, lock: threading.Lock, pooled: Pool) -> None:
        self._lock = lock
        self._pooled = pooled

    def __enter__(self) -> None:
        self._lock.acquire()
        try:
            self._pooled.__enter__()
        except BaseException:
            self._lock.release()
            raise

    def __exit__(self, *exc: object) -> None:
        try:
            self._pooled.__exit__()
        finally:
            self._lock.release()
