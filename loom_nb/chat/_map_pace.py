"""How many of a map's model calls may be in flight: a ceiling that halves on rate limits (AIMD).

``chat.map(..., concurrency=8)`` starts at the ceiling. A call the vendor refused for its rate
(``ProviderError`` code ``rate_limited``, or ``provider_overloaded``) halves the limit, once per
window: the calls that were already in flight when it was halved do not halve it again, they were
sent at the old rate. Nothing new starts until the vendor's ``Retry-After`` (the error's
``retry_after`` detail; else a backoff doubling from half a second up to a minute) has passed.
Every answer then adds ``1 / limit`` to the limit (one more call in flight per window of answers),
so the rate climbs back to the ceiling once the vendor takes it again: additive increase,
multiplicative decrease, the rule TCP uses for the same problem.

The pacer keeps a record for tests and the progress line: the highest number in flight
(``max_in_flight``) and every limit it took (``limits``).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from typing import Any

__all__ = ["THROTTLED", "Pacer", "retry_after_of"]

THROTTLED = frozenset({"rate_limited", "provider_overloaded"})
"""Error codes that mean "slow down" rather than "this item failed"."""

_FIRST_BACKOFF = 0.5
_MAX_WAIT = 60.0


def retry_after_of(error: BaseException) -> float | None:
    """The seconds a vendor asked to wait (its ``Retry-After``), when the error says so."""
    details = getattr(error, "details", None)
    value = details.get("retry_after") if isinstance(details, dict) else None
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return min(float(value), _MAX_WAIT)
    return None


class Pacer:
    """Admits calls while fewer than ``limit`` are in flight; halves ``limit`` on a rate limit."""

    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling
        self.limit = float(ceiling)
        self.in_flight = 0
        self.max_in_flight = 0
        """The most calls that were ever in flight at once."""
        self.limits: list[int] = [ceiling]
        """Every whole limit taken, in order (a 429 storm shows as a drop, then the climb back)."""
        self.throttles = 0
        """How many calls were refused for their rate."""
        self._window = 0
        self._resume_at = 0.0
        self._backoff = _FIRST_BACKOFF
        self._changed = asyncio.Event()
        self.closed = False
        """Set by ``close``: waiting callers return at once (the map was stopped)."""

    def close(self) -> None:
        """Wake every caller waiting for a slot; from now on ``acquire`` returns at once."""
        self.closed = True
        self._changed.set()

    async def acquire(self) -> int:
        """Wait for a free slot (and for any Retry-After to pass); returns the window it was taken in.

        After ``close`` it returns at once; the caller checks why and releases the slot.
        """
        loop = asyncio.get_running_loop()
        while not self.closed:
            wait = self._resume_at - loop.time()
            if wait <= 0 and self.in_flight < max(1, math.floor(self.limit)):
                break
            self._changed.clear()
            if wait > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), wait)
            else:
                await self._changed.wait()
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        return self._window

    async def changed(self) -> None:
        """Wait until a call ends (or the pacer is closed)."""
        if self.closed:
            return
        self._changed.clear()
        await self._changed.wait()

    def release(self, window: int, *, throttled: BaseException | None = None, ok: bool) -> None:
        """A call taken in ``window`` ended: answered (``ok``), refused for its rate, or failed."""
        self.in_flight -= 1
        if throttled is not None:
            self.throttles += 1
            if window == self._window:  # the first refusal of the window halves the limit
                self._window += 1
                self.limit = max(1.0, math.floor(self.limit / 2))
            hinted = retry_after_of(throttled)
            wait = hinted if hinted is not None else self._backoff
            self._backoff = min(_MAX_WAIT, self._backoff * 2)
            loop = asyncio.get_running_loop()
            self._resume_at = max(self._resume_at, loop.time() + wait)
        elif ok:
            self._backoff = _FIRST_BACKOFF
            self.limit = min(float(self.ceiling), self.limit + 1.0 / self.limit)
        whole = max(1, math.floor(self.limit))
        if whole != self.limits[-1]:
            self.limits.append(whole)
        self._changed.set()

    def snapshot(self) -> dict[str, Any]:
        """The pacer's state for the progress line."""
        return {"limit": max(1, math.floor(self.limit)), "in_flight": self.in_flight}
