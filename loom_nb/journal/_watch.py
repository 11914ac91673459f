"""``journal.watch(execution_id)``: follow a live execution from another process (issues 16, 33).

A watch is a thread that reads the execution's events after the last one it delivered, hands
each to a callback (or a queue), and then waits for the next append: on PostgreSQL for a
notification (``_listener``: one LISTEN connection per process, shared by its watches; an
insert notifies in its own transaction, so the rows are visible when the notification arrives),
on SQLite by sleeping. Either way the wait ends after ``poll`` seconds, so a notification that
never comes (a transaction pooler in between, a dropped connection) costs one poll, never an
event: the watch never stalls. Delivery is in ``seq`` order and each event once.

A read that fails on the connection (lost, refused, the server full, the pooler) does not end
the watch: it is kept in ``watch.trouble`` and retried at the next look. Anything else (the
callback raised, the journal is damaged) ends it, in ``watch.error``.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from loom_nb.errors import JournalError

if TYPE_CHECKING:
    from loom_nb.journal._journal import Journal
    from loom_nb.journal._timeline import Event

__all__ = ["TRANSIENT", "JournalWatch", "PollListener"]

TRANSIENT = frozenset(
    {
        "journal_unavailable",
        "journal_connection_lost",
        "journal_too_many_connections",
        "journal_pooler_error",
    }
)
"""Codes of failed reads a watch retries at its next look instead of ending."""


class PollListener:
    """A listener for journals without notifications: waiting is sleeping (``wake`` ends it)."""

    mode: Literal["notify", "poll"] = "poll"

    def __init__(self) -> None:
        self._woken = threading.Event()

    def wait(self, timeout: float) -> bool:
        """Sleep ``timeout`` seconds, or until woken; never announces an append."""
        self._woken.wait(timeout)
        self._woken.clear()
        return False

    def wake(self) -> None:
        """End a pending ``wait`` now (the watch is stopping)."""
        self._woken.set()

    def close(self) -> None:
        """Nothing to release."""


class JournalWatch:
    """A running watch over one execution; ``stop()`` ends it. Obtain one with ``journal.watch(id)``."""

    def __init__(
        self,
        journal: Journal,
        execution_id: str,
        callback: Callable[[Event], object] | None,
        *,
        after_seq: int = 0,
        poll: float | None = None,
    ) -> None:
        if not callable(getattr(journal, "_listen", None)):
            raise JournalError(
                f"JournalWatch() takes a Journal, not {type(journal).__name__}; use "
                "journal.watch(execution_id, callback).",
                code="invalid_argument",
            )
        if not isinstance(execution_id, str):
            raise JournalError(
                f"execution_id must be a string, not {type(execution_id).__name__}.",
                code="invalid_argument",
            )
        if isinstance(after_seq, bool) or not isinstance(after_seq, int):
            raise JournalError(
                f"after_seq must be an int, not {type(after_seq).__name__}.",
                code="invalid_argument",
            )
        if callback is not None and not callable(callback):
            raise JournalError(
                f"watch callback must be callable, not {type(callback).__name__}.",
                code="invalid_argument",
            )
        if poll is not None and (
            isinstance(poll, bool) or not isinstance(poll, int | float) or not 0.01 <= poll <= 60
        ):
            raise JournalError(
                f"poll must be a number of seconds from 0.01 to 60, not {poll!r}.",
                code="invalid_argument",
            )
        if (
            isinstance(after_seq, bool)
            or not isinstance(after_seq, int)
            or not 0 <= after_seq < 2**63
        ):
            raise JournalError(
                f"after_seq must be a non-negative int, not {after_seq!r}.", code="invalid_argument"
            )
        self.execution_id = execution_id
        """The execution being watched."""
        self.last_seq = after_seq
        """The ``seq`` of the last event delivered."""
        self.error: BaseException | None = None
        """What stopped the watch early (the callback raised, the journal failed), else None."""
        self.trouble: JournalError | None = None
        """Why the last look failed (a lost or refused connection), retried at the next; None
        once a look succeeds."""
        self._journal = journal
        self._callback = callback
        self._poll = float(poll if poll is not None else journal._backend.watch_poll)
        self._queue: queue.Queue[Event] = queue.Queue()
        self._earlier: dict[int, list[Any]] = {}  # model inputs expanded so far (deltas)
        self._primed = after_seq == 0
        self._stop = threading.Event()
        # Subscribe before the first read: an append after it is announced, one before it read.
        self._listener: Any = journal._listen(execution_id)
        self._thread = threading.Thread(
            target=self._run, name=f"loom_nb-watch-{execution_id}", daemon=True
        )
        self._thread.start()

    @property
    def mode(self) -> Literal["notify", "poll"]:
        """``"notify"`` while notifications of appends reach the watch, ``"poll"`` while it only
        looks every ``poll`` seconds (SQLite; PostgreSQL through a transaction pooler without
        ``listen_url``; a listening connection being re-made)."""
        mode: Literal["notify", "poll"] = self._listener.mode
        return mode

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    batch = self._look()
                except JournalError as exc:
                    if exc.code not in TRANSIENT:
                        raise
                    self.trouble = exc  # the connection: look again after the next wait
                    batch = []
                else:
                    self.trouble = None
                for event in batch:
                    self.last_seq = event.seq
                    if self._callback is not None:
                        self._callback(event)
                    else:
                        self._queue.put(event)
                if self._stop.is_set():
                    break
                self._listener.wait(self._poll)
        except BaseException as exc:  # reported through .error; a watch must not kill the kernel
            self.error = exc
        finally:
            self._listener.close()

    def _look(self) -> list[Event]:
        """The events after the last one delivered (on the first look, after ``after_seq``)."""
        if self._primed:
            return self._journal.events_after(
                self.execution_id, self.last_seq, earlier=self._earlier
            )
        # Model inputs after after_seq may be deltas of earlier ones: read those too.
        batch = self._journal.events_after(self.execution_id, 0, earlier=self._earlier)
        self._primed = True
        return [e for e in batch if e.seq > self.last_seq]

    def get(self, timeout: float | None = None) -> Event | None:
        """The next event (without a callback), waiting up to ``timeout`` seconds; None if none came."""
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None

    @property
    def running(self) -> bool:
        """Whether the watch is still following the execution."""
        return self._thread.is_alive()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop following and wait (up to ``timeout`` seconds) for the thread to end."""
        self._stop.set()
        self._listener.wake()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def __enter__(self) -> JournalWatch:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<JournalWatch {self.execution_id!r} {state}, after seq {self.last_seq}>"
