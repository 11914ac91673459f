"""Leases: one writer per execution, and takeover when the writer died (issues 15 and 30).

A journal handle that runs an execution live holds its lease: one row per execution naming the
holder (a token unique to the ``Journal`` object, see below), its host and pid, and when the
lease expires. The row is taken
or renewed in the same transaction as an append, so no step is journaled by a process that does
not hold the lease; before a step's function runs, the lease is checked and the log is checked
not to have moved since the execution was opened, so a second writer is refused BEFORE it runs
anything (an approved email is sent once). A writer that loses gets ``ExecutionBusyError``.

The lease lasts ``ttl`` seconds from its last renewal. It is renewed by appends and, while a step
is in flight, by the journal's heartbeat thread, so a live holder keeps it through a slow model
call. Completing or parking an execution releases it. A holder that died stops renewing:

- on the same host, a holder whose pid no longer runs (or is a zombie) is dead at once, so a
  SIGKILLed kernel does not lock its run even for ``ttl``;
- on another host, or when the pid was reused by another process, the lease is free once it
  expired.

The holder is the journal handle, not the process: two ``Journal`` objects on one database in
one process (two notebooks' cells, a widget and a cell) are two writers, and the second is
refused exactly as a second process is. Each handle's token is registered here while the handle
lives (``register``); a lease held by this very process under a token no longer registered
belongs to a handle that was closed or collected (a cell run again), so it is dead at once, as a
killed process's is.

The decision is pure Python (``decide``) over the row's values, so another journal backend reads
the same row shape and takes the same decisions; only the SQL that stores the row is per backend.
Besides the lease, the events table is unique on (execution_id, ordinal): even a writer that
somehow skipped the lease cannot interleave rows with another.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from dataclasses import dataclass
from typing import Literal

__all__ = ["Holder", "LeaseRow", "decide", "forget", "new_holder", "pid_alive", "register"]


@dataclass(frozen=True)
class Holder:
    """Who holds (or wants) a lease: a per-process token, the host and the pid."""

    token: str
    host: str
    pid: int


@dataclass(frozen=True)
class LeaseRow:
    """A lease as stored: its holder and when it expires (seconds since the epoch)."""

    holder: Holder
    expires: float


_LIVE: set[str] = set()
"""Tokens of the journal handles of this process that may still hold leases."""
_LIVE_LOCK = threading.Lock()


def new_holder() -> Holder:
    """A new lease holder for a journal handle in this process (registered as live)."""
    holder = Holder(token=uuid.uuid4().hex, host=socket.gethostname(), pid=os.getpid())
    register(holder.token)
    return holder


def register(token: str) -> None:
    """Note a handle's token as live in this process."""
    with _LIVE_LOCK:
        _LIVE.add(token)


def forget(token: str) -> None:
    """The handle with this token was closed or collected: its leases are dead from now on."""
    with _LIVE_LOCK:
        _LIVE.discard(token)


def _live(token: str) -> bool:
    with _LIVE_LOCK:
        return token in _LIVE


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid runs on this host (a zombie counts as dead)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: it exists
    except OSError:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            # "pid (comm) state ...": the state follows the last ')'.
            state = stat.read().rsplit(")", 1)[-1].split()[0]
    except (OSError, IndexError):
        return True  # no /proc (macOS): the signal check is all there is
    return state not in ("Z", "X")


Decision = Literal["mine", "free", "dead", "expired", "busy"]


def decide(row: LeaseRow | None, holder: Holder, now: float) -> Decision:
    """What ``holder`` may do with the lease ``row`` at time ``now``.

    ``mine``: it already holds it (renew). ``free``: nobody does. ``dead``: the holder's process
    on this host is gone, or the holder is a handle of this process that was closed or
    collected. ``expired``: the lease ran out. ``busy``: a live holder has it (another process,
    or another live handle of this one).
    """
    if row is None:
        return "free"
    if row.holder.token == holder.token:
        return "mine"
    if row.holder.host == holder.host:
        if row.holder.pid == holder.pid:
            if not _live(row.holder.token):
                return "dead"
        elif not pid_alive(row.holder.pid):
            return "dead"
    if row.expires <= now:
        return "expired"
    return "busy"
