"""The journal's storage seam (issue 16): what a backend provides, SQLite's and PostgreSQL's alike.

A backend is a DB-API style connection in autocommit mode (``conn.execute(sql, params)`` with
``?`` placeholders, ``executemany``, ``close``), already opened and migrated, plus its error
classes, the statement that starts a read-then-write transaction holding the journal's write
lock (``BEGIN_WRITE``), and the scopes a read or a write to one execution holds. Every semantic
above it (events, replay, leases, ordinals, claims, recordings, forks) is one implementation,
running the same portable SQL on both (``_sql``): ``_journal`` reads, ``_writer`` appends.

The transaction every write runs in, and how a failed read or write is reported, are written
once here on top of those few members.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar, Literal, Protocol, TypeVar

from loom_nb.errors import JournalError

__all__ = ["JournalBackend", "Listener"]

T = TypeVar("T")


class Listener(Protocol):
    """What a watch waits on between looks (``journal.watch``): announcements of its execution."""

    @property
    def mode(self) -> Literal["notify", "poll"]:
        """``"notify"`` while announcements arrive, ``"poll"`` while waiting is only sleeping."""
        ...

    def wait(self, timeout: float) -> bool:
        """Block until an append is announced (True), ``wake`` is called, or ``timeout`` passes."""
        ...

    def wake(self) -> None:
        """End a pending ``wait`` now (the watch is stopping)."""
        ...

    def close(self) -> None:
        """Stop listening (the process's listening connection closes with its last watch)."""
        ...


class JournalBackend(ABC):
    """One journal's database: a connection, its error classes, and the scopes reads and writes hold."""

    Error: ClassVar[type[Exception]]
    """The driver's base error class (a failed statement)."""
    IntegrityError: ClassVar[type[Exception]]
    """The driver's constraint violation (another writer's row got in first)."""
    BEGIN_WRITE: ClassVar[str]
    """Starts a read-then-write transaction holding the journal's write lock."""
    watch_poll: ClassVar[float]
    """A watch's default seconds between looks (``journal.watch(poll=None)``)."""
    BEGIN_QUEUE: ClassVar[str]
    """Starts a work queue's transaction (``_work``): rows are locked, not the journal."""
    SKIP_LOCKED: ClassVar[str]
    """Ends a SELECT that locks the rows it picks, skipping rows another transaction holds."""
    FOR_UPDATE: ClassVar[str]
    """Ends a SELECT that locks the rows it reads until the transaction ends."""

    conn: Any
    """The connection (``execute``, ``executemany``, ``close``), in autocommit mode."""

    path: str
    """Where the database is, as given (a path, ``:memory:`` or a URL)."""

    @abstractmethod
    def reading(self) -> contextlib.AbstractContextManager[Any]:
        """Hold what a read (or a transaction of its own) needs."""

    @abstractmethod
    def writing(
        self, execution_id: str, *, database: bool = True
    ) -> contextlib.AbstractContextManager[Any]:
        """Hold what a write to ``execution_id`` needs: the lock guarding its lease and claims
        and, with ``database``, a connection."""

    @abstractmethod
    def listen(self, execution_id: str) -> Listener:
        """What a watch of ``execution_id`` waits on between looks."""

    @abstractmethod
    def damaged(self, exc: BaseException) -> JournalError | None:
        """``journal_corrupt`` when ``exc`` says the database itself is damaged, else None."""

    def close(self) -> None:
        """Close the connection (or the pool)."""
        self.conn.close()

    def transaction(self, body: Callable[[], T], *, what: str) -> T:
        """Run ``body`` in a write transaction (``BEGIN_WRITE`` ... ``COMMIT``), rolled back on error."""
        try:
            self.conn.execute(self.BEGIN_WRITE)
        except self.Error as exc:
            raise self.write_error(exc) from exc
        try:
            result = body()
            self.conn.execute("COMMIT")
        except BaseException as exc:
            # A connection that was lost cannot roll back (the server already has): the error
            # that lost it is the one to report.
            with contextlib.suppress(self.Error):
                self.conn.execute("ROLLBACK")
            if isinstance(exc, self.IntegrityError) and what == "import":
                raise JournalError(
                    f"the recording could not be imported ({exc}): the execution already "
                    "exists. Import it under another id.",
                    code="execution_exists",
                ) from exc
            if isinstance(exc, self.Error):
                raise self.write_error(exc) from exc
            raise
        return result

    def read(self, query: Callable[[], T]) -> T:
        """Run a read; a failure is reported as ``failure`` says (``journal_corrupt``, unavailable ...)."""
        try:
            return query()
        except self.Error as exc:
            raise self.failure(exc, doing="read") from exc

    def write_error(self, exc: BaseException) -> JournalError:
        """The ``JournalError`` a failed write is reported as."""
        return self.failure(exc, doing="write")

    def failure(self, exc: BaseException, *, doing: Literal["read", "write"]) -> JournalError:
        """The ``JournalError`` for a failed read or write: a damaged database is
        ``journal_corrupt``; otherwise SQLite's advice (a lock another process holds, a full or
        read-only disk). The PostgreSQL backend says what happened to the connection instead."""
        damaged = self.damaged(exc)
        if damaged is not None:
            return damaged
        if doing == "read":
            return JournalError(
                f"the journal at {self.path!r} could not be read ({exc}). If another process "
                "holds it locked, retry.",
                code="journal_unavailable",
                path=self.path,
            )
        return JournalError(
            f"the journal could not be written ({exc}). If another process holds the database "
            "locked, retry; if the disk is full or read-only, free space or move the journal.",
            code="journal_write_failed",
        )
