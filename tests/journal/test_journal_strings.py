"""Strings json.loads accepts (lone surrogates included) are journaled and read back equal."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loom_nb.errors import JournalError
from loom_nb.journal import Journal


def never(_: Any) -> Any:
    raise AssertionError("a replayed step must not call its fn")


async def test_lone_surrogates_that_json_parsed_are_journaled_and_replayed(
    tmp_path: Path,
) -> None:
    """A string json.loads produced with a lone surrogate (a cut emoji) journals and replays as is."""
    cut = json.loads('"half an emoji: \\ud83d"')
    journal = Journal(tmp_path / "j.sqlite")
    execution = journal.execution("r")
    assert await execution.execute("s", lambda x: {"text": x}, cut) == {"text": cut}

    def fails(_: Any) -> Any:
        raise ValueError(cut)

    with pytest.raises(ValueError):
        await execution.execute("t", fails)
    assert await journal.execution("r").execute("s", never, cut) == {"text": cut}
    assert journal.events("r")[-1].payload["error"]["message"] == cut


async def test_ids_that_cannot_be_stored_are_journal_errors(
    open_journal: Callable[..., Journal],
) -> None:
    """A step or execution id holding a lone surrogate is refused as a JournalError before anything is journaled."""
    journal = open_journal()
    execution = journal.execution("r")
    with pytest.raises(JournalError) as info:
        await execution.execute(json.loads('"step\\ud800"'), never)
    assert info.value.code == "invalid_step_id"
    assert await execution.execute("s", lambda x: x, 1) == 1
    with pytest.raises(JournalError) as opened:
        journal.execution(json.loads('"run\\ud800"'))
    assert opened.value.code == "invalid_execution_id"
