"""The stdio transport of an MCP server: a child process in its own session, always reaped.

The SDK's own ``stdio_client`` hides the process, and a toolset needs it: to say why a call
failed (the exit code, the last lines of stderr), to refuse a message over a size cap, and to
kill the whole process group from an ``atexit`` hook when an event loop never got to run the
shutdown (a kernel shut down with a server still up). So this transport spawns the process
itself and speaks the same newline-delimited JSON-RPC over its pipes with the SDK's message
types.

Shutdown runs shielded from cancellation and every wait in it is bounded: stdin is closed (a
well-behaved server exits on end of input), then after ``grace`` seconds SIGTERM goes to the
process group, then SIGKILL. The group is killed once more at the end, so a grandchild the
server spawned does not outlive it. The live process groups are also kept in a module set that
an ``atexit`` hook kills, the last resort for a toolset never closed.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import IO, Any

import anyio
import mcp_types
from anyio.abc import Process
from mcp.shared.message import SessionMessage

__all__ = ["MAX_MESSAGE_BYTES", "StdioProcess", "kill_group", "stdio_transport"]

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""The largest single message a server may send; a longer line ends the connection."""

_LIVE_GROUPS: set[int] = set()


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        os.killpg(pgid, sig)


def kill_group(pgid: int) -> None:
    """SIGKILL a server's process group now (its connection's event loop is gone)."""
    _kill_group(pgid, signal.SIGKILL)
    _LIVE_GROUPS.discard(pgid)


@atexit.register
def _reap_all() -> None:
    """Kill every server process group still alive when the interpreter exits."""
    for pgid in list(_LIVE_GROUPS):
        _kill_group(pgid, signal.SIGKILL)
    _LIVE_GROUPS.clear()


class StdioProcess:
    """What the toolset knows of a running server process: its pid and, once dead, its exit code."""

    def __init__(self, process: Process) -> None:
        self._process = process
        self.pid: int = process.pid
        """The server's process id (also its process group id)."""
        self.overflowed = False
        """True when the server sent a message over ``MAX_MESSAGE_BYTES`` (the connection ended)."""

    @property
    def returncode(self) -> int | None:
        """The exit code once the process ended, else None."""
        return self._process.returncode


@asynccontextmanager
async def stdio_transport(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: str | None,
    errlog: IO[Any],
    on_start: Callable[[StdioProcess], None],
    grace: float = 2.0,
) -> AsyncIterator[tuple[Any, Any]]:
    """Spawn ``argv`` and yield the (read, write) message streams an MCP ``Client`` takes.

    Raises ``OSError`` when the command cannot be started.
    """
    if sys.platform == "win32":  # pragma: no cover - the toolset refuses earlier
        raise OSError("the loom_nb stdio transport needs a POSIX system")
    process = await anyio.open_process(
        argv, env=env, cwd=cwd, stderr=errlog, start_new_session=True
    )
    _LIVE_GROUPS.add(process.pid)
    handle = StdioProcess(process)
    on_start(handle)
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)

    async def reader() -> None:
        assert process.stdout is not None
        pending = bytearray()
        draining = False
        try:
            async for chunk in process.stdout:
                if draining:
                    continue  # the session is gone: keep the pipe flowing so the server can exit
                searched = len(pending)
                pending += chunk
                while (end := pending.find(b"\n", searched)) >= 0:
                    line = bytes(pending[:end])
                    del pending[: end + 1]
                    searched = 0
                    try:
                        await read_send.send(_parse(line))
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        draining = True
                        pending.clear()
                        break
                if len(pending) > MAX_MESSAGE_BYTES:
                    handle.overflowed = True
                    draining = True
                    pending.clear()
                    await read_send.aclose()  # pending requests fail as "connection closed"
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass
        finally:
            await read_send.aclose()

    async def writer() -> None:
        assert process.stdin is not None
        try:
            async with write_recv:
                async for message in write_recv:
                    text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((text + "\n").encode("utf-8"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_send.aclose()  # the session sees the end instead of waiting forever

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(reader)
            group.start_soon(writer)
            try:
                yield read_recv, write_send
            finally:
                with anyio.CancelScope(shield=True):
                    read_recv.close()
                    write_send.close()
                    await _stop(process, grace)
                group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(process, grace)


async def _stop(process: Process, grace: float) -> None:
    """Close stdin, wait ``grace``, then SIGTERM and SIGKILL the process group; always bounded."""
    pgid = process.pid
    if process.stdin is not None:
        with contextlib.suppress(Exception):
            await process.stdin.aclose()
    if not await _exited(process, grace):
        _kill_group(pgid, signal.SIGTERM)
        if not await _exited(process, 1.0):
            _kill_group(pgid, signal.SIGKILL)
            await _exited(process, 2.0)
    _kill_group(pgid, signal.SIGKILL)  # a grandchild the server left behind
    _LIVE_GROUPS.discard(pgid)
    with contextlib.suppress(Exception), anyio.move_on_after(1.0):
        await process.aclose()


async def _exited(process: Process, seconds: float) -> bool:
    """Whether the process ended within ``seconds`` (polled: pipes may stay open)."""
    deadline = anyio.current_time() + seconds
    while process.returncode is None:
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(0.01)
    return True


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as exc:
        return exc
    return SessionMessage(message)
