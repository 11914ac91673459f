"""The journal's write side: appends under the writer lease, one writer per execution (issue 15).

One execution has one writer at a time: the journal handle running it live holds its lease
(``_lease`` decides; this module stores it), taken in the same transaction as an append, and
checked before a step's function runs; another process, another ``Journal`` object on the same
database in this process, or a stale ``Execution`` object of this one, gets
``ExecutionBusyError`` before it runs anything. Within the process the lease is per execution
too: while a step runs, it is claimed by the ``Execution`` object and thread running it, and
another thread (or another object) trying to run a step of the same execution, or to append to
it, gets ``ExecutionBusyError`` (``reason="in_process"``) before it runs anything, as a second
process would. The events table is unique on (execution_id, ordinal) as a backstop. A lease
whose holder died is taken over (at once on the same host, after ``lease_ttl`` seconds
elsewhere).

Each append is one atomic statement or transaction, so two processes appending never interleave
half-events. While a step is in flight (from ``hold`` to ``let_go``: its claim) a heartbeat
thread renews its execution's lease, so a live writer keeps it through a slow model call.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from loom_nb.errors import ExecutionBusyError, JournalError
from loom_nb.journal._backend import JournalBackend
from loom_nb.journal._lease import Holder, LeaseRow, decide, forget, new_holder
from loom_nb.journal._sql import (
    INSERT,
    INSERTS,
    LAST_ORDINAL,
    LEASE_DROP,
    LEASE_GET,
    LEASE_PUT,
    LEASE_RENEW,
    LEASE_TAKE,
    PIN,
    UNPIN,
    now_iso,
)

__all__ = ["Owner", "Writer"]

Owner = tuple[object, int]
"""Who runs a step within this process: the ``Execution`` object's token and the thread's ident."""

NewRow = tuple[str, str, str | None, int | None, str, str]
"""(execution_id, kind, step_id, position, payload, created): a row of a new execution."""


class Writer:
    """Appends to one journal's executions, holding their leases; ``Journal`` writes through it.

    ``lock`` is the journal's own lock (it guards the heartbeat's look at the steps in flight,
    and on SQLite the connection, every lease and every claim too); ``label`` names the journal
    in messages; ``heartbeat`` is False for a journal no other process can see (in memory),
    whose leases need no renewing.
    """

    def __init__(
        self,
        backend: JournalBackend,
        *,
        lock: threading.Lock,
        lease_ttl: float,
        label: str,
        heartbeat: bool,
    ) -> None:
        self._backend = backend
        self._lock = lock
        self._label = label
        self._beats = heartbeat
        self.lease_ttl = lease_ttl
        self._held: dict[str, _Held] = {}
        self._running: dict[str, tuple[Owner, int]] = {}
        self._fences: dict[str, Callable[[], None]] = {}
        self.heartbeat: threading.Thread | None = None
        """The thread renewing leases of steps in flight, once one was."""
        self._beat_lock = threading.Lock()
        self._closed = threading.Event()
        self._holder: Holder | None = None

    def me(self) -> Holder:
        """This writer (its journal handle) as a lease holder: a token of its own, a new one
        after ``fork`` (the pid changed); forgotten when the writer is closed or collected."""
        holder = self._holder
        if holder is None or holder.pid != os.getpid():
            holder = self._holder = new_holder()
            weakref.finalize(self, forget, holder.token)
        return holder

    def append(
        self,
        execution_id: str,
        ordinal: int,
        rows: list[tuple[str, str | None, int | None, str]],
        *,
        release: bool = False,
        owner: Owner | None = None,
        pins: tuple[str, ...] = (),
        unpin: int | None = None,
    ) -> None:
        """Append ``rows`` (kind, step_id, position, payload) at ``ordinal`` on, atomically.

        The writer lease is taken or renewed in the same transaction, unless this process holds
        it comfortably and wrote the execution's last row itself: then one INSERT statement (one
        commit) is the whole append, and the (execution_id, ordinal) uniqueness still refuses a
        row another writer got in first; with ``release``, ``pins`` or ``unpin`` the lease is
        then not read again either, its rows going in the same transaction as the append. ``release`` gives the lease back in the same commit
        (completion, park). While another owner (thread and ``Execution`` object) of this process
        runs a step of the execution, the append is refused (``hold``). ``pins`` are content
        addresses pinned at the first row's position, ``unpin`` a position whose pins go, both
        in the same transaction as the rows (``_content_pins``).
        """
        backend = self._backend
        created = now_iso()
        values: list[Any] = []
        for index, (kind, step_id, position, payload) in enumerate(rows):
            values += [execution_id, kind, step_id, position, payload, created, ordinal + index]
        statement = INSERTS[len(rows)]
        with backend.writing(execution_id):
            self._check_running(execution_id, owner)
            now = time.time()
            fence = self._fences.get(execution_id)
            held = self._held.get(execution_id) if self._holds(execution_id, ordinal, now) else None
            if held is not None and not (release or pins or unpin is not None or fence):
                try:
                    backend.conn.execute(statement, values)
                except backend.IntegrityError as exc:
                    raise _moved(execution_id) from exc
                except backend.Error as exc:
                    raise backend.write_error(exc) from exc
                self._held[execution_id].next_ordinal = ordinal + len(rows)
                return

            def body() -> float:
                if fence is not None:
                    fence()
                # Held comfortably, written last by this process: the lease is not read again
                # (as for the one-statement append above; the ordinal's uniqueness still refuses
                # a row another writer got in first); a fenced append checks its claim first.
                expires = (
                    held.expires
                    if held is not None
                    else self._take_lease(execution_id, ordinal, now)
                )
                try:
                    backend.conn.execute(statement, values)
                except backend.IntegrityError as exc:
                    raise _moved(execution_id) from exc
                if pins:
                    position = rows[0][2]
                    backend.conn.executemany(
                        PIN, [(execution_id, position, address, now) for address in pins]
                    )
                if unpin is not None:
                    backend.conn.execute(UNPIN, (execution_id, unpin))
                if release:
                    backend.conn.execute(LEASE_DROP, (execution_id, self.me().token))
                return expires

            expires = backend.transaction(body, what="append")
            if release:
                self._held.pop(execution_id, None)
            else:
                self._held[execution_id] = _Held(expires, ordinal + len(rows))

    def hold(self, execution_id: str, ordinal: int, owner: Owner | None = None) -> None:
        """Make sure this process may write ``execution_id`` next at ``ordinal``, or raise.

        Called before a live step's function runs: a second writer is refused here, before it
        does anything, with ``ExecutionBusyError``. With ``owner`` (the thread and ``Execution``
        object about to run the step), the execution is also claimed for it within this process
        until ``let_go``: another owner is refused until then, so two threads of one process
        cannot both run a step at the same position. The same owner may hold several claims (a
        step's concurrent siblings in one event loop). A claimed execution has a step in flight:
        the heartbeat (started on the first claim) renews its lease until ``let_go``.
        """
        with self._backend.writing(execution_id):
            self._check_running(execution_id, owner)
            now = time.time()
            fence = self._fences.get(execution_id)
            if fence is not None or not self._holds(execution_id, ordinal, now):

                def body() -> float:
                    if fence is not None:
                        fence()
                    return self._take_lease(execution_id, ordinal, now)

                expires = self._backend.transaction(body, what="lease")
                self._held[execution_id] = _Held(expires, ordinal)
            if owner is not None:
                count = self._running.get(execution_id, (owner, 0))[1]
                self._running[execution_id] = (owner, count + 1)
                if self.heartbeat is None and self._beats:
                    self._start_heartbeat()

    @contextlib.contextmanager
    def fenced(self, execution_id: str, check: Callable[[], None]) -> Iterator[None]:
        """While inside, every write to ``execution_id`` first runs ``check`` in its transaction.

        ``check`` raises to refuse the write (a work queue's claim that another worker took
        over, ``_work``); every append and lease check then runs as a transaction, never the
        one-statement append. On leaving, this writer gives the execution's lease back, so the
        next worker on it does not wait for the lease to expire.
        """
        with self._lock:
            if execution_id in self._fences:
                raise JournalError(
                    f"execution {execution_id!r} is already fenced in this journal: one work "
                    "item runs it at a time.",
                    code="execution_fenced",
                    execution_id=execution_id,
                )
            self._fences[execution_id] = check
        try:
            yield
        finally:
            with self._lock:
                self._fences.pop(execution_id, None)
            with contextlib.suppress(self._backend.Error, JournalError):  # it expires anyway
                self.give_back(execution_id)

    def let_go(self, execution_id: str, owner: Owner) -> None:
        """End one claim ``owner`` took with ``hold`` (its step's outcome is journaled or lost)."""
        with self._backend.writing(execution_id, database=False):
            claim = self._running.get(execution_id)
            if claim is None or claim[0] != owner:
                return
            if claim[1] > 1:
                self._running[execution_id] = (owner, claim[1] - 1)
            else:
                del self._running[execution_id]

    def give_back(self, execution_id: str) -> bool:
        """Drop this writer's lease on ``execution_id`` when it holds one and runs no step of it,
        so another writer may take the execution at once; True when a lease was given back.

        For an execution left open on purpose: a map's item whose step failed, which any process
        may run again (``chat.map``'s workers). Writing it again takes the lease again.
        """
        backend = self._backend
        with backend.writing(execution_id):
            if execution_id in self._running:
                return False
            if self._held.pop(execution_id, None) is None:
                return False
            token = self.me().token
            with contextlib.suppress(backend.Error, JournalError):  # it expires on its own
                backend.transaction(
                    lambda: backend.conn.execute(LEASE_DROP, (execution_id, token)),
                    what="release",
                )
        return True

    def check_busy(self, execution_id: str, owner: Owner | None) -> None:
        """Raise ``ExecutionBusyError`` when another owner in this process runs a step of the execution."""
        if owner is None:
            return
        with self._backend.writing(execution_id, database=False):
            self._check_running(execution_id, owner)

    def _check_running(self, execution_id: str, owner: Owner | None) -> None:
        """Under the lock: refuse when another owner in this process runs a step of the execution."""
        claim = self._running.get(execution_id)
        if claim is not None and claim[0] != owner:
            raise ExecutionBusyError(
                f"execution {execution_id!r} is running a step in another thread (or through "
                "another Execution object) of this process. Only one writer may run an execution: "
                "wait for that step to finish, then open the execution again "
                "(journal.execution(id)) and run the code from the top, or run a copy under a new "
                "id (execution.fork(step, new_id)).",
                execution_id=execution_id,
                reason="in_process",
                pid=os.getpid(),
            )

    def _holds(self, execution_id: str, ordinal: int, now: float) -> bool:
        held = self._held.get(execution_id)
        return (
            held is not None
            and held.next_ordinal == ordinal
            and held.expires - now > self.lease_ttl / 2
        )

    def _take_lease(self, execution_id: str, ordinal: int, now: float) -> float:
        """Inside a write transaction: take or renew the lease, or raise; return its expiry."""
        conn = self._backend.conn
        holder = self.me()
        found = conn.execute(LEASE_GET, (execution_id,)).fetchone()
        row = None
        if found is not None:
            row = LeaseRow(Holder(token=found[0], host=found[1], pid=found[2]), float(found[3]))
        verdict = decide(row, holder, now)
        if verdict == "busy":
            assert row is not None
            raise _busy(execution_id, row, now)
        last = conn.execute(LAST_ORDINAL, (execution_id,)).fetchone()[0]
        if last is not None and last != ordinal - 1:
            raise _moved(execution_id)
        expires = now + self.lease_ttl
        acquired = now_iso()
        if row is None:
            conn.execute(
                LEASE_PUT,
                (execution_id, holder.token, holder.host, holder.pid, expires, acquired),
            )
        elif verdict == "mine":
            conn.execute(LEASE_RENEW, (expires, execution_id, holder.token))
        else:
            conn.execute(
                LEASE_TAKE,
                (holder.token, holder.host, holder.pid, expires, acquired, execution_id),
            )
        return expires

    def _start_heartbeat(self) -> None:
        """Start the thread that renews the leases of steps in flight, once (``hold``)."""
        with self._beat_lock:
            if self.heartbeat is not None:
                return
            # The thread holds the writer weakly: a journal a notebook drops without close() (a
            # cell run again) is collected, its writer and connections with it, instead of being
            # kept alive, connected and renewing, by its own heartbeat.
            self.heartbeat = threading.Thread(
                target=_heartbeat,
                args=(weakref.ref(self), self._closed, self.lease_ttl / 3),
                name="loom-journal-lease",
                daemon=True,
            )
            self.heartbeat.start()

    def renew(self) -> None:
        """Renew the leases of executions with a step in flight (the heartbeat's one beat)."""
        backend = self._backend
        with self._lock:  # on SQLite the lock the claims are taken under
            in_flight = list(self._running)
        for execution_id in in_flight:
            if self._closed.is_set():
                return
            # Best effort: the next append renews in its transaction or reports.
            with contextlib.suppress(backend.Error, JournalError), backend.writing(execution_id):
                held = self._held.get(execution_id)
                if held is None or self._closed.is_set():
                    continue
                expires = time.time() + self.lease_ttl
                backend.conn.execute(LEASE_RENEW, (expires, execution_id, self.me().token))
                held.expires = expires

    def append_rows(self, rows: Iterable[NewRow]) -> None:
        """Append complete rows (with their own ``created``) in one transaction (for imports).

        The rows are one execution's events in order; they get ordinals 0, 1, 2 ...
        """
        backend = self._backend
        numbered = [(*row, index) for index, row in enumerate(rows)]
        with backend.reading():  # a new execution: no lease, one transaction of its own
            backend.transaction(lambda: backend.conn.executemany(INSERT, numbered), what="import")

    def insert_execution(self, execution_id: str, rows: list[NewRow]) -> None:
        """Write a whole new execution (a fork) in one transaction; refuse an id in use."""
        backend = self._backend

        def body() -> None:
            if backend.conn.execute(LAST_ORDINAL, (execution_id,)).fetchone()[0] is not None:
                raise JournalError(
                    f"execution {execution_id!r} already exists in {self._label}; fork under a "
                    "new id.",
                    code="execution_exists",
                    execution_id=execution_id,
                )
            numbered = [(*row, index) for index, row in enumerate(rows)]
            backend.conn.executemany(INSERT, numbered)

        with backend.reading():  # a new execution: no lease, one transaction of its own
            backend.transaction(body, what="fork")

    def close(self) -> None:
        """Stop renewing and give back the leases this process holds, so another can take over at once."""
        backend = self._backend
        self._closed.set()
        token = self.me().token
        with self._lock:
            held = list(self._held)
        for execution_id in held:
            # Best effort: a lease not given back expires on its own.
            with contextlib.suppress(backend.Error, JournalError), backend.writing(execution_id):
                backend.conn.execute(LEASE_DROP, (execution_id, token))
        with self._lock:
            self._held.clear()
            backend.close()
        forget(token)


def _heartbeat(ref: weakref.ref[Writer], closed: threading.Event, interval: float) -> None:
    """Renew a writer's leases every ``interval`` seconds until it is closed or collected."""
    while not closed.wait(interval):
        writer = ref()
        if writer is None:
            return
        writer.renew()
        del writer  # hold it only while beating


class _Held:
    """A lease this process holds: when it expires, and the ordinal this process writes next."""

    __slots__ = ("expires", "next_ordinal")

    def __init__(self, expires: float, next_ordinal: int) -> None:
        self.expires = expires
        self.next_ordinal = next_ordinal


def _busy(execution_id: str, row: LeaseRow, now: float) -> ExecutionBusyError:
    left = max(0.0, row.expires - now)
    if row.holder.pid == os.getpid() and row.holder.host == socket.gethostname():
        return ExecutionBusyError(
            f"execution {execution_id!r} is being run through another Journal object of this "
            f"process (pid {row.holder.pid}; its lease runs {left:.0f} s more unless renewed): "
            "two handles on one journal are two writers. Run the execution through that "
            "journal, or close it (journal.close()) and open the execution again here, or run a "
            "copy under a new id (execution.fork(step, new_id)).",
            execution_id=execution_id,
            pid=row.holder.pid,
            host=row.holder.host,
            expires=row.expires,
            reason="other_journal",
        )
    return ExecutionBusyError(
        f"execution {execution_id!r} is being run by another live writer (pid {row.holder.pid} "
        f"on host {row.holder.host!r}; its lease runs {left:.0f} s more unless renewed). Only "
        "one writer may run an execution: let that one finish (or stop it) and open the "
        "execution again, or run a copy under a new id (execution.fork(step, new_id)).",
        execution_id=execution_id,
        pid=row.holder.pid,
        host=row.holder.host,
        expires=row.expires,
    )


def _moved(execution_id: str) -> ExecutionBusyError:
    return ExecutionBusyError(
        f"execution {execution_id!r} was written by another writer since this Execution was "
        "opened, so it cannot go on from what it read. Open it again (journal.execution(id)) "
        "and run the code from the top: what the other writer did is replayed from the log.",
        execution_id=execution_id,
        reason="log_moved",
    )
