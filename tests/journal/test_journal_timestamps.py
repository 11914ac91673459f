"""``created`` stamps: ISO 8601 UTC with microseconds, as ``datetime.isoformat`` writes them."""

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
