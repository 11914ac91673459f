"""One LISTEN connection per process and database, shared by every watch (issues 30 and 33).

An append NOTIFYs the channel ``loom_journal`` with its execution id (``loom_nb._pg``,
``pg001_notify``, ``pg004_listened_notify``). A watch waits for that between looks, so a viewer sees a step within
milliseconds of its commit. LISTEN is session state, so it needs a session of its own: a
transaction pooler (PgBouncer in its usual mode) hands each transaction to any server session,
and a notification reaches whichever client, or none. ``Journal(url, listen_url=...)`` (or
``$LOOM_JOURNAL_LISTEN_URL``) names a direct connection for it; without one the journal's own URL
is tried.

The hub. All the watches of one process on one listen URL share one connection, held by one
thread (``_Hub``): it LISTENs, wakes the watches of the execution a notification names, and
closes when the last watch stops. A class of 300 kernels each watching is 300 listening
connections, not 300 times the watches.

Appends notify only while a listener is registered in ``loom_listeners`` (``_registered``):
NOTIFY serializes every notifying commit on the server, which writers should not pay for
nobody. The hub registers its backend before it LISTENs and drops the row when it stops.

Never stall, never miss. A watch reads the log after the last event it delivered; a
notification only says when to look. So the watch also looks every ``poll`` seconds whatever
happens, and the hub wakes every watch after it (re)connects, because appends while it was not
listening announced themselves to nobody. A dropped connection (a restarted server,
``pg_terminate_backend``) is reconnected with backoff.

Behind a pooler. Before LISTEN the hub asks the server, over its connection and over a second
one, which backend it is talking to: two connections answered by one backend can only be a
pooler's, and the hub does not LISTEN there (a LISTEN would stay on a server session the pooler
shares with other clients). Otherwise it LISTENs and sends itself a probe notification through
the second connection; if the probe never comes back, notifications cannot reach this process
either. In both cases the hub says so once in the log and closes its connection, and the
watches poll (``watch.mode == "poll"``). A notification that does arrive, the probe or an
append's, sets ``mode`` to ``"notify"``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid
from typing import Any, Literal

import psycopg

from loom_nb._pg import CONNECT_OPTIONS, NOTIFY_CHANNEL, connection_error, redact
from loom_nb.errors import JournalError

__all__ = ["Subscription", "application_name", "hub_for", "subscribe"]

log = logging.getLogger("loom_nb.journal")

_SLICE = 0.2  # seconds the hub waits for a notification before it looks at its stop flag
_PROBE_WAIT = 3.0  # seconds a probe may take to come back before notifications count as lost
_RETRY = (0.1, 5.0)  # first and longest pause between reconnection attempts
_SETTLE = 1.0  # seconds a new listener waits at most for the appends in flight when it registered

Mode = Literal["notify", "poll"]

_HUBS: dict[str, _Hub] = {}
_HUBS_LOCK = threading.Lock()
_HUBS_PID = [os.getpid()]


def application_name() -> str:
    """What this process's listening connections call themselves on the server."""
    return f"loom_nb-listen-{os.getpid()}"


def subscribe(url: str, execution_id: str) -> Subscription:
    """A subscription to the appends of ``execution_id``, on this process's hub for ``url``."""
    with _HUBS_LOCK:
        if _HUBS_PID[0] != os.getpid():  # a forked child: the parent's threads are not here
            _HUBS.clear()
            _HUBS_PID[0] = os.getpid()
        hub = _HUBS.get(url)
        if hub is None:
            hub = _HUBS[url] = _Hub(url)
        return hub.subscribe(execution_id)


def hub_for(url: str) -> _Hub | None:
    """The running hub for ``url`` in this process, if a watch uses one."""
    with _HUBS_LOCK:
        return _HUBS.get(url)


class Subscription:
    """One watch's ear on a hub: ``wait`` returns True when its execution was announced."""

    __slots__ = ("_event", "_hub", "execution_id")

    def __init__(self, hub: _Hub, execution_id: str) -> None:
        self._hub = hub
        self._event = threading.Event()
        self.execution_id = execution_id

    @property
    def mode(self) -> Mode:
        """``"notify"`` once notifications reach the hub, else ``"poll"``."""
        return self._hub.mode

    def poke(self) -> None:
        """Announce an append (or a reason to look again) to the watch."""
        self._event.set()

    wake = poke

    def wait(self, timeout: float) -> bool:
        """Block until poked (True) or ``timeout`` seconds pass (False)."""
        poked = self._event.wait(timeout)
        self._event.clear()
        return poked

    def close(self) -> None:
        """Stop listening for this watch; the hub closes with its last subscription."""
        self._hub.unsubscribe(self)


class _Hub:
    """The thread and connection that LISTEN for one URL in this process."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.where = redact(url)
        self.mode: Mode = "poll"
        """``"notify"`` once a notification arrived on the current connection."""
        self.backend_pid: int | None = None
        """The server process of the listening connection while it is connected."""
        self.connects = 0
        """How many times the hub connected and LISTENed (1 plus its reconnections)."""
        self.deaf = False
        """True once a probe did not come back: notifications cannot reach this process."""
        self.problem: JournalError | None = None
        """Why the hub is not listening right now (it retries), else None."""
        self._subs: dict[str, set[Subscription]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="loom_nb-listen", daemon=True)
        self._thread.start()

    def subscribe(self, execution_id: str) -> Subscription:
        """Register a watch of ``execution_id`` (under the registry's lock)."""
        sub = Subscription(self, execution_id)
        with self._lock:
            self._subs.setdefault(execution_id, set()).add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        """Drop a watch; the last one stops the hub and closes its connection."""
        with _HUBS_LOCK:
            with self._lock:
                subs = self._subs.get(sub.execution_id)
                if subs is not None:
                    subs.discard(sub)
                    if not subs:
                        del self._subs[sub.execution_id]
                last = not self._subs
            if last and _HUBS.get(self.url) is self:
                del _HUBS[self.url]
                self._stop.set()
        if last and threading.current_thread() is not self._thread:
            self._thread.join(2 * _SLICE + 1)

    def _poke(self, execution_id: str) -> None:
        with self._lock:
            subs = list(self._subs.get(execution_id, ()))
        for sub in subs:
            sub.poke()

    def _poke_all(self) -> None:
        with self._lock:
            subs = [sub for group in self._subs.values() for sub in group]
        for sub in subs:
            sub.poke()

    def _run(self) -> None:
        pause = _RETRY[0]
        while not self._stop.is_set() and not self.deaf:
            conn: psycopg.Connection[object] | None = None
            try:
                conn = psycopg.connect(
                    self.url,
                    connect_timeout=5,
                    application_name=application_name(),
                    **CONNECT_OPTIONS,
                )
                other = _other(self.url)
                try:
                    if other is not None and _same_session(conn, other):
                        self._give_up("two connections share one server session")
                        return
                    self._register(conn)
                    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    self.backend_pid = conn.info.backend_pid
                    self.connects += 1
                    self.problem = None
                    pause = _RETRY[0]
                    # Appends while nobody listened announced themselves to no one: look again.
                    self._poke_all()
                    probe = _probe(other)
                finally:
                    if other is not None:
                        other.close()
                self._listen(conn, probe)
            except psycopg.Error as exc:
                self.problem = connection_error(exc, where=self.where, connecting=conn is None)
                if self.connects:
                    log.info("journal watch: listening at %s stopped: %s", self.where, exc)
            finally:
                self.mode = "poll"
                self.backend_pid = None
                if conn is not None:
                    _unregister(conn)
                    conn.close()
            if not self._stop.is_set() and not self.deaf:
                self._stop.wait(pause)
                pause = min(pause * 2, _RETRY[1])

    def _listen(self, conn: psycopg.Connection[object], probe: str | None) -> None:
        """Hand each notification to its watches until stopped, deaf, or the connection fails."""
        sent = time.monotonic()
        while not self._stop.is_set():
            for note in conn.notifies(timeout=_SLICE):
                self.mode = "notify"
                if note.payload == probe:
                    probe = None
                else:
                    self._poke(note.payload)
            unanswered = probe is not None and self.mode == "poll"
            if unanswered and time.monotonic() - sent > _PROBE_WAIT:
                self._give_up("a notification sent to this process never arrived")
                return

    def _register(self, conn: psycopg.Connection[object]) -> None:
        """Enter this connection's backend in ``loom_listeners``, so appends notify (see
        ``_registered``); a server that refuses it leaves the watches to their looks."""
        try:
            _registered(conn)
        except psycopg.OperationalError:
            raise  # the connection failed: reconnect
        except psycopg.Error as exc:  # no right to write it (a read-only role): appends stay silent
            log.warning(
                "journal watch: cannot register this listener at %s (%s); appends will not "
                "notify it, and its watches look every poll interval instead.",
                self.where,
                exc,
            )

    def _give_up(self, why: str) -> None:
        """Stop listening for good: notifications cannot reach this process through the URL."""
        self.deaf = True
        log.warning(
            "journal watch: notifications cannot reach this process through %s (%s: a "
            "transaction pooler?); its watches poll instead. Pass Journal(..., listen_url=...) "
            "a direct connection to the database for live updates.",
            self.where,
            why,
        )


def _registered(conn: psycopg.Connection[Any]) -> None:
    """Register the backend of ``conn`` as a listener, before it LISTENs.

    An append notifies only while ``loom_listeners`` has a row (``pg004_listened_notify``):
    NOTIFY serializes every notifying commit on the server, a cost for nobody when nobody
    listens. Rows of backends that are gone are dropped first. An append that looked at the
    table before this row was committed did not notify, so this waits (up to ``_SETTLE``
    seconds) until every transaction in flight at that point has ended: then the hub's look
    after LISTEN (``_poke_all``) sees those appends, and every later one notifies.
    """
    conn.execute("DELETE FROM loom_listeners WHERE pid NOT IN (SELECT pid FROM pg_stat_activity)")
    conn.execute(
        "INSERT INTO loom_listeners (pid, since) VALUES (pg_backend_pid(), %s) "
        "ON CONFLICT (pid) DO UPDATE SET since = EXCLUDED.since",
        (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),),
    )
    row = conn.execute("SELECT pg_current_snapshot()::text").fetchone()
    snapshot = row[0] if row else None
    deadline = time.monotonic() + _SETTLE
    while snapshot is not None and time.monotonic() < deadline:
        running = conn.execute(
            "SELECT count(*) FROM pg_snapshot_xip(%s::pg_snapshot) AS x "
            "WHERE pg_xact_status(x) = 'in progress'",
            (snapshot,),
        ).fetchone()
        if not running or not running[0]:
            return
        time.sleep(0.01)


def _unregister(conn: psycopg.Connection[object]) -> None:
    """Drop this backend's row (a row left by a broken connection goes at the next registration)."""
    if conn.closed or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        return
    with contextlib.suppress(psycopg.Error):
        conn.execute("DELETE FROM loom_listeners WHERE pid = pg_backend_pid()")


def _other(url: str) -> psycopg.Connection[object] | None:
    """A second connection to ``url`` for the checks, or None when none can be made now."""
    try:
        return psycopg.connect(url, connect_timeout=5, **CONNECT_OPTIONS)
    except psycopg.Error:
        return None  # unverified: the watches still poll, and notifications still wake them


def _same_session(conn: psycopg.Connection[object], other: psycopg.Connection[object]) -> bool:
    """Whether two open connections reached the same server session: only a pooler does that.

    Directly, two connections are two backends. A transaction pooler hands each statement any
    idle server session, most often the one just used, so the second connection's statement
    usually runs where the first one's did; when it does not (a busy pool), the probe decides.
    Checking before LISTEN keeps LISTEN off a pooler's shared sessions.
    """
    first = conn.execute("SELECT pg_backend_pid()").fetchone()
    second = other.execute("SELECT pg_backend_pid()").fetchone()
    return first is not None and first == second


def _probe(other: psycopg.Connection[object] | None) -> str | None:
    """Send a notification for the hub from another connection; None if it cannot be sent."""
    if other is None:
        return None
    token = f"loom-probe:{uuid.uuid4().hex}"
    try:
        other.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, token))
    except psycopg.Error:
        return None
    return token
