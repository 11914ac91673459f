"""The journal's portable SQL: the statements every backend runs, and how ``created`` is stored.

Plain SQL with ``?`` placeholders (the PostgreSQL connection rewrites them), over the shape the
migrations create (``_schema`` for SQLite, ``loom_nb._pg`` for PostgreSQL): ``events``,
``leases`` and ``content_pins`` rows. No backend-specific syntax belongs here.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

__all__ = [
    "AFTER",
    "INSERT",
    "INSERTS",
    "LAST_ORDINAL",
    "LEASE_DROP",
    "LEASE_GET",
    "LEASE_PUT",
    "LEASE_RENEW",
    "LEASE_TAKE",
    "PIN",
    "PINNED",
    "PINNED_ADDRESS",
    "SELECT",
    "STARTED",
    "UNPIN",
    "Row",
    "now_iso",
    "stamp_ns",
]

Row = tuple[int, str, str, str | None, int | None, str, str]
"""(seq, execution_id, kind, step_id, position, payload, created) as stored."""

INSERT = (
    "INSERT INTO events (execution_id, kind, step_id, position, payload, created, ordinal) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
INSERTS = {n: INSERT + ", (?, ?, ?, ?, ?, ?, ?)" * (n - 1) for n in (1, 2, 3)}
"""One INSERT statement of ``n`` rows, by ``n`` (a step's start and outcome share one)."""
LEASE_GET = "SELECT token, host, pid, expires FROM leases WHERE execution_id = ?"
LEASE_PUT = (
    "INSERT INTO leases (execution_id, token, host, pid, expires, acquired) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
LEASE_TAKE = (
    "UPDATE leases SET token = ?, host = ?, pid = ?, expires = ?, acquired = ? "
    "WHERE execution_id = ?"
)
LEASE_RENEW = "UPDATE leases SET expires = ? WHERE execution_id = ? AND token = ?"
LEASE_DROP = "DELETE FROM leases WHERE execution_id = ? AND token = ?"
LAST_ORDINAL = "SELECT MAX(ordinal) FROM events WHERE execution_id = ?"
PIN = (
    "INSERT INTO content_pins (execution_id, position, address, created) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (execution_id, position, address) DO UPDATE SET created = excluded.created"
)
UNPIN = "DELETE FROM content_pins WHERE execution_id = ? AND position = ?"
PINNED = (
    "SELECT DISTINCT content_pins.address FROM content_pins "
    "LEFT JOIN leases ON leases.execution_id = content_pins.execution_id "
    "WHERE (content_pins.created >= ? OR leases.expires > ?)"
)
"""Addresses of pins that count: made since a moment, or of an execution whose lease is live."""
PINNED_ADDRESS = PINNED + " AND content_pins.address = ?"
SELECT = (
    "SELECT seq, execution_id, kind, step_id, position, payload, created FROM events "
    "WHERE execution_id = ? ORDER BY ordinal"
)
"""An execution's events in order (``ordinal`` order is ``seq`` order within an execution, and
``(execution_id, ordinal)`` is the index that finds them: ``_schema.m008_one_index_per_execution``)."""
STARTED = (
    "SELECT payload FROM events WHERE execution_id = ? AND kind = 'execution_started' "
    "ORDER BY ordinal LIMIT 1"
)
"""What an execution was started with: its first ``execution_started`` event's payload."""
AFTER = (
    "SELECT seq, execution_id, kind, step_id, position, payload, created FROM events "
    "WHERE execution_id = ? AND ordinal > COALESCE("
    "(SELECT ordinal FROM events WHERE seq = ? AND execution_id = ?), -1) "
    "AND seq > ? ORDER BY ordinal"
)
"""An execution's events after a ``seq``, in order. When that ``seq`` is one of the execution's
own events (what a watch passes: the last it delivered), its ordinal bounds the index range,
so a tail read costs what it returns, not the execution's length; any other ``seq`` (0, another
execution's) reads the execution's events and keeps the later ones."""


def now_iso() -> str:
    """The current UTC time as ISO 8601 with microseconds (how ``created`` is stored).

    The same text as ``datetime.now(UTC).isoformat(timespec="microseconds")`` of ``stamp_ns()``
    (the wall clock, kept steady within the process); the date and time of day are formatted
    once per second (every journaled row asks for one).
    """
    global _second
    seconds, nanos = divmod(stamp_ns(), 1_000_000_000)
    second = _second
    if second[0] != seconds:
        stamp = datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")
        second = _second = (seconds, stamp[:-6])  # without its "+00:00"
    return f"{second[1]}.{nanos // 1000:06d}+00:00"


RESYNC_NS = 1_000_000_000
"""How far (1 s) the wall clock may move from the steady clock before stamps follow it again."""


def stamp_ns() -> int:
    """Now, in nanoseconds since the epoch: the wall clock, as a steady clock keeps it.

    Stamps advance with ``time.monotonic_ns``, from the wall time of the first stamp, so the
    time between two of them is what elapsed: a clock stepped back or forth by less than a second
    (a virtual machine's clock resynchronized, NTP stepping it) does not make a step's journaled
    duration short, long or negative. When the wall clock and the stamps are more than
    ``RESYNC_NS`` apart (the clock was set, the machine slept), stamps follow the wall clock again.
    """
    global _offset
    wall = time.time_ns()
    steady = time.monotonic_ns()
    offset = _offset
    if offset is None or abs(wall - steady - offset) > RESYNC_NS:
        _offset = offset = wall - steady
    return steady + offset


_offset: int | None = None
"""Wall minus steady clock, in nanoseconds, when stamps last followed the wall clock."""

_second: tuple[int, str] = (-1, "")
"""The last second ``now_iso`` formatted, and its text up to the seconds."""
