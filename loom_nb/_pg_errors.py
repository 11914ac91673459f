"""What a failed PostgreSQL connection or statement means, and what to do about it (issue 33).

A class of kernels on one server meets failures a single notebook never does: the server out of
connection slots, a pooler in between refusing a client or giving up on a statement, a
connection dropped under a write. Each gets its own kind, and the journal and the store's index
(which share the database, ``loom_nb._pg``) turn a kind into their own error code:

- ``unavailable``: no connection could be made (refused, timed out, no such host or database);
- ``too_many_connections``: the server has no slot left (``max_connections``, or the role's
  ``CONNECTION LIMIT``): use a pooler, or raise the limit;
- ``pooler_error``: the pooler (PgBouncer) speaks for itself: its ``max_client_conn``, a server
  it cannot reach, a startup option it does not pass, a wait it gave up, or another client's
  prepared statements on a shared server session;
- ``connection_lost``: an open connection broke (the server restarted, the backend was
  terminated, the network went): a write may or may not have landed, and resuming the execution
  is safe (a step whose completion is in the log is served from it, any other runs again).

The kind is read from the SQLSTATE where libpq has one and from the message where it has not (a
failed connection carries none, and the pooler's own errors are recognised by their words). The
messages name the server as ``host:port`` or a redacted URL, never a password.
"""

from __future__ import annotations

from typing import Literal

import psycopg

__all__ = ["Kind", "diagnose", "explain"]

Kind = Literal["unavailable", "too_many_connections", "pooler_error", "connection_lost"]
"""What went wrong with a connection (see the module's docstring)."""

_TOO_MANY = (
    "too many clients",
    "too many connections",
    "remaining connection slots are reserved",
)
_POOLER_CLIENTS = ("no more connections allowed",)  # PgBouncer's max_client_conn
_POOLER_SERVER = (
    "pgbouncer cannot connect to server",
    "server login has been failing",
    "no such database",
    "no such user",
)
_POOLER_OPTIONS = ("unsupported startup parameter",)
_POOLER_WAIT = (
    "query_wait_timeout",
    "client_idle_timeout",
    "idle transaction timeout",
    "client_login_timeout",
    "query_timeout",
)
_PREPARED = ("prepared statement", "bind message supplies")
_PREPARED_STATES = ("26000", "42P05")
_LOST = (
    "server closed the connection",
    "server conn crashed",
    "connection is closed",
    "connection is lost",
    "terminating connection",
    "consuming input failed",
    "could not receive data",
    "could not send data",
    "connection reset",
    "eof detected",
    "ssl syscall",
    "connection not open",
)


def diagnose(exc: BaseException, *, connecting: bool) -> Kind | None:
    """The kind of connection failure ``exc`` is, or None when it is not one (a refused statement).

    ``connecting`` says whether ``exc`` came from making a connection (or waiting for one from a
    pool): a failure there that is neither a full server nor the pooler is ``unavailable``.
    """
    if not isinstance(exc, psycopg.Error):
        return None
    text = str(exc).lower()
    state = exc.sqlstate or ""
    if any(m in text for m in _POOLER_CLIENTS + _POOLER_SERVER + _POOLER_OPTIONS + _POOLER_WAIT):
        return "pooler_error"
    if state == "53300" or any(m in text for m in _TOO_MANY):
        return "too_many_connections"
    if state in _PREPARED_STATES or any(m in text for m in _PREPARED):
        return "pooler_error"
    if connecting:
        return "unavailable" if isinstance(exc, psycopg.OperationalError) else None
    if state.startswith("08") or state in ("57P01", "57P02", "57P03"):
        return "connection_lost"
    if any(m in text for m in _LOST):
        return "connection_lost"
    if isinstance(exc, psycopg.OperationalError) and not state:
        return "connection_lost"  # the client side gave up on the connection (no server answer)
    return None


def explain(
    exc: BaseException, *, where: str, connecting: bool, doing: str = "read"
) -> tuple[Kind, str] | None:
    """``(kind, message)`` for a connection failure, or None when ``exc`` is not one.

    ``where`` names the server (``host:port`` or a redacted URL); ``doing`` is ``"read"``,
    ``"write"`` or ``"watch"``, which changes what a lost connection means for the caller.
    """
    kind = diagnose(exc, connecting=connecting)
    if kind is None:
        return None
    line = _first_line(exc)
    if kind == "unavailable":
        return kind, (
            f"cannot connect to the database at {where}: {line}. Check that the server (or the "
            "pooler in front of it) is up and listening there, and that the database exists."
        )
    if kind == "too_many_connections":
        return kind, (
            f"the PostgreSQL server at {where} has no connection left for this client: {line}. "
            "Every open journal holds a connection (more, up to its pool_size, while threads "
            "share it) and every process with a watch one more (README, 'Team setup', has the "
            "arithmetic). Put a transaction pooler such as PgBouncer between the kernels and the "
            "server (the journal works through one unchanged; pass listen_url= a direct URL for "
            "live watches), or raise the server's max_connections (or the role's CONNECTION "
            "LIMIT)."
        )
    if kind == "pooler_error":
        return kind, _pooler(str(exc).lower(), where, line)
    if doing == "write":
        return kind, (
            f"the connection to the journal at {where} was lost during a write: {line}. The "
            "write may not have reached the journal. Resuming is safe: open the execution again "
            "(journal.execution(id), Chat.resume) and run from the top; a step whose completion "
            "is in the log is served from it, any other step runs again. Check that the server "
            "(and any pooler in front of it) is up."
        )
    return kind, (
        f"the connection to the database at {where} was lost: {line}. Retry; check that the "
        "server (and any pooler in front of it) is up."
    )


def _pooler(text: str, where: str, line: str) -> str:
    """The message for an error the pooler raised itself, by what it says."""
    if any(m in text for m in _POOLER_CLIENTS):
        return (
            f"the connection pooler at {where} refused a new client: {line}. Raise its "
            "max_client_conn (every open journal is a client, up to its pool_size, and every "
            "process with a watch one more), or open fewer journals."
        )
    if any(m in text for m in _POOLER_SERVER):
        return (
            f"the connection pooler at {where} could not log in to PostgreSQL for this "
            f"database and user: {line}. Check that the server is up, that the pooler's "
            "[databases] entry and auth file name this database and user, and that the server "
            "has connections left for the pooler's pools (default_pool_size each)."
        )
    if any(m in text for m in _POOLER_OPTIONS):
        return (
            f"the connection pooler at {where} does not pass the URL's startup options: {line}. "
            "PgBouncer forwards no options= (such as a search_path): give the journal a database "
            "of its own, or the role a search_path (ALTER ROLE ... SET search_path), and leave "
            "options out of the URL."
        )
    if any(m in text for m in _POOLER_WAIT):
        return (
            f"the connection pooler at {where} gave up waiting: {line}. Its pool is too small "
            "for the load, or the server is slow: raise default_pool_size (or the timeout) in "
            "the pooler, or let fewer kernels write at once, then retry."
        )
    return (
        f"a server session behind the connection pooler at {where} holds another client's "
        f"prepared statements: {line}. loom_nb prepares none, so another client of the same "
        "pool does: turn its prepared statements off (psycopg: prepare_threshold=None) or give "
        "it a session-pooled database of its own."
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
