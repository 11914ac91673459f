"""The journal on SQLite: ``Journal()`` in memory, ``Journal("run.sqlite")`` in a file (ADR 0120 decision 10).

Durability. The database runs in WAL mode with ``synchronous=NORMAL`` by default: a commit is
atomic and survives the process being killed at any instant (the crash-and-resume test kills
runs with SIGKILL), while the WAL is synced to disk at checkpoints rather than at every commit,
so a power cut may lose the last few commits but never corrupts the log. ``synchronous="FULL"``
syncs every commit as well, at a large cost per step. The benchmark measures the baseline with
the same setting.

Concurrency. The connection is shared by the threads of a process under the journal's one lock
(reads and writes alike); between processes SQLite's own locking serializes writers
(``BEGIN IMMEDIATE`` for read-then-write, a busy timeout for waiting).

Paths. ``Journal("runs/x.sqlite")`` creates the journal's own folder (``runs``) when its parent
exists, and nothing else: a mistyped path is refused (``journal_unavailable``), never a tree of
folders created somewhere. A file that is not a sound SQLite database (a flipped bit, another
format) is ``journal_corrupt``, on open or on any later read.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any, ClassVar

from loom_nb.errors import JournalError
from loom_nb.journal._backend import JournalBackend, Listener
from loom_nb.journal._schema import migrate
from loom_nb.journal._watch import PollListener

__all__ = ["SqliteBackend"]


class SqliteBackend(JournalBackend):
    """One SQLite connection, shared by the process's threads under ``lock`` (the journal's)."""

    Error: ClassVar[type[Exception]] = sqlite3.Error
    IntegrityError: ClassVar[type[Exception]] = sqlite3.IntegrityError
    BEGIN_WRITE: ClassVar[str] = "BEGIN IMMEDIATE"
    watch_poll: ClassVar[float] = 0.25
    # One writer at a time holds the whole database: nothing to lock row by row.
    BEGIN_QUEUE: ClassVar[str] = "BEGIN IMMEDIATE"
    SKIP_LOCKED: ClassVar[str] = ""
    FOR_UPDATE: ClassVar[str] = ""

    def __init__(
        self, path: str, *, synchronous: str, timeout: float, lock: threading.Lock
    ) -> None:
        self.path = path
        self._lock = lock
        self.conn = self._connect(synchronous, timeout)

    def reading(self) -> contextlib.AbstractContextManager[Any]:
        """SQLite's one connection, under the lock."""
        return self._lock

    def writing(
        self, execution_id: str, *, database: bool = True
    ) -> contextlib.AbstractContextManager[Any]:
        """The journal's one lock (it guards the connection, every lease and every claim)."""
        return self._lock

    def listen(self, execution_id: str) -> Listener:
        """SQLite has no notifications: a watch sleeps between looks."""
        return PollListener()

    def damaged(self, exc: BaseException) -> JournalError | None:
        return _corrupt(exc, self.path) if _is_corruption(exc) else None

    def _connect(self, synchronous: str, timeout: float) -> sqlite3.Connection:
        """Open and migrate the SQLite database."""
        try:
            if self.path != ":memory:" and not self.path.startswith("file:"):
                _make_own_folder(Path(self.path))
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=timeout
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={synchronous}")
            migrate(conn)
        except sqlite3.DatabaseError as exc:
            if _is_corruption(exc):
                raise _corrupt(exc, self.path) from exc
            raise JournalError(
                f"cannot open the journal at {self.path!r}: {exc}. Check the path is a writable "
                "SQLite file (or ':memory:').",
                code="journal_unavailable",
                path=self.path,
            ) from exc
        except (OSError, sqlite3.Error) as exc:
            raise JournalError(
                f"cannot open the journal at {self.path!r}: {exc}. Check the path is a writable "
                "SQLite file (or ':memory:').",
                code="journal_unavailable",
                path=self.path,
            ) from exc
        return conn


def _is_corruption(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, sqlite3.DatabaseError) and (
        "malformed" in text or "not a database" in text or "corrupt" in text
    )


def _corrupt(exc: BaseException, path: str) -> JournalError:
    return JournalError(
        f"the journal at {path!r} is damaged ({exc}): it is not a sound SQLite database. Restore "
        "it from a backup, or replay from a recording (journal.import_jsonl into a new journal).",
        code="journal_corrupt",
        path=path,
    )


def _make_own_folder(path: Path) -> None:
    """Create the journal file's own folder when its parent exists; refuse any deeper gap."""
    folder = path.parent
    if folder.is_dir():
        return
    if not folder.parent.is_dir():
        raise JournalError(
            f"cannot create the journal at {os.fspath(path)!r}: neither its folder "
            f"{os.fspath(folder)!r} nor that folder's parent exists. Create the folders first, "
            "or check the path for a typo.",
            code="journal_unavailable",
            path=os.fspath(path),
        )
    try:
        folder.mkdir(exist_ok=True)
    except OSError as exc:
        raise JournalError(
            f"cannot create the journal's folder {os.fspath(folder)!r}: {exc}.",
            code="journal_unavailable",
            path=os.fspath(path),
        ) from exc
