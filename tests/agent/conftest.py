"""Fixtures for the agent tests: a journal per test and helpers to read what it recorded."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from loom_nb.journal import Journal


@pytest.fixture
def journal() -> Iterator[Journal]:
    """An in-memory journal, closed after the test."""
    j = Journal(":memory:")
    yield j
    j.close()


def step_ids(journal: Journal, execution_id: str) -> list[str]:
    """The ids of the completed steps of an execution, in log order."""
    return [
        e.step_id
        for e in journal.events(execution_id)
        if e.kind == "step_completed" and e.step_id is not None
    ]
