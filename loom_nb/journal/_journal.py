"""``Journal``: the append-only event log of durable executions, on SQLite (ADR 0120 decision 10).

One table, ``events``, holds every execution's events in ``seq`` order; nothing is ever updated
or deleted (triggers refuse it). An ``Execution`` reads its own events once, when it is opened,
and appends as it runs.

Durability. The database runs in WAL mode with ``synchronous=NORMAL`` by default: a commit is
atomic and survives the process being killed at any instant (the crash-and-resume test kills
runs with SIGKILL), while the WAL is synced to disk at checkpoints rather than at every commit,
so a power cut may lose the last few commits but never corrupts the log. ``synchronous="FULL"``
syncs every commit as well, at a large cost per step. The benchmark measures the baseline with
the same setting.

Concurrency. The connection is shared by the threads of a process under a lock; between
processes SQLite's own locking serializes writers (``BEGIN IMMEDIATE`` for read-then-write, a
busy timeout for waiting). Each append is one atomic statement or transaction, so two processes
appending never interleave half-events. One execution has one writer at a time (issue 15): the
process running it live holds its lease (``_lease``), taken in the same transaction as an
append, and checked before a step's function runs; another process, or a stale ``Execution``
object of this one, gets ``ExecutionBusyError`` before it runs anything. Within the process the
lease is per execution too: while a step runs, it is claimed by the ``Execution`` object and
thread running it, and another thread (or another object) trying to run a step of the same
execution, or to append to it, gets ``ExecutionBusyError`` (``reason="in_process"``) before it
runs anything, as a second process would. The events table is
unique on (execution_id, ordinal) as a backstop. A lease whose holder died is taken over (at
once on the same host, after ``lease_ttl`` seconds elsewhere).

Paths. ``Journal("runs/x.sqlite")`` creates the journal's own folder (``runs``) when its parent
exists, and nothing else: a mistyped path is refused (``journal_unavailable``), never a tree of
folders created somewhere. A file that is not a sound SQLite database (a flipped bit, another
format) is ``journal_corrupt``, on open or on any later read.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, ClassVar, Literal

from loom_nb.errors import ConfigurationError, ExecutionBusyError, JournalError
from loom_nb.journal._claims import DEFAULT_CLAIM_THRESHOLD, unclaim
from loom_nb.journal._codec import decode, is_storable_id
from loom_nb.journal._lease import Holder, LeaseRow, decide, me
from loom_nb.journal._schema import migrate
from loom_nb.journal._timeline import Event, ExecutionSummary, Timeline

if TYPE_CHECKING:
    from loom_nb.journal._execution import Execution
    from loom_nb.journal._watch import JournalWatch
    from loom_nb.store import ContentStore, Principal

__all__ = ["Journal"]

Row = tuple[int, str, str, str | None, int | None, str, str]
"""(seq, execution_id, kind, step_id, position, payload, created) as stored."""

_INSERT = (
    "INSERT INTO events (execution_id, kind, step_id, position, payload, created, ordinal) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_INSERTS = {n: _INSERT + ", (?, ?, ?, ?, ?, ?, ?)" * (n - 1) for n in (1, 2, 3)}
_LEASE_GET = "SELECT token, host, pid, expires FROM leases WHERE execution_id = ?"
_LEASE_PUT = (
    "INSERT INTO leases (execution_id, token, host, pid, expires, acquired) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
_LEASE_TAKE = (
    "UPDATE leases SET token = ?, host = ?, pid = ?, expires = ?, acquired = ? "
    "WHERE execution_id = ?"
)
_LEASE_RENEW = "UPDATE leases SET expires = ? WHERE execution_id = ? AND token = ?"
_LEASE_DROP = "DELETE FROM leases WHERE execution_id = ? AND token = ?"
_LAST_ORDINAL = "SELECT MAX(ordinal) FROM events WHERE execution_id = ?"
_SELECT = (
    "SELECT seq, execution_id, kind, step_id, position, payload, created FROM events "
    "WHERE execution_id = ? ORDER BY seq"
)


_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def now_iso() -> str:
    """The current UTC time as ISO 8601 with microseconds (how ``created`` is stored)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


class Journal:
    """An append-only event log of durable executions: SQLite by path, PostgreSQL by URL.

    ``Journal("postgresql://user@host/db", pool_size=4)`` is the same journal on PostgreSQL
    (issue 16; see ``loom_nb.journal._postgres``): a pool of up to ``pool_size`` connections, so
    threads (or ``Execution`` objects) of one process running different executions do not wait
    for each other's round trips.

    ``Journal()`` is in memory; ``Journal("run.sqlite")`` is a file (the file's own folder is
    created when its parent exists; any other missing folder is refused). With ``store``, step
    inputs and outputs whose JSON is over ``claim_threshold`` bytes are kept in the content store
    and journaled as claim-checks. ``synchronous`` is SQLite's durability setting (``"NORMAL"``
    or ``"FULL"``; see the module docstring). ``lease_ttl`` is how many seconds a writer's lease
    on an execution outlives its last renewal (a live writer renews it while it runs; a writer
    that died on another host frees it after this long).
    """

    def __new__(
        cls, path: str | os.PathLike[str] = ":memory:", *args: Any, **kwargs: Any
    ) -> Journal:
        # Journal("postgresql://...") is the PostgreSQL journal (issue 16); everything else SQLite.
        if cls is Journal and isinstance(path, str) and path.startswith(_POSTGRES_SCHEMES):
            try:
                from loom_nb.journal._postgres import PostgresJournal
            except ImportError as exc:
                raise ConfigurationError(
                    "a PostgreSQL journal needs psycopg 3 and psycopg-pool: pip install 'loom_nb[postgres]'.",
                    code="backend_not_installed",
                ) from exc
            return super().__new__(PostgresJournal)
        return super().__new__(cls)

    def __init__(
        self,
        path: str | os.PathLike[str] = ":memory:",
        *,
        store: ContentStore | None = None,
        claim_threshold: int = DEFAULT_CLAIM_THRESHOLD,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        timeout: float = 30.0,
        lease_ttl: float = 30.0,
    ) -> None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0:
            raise JournalError(
                f"timeout must be a non-negative number of seconds, not {timeout!r}.",
                code="invalid_argument",
            )
        if synchronous not in ("NORMAL", "FULL"):
            raise JournalError(
                f"synchronous must be 'NORMAL' or 'FULL', not {synchronous!r}.",
                code="invalid_argument",
            )
        if (
            isinstance(claim_threshold, bool)
            or not isinstance(claim_threshold, int)
            or claim_threshold < 0
        ):
            raise JournalError(
                f"claim_threshold must be a non-negative int of bytes, not {claim_threshold!r}.",
                code="invalid_argument",
            )
        if (
            isinstance(lease_ttl, bool)
            or not isinstance(lease_ttl, int | float)
            or not 0.05 <= lease_ttl <= 86_400
        ):
            raise JournalError(
                f"lease_ttl must be a number of seconds from 0.05 to 86400, not {lease_ttl!r}.",
                code="invalid_argument",
            )
        if not isinstance(path, str | os.PathLike):
            raise JournalError(
                f"a journal path is a str or os.PathLike (or ':memory:'), not {type(path).__name__}.",
                code="invalid_argument",
            )
        self._path = os.fspath(path)
        if not isinstance(self._path, str):
            raise JournalError(
                f"a journal path is text, not {type(self._path).__name__}.",
                code="invalid_argument",
            )
        self.lease_ttl = float(lease_ttl)
        """Seconds a writer's lease on an execution lasts after its last renewal."""
        self._held: dict[str, _Held] = {}
        self._inflight: dict[str, int] = {}
        self._running: dict[str, tuple[Owner, int]] = {}
        self._heartbeat: threading.Thread | None = None
        self._closed = threading.Event()
        self.store = store
        """The content store claim-checked payloads go to (None: everything stays inline)."""
        self.claim_threshold = claim_threshold
        """Payloads whose JSON is longer than this many bytes are claim-checked."""
        self.synchronous = synchronous
        """SQLite's ``synchronous`` setting in force."""
        self._lock = threading.Lock()
        self._conn: Any = self._connect(synchronous, timeout)

    # The storage seam (issue 16). A backend is a DB-API style connection in autocommit mode
    # (``execute(sql, params)`` with ``?`` placeholders, ``executemany``, ``close``) opened and
    # migrated by ``_connect``, plus its error classes; every semantic above and below (events,
    # replay, leases, ordinals, claims, recordings, forks) is this one implementation.
    # ``_BEGIN_WRITE`` starts a read-then-write transaction holding the journal's write lock.
    _Error: ClassVar[type[Exception]] = sqlite3.Error
    _IntegrityError: ClassVar[type[Exception]] = sqlite3.IntegrityError
    _BEGIN_WRITE: ClassVar[str] = "BEGIN IMMEDIATE"

    def _reading(self) -> contextlib.AbstractContextManager[Any]:
        """Hold what a read (or a transaction of its own) needs: SQLite's one connection, under the lock.

        The PostgreSQL journal overrides this and ``_writing`` to lend each thread a pooled
        connection of its own, so threads on different executions do not wait for each other.
        """
        return self._lock

    def _writing(
        self, execution_id: str, *, database: bool = True
    ) -> contextlib.AbstractContextManager[Any]:
        """Hold what a write to ``execution_id`` needs: the lock guarding its lease and claims
        (here the journal's one lock) and, with ``database``, a connection."""
        return self._lock

    def _disconnect(self) -> None:
        """Close the connection (or, on PostgreSQL, the pool)."""
        self._conn.close()

    def _connect(self, synchronous: str, timeout: float) -> Any:
        """Open and migrate the SQLite database (the PostgreSQL journal overrides this)."""
        try:
            if self._path != ":memory:" and not self._path.startswith("file:"):
                _make_own_folder(Path(self._path))
            conn = sqlite3.connect(
                self._path, isolation_level=None, check_same_thread=False, timeout=timeout
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={synchronous}")
            migrate(conn)
        except sqlite3.DatabaseError as exc:
            if _is_corruption(exc):
                raise _corrupt(exc, self._path) from exc
            raise JournalError(
                f"cannot open the journal at {self._path!r}: {exc}. Check the path is a writable "
                "SQLite file (or ':memory:').",
                code="journal_unavailable",
                path=self._path,
            ) from exc
        except (OSError, sqlite3.Error) as exc:
            raise JournalError(
                f"cannot open the journal at {self._path!r}: {exc}. Check the path is a writable "
                "SQLite file (or ':memory:').",
                code="journal_unavailable",
                path=self._path,
            ) from exc
        return conn

    @property
    def path(self) -> str:
        """The database path (``":memory:"`` for an in-memory journal)."""
        return self._path

    def __repr__(self) -> str:
        return f"Journal({self._path!r})"

    # -- executions -----------------------------------------------------------------------

    def execution(
        self,
        execution_id: str,
        *,
        principal: Principal | None = None,
        divergence: Literal["fail", "ignore_inputs", "warn"] = "fail",
    ) -> Execution:
        """Open an execution: a new one (journaling ``execution_started``) or a recorded one to replay.

        A recorded execution keeps the principal it was started with; passing a different one
        is refused. ``divergence`` says what replay does when the code asks for something the log
        did not record at that position (ADR 0120 decision 10: another step id) or asks for the
        same step with another input (issue 15: the step's recorded input hash differs):

        - ``"fail"`` (default): raise ``ReplayDivergenceError`` (code ``replay_divergence`` or
          ``input_changed``);
        - ``"ignore_inputs"``: serve a recorded step even when its input changed (another step
          id still raises);
        - ``"warn"``: journal a divergence event and go on live from there (the log after it is
          superseded).

        Opening never takes the writer lease: replaying a finished run writes nothing. The lease
        is taken when the execution first journals something live.
        """
        from loom_nb.journal._execution import Execution, principal_from_json, principal_to_json

        _check_id(execution_id)
        if divergence not in ("fail", "ignore_inputs", "warn"):
            raise JournalError(
                f"divergence must be 'fail', 'ignore_inputs' or 'warn', not {divergence!r}.",
                code="invalid_argument",
            )
        wanted = principal_to_json(principal)
        with self._reading():
            rows = self._transaction(lambda: self._open_rows(execution_id, wanted), what="open")
        first = decode(rows[0][5], where=f"execution {execution_id!r}: execution_started")
        recorded = principal_from_json(first.get("principal") if isinstance(first, dict) else None)
        if principal is not None and wanted != principal_to_json(recorded):
            raise JournalError(
                f"execution {execution_id!r} was started by principal {recorded!r}, not "
                f"{principal!r}. Reopen it with the principal it was started with (or none).",
                code="principal_mismatch",
                execution_id=execution_id,
            )
        timeline = Timeline(execution_id)
        for row in rows:
            timeline.apply(row[2], row[3], row[4], row[5])
        return Execution(
            self, execution_id, recorded, timeline, divergence=divergence, ordinal=len(rows)
        )

    def _open_rows(self, execution_id: str, principal: dict[str, Any] | None) -> list[Row]:
        rows: list[Row] = self._conn.execute(_SELECT, (execution_id,)).fetchall()
        if not rows:
            payload = _json_object({"principal": principal})
            self._conn.execute(
                _INSERT, (execution_id, "execution_started", None, None, payload, now_iso(), 0)
            )
            rows = self._conn.execute(_SELECT, (execution_id,)).fetchall()
        if rows[0][2] != "execution_started":
            raise JournalError(
                f"execution {execution_id!r}: its first event is {rows[0][2]!r}, not "
                "execution_started; the journal is damaged.",
                code="journal_corrupt",
            )
        return rows

    def events(
        self, execution_id: str, *, resolve_claims: bool = True, expand_inputs: bool = True
    ) -> list[Event]:
        """Every event of an execution, in order, with payloads decoded.

        With ``resolve_claims`` (the default), claim-checked step inputs and outputs are read
        back from the content store and the payload looks as if they had been inline; without
        it, payloads are exactly as stored (markers and their ``claimed`` list). With
        ``expand_inputs`` (the default, needs ``resolve_claims``), a model step's messages
        journaled as a delta of an earlier step are shown whole, so every model step's input
        reads as its full request.
        """
        with self._reading():
            rows = self._read(lambda: self._conn.execute(_SELECT, (execution_id,)).fetchall())
        events = [self._event(row, resolve_claims=resolve_claims) for row in rows]
        return _expanded(events) if resolve_claims and expand_inputs else events

    def _event(self, row: Row, *, resolve_claims: bool) -> Event:
        seq, execution_id, kind, step_id, position, text, created = row
        where = f"execution {execution_id!r}, event {seq} ({kind})"
        payload = decode(text, where=where)
        if resolve_claims:
            payload = self.resolve_claims(payload, where=where)
        return Event(
            seq=seq,
            execution_id=execution_id,
            kind=kind,  # type: ignore[arg-type]
            step_id=step_id,
            position=position,
            payload=payload,
            created=datetime.fromisoformat(created),
        )

    def resolve_claims(self, payload: Any, *, where: str = "journal") -> Any:
        """``payload`` with each field its ``claimed`` list names read back from the content store."""
        if not (isinstance(payload, dict) and "claimed" in payload):
            return payload
        resolved = {k: v for k, v in payload.items() if k != "claimed"}
        for name in payload["claimed"]:
            resolved[name] = unclaim(payload.get(name), store=self.store, where=f"{where}.{name}")
        return resolved

    def executions(self) -> list[ExecutionSummary]:
        """A summary of every execution in the journal, oldest first."""
        with self._reading():
            rows = self._read(
                lambda: self._conn.execute(
                    "SELECT execution_id, kind, step_id, position, "
                    "CASE WHEN kind = 'execution_started' THEN payload ELSE '' END, created "
                    "FROM events ORDER BY seq"
                ).fetchall()
            )
        return self._summaries(rows)

    def _summaries(self, rows: Iterable[tuple[Any, ...]]) -> list[ExecutionSummary]:
        """Fold (execution_id, kind, step_id, position, started payload, created) rows into summaries."""
        folds: dict[str, tuple[Timeline, list[Any]]] = {}
        for execution_id, kind, step_id, position, payload, created in rows:
            if execution_id not in folds:
                folds[execution_id] = (Timeline(execution_id), [payload, created, created, 0])
            timeline, info = folds[execution_id]
            timeline.apply(kind, step_id, position, payload)
            info[2] = created
            info[3] += 1
        summaries = []
        for execution_id, (timeline, (started, first, last, count)) in folds.items():
            head = decode(started, where=f"execution {execution_id!r}") if started else {}
            principal = head.get("principal") if isinstance(head, dict) else None
            tenant = principal.get("tenant") if isinstance(principal, dict) else None
            summaries.append(
                ExecutionSummary(
                    execution_id=execution_id,
                    status=timeline.status,
                    tenant=tenant,
                    steps=timeline.completed_steps,
                    events=count,
                    started=datetime.fromisoformat(first),
                    updated=datetime.fromisoformat(last),
                )
            )
        return summaries

    def iter_payloads(self) -> Iterator[Any]:
        """Every event's JSON payload as stored (claim-check markers and media refs unresolved).

        This is what content GC scans (``sweep_unpinned_content(store, logs=[journal])``):
        both shapes pin the blobs they cite.
        """
        last = 0
        while True:
            with self._reading():
                batch = self._read(
                    lambda after=last: self._conn.execute(  # type: ignore[misc]
                        "SELECT seq, payload FROM events WHERE seq > ? ORDER BY seq LIMIT 500",
                        (after,),
                    ).fetchall()
                )
            if not batch:
                return
            for seq, text in batch:
                yield decode(text, where=f"event {seq}")
            last = batch[-1][0]

    def events_after(
        self, execution_id: str, seq: int, *, earlier: dict[int, list[Any]] | None = None
    ) -> list[Event]:
        """The events of an execution with ``seq`` greater than ``seq``, in order (claims resolved).

        Model steps' messages are expanded whole, given in ``earlier`` the expansions of the
        events before ``seq`` (what a watch accumulates; empty when reading from the start).
        """
        with self._reading():
            rows = self._conn.execute(
                "SELECT seq, execution_id, kind, step_id, position, payload, created FROM events "
                "WHERE execution_id = ? AND seq > ? ORDER BY seq",
                (execution_id, seq),
            ).fetchall()
        events = [self._event(row, resolve_claims=True) for row in rows]
        return _expanded(events, {} if earlier is None else earlier)

    def watch(
        self,
        execution_id: str,
        callback: Callable[[Event], object] | None = None,
        *,
        after_seq: int = 0,
        poll: float = 0.25,
    ) -> JournalWatch:
        """Follow an execution live: every event appended to it (after ``after_seq``), as it lands.

        A viewer in another process (a ``ReplayStepper`` in a second kernel) sees a running
        execution's steps as they are journaled. Each new event goes to ``callback`` (called on
        the watch's own thread) or, without one, is queued for ``watch.get(timeout)``. On
        PostgreSQL the watch waits on ``LISTEN/NOTIFY``; on SQLite it looks every ``poll``
        seconds. Stop it with ``watch.stop()`` (or use it as a context manager).
        """
        from loom_nb.journal._watch import JournalWatch

        _check_id(execution_id)
        return JournalWatch(self, execution_id, callback, after_seq=after_seq, poll=poll)

    def _listen(self) -> Any:
        """What a watch waits on between looks: SQLite has no notifications, so it sleeps."""
        from loom_nb.journal._watch import PollListener

        return PollListener()

    # -- recordings -----------------------------------------------------------------------

    def export_jsonl(
        self, execution_id: str, path_or_file: str | os.PathLike[str] | IO[str]
    ) -> int:
        """Write an execution as a JSON Lines recording (one event per line); return the line count.

        Claim-checked payloads are inlined, so the recording is self-contained; media refs stay
        addresses (a replay never resolves them).
        """
        from loom_nb.journal._recording import export_jsonl

        return export_jsonl(self, execution_id, path_or_file)

    def import_jsonl(
        self, path_or_file: str | os.PathLike[str] | IO[str], *, execution_id: str | None = None
    ) -> str:
        """Load a JSON Lines recording as a new execution (optionally under another id); return its id."""
        from loom_nb.journal._recording import import_jsonl

        return import_jsonl(self, path_or_file, execution_id=execution_id)

    # -- reading and writing --------------------------------------------------------------

    def _read(self, query: Callable[[], Any]) -> Any:
        """Run a read; a damaged database is ``journal_corrupt``, anything else unavailable."""
        try:
            return query()
        except self._Error as exc:
            if _is_corruption(exc):
                raise _corrupt(exc, self._path) from exc
            raise JournalError(
                f"the journal at {self._path!r} could not be read ({exc}). If another process "
                "holds it locked, retry.",
                code="journal_unavailable",
                path=self._path,
            ) from exc

    def _append(
        self,
        execution_id: str,
        ordinal: int,
        rows: list[tuple[str, str | None, int | None, str]],
        *,
        release: bool = False,
        owner: Owner | None = None,
    ) -> None:
        """Append ``rows`` (kind, step_id, position, payload) at ``ordinal`` on, atomically.

        The writer lease is taken or renewed in the same transaction, unless this process holds
        it comfortably and wrote the execution's last row itself: then one INSERT statement (one
        commit) is the whole append, and the (execution_id, ordinal) uniqueness still refuses a
        row another writer got in first. ``release`` gives the lease back in the same commit
        (completion, park). While another owner (thread and ``Execution`` object) of this process
        runs a step of the execution, the append is refused (``_hold``).
        """
        created = now_iso()
        values: list[Any] = []
        for index, (kind, step_id, position, payload) in enumerate(rows):
            values += [execution_id, kind, step_id, position, payload, created, ordinal + index]
        statement = _INSERTS[len(rows)]
        with self._writing(execution_id):
            self._check_running(execution_id, owner)
            now = time.time()
            if not release and self._holds(execution_id, ordinal, now):
                try:
                    self._conn.execute(statement, values)
                except self._IntegrityError as exc:
                    raise _moved(execution_id) from exc
                except self._Error as exc:
                    raise self._write_error(exc) from exc
                self._held[execution_id].next_ordinal = ordinal + len(rows)
                return

            def body() -> float:
                expires = self._take_lease(execution_id, ordinal, now)
                try:
                    self._conn.execute(statement, values)
                except self._IntegrityError as exc:
                    raise _moved(execution_id) from exc
                if release:
                    self._conn.execute(_LEASE_DROP, (execution_id, me().token))
                return expires

            expires = self._transaction(body, what="append")
            if release:
                self._held.pop(execution_id, None)
            else:
                self._held[execution_id] = _Held(expires, ordinal + len(rows))

    def _hold(self, execution_id: str, ordinal: int, owner: Owner | None = None) -> None:
        """Make sure this process may write ``execution_id`` next at ``ordinal``, or raise.

        Called before a live step's function runs: a second writer is refused here, before it
        does anything, with ``ExecutionBusyError``. With ``owner`` (the thread and ``Execution``
        object about to run the step), the execution is also claimed for it within this process
        until ``_let_go``: another owner is refused until then, so two threads of one process
        cannot both run a step at the same position. The same owner may hold several claims (a
        step's concurrent siblings in one event loop).
        """
        with self._writing(execution_id):
            self._check_running(execution_id, owner)
            now = time.time()
            if not self._holds(execution_id, ordinal, now):
                expires = self._transaction(
                    lambda: self._take_lease(execution_id, ordinal, now), what="lease"
                )
                self._held[execution_id] = _Held(expires, ordinal)
            if owner is not None:
                count = self._running.get(execution_id, (owner, 0))[1]
                self._running[execution_id] = (owner, count + 1)

    def _let_go(self, execution_id: str, owner: Owner) -> None:
        """End one claim ``owner`` took with ``_hold`` (its step's outcome is journaled or lost)."""
        with self._writing(execution_id, database=False):
            claim = self._running.get(execution_id)
            if claim is None or claim[0] != owner:
                return
            if claim[1] > 1:
                self._running[execution_id] = (owner, claim[1] - 1)
            else:
                del self._running[execution_id]

    def _check_busy(self, execution_id: str, owner: Owner | None) -> None:
        """Raise ``ExecutionBusyError`` when another owner in this process runs a step of the execution."""
        if owner is None:
            return
        with self._writing(execution_id, database=False):
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
        holder = me()
        found = self._conn.execute(_LEASE_GET, (execution_id,)).fetchone()
        row = None
        if found is not None:
            row = LeaseRow(Holder(token=found[0], host=found[1], pid=found[2]), float(found[3]))
        verdict = decide(row, holder, now)
        if verdict == "busy":
            assert row is not None
            raise _busy(execution_id, row, now)
        last = self._conn.execute(_LAST_ORDINAL, (execution_id,)).fetchone()[0]
        if last is not None and last != ordinal - 1:
            raise _moved(execution_id)
        expires = now + self.lease_ttl
        acquired = now_iso()
        if row is None:
            self._conn.execute(
                _LEASE_PUT,
                (execution_id, holder.token, holder.host, holder.pid, expires, acquired),
            )
        elif verdict == "mine":
            self._conn.execute(_LEASE_RENEW, (expires, execution_id, holder.token))
        else:
            self._conn.execute(
                _LEASE_TAKE,
                (holder.token, holder.host, holder.pid, expires, acquired, execution_id),
            )
        return expires

    def _in_flight(self, execution_id: str, delta: int) -> None:
        """Count a step of ``execution_id`` starting (+1) or ending (-1); while one is in flight
        the heartbeat keeps the lease renewed."""
        with self._lock:
            count = self._inflight.get(execution_id, 0) + delta
            if count > 0:
                self._inflight[execution_id] = count
            else:
                self._inflight.pop(execution_id, None)
            if count > 0 and self._heartbeat is None and self._path != ":memory:":
                # The thread holds the journal weakly: a journal a notebook drops without
                # close() (a cell run again) is collected, and its connections with it, instead
                # of being kept alive, connected and renewing, by its own heartbeat.
                self._heartbeat = threading.Thread(
                    target=_heartbeat,
                    args=(weakref.ref(self), self._closed, self.lease_ttl / 3),
                    name="loom-journal-lease",
                    daemon=True,
                )
                self._heartbeat.start()

    def _renew(self) -> None:
        """Renew the leases of executions with a step in flight (the heartbeat's one beat)."""
        with self._lock:
            in_flight = list(self._inflight)
        for execution_id in in_flight:
            if self._closed.is_set():
                return
            # Best effort: the next append renews in its transaction or reports.
            with contextlib.suppress(self._Error, JournalError), self._writing(execution_id):
                held = self._held.get(execution_id)
                if held is None or self._closed.is_set():
                    continue
                expires = time.time() + self.lease_ttl
                self._conn.execute(_LEASE_RENEW, (expires, execution_id, me().token))
                held.expires = expires

    def _append_rows(
        self, rows: Iterable[tuple[str, str, str | None, int | None, str, str]]
    ) -> None:
        """Append complete rows (with their own ``created``) in one transaction (for imports).

        The rows are one execution's events in order; they get ordinals 0, 1, 2 ...
        """
        numbered = [(*row, index) for index, row in enumerate(rows)]
        with self._reading():  # a new execution: no lease, one transaction of its own
            self._transaction(lambda: self._conn.executemany(_INSERT, numbered), what="import")

    def _insert_execution(
        self, execution_id: str, rows: list[tuple[str, str, str | None, int | None, str, str]]
    ) -> None:
        """Write a whole new execution (a fork) in one transaction; refuse an id in use."""

        def body() -> None:
            if self._conn.execute(_LAST_ORDINAL, (execution_id,)).fetchone()[0] is not None:
                raise JournalError(
                    f"execution {execution_id!r} already exists in {self!r}; fork under a new id.",
                    code="execution_exists",
                    execution_id=execution_id,
                )
            numbered = [(*row, index) for index, row in enumerate(rows)]
            self._conn.executemany(_INSERT, numbered)

        with self._reading():  # a new execution: no lease, one transaction of its own
            self._transaction(body, what="fork")

    def _transaction(self, body: Any, *, what: str) -> Any:
        try:
            self._conn.execute(self._BEGIN_WRITE)
        except self._Error as exc:
            raise self._write_error(exc) from exc
        try:
            result = body()
            self._conn.execute("COMMIT")
        except BaseException as exc:
            self._conn.execute("ROLLBACK")
            if isinstance(exc, self._IntegrityError) and what == "import":
                raise JournalError(
                    f"the recording could not be imported ({exc}): the execution already "
                    "exists. Import it under another id.",
                    code="execution_exists",
                ) from exc
            if isinstance(exc, self._Error):
                raise self._write_error(exc) from exc
            raise
        return result

    def _write_error(self, exc: BaseException) -> JournalError:
        if _is_corruption(exc):
            return _corrupt(exc, self._path)
        return JournalError(
            f"the journal could not be written ({exc}). If another process holds the database "
            "locked, retry; if the disk is full or read-only, free space or move the journal.",
            code="journal_write_failed",
        )

    def close(self) -> None:
        """Close the database connection (the journal cannot be used afterwards).

        Leases this process holds on executions are given back first, so another process can
        take over at once.
        """
        self._closed.set()
        token = me().token
        with self._lock:
            held = list(self._held)
        for execution_id in held:
            # Best effort: a lease not given back expires on its own.
            with contextlib.suppress(self._Error, JournalError), self._writing(execution_id):
                self._conn.execute(_LEASE_DROP, (execution_id, token))
        with self._lock:
            self._held.clear()
            self._disconnect()

    def __enter__(self) -> Journal:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _heartbeat(ref: weakref.ref[Journal], closed: threading.Event, interval: float) -> None:
    """Renew a journal's leases every ``interval`` seconds until it is closed or collected."""
    while not closed.wait(interval):
        journal = ref()
        if journal is None:
            return
        journal._renew()
        del journal  # hold it only while beating


def _expanded(events: list[Event], earlier: dict[int, list[Any]] | None = None) -> list[Event]:
    """``events`` with each model step's delta-journaled messages expanded to the whole list.

    ``earlier`` carries the expansions of events already seen (a watch passes its own, so the
    events it delivers one batch at a time read whole too).
    """
    from loom_nb.journal._requests import expand_messages

    if earlier is None:
        earlier = {}
    out: list[Event] = []
    for event in events:
        payload = event.payload
        if (
            event.kind in ("step_completed", "step_failed")
            and event.position is not None
            and isinstance(payload, dict)
        ):
            step_input = payload.get("input")
            where = f"execution {event.execution_id!r}, event {event.seq}"
            messages = expand_messages(step_input, earlier, where=where)
            if messages is not None and isinstance(step_input, dict):
                earlier[event.position] = messages
                if messages is not step_input.get("messages"):
                    full = {**payload, "input": {**step_input, "messages": messages}}
                    event = dataclasses.replace(event, payload=full)
        out.append(event)
    return out


Owner = tuple[object, int]
"""Who runs a step within this process: the ``Execution`` object's token and the thread's ident."""


class _Held:
    """A lease this process holds: when it expires, and the ordinal this process writes next."""

    __slots__ = ("expires", "next_ordinal")

    def __init__(self, expires: float, next_ordinal: int) -> None:
        self.expires = expires
        self.next_ordinal = next_ordinal


def _busy(execution_id: str, row: LeaseRow, now: float) -> ExecutionBusyError:
    left = max(0.0, row.expires - now)
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


def _is_corruption(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, sqlite3.DatabaseError) and (
        "malformed" in text or "not a database" in text or "corrupt" in text
    )


def _corrupt(exc: BaseException, path: str) -> JournalError:
    return JournalError(
        f"the journal at {path!r} is damaged ({exc}): it is not a sound SQLite database. Restore "
        "it from a backup, or replay from a recording (journal.import_jsonl into a new journal).",
        code="journal_corrupt",
        path=path,
    )


def _make_own_folder(path: Path) -> None:
    """Create the journal file's own folder when its parent exists; refuse any deeper gap."""
    folder = path.parent
    if folder.is_dir():
        return
    if not folder.parent.is_dir():
        raise JournalError(
            f"cannot create the journal at {os.fspath(path)!r}: neither its folder "
            f"{os.fspath(folder)!r} nor that folder's parent exists. Create the folders first, "
            "or check the path for a typo.",
            code="journal_unavailable",
            path=os.fspath(path),
        )
    try:
        folder.mkdir(exist_ok=True)
    except OSError as exc:
        raise JournalError(
            f"cannot create the journal's folder {os.fspath(folder)!r}: {exc}.",
            code="journal_unavailable",
            path=os.fspath(path),
        ) from exc


def _json_object(value: dict[str, Any]) -> str:
    from loom_nb.journal._codec import dumps

    return dumps(value)


def _check_id(execution_id: object) -> None:
    if not is_storable_id(execution_id):
        raise JournalError(
            f"an execution id is a non-empty string of valid Unicode, not {execution_id!r}.",
            code="invalid_execution_id",
        )
