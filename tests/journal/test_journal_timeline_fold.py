"""The timeline a live execution keeps in memory is the one its journaled rows fold into.

A step that never suspends journals its start and outcome in one commit and folds both into the
in-memory timeline at once (``Timeline.settle_step``); reopening the execution folds the same
rows one by one (``Timeline.apply``). The two must agree, or a live object and a reopened one
would serve different steps.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from loom_nb.errors import JournalError
from loom_nb.journal import Journal
from loom_nb.journal._timeline import Timeline


def _fails(_: Any) -> Any:
    raise ValueError("no")


async def _pause(value: Any) -> Any:
    await asyncio.sleep(0)  # suspends: its start is committed on its own
    return value


def test_a_live_timeline_equals_the_reopened_one() -> None:
    journal = Journal()

    async def go() -> None:
        execution = journal.execution("r")
        assert await execution.execute("a", lambda x: x + 1, 1) == 2
        with pytest.raises(ValueError, match="no"):
            await execution.execute("b", _fails, None)
        assert await execution.execute("c", _pause, {"k": [1]}) == {"k": [1]}
        await execution.park({"ask": "ok?"})
        live = execution._timeline.entries
        reopened = journal.execution("r")._timeline.entries
        assert [(e.kind, e.step_id, e.state, e.payload) for e in live] == [
            (e.kind, e.step_id, e.state, e.payload) for e in reopened
        ]
        assert [e.state for e in live] == ["completed", "failed", "completed", "parked"]

    asyncio.run(go())
    journal.close()


def test_a_settled_step_out_of_place_is_refused() -> None:
    timeline = Timeline("r")
    timeline.settle_step("a", 0, "step_completed", "{}")
    with pytest.raises(JournalError) as beyond:
        timeline.settle_step("b", 2, "step_completed", "{}")
    assert beyond.value.code == "journal_corrupt"
    with pytest.raises(JournalError):
        timeline.settle_step("b", 1, "parked", "{}")
    assert [e.step_id for e in timeline.entries] == ["a"]


def test_a_completed_steps_payload_is_canonical_json_of_its_fields() -> None:
    journal = Journal()

    async def go() -> None:
        await journal.execution("r").execute("a", lambda x: {"b": 1, "a": [x]}, {"z": 1, "y": 2})

    asyncio.run(go())
    payload = journal._conn.execute(
        "SELECT payload FROM events WHERE kind = 'step_completed'"
    ).fetchone()[0]
    decoded = json.loads(payload)
    assert payload == json.dumps(decoded, sort_keys=True, separators=(",", ":"))
    assert list(decoded) == ["input", "input_hash", "output"]
    journal.close()
