"""``Journal``: the append-only event log of durable executions (ADR 0120 decision 10).

One table, ``events``, holds every execution's events in ``seq`` order; nothing is ever updated
or deleted (triggers refuse it). An ``Execution`` reads its own events once, when it is opened,
and appends as it runs.

This module is the public face: opening executions, reading events and summaries, watching,
recordings. What is stored where is a backend's (``_backend``): ``Journal("run.sqlite")`` (or
``Journal()`` in memory) is SQLite (``_sqlite``), ``Journal("postgresql://...")`` is a
``PostgresJournal`` on PostgreSQL (``_postgres``). Every write goes through the journal's
``Writer`` (``_writer``), which keeps one writer per execution with a lease (issue 15).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, Literal

from loom_nb.errors import ConfigurationError, JournalError
from loom_nb.journal._backend import JournalBackend, Listener
from loom_nb.journal._claims import DEFAULT_CLAIM_THRESHOLD, unclaim
from loom_nb.journal._codec import check_execution_id, decode, dumps
from loom_nb.journal._content_pins import pinned_content
from loom_nb.journal._divergence import Divergence, check_divergence
from loom_nb.journal._execution import Execution
from loom_nb.journal._principal import principal_from_json, principal_to_json
from loom_nb.journal._recording import export_jsonl, import_jsonl
from loom_nb.journal._requests import expanded_events
from loom_nb.journal._sql import AFTER, INSERT, SELECT, STARTED, Row, now_iso
from loom_nb.journal._sqlite import SqliteBackend
from loom_nb.journal._timeline import Event, ExecutionSummary, Timeline
from loom_nb.journal._watch import JournalWatch
from loom_nb.journal._work import WorkQueue
from loom_nb.journal._writer import NewRow, Owner, Writer

if TYPE_CHECKING:
    from loom_nb.store import ContentStore, Principal

__all__ = ["Journal", "PostgresJournal"]

_POSTGRES_SCHEMES = ("postgresql://", "postgres://")
LISTEN_ENV = "LOOM_JOURNAL_LISTEN_URL"
"""The environment variable a PostgreSQL journal takes its ``listen_url`` from when not given one."""


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
    or ``"FULL"``; see ``loom_nb.journal._sqlite``). ``lease_ttl`` is how many seconds a writer's
    lease on an execution outlives its last renewal (a live writer renews it while it runs; a
    writer that died on another host frees it after this long).
    """

    def __new__(
        cls, path: str | os.PathLike[str] = ":memory:", *args: Any, **kwargs: Any
    ) -> Journal:
        # Journal("postgresql://...") is the PostgreSQL journal (issue 16); everything else SQLite.
        if cls is Journal and isinstance(path, str) and path.startswith(_POSTGRES_SCHEMES):
            try:
                import loom_nb.journal._postgres  # noqa: F401 - psycopg is there
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
        listen_url: str | None = None,
    ) -> None:
        if listen_url is not None and not isinstance(self, PostgresJournal):
            raise JournalError(
                "listen_url is for a PostgreSQL journal (a direct connection its watches LISTEN "
                "on); a SQLite journal's watch polls the file.",
                code="invalid_argument",
            )
        self._listen_url = listen_url
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
        self.store = store
        """The content store claim-checked payloads go to (None: everything stays inline)."""
        self.claim_threshold = claim_threshold
        """Payloads whose JSON is longer than this many bytes are claim-checked."""
        self.synchronous = synchronous
        """SQLite's ``synchronous`` setting in force."""
        lock = threading.Lock()
        self._backend = self._open_backend(lock, synchronous, timeout)
        self._writer = Writer(
            self._backend,
            lock=lock,
            lease_ttl=self.lease_ttl,
            label=repr(self),
            heartbeat=self._path != ":memory:",
        )

    def _open_backend(
        self, lock: threading.Lock, synchronous: str, timeout: float
    ) -> JournalBackend:
        """Open and migrate the database (the PostgreSQL journal opens its own backend)."""
        return SqliteBackend(self._path, synchronous=synchronous, timeout=timeout, lock=lock)

    @property
    def _conn(self) -> Any:
        """The backend's connection (SQLite's, or PostgreSQL's pool looking like one)."""
        return self._backend.conn

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
        divergence: Divergence = "fail",
        meta: Mapping[str, Any] | None = None,
    ) -> Execution:
        """Open an execution: a new one (journaling ``execution_started``) or a recorded one to replay.

        A recorded execution keeps the principal it was started with; passing a different one
        is refused. ``meta`` is a JSON object a new execution records with its start (a chat
        records the provider answering it; ``start_of`` reads it back); reopening keeps the
        recorded one. ``divergence`` says what replay does when the code asks for something the log
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
        check_execution_id(execution_id)
        check_divergence(divergence)
        wanted = principal_to_json(principal)
        start: dict[str, Any] = {"principal": wanted}
        if meta is not None:
            start["meta"] = dict(meta)
        with self._backend.reading():
            rows = self._backend.transaction(
                lambda: self._open_rows(execution_id, start), what="open"
            )
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
            self, execution_id, recorded, timeline, divergence=divergence, ordinal=len(rows),
            start=first if isinstance(first, dict) else {},  # kept: Execution.start
        )  # fmt: skip

    def _open_rows(self, execution_id: str, start: dict[str, Any]) -> list[Row]:
        rows: list[Row] = self._conn.execute(SELECT, (execution_id,)).fetchall()
        if not rows:
            row = (execution_id, "execution_started", None, None, dumps(start), now_iso(), 0)
            self._conn.execute(INSERT, row)
            rows = [(0, *row[:6])]  # as stored (its seq is not read: the one row is the start)
        if rows[0][2] != "execution_started":
            raise JournalError(
                f"execution {execution_id!r}: its first event is {rows[0][2]!r}, not "
                "execution_started; the journal is damaged.",
                code="journal_corrupt",
            )
        return rows

    def start_of(self, execution_id: str) -> dict[str, Any] | None:
        """What an execution was started with (its ``execution_started`` payload: ``principal``,
        and ``meta`` or ``forked_from`` when it has them), or None when there is no such execution."""
        with self._backend.reading():
            rows = self._backend.read(
                lambda: self._conn.execute(STARTED, (execution_id,)).fetchall()
            )
        if not rows:
            return None
        start = decode(rows[0][0], where=f"execution {execution_id!r}: execution_started")
        return start if isinstance(start, dict) else {}

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
        with self._backend.reading():
            rows = self._backend.read(
                lambda: self._conn.execute(SELECT, (execution_id,)).fetchall()
            )
        events = [self._event(row, resolve_claims=resolve_claims) for row in rows]
        return expanded_events(events) if resolve_claims and expand_inputs else events

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
        with self._backend.reading():
            rows = self._backend.read(
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
            with self._backend.reading():
                batch = self._backend.read(
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

    def pinned_content(
        self,
        *,
        used_since: datetime,
        now: datetime | None = None,
        address: str | None = None,
    ) -> set[str]:
        """The content addresses steps in flight read (issue 30), for the content sweep.

        A step whose input cites stored content pins those addresses when it starts, before it
        reads the store, and its outcome removes the pins (its journaled input cites them from
        then on). A pin counts while its execution's writer lease is live at ``now`` (default:
        the current time) or when it was made at or after ``used_since``; the pin of a step whose
        process died lapses. With ``address``, only that address is looked up (what the sweep
        asks again just before erasing a blob). ``sweep_unpinned_content(store, [journal], ...)``
        and ``loom-nb store gc`` keep these.
        """
        return pinned_content(self._backend, used_since=used_since, now=now, address=address)

    def events_after(
        self, execution_id: str, seq: int, *, earlier: dict[int, list[Any]] | None = None
    ) -> list[Event]:
        """The events of an execution with ``seq`` greater than ``seq``, in order (claims resolved).

        Model steps' messages are expanded whole, given in ``earlier`` the expansions of the
        events before ``seq`` (what a watch accumulates; empty when reading from the start).
        """
        check_execution_id(execution_id)
        if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq < 2**63:
            raise JournalError(
                f"seq is a non-negative int (an event's seq), not {seq!r}.", code="invalid_argument"
            )
        if earlier is not None and not isinstance(earlier, dict):
            raise JournalError(
                f"earlier is a dict (a watch's expansions) or None, not {type(earlier).__name__}.",
                code="invalid_argument",
            )
        with self._backend.reading():
            rows = self._backend.read(
                lambda: self._conn.execute(AFTER, (execution_id, seq, execution_id, seq)).fetchall()
            )
        events = [self._event(row, resolve_claims=True) for row in rows]
        return expanded_events(events, {} if earlier is None else earlier)

    def watch(
        self,
        execution_id: str,
        callback: Callable[[Event], object] | None = None,
        *,
        after_seq: int = 0,
        poll: float | None = None,
    ) -> JournalWatch:
        """Follow an execution live: every event appended to it (after ``after_seq``), as it lands.

        A viewer in another process (a ``ReplayStepper`` in a second kernel) sees a running
        execution's steps as they are journaled. Each new event goes to ``callback`` (called on
        the watch's own thread) or, without one, is queued for ``watch.get(timeout)``. The watch
        looks every ``poll`` seconds (default 0.25 on SQLite, 1 on PostgreSQL); on PostgreSQL a
        notification (``LISTEN/NOTIFY``, at ``listen_url`` when given) ends the wait as soon as
        an append commits, so a viewer sees it within milliseconds. The watches of one process
        share one listening connection. ``watch.mode`` says which is at work. Stop it with
        ``watch.stop()`` (or use it as a context manager).
        """
        check_execution_id(execution_id)
        return JournalWatch(self, execution_id, callback, after_seq=after_seq, poll=poll)

    def _listen(self, execution_id: str) -> Listener:
        """What a watch of ``execution_id`` waits on between looks (SQLite sleeps; PostgreSQL
        notifies)."""
        return self._backend.listen(execution_id)

    def work_queue(self, name: str) -> WorkQueue:
        """The work queue ``name`` in this journal's database: items workers claim under a lease
        (issue 32; see ``loom_nb.journal._work``)."""
        return WorkQueue(self, name)

    # -- recordings -----------------------------------------------------------------------

    def export_jsonl(
        self, execution_id: str, path_or_file: str | os.PathLike[str] | IO[str]
    ) -> int:
        """Write an execution as a JSON Lines recording (one event per line); return the line count.

        Claim-checked payloads are inlined, so the recording is self-contained; media refs stay
        addresses (a replay never resolves them).
        """
        return export_jsonl(self, execution_id, path_or_file)

    def import_jsonl(
        self, path_or_file: str | os.PathLike[str] | IO[str], *, execution_id: str | None = None
    ) -> str:
        """Load a JSON Lines recording as a new execution (optionally under another id); return its id."""
        return import_jsonl(self, path_or_file, execution_id=execution_id)

    # -- writing (through the writer, which holds the leases) -----------------------------

    def _append(
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
        """Append ``rows`` (kind, step_id, position, payload) at ``ordinal`` on, under the lease
        (pinning ``pins`` at the first row's position, unpinning the position ``unpin``)."""
        self._writer.append(
            execution_id, ordinal, rows, release=release, owner=owner, pins=pins, unpin=unpin
        )

    def _hold(self, execution_id: str, ordinal: int, owner: Owner | None = None) -> None:
        """Make sure this process may write ``execution_id`` next at ``ordinal``, or raise."""
        self._writer.hold(execution_id, ordinal, owner)

    def _let_go(self, execution_id: str, owner: Owner) -> None:
        """End one claim ``owner`` took with ``_hold``."""
        self._writer.let_go(execution_id, owner)

    def _check_busy(self, execution_id: str, owner: Owner | None) -> None:
        """Raise ``ExecutionBusyError`` when another owner in this process runs a step of the execution."""
        self._writer.check_busy(execution_id, owner)

    def _append_rows(self, rows: Iterable[NewRow]) -> None:
        """Append one new execution's complete rows in one transaction (for imports)."""
        self._writer.append_rows(rows)

    def _insert_execution(self, execution_id: str, rows: list[NewRow]) -> None:
        """Write a whole new execution (a fork) in one transaction; refuse an id in use."""
        self._writer.insert_execution(execution_id, rows)

    @property
    def _heartbeat(self) -> threading.Thread | None:
        """The thread renewing the leases of steps in flight, once one was started."""
        return self._writer.heartbeat

    def close(self) -> None:
        """Close the database connection (the journal cannot be used afterwards).

        Leases this process holds on executions are given back first, so another process can
        take over at once.
        """
        self._writer.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class PostgresJournal(Journal):
    """The append-only journal on PostgreSQL; ``Journal("postgresql://...")`` returns one.

    ``path`` is a libpq connection URL (``postgresql://user@host:5432/db``; add
    ``?options=-csearch_path%3Dschema`` to use a schema other than the default; a pooler such as
    PgBouncer does not pass ``options``). ``pool_size`` is the most connections this journal
    opens (one is kept open; more are opened as threads need them, and a thread waits up to
    ``timeout`` seconds when all are busy).

    ``path`` may go through a transaction pooler (PgBouncer): the journal keeps no state in a
    server session (issue 33). LISTEN needs one, so ``listen_url`` (default
    ``$LOOM_JOURNAL_LISTEN_URL``) names a direct connection to the same database for the
    watches; without it they listen at ``path``, and behind a transaction pooler, where no
    notification arrives, they poll every second instead. Every other argument is as for
    ``Journal``.
    """

    def __init__(
        self, path: str | os.PathLike[str] = ":memory:", *, pool_size: int = 4, **options: Any
    ) -> None:
        if (
            isinstance(pool_size, bool)
            or not isinstance(pool_size, int)
            or not 1 <= pool_size <= 64
        ):
            raise JournalError(
                f"pool_size must be an int from 1 to 64 (connections), not {pool_size!r}.",
                code="invalid_argument",
            )
        self.pool_size = pool_size
        """The most connections this journal's pool opens."""
        super().__init__(path, **options)
        # An S3 store given to this journal keeps its tenant index here (issue 16), unless it
        # was opened with an index of its own or its bucket records marker objects.
        follow = getattr(self.store, "_follow_journal", None)
        if follow is not None:
            follow(self)

    def _open_backend(
        self, lock: threading.Lock, synchronous: str, timeout: float
    ) -> JournalBackend:
        """Connect a pool in autocommit mode, set the durability, and apply the migrations."""
        from loom_nb.journal._postgres import PostgresBackend

        listen_url = self._listen_url or os.environ.get(LISTEN_ENV) or None
        self.listen_url = listen_url
        """Where this journal's watches LISTEN (None: at the journal's own URL)."""
        return PostgresBackend(
            self._path,
            synchronous=synchronous,
            timeout=timeout,
            pool_size=self.pool_size,
            listen_url=listen_url,
        )

    @property
    def _pg_pool(self) -> Any:
        """The connection pool, which an S3 store's tenant index shares (``loom_nb._pg.Pool``)."""
        return self._backend.conn

    def __repr__(self) -> str:
        from loom_nb._pg import redact

        return f"Journal({redact(self._path)!r})"
