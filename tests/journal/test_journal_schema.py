"""Schema migrations: an older journal upgrades in place, a newer one is refused."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from loom_nb.errors import JournalError
from loom_nb.journal import Journal
from loom_nb.journal._schema import MIGRATIONS, _refuse, m001_events, m002_append_only
from loom_nb.journal._sql import AFTER, SELECT, STARTED


def old_journal(path: Path) -> None:
    """A journal as the first release wrote it: two migrations, no ordinals, no leases."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(
        "CREATE TABLE loom_journal_migrations (name TEXT PRIMARY KEY, applied TEXT NOT NULL)"
    )
    for migration in (m001_events, m002_append_only):
        migration(conn)
        conn.execute(
            "INSERT INTO loom_journal_migrations VALUES (?, 'then')", (migration.__name__,)
        )
    rows = []
    for run in ("a", "b"):
        rows.append((run, "execution_started", None, None, '{"principal":null}'))
    for run in ("a", "b"):
        rows.append((run, "step_started", "s", 0, "{}"))
        rows.append((run, "step_completed", "s", 0, '{"input":1,"output":' + f'"{run}"' + "}"))
    conn.executemany(
        "INSERT INTO events (execution_id, kind, step_id, position, payload, created) "
        "VALUES (?, ?, ?, ?, ?, '2026-01-01T00:00:00+00:00')",
        rows,
    )
    conn.close()


async def test_old_journal_gets_ordinals_and_replays(tmp_path: Path) -> None:
    """Opening a journal written before ordinals numbers each execution's events and replays it (no input hashes recorded)."""
    path = tmp_path / "old.sqlite"
    old_journal(path)
    journal = Journal(path)
    conn = sqlite3.connect(path)
    numbered = conn.execute("SELECT execution_id, ordinal FROM events ORDER BY seq").fetchall()
    assert numbered == [("a", 0), ("b", 0), ("a", 1), ("a", 2), ("b", 1), ("b", 2)]
    names = [r[0] for r in conn.execute("SELECT name FROM loom_journal_migrations")]
    assert names == [m.__name__ for m in MIGRATIONS]
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("UPDATE events SET kind = 'x'")
    conn.close()
    execution = journal.execution("a")
    # Recorded without an input hash: served by step id alone, whatever the input now is.
    assert await execution.execute("s", lambda _: "live", 99) == "a"
    assert await execution.execute("t", lambda x: x, 2) == 2
    assert [e.kind for e in journal.events("a")][-1] == "step_completed"


def test_journal_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    """A journal recording a migration this version does not know is refused with journal_too_new."""
    path = tmp_path / "new.sqlite"
    Journal(path).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO loom_journal_migrations VALUES ('m999_future', 'later')")
    conn.commit()
    conn.close()
    with pytest.raises(JournalError) as info:
        Journal(path)
    assert info.value.code == "journal_too_new"
    assert "m999_future" in info.value.message


async def test_a_journal_numbered_by_autoincrement_keeps_its_seqs_and_rules(tmp_path: Path) -> None:
    """m007 rebuilds ``events`` without AUTOINCREMENT: every row and seq kept (gaps too), the
    append-only triggers and the ordinal uniqueness back, and new rows numbered after the last."""
    path = tmp_path / "old.sqlite"
    old_journal(path)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DROP TRIGGER events_no_delete")  # a gap in seq: copied, never renumbered
    conn.execute("DELETE FROM events WHERE seq = 3")
    _refuse(conn, "DELETE")  # the delete trigger back, as m002 made it
    before = conn.execute("SELECT seq, execution_id, kind, payload FROM events").fetchall()
    conn.close()
    journal = Journal(path)
    conn = sqlite3.connect(path, isolation_level=None)
    after = conn.execute("SELECT seq, execution_id, kind, payload FROM events").fetchall()
    assert after == before
    assert [row[0] for row in after] == [1, 2, 4, 5, 6]
    (table,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'events'").fetchone()
    assert "AUTOINCREMENT" not in table
    assert conn.execute("SELECT name FROM sqlite_sequence WHERE name = 'events'").fetchall() == []
    indexes = {
        row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
    }
    assert "events_by_ordinal" in indexes
    assert "events_by_execution" not in indexes  # m008 dropped it after m007 made it again
    for statement in ("UPDATE events SET kind = 'x'", "DELETE FROM events"):
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute(statement)
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
        conn.execute(
            "INSERT INTO events (execution_id, kind, payload, created, ordinal) "
            "VALUES ('a', 'x', '{}', 'now', 0)"
        )
    conn.close()
    execution = journal.execution("b")
    assert await execution.execute("s", lambda _: "live", 99) == "b"  # served as before
    assert await execution.execute("t", lambda x: x, 2) == 2
    assert [e.seq for e in journal.events("b")][-2:] == [7, 8]  # after the last, no reuse


async def test_an_execution_is_read_through_its_one_index_in_order(tmp_path: Path) -> None:
    """m008 leaves ``events_by_ordinal`` the only index on ``events``: an execution's reads
    (whole, after a seq, its start) search it, none scans the table, and each returns the
    events in ``seq`` order, the tail from the seq of one of its events or from any other seq."""
    path = tmp_path / "old.sqlite"
    old_journal(path)  # two executions' rows interleaved, numbered by m003
    journal = Journal(path)
    executions = {run: journal.execution(run) for run in ("a", "b")}
    for execution in executions.values():
        await execution.execute("s", lambda _: "live", 99)  # served: the old journal's step
    for run in ("b", "a", "b", "b", "a"):  # more interleaving, appended live
        await executions[run].execute(f"t{len(journal.events(run))}", lambda x: x, 1)
    conn = sqlite3.connect(path)
    indexes = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE tbl_name = 'events' AND type = 'index'"
        )
    ]
    assert indexes == ["events_by_ordinal"]
    for sql, params in (
        (SELECT, ("a",)),
        (AFTER, ("a", 3, "a", 3)),
        (STARTED, ("a",)),
    ):
        plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
        assert any("USING INDEX events_by_ordinal (execution_id=?" in step for step in plan), plan
        assert not any(step.startswith("SCAN") for step in plan), plan
    by_seq = {
        run: [
            row[0]
            for row in conn.execute(
                "SELECT seq FROM events WHERE execution_id = ? ORDER BY seq", (run,)
            )
        ]
        for run in ("a", "b")
    }
    conn.close()
    assert len(by_seq["b"]) > len(by_seq["a"]) > 3
    for run, seqs in by_seq.items():
        assert [e.seq for e in journal.events(run)] == seqs
        assert [e.seq for e in journal.events_after(run, 0)] == seqs
        for index, seq in enumerate(seqs):  # from each of its own events: the rest
            assert [e.seq for e in journal.events_after(run, seq)] == seqs[index + 1 :]
        other = by_seq["a" if run == "b" else "b"]
        for seq in other:  # from another execution's seq: its own events after that seq
            assert [e.seq for e in journal.events_after(run, seq)] == [s for s in seqs if s > seq]
        assert journal.events_after(run, max(seqs) + 100) == []
    assert journal.start_of("a") == {"principal": None}
    journal.close()
