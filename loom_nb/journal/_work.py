"""Work queues: several processes working one set of items, each item claimed under a lease (issue 32).

``journal.work_queue(name)`` is a named set of items (strings: a map's item keys) in the
journal's database, table ``work_items``, one row per queue and item. A worker ``claim``s up to
``limit`` items at a time; a claim lasts ``lease`` seconds unless the worker ``extend``s it, and
ends with ``complete`` or ``fail`` (with the error), or ``release`` (given back untried). An item
whose claim expired (its worker was SIGKILLed, or stalled) is claimable again, and so at once is
one held by a worker of this host whose process is gone (a worker id ``host:pid:...``, as
``worker_id()`` makes, names it; the journal's leases decide the same way); its ``attempts``
count every claim, and with ``max_attempts`` an item that used them all up fails instead of
killing one more worker.

Claiming. On PostgreSQL a claim is one transaction: a ``SELECT ... FOR UPDATE SKIP LOCKED`` picks
the oldest claimable rows no other transaction holds and an UPDATE stamps them with the claim's
token, so workers never wait for each other's claims and never get the same item. It runs behind
a transaction pooler too: one transaction, no session state, no prepared statement, and not the
journal's write lock (``BEGIN`` would take it). On SQLite the same statements run under
``BEGIN IMMEDIATE``: one writer at a time holds the file.

One completion per item. A lease alone cannot stop a worker that is still alive after its lease
ran out (a long pause, a stalled machine): another worker claims the item and runs it too. So
while a worker runs an item's journaled steps it holds the item's claim as a fence on the item's
execution (``queue.fenced(claim, execution_id)``): every write of the execution, the start and
the outcome of its steps included, first checks in its own transaction that the item's row
still carries this claim's token (on PostgreSQL locking the row, so a claim cannot slip in
before the commit). A worker whose item was claimed by another is refused
(``ExecutionBusyError`` code ``claim_lost``) before its step's outcome is journaled, and the
execution's own writer lease refuses it too; whoever holds the claim journals the step once, and
a later claim replays it from the log instead of calling the provider again.

Progress. ``counts()`` reads how many items are pending, claimed, done and failed (an expired
claim counts as pending); ``follow(callback)`` calls back with the counts whenever they change,
woken on PostgreSQL by a notification (``loom-work:<queue>`` on the journal's channel, sent by a
trigger on every change) and looking every ``poll`` seconds in any case (``_work_follow``).
"""

from __future__ import annotations

import contextlib
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from loom_nb.errors import ExecutionBusyError, JournalError
from loom_nb.journal._codec import is_storable_id
from loom_nb.journal._lease import pid_alive
from loom_nb.journal._work_follow import WorkFollow

if TYPE_CHECKING:
    from loom_nb.journal._backend import JournalBackend
    from loom_nb.journal._journal import Journal

__all__ = ["Claim", "WorkCounts", "WorkItem", "WorkQueue", "WorkState"]

T = TypeVar("T")

WorkState = Literal["pending", "claimed", "done", "failed"]

_ADD = (
    "INSERT INTO work_items (queue, item, seq, state, worker, token, lease_until, attempts, "
    "error, updated) VALUES (?, ?, ?, 'pending', NULL, NULL, 0, 0, NULL, ?) "
    "ON CONFLICT (queue, item) DO NOTHING"
)
_SIZE = "SELECT COUNT(*), MAX(seq) FROM work_items WHERE queue = ?"
_PICK = (
    "SELECT item FROM work_items WHERE queue = ? AND state IN ('pending', 'claimed') "
    "AND lease_until <= ?{besides} ORDER BY seq LIMIT ?"
)
_CLAIM = (
    "WITH picked AS ({pick}) UPDATE work_items SET state = 'claimed', worker = ?, token = ?, "
    "lease_until = ?, attempts = attempts + 1, updated = ? "
    "WHERE queue = ? AND item IN (SELECT item FROM picked) RETURNING item, attempts, seq"
)
_EXHAUST = (
    "WITH picked AS ({pick}) UPDATE work_items SET state = 'failed', error = ?, updated = ? "
    "WHERE queue = ? AND item IN (SELECT item FROM picked) RETURNING item"
)
_EXHAUSTED = (
    "SELECT item FROM work_items WHERE queue = ? AND state = 'claimed' AND lease_until <= ? "
    "AND attempts >= ?{besides}"
)
_EXTEND = (
    "UPDATE work_items SET lease_until = ?, updated = ? "
    "WHERE queue = ? AND item = ? AND token = ? AND state = 'claimed' RETURNING item"
)
_SETTLE = (
    "UPDATE work_items SET state = ?, error = ?, updated = ? "
    "WHERE queue = ? AND item = ? AND token = ? AND state = 'claimed' RETURNING item"
)
_RELEASE = (
    "UPDATE work_items SET state = 'pending', worker = NULL, token = NULL, lease_until = ?, "
    "attempts = attempts - 1, updated = ? "
    "WHERE queue = ? AND item = ? AND token = ? AND state = 'claimed' RETURNING item"
)
_RETRY = (
    "UPDATE work_items SET state = 'pending', worker = NULL, token = NULL, lease_until = 0, "
    "error = NULL, updated = ? WHERE queue = ? AND state = 'failed' RETURNING item"
)
_COUNTS = (
    "SELECT s, COUNT(*) FROM (SELECT CASE WHEN state = 'claimed' AND lease_until <= ? "
    "THEN 'pending' ELSE state END AS s FROM work_items WHERE queue = ?) AS w GROUP BY s"
)
_ITEMS = (
    "SELECT item, state, worker, attempts, error, lease_until FROM work_items "
    "WHERE queue = ? ORDER BY seq"
)
_CHUNK = 500  # keys per statement, well under both databases' parameter limits
_LOCAL = (
    "SELECT item, worker FROM work_items WHERE queue = ? AND state = 'claimed' "
    "AND lease_until > ? AND worker LIKE ?"
)
_REAP = (
    "UPDATE work_items SET lease_until = 0 "
    "WHERE queue = ? AND item = ? AND worker = ? AND state = 'claimed' RETURNING item"
)
_HOLDER = "SELECT token, state FROM work_items WHERE queue = ? AND item = ?"


@dataclass(frozen=True)
class Claim:
    """A worker's hold on one item: valid while the item's row carries ``token``."""

    queue: str
    """The queue's name."""
    item: str
    """The item's key."""
    worker: str
    """Who claimed it (the worker id given to ``claim``)."""
    token: str
    """Unique to this claim: a later claim of the item has another."""
    attempt: int
    """1 for the item's first claim, 2 for the next (after an expired lease or a retry) ..."""
    lease_until: float
    """When the claim expires unless extended (seconds since the epoch)."""


@dataclass(frozen=True)
class WorkCounts:
    """How many items of a queue are in each state (an expired claim counts as pending)."""

    pending: int = 0
    """Waiting for a worker (never claimed, given back, or whose claim expired)."""
    claimed: int = 0
    """Held by a worker under a live lease."""
    done: int = 0
    """Completed."""
    failed: int = 0
    """Failed (``fail``, or out of attempts)."""

    @property
    def total(self) -> int:
        """Every item of the queue."""
        return self.pending + self.claimed + self.done + self.failed

    @property
    def finished(self) -> bool:
        """Whether no item is pending or claimed any more."""
        return self.pending == 0 and self.claimed == 0


@dataclass(frozen=True)
class WorkItem:
    """One item of a queue as stored: its state, last worker, attempts and error."""

    item: str
    """The item's key."""
    state: WorkState
    """As stored: ``claimed`` stays until completed, failed, released or claimed again."""
    worker: str | None
    """The worker of its latest claim (None while never claimed, or given back)."""
    attempts: int
    """How many times it was claimed (a release does not count)."""
    error: str | None
    """Why it failed, when it did."""
    lease_until: float
    """When its claim expires (0 while pending)."""


class WorkQueue:
    """A named queue of items in a journal's database; obtain one with ``journal.work_queue(name)``."""

    def __init__(self, journal: Journal, name: str) -> None:
        if not is_storable_id(name):
            raise JournalError(
                f"a work queue's name is a non-empty string of valid Unicode, not {name!r}.",
                code="invalid_argument",
            )
        self._journal = journal
        self._backend: JournalBackend = journal._backend
        self.name = name
        """The queue's name (a map's execution id, for a map's items)."""

    def __repr__(self) -> str:
        return f"<WorkQueue {self.name!r} in {self._journal!r}>"

    # -- items ---------------------------------------------------------------------------------

    def add(self, items: Iterable[str]) -> int:
        """Add items (keys, in order) to the queue; keys already there are left as they are.

        Idempotent: every process joining a map adds the same keys and the first one counts.
        Returns how many were new.
        """
        keys = list(dict.fromkeys(items))
        for key in keys:
            if not is_storable_id(key):
                raise JournalError(
                    f"a work item's key is a non-empty string of valid Unicode, not {key!r}.",
                    code="invalid_argument",
                )

        def body(conn: Any) -> int:
            before, last = conn.execute(_SIZE, (self.name,)).fetchone()
            base = 0 if last is None else int(last) + 1
            now = time.time()
            rows = [(self.name, key, base + index, now) for index, key in enumerate(keys)]
            if rows:
                conn.executemany(_ADD, rows)
            after = conn.execute(_SIZE, (self.name,)).fetchone()[0]
            return int(after) - int(before)

        return self._transaction(body)

    def claim(
        self,
        worker: str,
        *,
        limit: int = 1,
        lease: float = 30.0,
        max_attempts: int | None = None,
        running: Iterable[str] = (),
    ) -> list[Claim]:
        """Claim up to ``limit`` claimable items (oldest first) for ``lease`` seconds.

        An empty list when none is claimable now (all done, failed, or held under live leases).
        With ``max_attempts``, an item whose expired claim was its last allowed attempt is
        failed (error ``lease expired N times``) instead of claimed again. ``running``: items
        the caller is still running under earlier claims, never claimed (nor failed) by it
        again even when those claims expired (it stalled past its lease): a second claim could
        not fence the execution the first still fences, and would only end the item as failed.
        Its heartbeat renews such a claim, unless another worker took the item over meanwhile.
        """
        _check_positive("limit", limit, integer=True)
        _check_positive("lease", lease)
        if max_attempts is not None:
            _check_positive("max_attempts", max_attempts, integer=True)
        token = uuid.uuid4().hex
        skip = self._backend.SKIP_LOCKED
        mine = sorted(set(running))
        besides = f" AND item NOT IN ({', '.join('?' * len(mine))})" if mine else ""

        def body(conn: Any) -> list[Claim]:
            now = time.time()
            if max_attempts is not None:
                pick = _EXHAUSTED.format(besides=besides) + skip
                error = f"lease expired {max_attempts} times: its workers died or stalled on it"
                conn.execute(
                    _EXHAUST.format(pick=pick),
                    (self.name, now, max_attempts, *mine, error, now, self.name),
                ).fetchall()
            self._reap(conn, now)
            until = now + lease
            rows = conn.execute(
                _CLAIM.format(pick=_PICK.format(besides=besides) + skip),
                (self.name, now, *mine, limit, worker, token, until, now, self.name),
            ).fetchall()
            rows.sort(key=lambda row: row[2])
            return [Claim(self.name, row[0], worker, token, int(row[1]), until) for row in rows]

        return self._transaction(body)

    def _reap(self, conn: Any, now: float) -> None:
        """Free at once the live claims of workers of this host whose process is gone."""
        host = socket.gethostname()
        rows = conn.execute(
            _LOCAL + self._backend.SKIP_LOCKED, (self.name, now, f"{host}:%")
        ).fetchall()
        for item, worker in rows:
            parts = str(worker).split(":")
            local = len(parts) == 3 and parts[0] == host and parts[1].isdigit()
            if local and not pid_alive(int(parts[1])):
                conn.execute(_REAP, (self.name, item, worker)).fetchall()

    def extend(self, claims: Sequence[Claim], *, lease: float = 30.0) -> list[Claim]:
        """Extend claims by ``lease`` seconds from now; return those still held (renewed)."""
        _check_positive("lease", lease)

        def body(conn: Any) -> list[Claim]:
            now = time.time()
            until = now + lease
            held = []
            for claim in sorted(claims, key=lambda c: c.item):  # lock rows in one order
                found = conn.execute(
                    _EXTEND, (until, now, self.name, claim.item, claim.token)
                ).fetchall()
                if found:
                    held.append(
                        Claim(
                            claim.queue, claim.item, claim.worker, claim.token, claim.attempt, until
                        )
                    )
            return held

        return self._transaction(body) if claims else []

    def complete(self, claim: Claim) -> None:
        """Mark the claimed item done; ``ExecutionBusyError`` (``claim_lost``) if another claimed it."""
        self._settle(claim, _SETTLE, ("done", None, time.time()))

    def fail(self, claim: Claim, error: str) -> None:
        """Mark the claimed item failed with ``error``; ``claim_lost`` if another claimed it."""
        self._settle(claim, _SETTLE, ("failed", str(error), time.time()))

    def release(self, claim: Claim, *, delay: float = 0.0) -> None:
        """Give the item back untried (its attempt does not count), claimable after ``delay`` s."""
        now = time.time()
        self._settle(claim, _RELEASE, (now + max(0.0, delay), now))

    def retry_failed(self, items: Iterable[str] | None = None) -> list[str]:
        """Make failed items pending again (their errors cleared): every one, or those of
        ``items``; return their keys."""
        now = time.time()
        if items is None:
            rows = self._transaction(lambda conn: conn.execute(_RETRY, (now, self.name)).fetchall())
            return [row[0] for row in rows]
        keys = list(items)

        def body(conn: Any) -> list[str]:
            found = []
            for start in range(0, len(keys), _CHUNK):
                chunk = keys[start : start + _CHUNK]
                marks = ", ".join("?" * len(chunk))
                statement = _RETRY.replace("RETURNING", f"AND item IN ({marks}) RETURNING")
                found += [row[0] for row in conn.execute(statement, (now, self.name, *chunk))]
            return found

        return self._transaction(body) if keys else []

    def _settle(self, claim: Claim, statement: str, values: tuple[Any, ...]) -> None:
        params = (*values, self.name, claim.item, claim.token)
        if not self._transaction(lambda conn: conn.execute(statement, params).fetchall()):
            raise self._lost(claim)

    # -- reading -------------------------------------------------------------------------------

    def counts(self) -> WorkCounts:
        """How many items are pending, claimed, done and failed right now."""
        backend = self._backend
        with backend.reading():
            rows = backend.read(
                lambda: backend.conn.execute(_COUNTS, (time.time(), self.name)).fetchall()
            )
        found = {state: int(count) for state, count in rows}
        return WorkCounts(
            pending=found.get("pending", 0),
            claimed=found.get("claimed", 0),
            done=found.get("done", 0),
            failed=found.get("failed", 0),
        )

    def items(self) -> list[WorkItem]:
        """Every item of the queue, in the order added."""
        backend = self._backend
        with backend.reading():
            rows = backend.read(lambda: backend.conn.execute(_ITEMS, (self.name,)).fetchall())
        return [
            WorkItem(row[0], row[1], row[2], int(row[3]), row[4], float(row[5])) for row in rows
        ]

    def follow(
        self,
        callback: Callable[[WorkCounts], object],
        *,
        poll: float | None = None,
        every: float = 0.2,
    ) -> WorkFollow:
        """Call ``callback(counts)`` now and whenever the counts change, until ``stop()``.

        Runs on a thread of its own; on PostgreSQL a change wakes it at once (LISTEN, at the
        journal's ``listen_url`` when given), and it looks every ``poll`` seconds in any case
        (default: the journal's watch interval), and at most once every ``every`` seconds (a busy
        queue announces every item; a progress bar needs a few looks a second).
        """
        return WorkFollow(self, callback, poll=poll, every=every)

    # -- the fence ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def fenced(self, claim: Claim, execution_id: str) -> Iterator[None]:
        """Hold ``claim`` as a fence on the item's execution while inside.

        Every write of ``execution_id`` through this queue's journal first checks, in its own
        transaction, that the item is still claimed with ``claim``'s token, and is refused with
        ``ExecutionBusyError`` (code ``claim_lost``) otherwise: a worker whose claim another
        took over cannot journal the item's step. On leaving, the execution's writer lease is
        given back.
        """
        backend = self._backend
        statement = _HOLDER + backend.FOR_UPDATE

        def check() -> None:
            row = backend.conn.execute(statement, (self.name, claim.item)).fetchone()
            if row is None or row[0] != claim.token or row[1] != "claimed":
                raise self._lost(claim)

        with self._journal._writer.fenced(execution_id, check):
            yield

    def _lost(self, claim: Claim) -> ExecutionBusyError:
        return ExecutionBusyError(
            f"work item {claim.item!r} of queue {self.name!r} is no longer claimed by "
            f"{claim.worker!r} (its lease ran out and another worker claimed it, or it was "
            "settled): leave it to its current holder.",
            code="claim_lost",
            reason="claim_lost",
            queue=self.name,
            item=claim.item,
        )

    def _transaction(self, body: Callable[[Any], T]) -> T:
        """Run ``body(conn)`` in one queue transaction (rows locked, not the journal)."""
        backend = self._backend
        with backend.reading():
            conn = backend.conn
            try:
                conn.execute(backend.BEGIN_QUEUE)
            except backend.Error as exc:
                raise backend.write_error(exc) from exc
            try:
                result = body(conn)
                conn.execute("COMMIT")
            except BaseException as exc:
                with contextlib.suppress(backend.Error):
                    conn.execute("ROLLBACK")
                if isinstance(exc, backend.Error):
                    raise backend.write_error(exc) from exc
                raise
        return result


def _check_positive(name: str, value: object, *, integer: bool = False) -> None:
    kinds: tuple[type, ...] = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not value > 0:  # type: ignore[operator]
        kind = "an int" if integer else "a number"
        raise JournalError(
            f"{name} must be {kind} above 0, not {value!r}.", code="invalid_argument"
        )
