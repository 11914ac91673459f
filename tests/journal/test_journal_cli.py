"""The ``loom-nb journal`` command: ls, show, export, import."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from loom_nb.cli import main
from loom_nb.journal import Journal
from loom_nb.store import LocalContentStore, Principal


def make_run(path: Path, store: LocalContentStore | None = None) -> None:
    async def run() -> None:
        journal = Journal(path, store=store, claim_threshold=64)
        execution = journal.execution("demo", principal=Principal("acme"))
        await execution.execute("plan", lambda _: {"say": "hello " * 30})
        await execution.complete("done")
        journal.close()

    asyncio.run(run())


def test_ls_lists_executions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """ls prints one line per execution with its status and step count; --json prints objects."""
    path = tmp_path / "j.sqlite"
    make_run(path)
    assert main(["journal", "ls", "--journal", str(path)]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("demo\tcompleted\t1 steps\t4 events\tacme\t")
    assert main(["journal", "ls", "--journal", str(path), "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert (row["execution_id"], row["status"], row["steps"]) == ("demo", "completed", 1)


def test_default_journal_comes_from_the_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --journal, LOOM_NB_JOURNAL names the file, else ./.loom/journal.sqlite."""
    path = tmp_path / "env.sqlite"
    make_run(path)
    monkeypatch.setenv("LOOM_NB_JOURNAL", str(path))
    assert main(["journal", "ls"]) == 0
    assert capsys.readouterr().out.startswith("demo\t")
    monkeypatch.delenv("LOOM_NB_JOURNAL")
    monkeypatch.chdir(tmp_path)
    make_run(tmp_path / ".loom" / "journal.sqlite")
    assert main(["journal", "ls"]) == 0
    assert capsys.readouterr().out.startswith("demo\t")


def test_show_prints_events(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """show prints each event with seq, position, kind and step id; --json prints whole events."""
    path = tmp_path / "j.sqlite"
    make_run(path)
    assert main(["journal", "show", "demo", "--journal", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[1:3] for line in lines[1:]] == [
        ["#0", "step_started"],
        ["#0", "step_completed"],
        ["#1", "completed"],
    ]
    assert "plan" in lines[2]
    assert main(["journal", "show", "demo", "--journal", str(path), "--json"]) == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert events[2]["payload"]["output"] == {"say": "hello " * 30}


def test_export_then_import_under_another_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """export -o writes the recording; import --as loads it into another journal under a new id."""
    path, recording = tmp_path / "j.sqlite", tmp_path / "run.jsonl"
    store = LocalContentStore(tmp_path / "store")
    make_run(path, store)
    args = ["--journal", str(path), "--store", str(tmp_path / "store")]
    assert main(["journal", "export", "demo", "-o", str(recording), *args]) == 0
    assert "__loomContent" not in recording.read_text("utf-8")
    other = tmp_path / "other.sqlite"
    assert main(["journal", "import", str(recording), "--journal", str(other), "--as", "copy"]) == 0
    assert capsys.readouterr().out.strip() == "copy"
    assert Journal(other).execution("copy").output == "done"


def test_export_to_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """export -o - writes the recording to standard output."""
    path = tmp_path / "j.sqlite"
    make_run(path)
    assert main(["journal", "export", "demo", "-o", "-", "--journal", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert json.loads(lines[0])["kind"] == "execution_started"
    assert len(lines) == 4


def test_missing_journal_and_execution_are_clear_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing journal file or execution exits 1 with the error code, and no file is created."""
    missing = tmp_path / "nope.sqlite"
    assert main(["journal", "ls", "--journal", str(missing)]) == 1
    assert "[no_journal]" in capsys.readouterr().err
    assert not missing.exists()
    path = tmp_path / "j.sqlite"
    make_run(path)
    assert main(["journal", "show", "ghost", "--journal", str(path)]) == 1
    assert "[execution_not_found]" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{oops\n", encoding="utf-8")
    assert main(["journal", "import", str(bad), "--journal", str(path)]) == 1
    assert "[recording_invalid]" in capsys.readouterr().err
