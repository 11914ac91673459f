"""``created`` stamps: ISO 8601 UTC with microseconds, as ``datetime.isoformat`` writes them, of
the wall clock as a steady clock keeps it (a clock stepped by less than a second moves no stamp)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from loom_nb.journal import _sql
from loom_nb.journal._sql import now_iso


@pytest.mark.parametrize(
    "nanos",
    [
        0,
        999,
        1_000,
        1_699_999_999_999_999_999,
        1_700_000_000_000_001_000,
        1_799_999_999_123_456_789,
    ],
)
def test_a_stamp_is_the_datetime_isoformat_of_its_instant(
    nanos: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_sql.time, "time_ns", lambda: nanos)
    monkeypatch.setattr(_sql, "_offset", None)  # the first stamp of a process is the wall clock
    expected = datetime.fromtimestamp(nanos // 1_000_000_000, UTC).replace(
        microsecond=nanos // 1000 % 1_000_000
    )
    assert now_iso() == expected.isoformat(timespec="microseconds")


def test_stamps_follow_the_clock_across_seconds() -> None:
    first = datetime.fromisoformat(now_iso())
    time.sleep(1.01)
    second = datetime.fromisoformat(now_iso())
    assert second.tzinfo == UTC
    assert 1.0 <= (second - first).total_seconds() < 5


_WALL = time.time_ns
"""The real wall clock, whatever a test has patched in."""


def _clock_moved(monkeypatch: pytest.MonkeyPatch, by_ns: int) -> None:
    """The wall clock reads ``by_ns`` from the real one from now on."""
    real = _WALL
    monkeypatch.setattr(_sql.time, "time_ns", lambda: real() + by_ns)


@pytest.mark.parametrize("by_ms", [-400, -45, 300, 990])
def test_a_clock_stepped_by_under_a_second_moves_no_stamp(
    by_ms: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The time between two stamps is the steady clock's, however the wall clock was stepped
    (by less than a second) in between: durations are never short, long or negative for it."""
    steady, first = time.monotonic_ns(), _sql.stamp_ns()
    _clock_moved(monkeypatch, by_ms * 1_000_000)
    time.sleep(0.02)
    second, elapsed = _sql.stamp_ns(), time.monotonic_ns() - steady
    assert elapsed - 2_000_000 <= second - first <= elapsed  # the calls' own few microseconds


@pytest.mark.parametrize("by_s", [-3600, -1.5, 1.5, 86_400])
def test_stamps_follow_a_clock_set_by_more_than_a_second(
    by_s: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clock set (or a machine that slept) by more than ``RESYNC_NS`` is followed at once, and
    the stamps after it are steady again from there."""
    _sql.stamp_ns()
    _clock_moved(monkeypatch, int(by_s * 1_000_000_000))
    second = _sql.stamp_ns()
    assert abs(second - time.time_ns()) < 5_000_000
    _clock_moved(monkeypatch, int(by_s * 1_000_000_000) - 200_000_000)  # then 0.2 s back
    third = _sql.stamp_ns()
    assert 0 <= third - second < 5_000_000
