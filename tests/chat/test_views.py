"""The views a chat keeps: held weakly, closed ones skipped, failing ones dropped; turn stats."""

from __future__ import annotations

import gc
import logging
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest

from loom_nb.chat._records import ChatTurn
from loom_nb.chat._views import LiveViews, TurnStats
from loom_nb.content import Usage
from loom_nb.render._source import Transcript


class FakeView:
    """What the chat updates: a comm while open, the transcript it was last told to follow."""

    def __init__(self) -> None:
        self.comm: object | None = object()
        self.followed: list[tuple[Transcript, str]] = []
        self.live_text = ""

    def _follow(self, transcript: Transcript, header: str) -> None:
        self.followed.append((transcript, header))


def _turn(index: int, start: int, *, tokens: int = 3, status: Any = "completed") -> ChatTurn:
    return ChatTurn(
        index=index,
        kind="chat",
        start=start,
        status=status,
        response=None,
        usage=Usage(input_tokens=tokens, output_tokens=1),
        cost=Decimal(0),
        position=index,
    )


def test_closed_views_are_skipped_and_unheld_views_collected() -> None:
    """A view whose comm is gone is dropped; one nobody holds is not kept alive."""
    views = LiveViews()
    kept, closed, dropped = FakeView(), FakeView(), FakeView()
    views.add(kept)
    views.add(closed)
    views.add(dropped)
    closed.comm = None
    assert set(views.live()) == {kept, dropped}
    del dropped
    gc.collect()
    assert views.live() == [kept]
    assert len(views) == 1


def test_a_failing_view_is_dropped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    """follow() updates each view; a view that raises is dropped and the rest still updated."""
    views = LiveViews()
    good, bad = FakeView(), FakeView()

    def broken(*_args: Any) -> None:
        raise RuntimeError("gone")

    bad._follow = broken  # type: ignore[method-assign]
    views.add(good)
    views.add(bad)
    with caplog.at_level(logging.WARNING):
        views.follow(
            views.live(), Transcript(), "chat x", on_decision=None, on_stop=None, live_text="so"
        )
    assert good.followed[-1][1] == "chat x"
    assert good.live_text == "so"
    assert views.live() == [good]
    assert "a displayed view could not be updated" in caplog.text
    views.stream("so far")
    assert good.live_text == "so far"


def test_turn_stats_name_the_assistant_message_of_each_turn() -> None:
    """Stats go on the message after each turn's start; a stopped turn says so; memo is reused."""
    stats = TurnStats()
    turns = [_turn(0, 0, tokens=7), _turn(1, 2, status="stopped")]
    first = stats.of(turns, 4)
    assert first == {
        1: {"input_tokens": 7, "output_tokens": 1, "latency_s": None},
        3: {"input_tokens": 3, "output_tokens": 1, "latency_s": None, "status": "stopped"},
    }
    assert stats.of(turns, 4) is first
    assert stats.of(turns[:1], 2) == {1: first[1]}


def test_a_stopped_turn_that_left_no_message_marks_no_other_turn() -> None:
    """A turn stopped before any text left no message: its stats (and ``stopped``) are not put on
    the next turn's reply, whether that is a run's or a plain turn's with no token counts."""
    stopped = _turn(0, 0, status="stopped")
    run = ChatTurn(
        index=1,
        kind="run",
        start=0,
        status="completed",
        response=None,
        usage=Usage(input_tokens=9, output_tokens=2),
        cost=Decimal(0),
        position=2,
    )
    assert TurnStats().of([stopped, run], 4) == {}
    quiet = _turn(1, 0, tokens=0)
    assert TurnStats().of([stopped, replace(quiet, usage=Usage())], 2) == {}
