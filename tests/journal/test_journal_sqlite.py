"""The SQLite backend: its own folder, damaged files, one lock, and the transaction the backend seam writes once."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from loom_nb.errors import JournalError
from loom_nb.journal._sqlite import SqliteBackend
from loom_nb.journal._watch import PollListener


def _open(path: Path | str, lock: threading.Lock | None = None) -> SqliteBackend:
    return SqliteBackend(
        str(path), synchronous="NORMAL", timeout=1.0, lock=lock or threading.Lock()
    )


def test_the_file_gets_its_own_folder_but_no_deeper_one(tmp_path: Path) -> None:
    """The journal file's folder is created when its parent exists; a deeper gap is journal_unavailable."""
    backend = _open(tmp_path / "runs" / "j.sqlite")
    backend.close()
    assert (tmp_path / "runs" / "j.sqlite").is_file()
    with pytest.raises(JournalError) as info:
        _open(tmp_path / "no" / "such" / "j.sqlite")
    assert info.value.code == "journal_unavailable"
    assert not (tmp_path / "no").exists()


def test_a_file_that_is_not_sqlite_is_journal_corrupt(tmp_path: Path) -> None:
    """Opening bytes that are not a SQLite database is journal_corrupt, naming the path."""
    path = tmp_path / "j.sqlite"
    path.write_bytes(b"not a database at all, just some bytes" * 200)
    with pytest.raises(JournalError) as info:
        _open(path)
    assert info.value.code == "journal_corrupt"
    assert str(path) in info.value.message


def test_reads_and_writes_hold_the_journals_one_lock() -> None:
    """Every scope is the lock the journal handed in (it also guards the writer's bookkeeping)."""
    lock = threading.Lock()
    backend = _open(":memory:", lock)
    assert backend.reading() is lock
    assert backend.writing("e") is lock
    assert backend.writing("e", database=False) is lock
    assert isinstance(backend.listen("e"), PollListener)
    backend.close()


def test_damaged_names_only_corruption() -> None:
    """damaged() turns a 'malformed' database error into journal_corrupt and leaves others alone."""
    backend = _open(":memory:")
    corrupt = backend.damaged(sqlite3.DatabaseError("database disk image is malformed"))
    assert corrupt is not None
    assert corrupt.code == "journal_corrupt"
    assert backend.damaged(sqlite3.OperationalError("database is locked")) is None
    backend.close()


def test_a_failed_transaction_is_rolled_back() -> None:
    """transaction() commits the body's rows, or none of them when the body raises."""
    backend = _open(":memory:")
    backend.conn.execute("CREATE TABLE t (x INTEGER UNIQUE)")

    def body() -> None:
        backend.conn.execute("INSERT INTO t VALUES (1)")
        raise ValueError("no")

    with pytest.raises(ValueError):
        backend.transaction(body, what="test")
    assert backend.conn.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 0
    backend.transaction(lambda: backend.conn.execute("INSERT INTO t VALUES (1)"), what="test")
    assert backend.conn.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 1
    backend.close()


def test_database_errors_in_a_transaction_are_journal_errors() -> None:
    """A duplicate row on import is execution_exists; any other failed write journal_write_failed."""
    backend = _open(":memory:")
    backend.conn.execute("CREATE TABLE t (x INTEGER UNIQUE)")
    backend.conn.execute("INSERT INTO t VALUES (1)")

    def insert() -> None:
        backend.conn.execute("INSERT INTO t VALUES (1)")

    with pytest.raises(JournalError) as info:
        backend.transaction(insert, what="import")
    assert info.value.code == "execution_exists"
    with pytest.raises(JournalError) as info:
        backend.transaction(insert, what="append")
    assert info.value.code == "journal_write_failed"
    with pytest.raises(JournalError) as info:
        backend.read(lambda: backend.conn.execute("SELECT * FROM missing").fetchall())
    assert info.value.code == "journal_unavailable"
    backend.close()
