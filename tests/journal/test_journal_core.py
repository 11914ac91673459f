"""Executions: journaled steps, exact replay, divergence, failures, parks and completion."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from loom_nb.errors import JournalError, ReplayDivergenceError, StepOutputError
from loom_nb.journal import Journal
from loom_nb.journal._codec import text_hash
from loom_nb.journal._schema import MIGRATIONS
from loom_nb.store import Principal
from loom_nb.taint import Untrusted


class Point(BaseModel):
    x: int
    y: tuple[int, int]


def never(_: Any) -> Any:
    raise AssertionError("a replayed step must not call its fn")


def kinds(journal: Journal, execution_id: str) -> list[tuple[str, str | None, int | None]]:
    return [(e.kind, e.step_id, e.position) for e in journal.events(execution_id)]


async def test_live_step_journals_input_and_output(open_journal: Callable[..., Journal]) -> None:
    """A live step runs fn(input) and journals step_started then step_completed with input and output."""
    journal = open_journal()
    execution = journal.execution("r")
    assert await execution.execute("add", lambda x: x + 1, 41) == 42
    events = journal.events("r")
    assert [e.kind for e in events] == ["execution_started", "step_started", "step_completed"]
    assert events[2].payload == {"input": 41, "input_hash": text_hash("41"), "output": 42}
    assert events[2].step_id == "add"
    assert events[2].position == 0


async def test_async_fn_is_awaited_and_its_start_committed_first(
    open_journal: Callable[..., Journal],
) -> None:
    """An async fn is awaited, and its step_started is in the log while it is suspended."""
    journal = open_journal()
    execution = journal.execution("r")
    seen: list[list[str]] = []

    async def watcher() -> None:
        seen.append([e.kind for e in journal.events("r")])

    async def slow(x: int) -> int:
        task = asyncio.ensure_future(watcher())  # runs while slow is suspended
        await asyncio.sleep(0)
        await task
        return x * 2

    assert await execution.execute("double", slow, 4) == 8
    assert seen == [["execution_started", "step_started"]]
    assert [e.kind for e in journal.events("r")][-1] == "step_completed"


async def test_async_fn_that_never_suspends_is_one_commit(
    open_journal: Callable[..., Journal], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An awaitable that finishes without suspending is journaled like a sync step: one append."""
    journal = open_journal()
    execution = journal.execution("r")
    appends: list[list[str]] = []
    append = journal._append

    def counting(execution_id: str, ordinal: int, rows: list[Any], **kwargs: Any) -> None:
        appends.append([row[0] for row in rows])
        append(execution_id, ordinal, rows, **kwargs)

    monkeypatch.setattr(journal, "_append", counting)

    async def quick(x: int) -> int:
        return x + 1

    async def failing(_x: int) -> int:
        raise ValueError("no")

    assert await execution.execute("quick", quick, 1) == 2
    with pytest.raises(ValueError):
        await execution.execute("failing", failing, 1)
    assert appends == [["step_started", "step_completed"], ["step_started", "step_failed"]]
    kinds = [e.kind for e in journal.events("r")]
    assert kinds == [
        "execution_started",
        *["step_started", "step_completed"],
        *["step_started", "step_failed"],
    ]


async def test_an_awaitable_over_a_plain_iterator_is_awaited(
    open_journal: Callable[..., Journal],
) -> None:
    """An ``__await__`` that returns a plain iterator (no send/throw) is awaited, start first."""
    journal = open_journal()
    execution = journal.execution("r")

    class Plain:
        def __await__(self) -> Any:
            return iter([None])  # one bare yield, as asyncio.sleep(0) makes

    assert await execution.execute("plain", lambda _x: Plain(), 1) is None
    kinds = [e.kind for e in journal.events("r")]
    assert kinds == ["execution_started", "step_started", "step_completed"]


async def test_a_start_the_journal_refuses_stops_the_suspended_step(
    open_journal: Callable[..., Journal], monkeypatch: pytest.MonkeyPatch
) -> None:
    """If the start cannot be journaled at the first suspension, the awaitable goes no further."""
    journal = open_journal()
    execution = journal.execution("r")
    reached: list[str] = []

    def refuse(*_args: Any, **_kwargs: Any) -> None:
        raise RuntimeError("disk full")

    async def slow(x: int) -> int:
        reached.append("before")
        try:
            await asyncio.sleep(0)
        finally:
            reached.append("closed")
        reached.append("after")
        return x

    monkeypatch.setattr(journal, "_append", refuse)
    with pytest.raises(RuntimeError, match="disk full"):
        await execution.execute("slow", slow, 1)
    assert reached == ["before", "closed"]


async def test_a_cancelled_suspended_step_is_journaled_failed(
    open_journal: Callable[..., Journal],
) -> None:
    """Cancellation reaches the awaitable through the wrapper; the step's start and failure land."""
    journal = open_journal()
    execution = journal.execution("r")
    entered = asyncio.Event()

    async def forever(_x: int) -> int:
        entered.set()
        await asyncio.sleep(3600)
        return 0

    task = asyncio.ensure_future(execution.execute("forever", forever, 1))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    kinds = [e.kind for e in journal.events("r")]
    assert kinds == ["execution_started", "step_started", "step_failed"]


async def test_replay_serves_recorded_outputs_without_calling_fn(
    open_journal: Callable[..., Journal],
) -> None:
    """A reopened execution returns each completed step's recorded output and never calls fn."""
    journal = open_journal()
    first = journal.execution("r")
    outputs = [await first.execute(f"s{i}", lambda x: {"n": x * 10}, i) for i in range(3)]
    replay = journal.execution("r")
    assert replay.is_replaying
    again = [await replay.execute(f"s{i}", never, i) for i in range(3)]
    assert again == outputs
    assert not replay.is_replaying
    assert await replay.execute("s3", lambda x: x, "live") == "live"
    assert kinds(journal, "r")[-1] == ("step_completed", "s3", 3)


async def test_live_and_replayed_values_are_the_same_json_round_trip(
    open_journal: Callable[..., Journal],
) -> None:
    """Live and replayed, execute returns the JSON round trip (models dumped, tuples as lists, taint as its marker)."""
    journal = open_journal()
    value = {"point": Point(x=1, y=(2, 3)), "pair": (1, 2), "t": Untrusted("hi", "tool:web")}
    live = await journal.execution("r").execute("s", lambda _: value)
    replayed = await journal.execution("r").execute("s", never)
    expected = {
        "pair": [1, 2],
        "point": {"x": 1, "y": [2, 3]},
        "t": {"__loomUntrusted": {"origin": "tool:web", "value": "hi"}},
    }
    assert live == replayed == expected


async def test_divergence_fail_names_expected_and_actual(
    open_journal: Callable[..., Journal],
) -> None:
    """Replay meeting another step id at a position raises ReplayDivergenceError naming both ids."""
    journal = open_journal()
    await journal.execution("r").execute("fetch", lambda _: 1)
    replay = journal.execution("r")
    with pytest.raises(ReplayDivergenceError) as info:
        await replay.execute("search", never)
    assert info.value.details["expected"] == "fetch"
    assert info.value.details["actual"] == "search"
    assert "'fetch'" in info.value.message
    assert "'search'" in info.value.message
    assert [e.kind for e in journal.events("r")][-1] == "step_completed"  # nothing written


async def test_divergence_warn_records_and_goes_live(open_journal: Callable[..., Journal]) -> None:
    """With divergence='warn' the divergence is journaled and the step runs live, superseding the old timeline."""
    journal = open_journal()
    old = journal.execution("r")
    await old.execute("a", lambda _: "a")
    await old.execute("b", lambda _: "b")
    warn = journal.execution("r", divergence="warn")
    assert await warn.execute("a", never) == "a"
    assert await warn.execute("c", lambda _: "c") == "c"
    divergence = [e for e in journal.events("r") if e.kind == "divergence"]
    assert len(divergence) == 1
    assert divergence[0].payload == {"actual": "c", "expected": "b"}
    replay = journal.execution("r")
    assert [await replay.execute("a", never), await replay.execute("c", never)] == ["a", "c"]
    assert not replay.is_replaying


async def test_failed_step_is_journaled_reraised_and_rerun_on_resume(
    open_journal: Callable[..., Journal],
) -> None:
    """A raising fn journals step_failed {type, code, message}, re-raises, and is run again on replay."""
    journal = open_journal()
    execution = journal.execution("r")
    await execution.execute("ok", lambda _: 1)

    def boom(_: Any) -> Any:
        raise StepOutputError("disk on fire", code="fire")

    with pytest.raises(StepOutputError, match="disk on fire"):
        await execution.execute("flaky", boom, {"q": 1})
    failed = journal.events("r")[-1]
    assert failed.kind == "step_failed"
    assert failed.payload == {
        "error": {"code": "fire", "message": "disk on fire", "type": "StepOutputError"},
        "input": {"q": 1},
        "input_hash": text_hash('{"q":1}'),
    }
    replay = journal.execution("r")
    assert await replay.execute("ok", never) == 1
    assert replay.is_replaying
    assert await replay.execute("flaky", lambda q: q["q"] + 1, {"q": 1}) == 2
    assert not replay.is_replaying
    assert kinds(journal, "r")[-2:] == [
        ("step_started", "flaky", 1),
        ("step_completed", "flaky", 1),
    ]


async def test_failure_caught_by_the_app_supersedes_later_steps_on_rerun(
    open_journal: Callable[..., Journal],
) -> None:
    """Re-running a failed step goes live from its position: steps recorded after it run again."""
    journal = open_journal()
    execution = journal.execution("r")
    with pytest.raises(RuntimeError):
        await execution.execute("try", lambda _: (_ for _ in ()).throw(RuntimeError("x")))
    await execution.execute("after", lambda _: "first run")
    replay = journal.execution("r")
    await replay.execute("try", lambda _: "worked")
    assert await replay.execute("after", lambda _: "second run") == "second run"
    assert await journal.execution("r").execute("try", never) == "worked"


@pytest.mark.parametrize(
    ("output", "code"),
    [
        ({1, 2}, "step_output_not_json"),
        (object(), "step_output_not_json"),
        (float("nan"), "step_output_not_json"),
        ({"inf": float("inf")}, "step_output_not_json"),
    ],
)
async def test_output_that_is_not_json_is_a_step_output_error(
    output: Any, code: str, open_journal: Callable[..., Journal]
) -> None:
    """An output JSON cannot hold raises StepOutputError at that step; no step_completed is written."""
    journal = open_journal()
    execution = journal.execution("r")
    with pytest.raises(StepOutputError) as info:
        await execution.execute("bad", lambda _: output)
    assert info.value.code == code
    assert "'bad'" in info.value.message
    assert [e.kind for e in journal.events("r")] == [
        "execution_started",
        "step_started",
        "step_failed",
    ]


async def test_too_deep_output_is_a_step_output_error(open_journal: Callable[..., Journal]) -> None:
    """An output nested deeper than the encoder allows is StepOutputError('step_value_too_deep'), not RecursionError."""
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    journal = open_journal()
    with pytest.raises(StepOutputError) as info:
        await journal.execution("r").execute("deep", lambda _: deep)
    assert info.value.code == "step_value_too_deep"
    assert "step_completed" not in [e.kind for e in journal.events("r")]


async def test_circular_output_is_a_step_output_error(open_journal: Callable[..., Journal]) -> None:
    """A circular output raises StepOutputError rather than ValueError."""
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(StepOutputError):
        await open_journal().execution("r").execute("loop", lambda _: loop)


async def test_input_that_is_not_json_fails_before_fn_runs(
    open_journal: Callable[..., Journal],
) -> None:
    """A non-JSON input is refused before fn runs and nothing is journaled for the step."""
    journal = open_journal()
    with pytest.raises(StepOutputError) as info:
        await journal.execution("r").execute("s", never, {1, 2})
    assert info.value.code == "step_input_not_json"
    assert [e.kind for e in journal.events("r")] == ["execution_started"]


async def test_park_resume_and_replay_returns_the_decision(
    open_journal: Callable[..., Journal],
) -> None:
    """park journals a payload and waits; resume records the decision; replayed, park returns it."""
    journal = open_journal()
    execution = journal.execution("r")
    await execution.execute("plan", lambda _: "plan")
    assert await execution.park({"approve": "delete"}) is None
    assert execution.status == "parked"
    assert execution.parked_payload == {"approve": "delete"}
    with pytest.raises(JournalError) as info:
        await execution.execute("act", never)
    assert info.value.code == "execution_parked"

    reopened = journal.execution("r")
    assert reopened.status == "parked"
    await reopened.resume({"approved": True})
    assert reopened.status == "running"
    assert reopened.parked_payload is None
    assert reopened.resumed_payload == {"approved": True}
    assert await reopened.execute("plan", never) == "plan"
    assert await reopened.park({"approve": "delete"}) == {"approved": True}
    assert await reopened.execute("act", lambda _: "done") == "done"
    assert [e.kind for e in journal.events("r")].count("parked") == 1


async def test_resume_when_not_parked_is_refused(open_journal: Callable[..., Journal]) -> None:
    """resume on a running execution raises JournalError('execution_not_parked')."""
    with pytest.raises(JournalError) as info:
        await open_journal().execution("r").resume("yes")
    assert info.value.code == "execution_not_parked"


async def test_complete_is_recorded_once_and_ends_the_run(
    open_journal: Callable[..., Journal],
) -> None:
    """complete journals the output once; replayed it is kept; a live step after it is refused."""
    journal = open_journal()
    execution = journal.execution("r")
    await execution.execute("s", lambda _: 1)
    await execution.complete({"answer": (4, 2)})
    assert execution.status == "completed"
    assert execution.output == {"answer": [4, 2]}
    replay = journal.execution("r")
    await replay.execute("s", never)
    await replay.complete({"answer": "ignored on replay"})
    assert [e.kind for e in journal.events("r")].count("completed") == 1
    with pytest.raises(JournalError) as info:
        await replay.execute("more", never)
    assert info.value.code == "execution_completed"


async def test_principal_is_recorded_and_enforced(open_journal: Callable[..., Journal]) -> None:
    """The starting principal is journaled, returned on reopen, and a different one is refused."""
    journal = open_journal()
    journal.execution("r", principal=Principal("acme", "ann"))
    assert journal.events("r")[0].payload == {"principal": {"subject": "ann", "tenant": "acme"}}
    assert journal.execution("r").principal == Principal("acme", "ann")
    with pytest.raises(JournalError) as info:
        journal.execution("r", principal=Principal("other"))
    assert info.value.code == "principal_mismatch"


async def test_concurrent_steps_take_positions_in_call_order(
    open_journal: Callable[..., Journal],
) -> None:
    """Steps gathered concurrently are numbered in call order and replay in that order."""
    journal = open_journal()
    execution = journal.execution("r")

    async def slow(x: int) -> int:
        await asyncio.sleep(0.001 * (3 - x))
        return x

    assert await asyncio.gather(*(execution.execute(f"s{i}", slow, i) for i in range(3))) == [
        0,
        1,
        2,
    ]
    replay = journal.execution("r")
    assert await asyncio.gather(*(replay.execute(f"s{i}", never, i) for i in range(3))) == [0, 1, 2]


def test_executions_summarize_status_and_steps(open_journal: Callable[..., Journal]) -> None:
    """journal.executions() lists each execution with its status, tenant and completed steps."""

    async def run() -> Journal:
        journal = open_journal()
        a = journal.execution("a", principal=Principal("acme"))
        await a.execute("s", lambda _: 1)
        await a.complete(1)
        b = journal.execution("b")
        await b.park("wait")
        journal.execution("c")
        return journal

    journal = asyncio.run(run())
    summary = {s.execution_id: s for s in journal.executions()}
    assert {k: (v.status, v.tenant, v.steps) for k, v in summary.items()} == {
        "a": ("completed", "acme", 1),
        "b": ("parked", None, 0),
        "c": ("running", None, 0),
    }
    assert summary["a"].events == 4  # started, step_started, step_completed, completed


@pytest.mark.parametrize(
    ("call", "code"),
    [
        (lambda j: j.execution(""), "invalid_execution_id"),
        (lambda j: j.execution("r", divergence="maybe"), "invalid_argument"),
        (lambda j: Journal(synchronous="OFF"), "invalid_argument"),
        (lambda j: Journal(claim_threshold=-1), "invalid_argument"),
    ],
)
def test_bad_arguments_are_journal_errors(
    call: Any, code: str, open_journal: Callable[..., Journal]
) -> None:
    """Bad arguments raise JournalError with a stable code."""
    with pytest.raises(JournalError) as info:
        call(open_journal())
    assert info.value.code == code


async def test_bad_step_id_is_refused(open_journal: Callable[..., Journal]) -> None:
    """An empty or non-string step id raises JournalError('invalid_step_id')."""
    with pytest.raises(JournalError) as info:
        await open_journal().execution("r").execute("", never)
    assert info.value.code == "invalid_step_id"


def test_file_journal_is_wal_append_only_and_migrated_once(tmp_path: Path) -> None:
    """A file journal runs in WAL mode, refuses UPDATE/DELETE, and applies each migration once."""
    path = tmp_path / "sub" / "j.sqlite"
    Journal(path).execution("r")
    Journal(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    names = [r[0] for r in conn.execute("SELECT name FROM loom_journal_migrations")]
    assert names == [m.__name__ for m in MIGRATIONS]
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("UPDATE events SET kind = 'x'")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("DELETE FROM events")


def test_unopenable_path_is_a_journal_error(tmp_path: Path) -> None:
    """A path that cannot hold a database raises JournalError('journal_unavailable')."""
    (tmp_path / "dir.sqlite").mkdir()
    with pytest.raises(JournalError) as info:
        Journal(tmp_path / "dir.sqlite")
    assert info.value.code == "journal_unavailable"


async def test_damaged_log_is_reported_not_guessed(tmp_path: Path) -> None:
    """An event that does not fit the timeline (a completion with no start) is JournalError('journal_corrupt')."""
    path = tmp_path / "j.sqlite"
    Journal(path).execution("r")
    conn = sqlite3.connect(path)
    conn.execute(
        "INSERT INTO events (execution_id, kind, step_id, position, payload, created) "
        "VALUES ('r', 'step_completed', 's', 0, '{}', '2026-01-01T00:00:00+00:00')"
    )
    conn.commit()
    with pytest.raises(JournalError) as info:
        Journal(path).execution("r")
    assert info.value.code == "journal_corrupt"
