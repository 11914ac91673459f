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
appending never interleave half-events. One execution is meant to have one writer at a time.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, Literal

from loom_nb.errors import JournalError
from loom_nb.journal._claims import DEFAULT_CLAIM_THRESHOLD, unclaim
from loom_nb.journal._codec import decode, is_storable_id
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
    "INSERT INTO events (execution_id, kind, step_id, position, payload, created) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
_INSERT_PAIR = _INSERT + ", (?, ?, ?, ?, ?, ?)"
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

    ``Journal("postgresql://user@host/db")`` is the same journal on PostgreSQL (issue 16; see
    ``loom_nb.journal._postgres``, which also takes ``pool_size``).

    ``Journal()`` is in memory; ``Journal("run.sqlite")`` is a file (parent folders are
    created). With ``store``, step inputs and outputs whose JSON is over ``claim_threshold``
    bytes are kept in the content store and journaled as claim-checks. ``synchronous`` is
    SQLite's durability setting (``"NORMAL"`` or ``"FULL"``; see the module docstring).
    """

    def __new__(
        cls, path: str | os.PathLike[str] = ":memory:", *args: Any, **kwargs: Any
    ) -> Journal:
        # Journal("postgresql://...") is the PostgreSQL journal (issue 16); everything else SQLite.
        if cls is Journal and isinstance(path, str) and path.startswith(_POSTGRES_SCHEMES):
            from loom_nb.journal._postgres import PostgresJournal

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
    ) -> None:
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
        self._path = os.fspath(path)
        self.store = store
        """The content store claim-checked payloads go to (None: everything stays inline)."""
        self.claim_threshold = claim_threshold
        """Payloads whose JSON is longer than this many bytes are claim-checked."""
        self.synchronous = synchronous
        """SQLite's ``synchronous`` setting in force."""
        self._lock = threading.Lock()
        try:
            if self._path != ":memory:" and not self._path.startswith("file:"):
                Path(self._path).parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                self._path, isolation_level=None, check_same_thread=False, timeout=timeout
            )
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(f"PRAGMA synchronous={synchronous}")
            migrate(self._conn)
        except (OSError, sqlite3.Error) as exc:
            raise JournalError(
                f"cannot open the journal at {self._path!r}: {exc}. Check the path is a writable "
                "SQLite file (or ':memory:').",
                code="journal_unavailable",
                path=self._path,
            ) from exc

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
        divergence: Literal["fail", "warn"] = "fail",
    ) -> Execution:
        """Open an execution: a new one (journaling ``execution_started``) or a recorded one to replay.

        A recorded execution keeps the principal it was started with; passing a different one
        is refused. ``divergence`` says what replay does when the code asks for a step the log
        did not record at that position: ``"fail"`` raises ``ReplayDivergenceError``,
        ``"warn"`` journals a divergence event and goes on live.
        """
        from loom_nb.journal._execution import Execution, principal_from_json, principal_to_json

        _check_id(execution_id)
        if divergence not in ("fail", "warn"):
            raise JournalError(
                f"divergence must be 'fail' or 'warn', not {divergence!r}.", code="invalid_argument"
            )
        wanted = principal_to_json(principal)
        with self._lock:
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
        return Execution(self, execution_id, recorded, timeline, divergence=divergence)

    def _open_rows(self, execution_id: str, principal: dict[str, Any] | None) -> list[Row]:
        rows: list[Row] = self._conn.execute(_SELECT, (execution_id,)).fetchall()
        if not rows:
            payload = _json_object({"principal": principal})
            self._conn.execute(
                _INSERT, (execution_id, "execution_started", None, None, payload, now_iso())
            )
            rows = self._conn.execute(_SELECT, (execution_id,)).fetchall()
        if rows[0][2] != "execution_started":
            raise JournalError(
                f"execution {execution_id!r}: its first event is {rows[0][2]!r}, not "
                "execution_started; the journal is damaged.",
                code="journal_corrupt",
            )
        return rows

    def events(self, execution_id: str, *, resolve_claims: bool = True) -> list[Event]:
        """Every event of an execution, in order, with payloads decoded.

        With ``resolve_claims`` (the default), claim-checked step inputs and outputs are read
        back from the content store and the payload looks as if they had been inline; without
        it, payloads are exactly as stored (markers and their ``claimed`` list).
        """
        with self._lock:
            rows = self._conn.execute(_SELECT, (execution_id,)).fetchall()
        return [self._event(row, resolve_claims=resolve_claims) for row in rows]

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
        with self._lock:
            rows = self._conn.execute(
                "SELECT execution_id, kind, step_id, position, "
                "CASE WHEN kind = 'execution_started' THEN payload ELSE '' END, created "
                "FROM events ORDER BY seq"
            ).fetchall()
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
            with self._lock:
                batch = self._conn.execute(
                    "SELECT seq, payload FROM events WHERE seq > ? ORDER BY seq LIMIT 500", (last,)
                ).fetchall()
            if not batch:
                return
            for seq, text in batch:
                yield decode(text, where=f"event {seq}")
            last = batch[-1][0]

    def events_after(self, execution_id: str, seq: int) -> list[Event]:
        """The events of an execution with ``seq`` greater than ``seq``, in order (claims resolved)."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT seq, execution_id, kind, step_id, position, payload, created FROM events "
                "WHERE execution_id = ? AND seq > ? ORDER BY seq",
                (execution_id, seq),
            ).fetchall()
        return [self._event(row, resolve_claims=True) for row in rows]

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

    # -- writing --------------------------------------------------------------------------

    def _append(
        self, execution_id: str, kind: str, step_id: str | None, position: int | None, payload: str
    ) -> None:
        """Append one event; a single INSERT in autocommit mode is atomic on its own."""
        values = (execution_id, kind, step_id, position, payload, now_iso())
        with self._lock:
            try:
                self._conn.execute(_INSERT, values)
            except sqlite3.Error as exc:
                raise _write_error(exc) from exc

    def _append_pair(
        self,
        execution_id: str,
        first: tuple[str, str | None, int | None, str],
        second: tuple[str, str | None, int | None, str],
    ) -> None:
        """Append two events in one atomic statement (one commit), in this order."""
        created = now_iso()
        values = (execution_id, *first, created, execution_id, *second, created)
        with self._lock:
            try:
                self._conn.execute(_INSERT_PAIR, values)
            except sqlite3.Error as exc:
                raise _write_error(exc) from exc

    def _append_rows(
        self, rows: Iterable[tuple[str, str, str | None, int | None, str, str]]
    ) -> None:
        """Append complete rows (with their own ``created``) in one transaction (for imports)."""
        with self._lock:
            self._transaction(lambda: self._conn.executemany(_INSERT, list(rows)), what="import")

    def _transaction(self, body: Any, *, what: str) -> Any:
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise _write_error(exc) from exc
        try:
            result = body()
            self._conn.execute("COMMIT")
        except BaseException as exc:
            self._conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise _write_error(exc) from exc
            raise
        return result

    def close(self) -> None:
        """Close the database connection (the journal cannot be used afterwards)."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _json_object(value: dict[str, Any]) -> str:
    from loom_nb.journal._codec import dumps

    return dumps(value)


def _check_id(execution_id: object) -> None:
    if not is_storable_id(execution_id):
        raise JournalError(
            f"an execution id is a non-empty string of valid Unicode, not {execution_id!r}.",
            code="invalid_execution_id",
        )


def _write_error(exc: sqlite3.Error) -> JournalError:
    return JournalError(
        f"the journal could not be written ({exc}). If another process holds the database "
        "locked, retry; if the disk is full or read-only, free space or move the journal.",
        code="journal_write_failed",
    )
