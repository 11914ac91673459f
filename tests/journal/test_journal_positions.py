"""A call refused before it is journaled leaves no hole in the timeline, and odd strings journal."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loom_nb.errors import JournalError, StepOutputError
from loom_nb.journal import Journal


def never(_: Any) -> Any:
    raise AssertionError("a replayed step must not call its fn")


async def test_a_refused_input_leaves_no_gap_before_the_next_step(tmp_path: Path) -> None:
    """After a step refused for a non-JSON input, the next step journals and the log reopens."""
    journal = Journal(tmp_path / "j.sqlite")
    execution = journal.execution("r")
    with pytest.raises(StepOutputError):
        await execution.execute("bad", never, {1, 2})
    assert await execution.execute("good", lambda x: x + 1, 1) == 2
    await execution.complete("done")
    reopened = journal.execution("r")
    assert reopened.status == "completed"
    assert await reopened.execute("good", never, 1) == 2


async def test_refused_park_and_completion_payloads_leave_no_gap(
    open_journal: Callable[..., Journal],
) -> None:
    """A non-JSON park or completion payload is refused and the next call takes its position."""
    journal = open_journal()
    execution = journal.execution("r")
    with pytest.raises(StepOutputError):
        await execution.park({1, 2})
    assert await execution.park({"ask": 1}) is None
    await execution.resume(True)
    assert await execution.park({"ask": 1}) is True
    with pytest.raises(StepOutputError):
        await execution.complete(float("inf"))
    await execution.complete("ok")
    assert journal.execution("r").output == "ok"


async def test_steps_refused_on_a_parked_execution_never_damage_the_log(
    open_journal: Callable[..., Journal],
) -> None:
    """Repeated steps on a parked execution are refused as parked, and the log still reopens."""
    journal = open_journal()
    execution = journal.execution("r")
    await execution.park("wait")
    for _ in range(3):
        with pytest.raises(JournalError) as info:
            await execution.execute("s", lambda x: x, 1)
        assert info.value.code == "execution_parked"
    assert journal.execution("r").status == "parked"


async def test_a_step_fn_that_is_not_callable_is_a_journal_error(
    open_journal: Callable[..., Journal],
) -> None:
    """A step fn that is not callable is refused before anything is journaled."""
    journal = open_journal()
    execution = journal.execution("r")
    with pytest.raises(JournalError) as info:
        await execution.execute("s", None, 1)  # type: ignore[arg-type]
    assert info.value.code == "invalid_step_fn"
    assert await execution.execute("s", lambda x: x, 1) == 1
    assert [e.kind for e in journal.events("r")] == [
        "execution_started",
        "step_started",
        "step_completed",
    ]


async def test_seek_takes_the_log_as_replayed_and_goes_on_live_after_it(
    open_journal: Callable[..., Journal],
) -> None:
    """seek(len) skips the recorded steps (never asked again) and the next call runs live after them."""
    journal = open_journal()
    first = journal.execution("s")
    await first.execute("a", lambda x: x, 1)
    await first.execute("b", lambda x: x, 2)
    again = journal.execution("s")
    assert again.next_recorded == "a"
    again.seek(2)
    assert again.next_recorded is None
    assert not again.is_replaying
    # Another step id and input than the log's first: no divergence, it is position 2, live.
    assert await again.execute("c", lambda x: x * 10, 3) == 30
    assert [(e.step_id, e.position) for e in journal.events("s") if e.kind == "step_completed"] == [
        ("a", 0),
        ("b", 1),
        ("c", 2),
    ]
    middle = journal.execution("s")
    middle.seek(1)
    assert middle.next_recorded == "b"
    assert await middle.execute("b", never, 2) == 2  # still served from the log
    with pytest.raises(JournalError) as info:
        middle.seek(4)
    assert info.value.code == "invalid_argument"


async def test_seek_with_supersede_starts_the_log_over(
    open_journal: Callable[..., Journal],
) -> None:
    """seek(0, supersede=True): the next call runs live at 0 and the timeline keeps only what follows."""
    journal = open_journal()
    execution = journal.execution("o")
    await execution.execute("old", lambda x: x, 1)
    await execution.execute("older", lambda x: x, 2)
    execution.seek(0, supersede=True)
    assert await execution.execute("new", lambda x: x + 1, 1) == 2
    reopened = journal.execution("o")
    assert reopened.next_recorded == "new"
    assert await reopened.execute("new", never, 1) == 2
    assert not reopened.is_replaying  # "older" was superseded: the timeline ends after "new"
    assert len(journal.events("o")) == 7  # the log itself keeps everything (append-only)


def test_meta_is_recorded_with_a_new_execution_only(
    open_journal: Callable[..., Journal],
) -> None:
    """meta= goes into a new execution's start (start_of reads it); reopening keeps the first."""
    journal = open_journal()
    assert journal.start_of("m") is None
    journal.execution("m", meta={"chat": {"model": "x"}})
    journal.execution("m", meta={"chat": {"model": "y"}})
    assert journal.start_of("m") == {"meta": {"chat": {"model": "x"}}, "principal": None}
    journal.execution("plain")
    assert journal.start_of("plain") == {"principal": None}  # no meta: the old payload
