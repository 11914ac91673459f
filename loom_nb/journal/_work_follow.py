"""``queue.follow(callback)``: a work queue's counts, live, for a progress bar (issue 32).

A thread reads the queue's counts, calls back when they changed, and waits: on PostgreSQL for
the notification a trigger sends with every change to the queue's items (``loom-work:<queue>``
on the journal's channel, through the process's one listening connection, ``_listener``), on
SQLite by sleeping. The wait ends after ``poll`` seconds whatever happens, so a notification
that never comes (a transaction pooler, a dropped connection) costs one poll, never a count;
an expired claim turns back into a pending item without any write, and the poll sees that too.

A read that fails on the connection is kept in ``trouble`` and retried at the next look, as a
journal watch does; anything else (the callback raised) ends the follow, in ``error``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING

from loom_nb.errors import JournalError
from loom_nb.journal._watch import TRANSIENT

if TYPE_CHECKING:
    from loom_nb.journal._work import WorkCounts, WorkQueue

__all__ = ["WorkFollow", "channel_of"]


def channel_of(name: str) -> str:
    """What a change to queue ``name`` is announced as on the journal's channel (PostgreSQL)."""
    return f"loom-work:{name}"


class WorkFollow:
    """A running follow of a queue's counts; ``stop()`` ends it. Obtain one with ``queue.follow``."""

    def __init__(
        self,
        queue: WorkQueue,
        callback: Callable[[WorkCounts], object],
        *,
        poll: float | None = None,
        every: float = 0.2,
    ) -> None:
        backend = queue._backend
        if poll is None:
            poll = backend.watch_poll
        if isinstance(poll, bool) or not isinstance(poll, int | float) or not poll > 0:
            raise JournalError(
                f"poll must be a number of seconds above 0, not {poll!r}.", code="invalid_argument"
            )
        self.queue = queue
        """The queue followed."""
        self.poll = float(poll)
        """Seconds between looks when nothing announces a change."""
        self.every = max(0.0, float(every))
        """The fewest seconds between two looks (a busy queue announces every item)."""
        self.last: WorkCounts | None = None
        """The counts last handed to the callback."""
        self.trouble: JournalError | None = None
        """The last failed read (retried at the next look), None once a read succeeds."""
        self.error: BaseException | None = None
        """What ended the follow, when something did (the callback raised)."""
        self._callback = callback
        self._stop = threading.Event()
        self._listener = backend.listen(channel_of(queue.name))
        self._thread = threading.Thread(target=self._run, name="loom_nb-work-follow", daemon=True)
        self._thread.start()

    @property
    def mode(self) -> str:
        """``"notify"`` while notifications arrive, ``"poll"`` while waiting is only sleeping."""
        return self._listener.mode

    @property
    def running(self) -> bool:
        """Whether the follow's thread still runs."""
        return self._thread.is_alive()

    def look(self) -> WorkCounts | None:
        """Read the counts now and call back if they changed; the counts, or None on a failed read."""
        try:
            counts = self.queue.counts()
        except JournalError as exc:
            if exc.code not in TRANSIENT:
                raise
            self.trouble = exc
            return None
        self.trouble = None
        if counts != self.last:
            self.last = counts
            self._callback(counts)
        return counts

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.look()
                if self._stop.wait(self.every):
                    break
                self._listener.wait(self.poll)
        except BaseException as exc:  # the callback, or a damaged journal: end, keep why
            self.error = exc
        finally:
            self._listener.close()

    def stop(self, timeout: float | None = 5.0) -> None:
        """Stop following (after one last look, so the callback has the final counts)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._listener.wake()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)
            if self.error is None:
                self.look()

    def __enter__(self) -> WorkFollow:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
