"""Input hashes, fork, and the small holes: folders, corruption (issue 15)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from loom_nb.errors import JournalError, ReplayDivergenceError
from loom_nb.journal import Journal


def never(_: Any) -> Any:
    raise AssertionError("a replayed step must not call its fn")


async def test_changed_input_raises_input_changed_with_a_remedy() -> None:
    """Replaying a step with an input other than the recorded one raises ReplayDivergenceError('input_changed')."""
    journal = Journal()
    await journal.execution("r").execute("ask", lambda q: q.upper(), "old prompt")
    with pytest.raises(ReplayDivergenceError) as info:
        await journal.execution("r").execute("ask", never, "edited prompt")
    assert info.value.code == "input_changed"
    assert "fork" in info.value.message
    assert "ignore_inputs" in info.value.message
    assert info.value.details["step_id"] == "ask"
    # Nothing was written by the refused call: the same input still replays.
    assert await journal.execution("r").execute("ask", never, "old prompt") == "OLD PROMPT"


async def test_ignore_inputs_serves_the_recorded_output() -> None:
    """divergence='ignore_inputs' serves the recorded step despite a changed input; another step id still fails."""
    journal = Journal()
    await journal.execution("r").execute("ask", lambda q: q.upper(), "old")
    execution = journal.execution("r", divergence="ignore_inputs")
    assert await execution.execute("ask", never, "new") == "OLD"
    with pytest.raises(ReplayDivergenceError) as info:
        await journal.execution("r", divergence="ignore_inputs").execute("other", never, 1)
    assert info.value.code == "replay_divergence"


async def test_warn_reruns_a_changed_step_live() -> None:
    """divergence='warn' journals a divergence for a changed input and runs the step live."""
    journal = Journal()
    await journal.execution("r").execute("ask", lambda q: q.upper(), "old")
    assert await journal.execution("r", divergence="warn").execute("ask", str.upper, "new") == "NEW"
    kinds = [e.kind for e in journal.events("r")]
    assert kinds[-3:] == ["divergence", "step_started", "step_completed"]
    assert await journal.execution("r").execute("ask", never, "new") == "NEW"


async def test_fork_serves_the_prefix_and_runs_live_from_the_step() -> None:
    """fork(step, new_id) replays the steps before it and runs that step live; the parent is untouched."""
    journal = Journal()
    parent = journal.execution("p")
    for i in range(3):
        await parent.execute(f"s{i}", lambda x: x * 10, i)
    child = parent.fork("s2", "c")
    assert await child.execute("s0", never, 0) == 0
    assert await child.execute("s1", never, 1) == 10
    assert child.is_replaying is False
    assert await child.execute("s2", lambda x: x * 100, 5) == 500
    assert journal.events("c")[0].payload["forked_from"] == {"execution_id": "p", "position": 2}
    reopened = journal.execution("p")
    assert [await reopened.execute(f"s{i}", never, i) for i in range(3)] == [0, 10, 20]
    # By position too, and the fork exports and imports exactly.
    again = journal.execution("c").fork(3, "c2")
    assert await again.execute("s0", never, 0) == 0
    out = io.StringIO()
    journal.export_jsonl("c", out)
    other = Journal()
    other.import_jsonl(io.StringIO(out.getvalue()))
    copy = io.StringIO()
    other.export_jsonl("c", copy)
    assert copy.getvalue() == out.getvalue()
    imported = other.execution("c")
    assert [await imported.execute(f"s{i}", never, i) for i in range(2)] == [0, 10]
    assert await imported.execute("s2", never, 5) == 500


async def test_fork_refuses_unknown_steps_and_taken_ids() -> None:
    """fork names an unknown step, a position out of range and a taken id with codes."""
    journal = Journal()
    parent = journal.execution("p")
    await parent.execute("s0", lambda x: x, 0)
    for at, code in (("nope", "unknown_step"), (7, "unknown_step"), (1.5, "invalid_argument")):
        with pytest.raises(JournalError) as info:
            parent.fork(at, "c")  # type: ignore[arg-type]
        assert info.value.code == code
    with pytest.raises(JournalError) as info:
        parent.fork("s0", "p")
    assert info.value.code == "execution_exists"
    with pytest.raises(JournalError) as info:
        parent.fork("s0", "")
    assert info.value.code == "invalid_execution_id"


def test_missing_folders_are_refused_not_created(tmp_path: Path) -> None:
    """Journal(path) creates the file's own folder when its parent exists and refuses anything deeper."""
    with pytest.raises(JournalError) as info:
        Journal(tmp_path / "no" / "such" / "x.sqlite")
    assert info.value.code == "journal_unavailable"
    assert not (tmp_path / "no").exists()
    Journal(tmp_path / "own" / "x.sqlite").close()
    assert (tmp_path / "own" / "x.sqlite").is_file()


async def test_bit_flipped_database_reads_as_corrupt(tmp_path: Path) -> None:
    """A database whose pages were damaged reports journal_corrupt, on open or on a read, not a write failure."""
    path = tmp_path / "j.sqlite"
    journal = Journal(path)
    execution = journal.execution("r")
    for i in range(200):
        await execution.execute(f"s{i}", lambda x: {"pad": "x" * 500, "n": x}, i)
    journal.close()
    import sqlite3

    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(path.read_bytes())
    page = 4096
    for offset in range(page * 3, len(data) - page, page):
        data[offset + 8 : offset + 40] = bytes(x ^ 0xFF for x in data[offset + 8 : offset + 40])
    path.write_bytes(bytes(data))

    def read_all() -> None:
        reopened = Journal(path)
        reopened.events("r")
        reopened.execution("r")

    with pytest.raises(JournalError) as info:
        read_all()
    assert info.value.code == "journal_corrupt"
    header = bytearray(path.read_bytes())
    header[0:16] = b"not a database!!"
    path.write_bytes(bytes(header))
    with pytest.raises(JournalError) as info:
        Journal(path)
    assert info.value.code == "journal_corrupt"
