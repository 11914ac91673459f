"""What a fork copies: the rows of a timeline's prefix under a new id (``fork_rows``)."""

from __future__ import annotations

import json

import pytest

from loom_nb.errors import JournalError
from loom_nb.journal._fork import fork_rows
from loom_nb.journal._timeline import Timeline
from loom_nb.store import Principal


def _timeline() -> Timeline:
    timeline = Timeline("src")
    for kind, step_id, position, payload in [
        ("step_started", "a", 0, "{}"),
        ("step_completed", "a", 0, '{"output":1}'),
        ("parked", None, 1, '{"payload":"ask"}'),
        ("resumed", None, 1, '{"payload":"yes"}'),
        ("step_started", "b", 2, "{}"),
        ("step_failed", "b", 2, '{"error":{}}'),
    ]:
        timeline.apply(kind, step_id, position, payload)
    return timeline


def test_the_prefix_is_copied_event_by_event_under_the_new_id() -> None:
    """Rows before at_step: a started event naming the source, then each entry's events re-numbered."""
    rows = fork_rows(_timeline().entries, "src", Principal(tenant="t"), "b", "new")
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        ("new", "execution_started", None, None),
        ("new", "step_started", "a", 0),
        ("new", "step_completed", "a", 0),
        ("new", "parked", None, 1),
        ("new", "resumed", None, 1),
    ]
    started = json.loads(rows[0][4])
    assert started == {
        "forked_from": {"execution_id": "src", "position": 2},
        "principal": {"subject": None, "tenant": "t"},
    }
    assert rows[2][4] == '{"output":1}'
    assert len({r[5] for r in rows}) == 1  # one created stamp for the whole copy


def test_a_position_counts_like_a_step_id() -> None:
    """at_step may be a position from 0 to the timeline's length; 0 copies nothing but the start."""
    entries = _timeline().entries
    assert len(fork_rows(entries, "src", None, 0, "new")) == 1
    assert len(fork_rows(entries, "src", None, 3, "new")) == 7


@pytest.mark.parametrize(
    ("at_step", "new_id", "code"),
    [
        ("zzz", "new", "unknown_step"),
        (4, "new", "unknown_step"),
        (-1, "new", "unknown_step"),
        (True, "new", "invalid_argument"),
        (1.5, "new", "invalid_argument"),
        ("a", "", "invalid_execution_id"),
        ("a", 7, "invalid_execution_id"),
    ],
)
def test_bad_arguments_are_refused(at_step: object, new_id: object, code: str) -> None:
    """An unknown step, a position off the timeline, a wrong type or a bad new id is a JournalError."""
    with pytest.raises(JournalError) as info:
        fork_rows(_timeline().entries, "src", None, at_step, new_id)
    assert info.value.code == code
