"""The journal's write side on its own: appends at ordinals, in-process claims, and leases given back."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from loom_nb.errors import ExecutionBusyError
from loom_nb.journal._sql import INSERTS, LEASE_GET
from loom_nb.journal._sqlite import SqliteBackend
from loom_nb.journal._writer import Writer


def _writer(path: Path) -> Writer:
    lock = threading.Lock()
    backend = SqliteBackend(str(path), synchronous="NORMAL", timeout=1.0, lock=lock)
    return Writer(backend, lock=lock, lease_ttl=30.0, label="Journal('test')", heartbeat=False)


def _kinds(writer: Writer, execution_id: str) -> list[tuple[str, int]]:
    rows = writer._backend.conn.execute(
        "SELECT kind, ordinal FROM events WHERE execution_id = ? ORDER BY seq", (execution_id,)
    ).fetchall()
    return [(kind, ordinal) for kind, ordinal in rows]


def test_appends_take_consecutive_ordinals_and_the_lease(tmp_path: Path) -> None:
    """Rows land at their ordinals in order, and the first append takes the execution's lease."""
    writer = _writer(tmp_path / "j.sqlite")
    writer.append("e", 0, [("execution_started", None, None, "{}")])
    writer.append("e", 1, [("step_started", "s", 0, "{}"), ("step_completed", "s", 0, "{}")])
    assert _kinds(writer, "e") == [
        ("execution_started", 0),
        ("step_started", 1),
        ("step_completed", 2),
    ]
    assert writer._backend.conn.execute(LEASE_GET, ("e",)).fetchone() is not None
    writer.close()


def test_an_append_behind_the_log_is_log_moved(tmp_path: Path) -> None:
    """Appending at an ordinal another writer already used is ExecutionBusyError(log_moved)."""
    writer = _writer(tmp_path / "j.sqlite")
    writer.append("e", 0, [("execution_started", None, None, "{}")])
    with pytest.raises(ExecutionBusyError) as info:
        writer.append("e", 0, [("step_started", "s", 0, "{}")])
    assert info.value.details["reason"] == "log_moved"
    writer.close()


def test_another_owner_is_refused_while_a_step_is_claimed(tmp_path: Path) -> None:
    """hold() claims the execution for one owner until let_go(); another owner is refused in_process."""
    writer = _writer(tmp_path / "j.sqlite")
    writer.append("e", 0, [("execution_started", None, None, "{}")])
    mine, theirs = (object(), 1), (object(), 2)
    writer.hold("e", 1, mine)
    with pytest.raises(ExecutionBusyError) as info:
        writer.check_busy("e", theirs)
    assert info.value.details["reason"] == "in_process"
    with pytest.raises(ExecutionBusyError):
        writer.append("e", 1, [("step_started", "s", 0, "{}")], owner=theirs)
    writer.let_go("e", mine)
    writer.check_busy("e", theirs)
    writer.append("e", 1, [("step_started", "s", 0, "{}")], owner=theirs)
    writer.close()


def test_close_gives_the_leases_back(tmp_path: Path) -> None:
    """Closing the writer deletes the lease rows this process holds, so another can take over at once."""
    path = tmp_path / "j.sqlite"
    writer = _writer(path)
    writer.append("e", 0, [("execution_started", None, None, "{}")])
    writer.close()
    other = _writer(path)
    assert other._backend.conn.execute(LEASE_GET, ("e",)).fetchone() is None
    other.close()


def test_inserts_hold_as_many_rows_as_they_name() -> None:
    """INSERTS[n] is one statement with n rows of seven placeholders."""
    for n, statement in INSERTS.items():
        assert statement.count("?") == 7 * n
