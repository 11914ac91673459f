"""One connection to an MCP server: start, hand over the client, stop and reap (issue 28).

The SDK's transports and its ``Client`` are async context managers scoped to the task that
entered them, while a toolset is used from whatever task runs a chat (a cell, a view's button).
So the connection lives in a task of its own: it enters the transport and the client, hands the
connected client over, and waits for ``stop``; leaving its ``async with`` disconnects and, for
stdio, reaps the process (``_mcp_stdio``). ``close()`` waits for that to finish even when its
caller is cancelled (a kernel interrupt cancels the cell), then re-raises the cancellation.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import IO, TYPE_CHECKING, Any

from loom_nb._interrupt import wake_on_signals
from loom_nb.errors import ConfigurationError

if TYPE_CHECKING:
    from loom_nb.agent._mcp_stdio import StdioProcess
    from loom_nb.agent._mcp_url import Redacting

__all__ = ["MCPSession", "describe"]

_log = logging.getLogger(__name__)


class MCPSession:
    """A connection to one server (stdio command or streamable HTTP URL), started on demand."""

    def __init__(
        self,
        name: str,
        *,
        argv: list[str] | None,
        env: Mapping[str, str] | None,
        cwd: str | None,
        url: str | None,
        headers: Mapping[str, str] | None,
        where: str,
        startup_timeout: float,
        redactor: Redacting | None = None,
    ) -> None:
        self.name = name
        self.where = where
        self._redactor = redactor
        self.startup_timeout = startup_timeout
        self._argv = argv
        self._env = dict(env) if env is not None else None
        self._cwd = cwd
        self._url = url
        self._headers = dict(headers) if headers is not None else None
        self.client: Any = None
        self._runner: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._ready: asyncio.Future[Any] | None = None
        self.process: StdioProcess | None = None
        self._errlog: IO[bytes] | None = None
        self._last_words = b""
        """The end of a closed server's stderr (its file is closed with the connection)."""
        self.broken = False
        self.starts = 0
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def dead(self) -> bool:
        """True when the connection ended (the process exited, the session closed)."""
        if self.broken:
            return True
        process = self.process
        return process is not None and process.returncode is not None

    async def start(self) -> Any:
        """Start the server and return the connected client; ``ConfigurationError`` if it fails."""
        wake_on_signals()  # a kernel's interrupt ends a hung call at once (loom_nb._interrupt)
        try:
            from mcp import Client
        except ImportError as exc:  # pragma: no cover - the extra is part of dev
            raise ConfigurationError(
                "MCPToolset needs the MCP SDK: pip install 'loom_nb[mcp]'.",
                code="mcp_not_installed",
            ) from exc
        self.leave_foreign_loop()
        loop = asyncio.get_running_loop()
        self._loop = loop
        ready: asyncio.Future[Any] = loop.create_future()
        stop = asyncio.Event()
        self.broken = False
        self.process = None
        self._ready, self._stop = ready, stop
        self._runner = loop.create_task(self._run(Client, ready, stop), name=f"mcp:{self.name}")
        self.starts += 1
        try:
            client = await asyncio.wait_for(asyncio.shield(ready), self.startup_timeout)
        except asyncio.CancelledError:
            await self.close()
            raise
        except TimeoutError as exc:
            await self.close()
            raise self.start_error(
                f"did not answer the MCP handshake within {self.startup_timeout:g} s"
            ) from exc
        except Exception as exc:
            await self.close()
            raise self.start_error(
                f"could not be started or connected ({describe(exc)})"
            ) from self.cause(exc)
        self.client = client
        return client

    async def close(self) -> None:
        """Disconnect and wait until a stdio process is reaped (a no-op when not started)."""
        self.leave_foreign_loop()
        runner, stop, ready = self._runner, self._stop, self._ready
        self.client = None
        self._runner = self._stop = self._ready = None
        if runner is None:
            self._keep_last_words()
            return
        if stop is not None:
            stop.set()
        if ready is None or not ready.done():
            runner.cancel()  # still connecting: nothing waits on ``stop`` yet
        cancelled = False
        while not runner.done():
            try:
                await asyncio.wait_for(asyncio.shield(runner), timeout=15)
            except asyncio.CancelledError:
                cancelled = True  # reap first; the cancellation is re-raised below
            except Exception:  # the reaping is bounded well below this; give up waiting
                break
        self._keep_last_words()
        if cancelled:
            raise asyncio.CancelledError

    def _keep_last_words(self) -> None:
        """Close the stderr file of a connection that ended, keeping its end for ``stderr_tail``
        (an error raised after the close quotes it), so no descriptor stays open until the
        toolset is collected."""
        log, self._errlog = self._errlog, None
        if log is None:
            return
        try:
            self._last_words = _tail_of(log)
        finally:
            log.close()

    def leave_foreign_loop(self) -> None:
        """Drop a connection made in another event loop (now closed, or not this one's to await).

        Its task cannot be awaited from here, so a stdio process of it is killed outright.
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if self._loop is None or self._loop is loop:
            return
        process = self.process
        if process is not None and process.returncode is None:
            from loom_nb.agent._mcp_stdio import kill_group

            kill_group(process.pid)
        self.client = None
        self._runner = self._stop = self._ready = None
        self._loop = None
        self.broken = True

    async def _run(self, client_type: Any, ready: asyncio.Future[Any], stop: asyncio.Event) -> None:
        """The connection's own task: connect, hand the client over, wait for ``stop``, leave."""
        try:
            async with AsyncExitStack() as stack:
                transport = await self._transport(stack)
                client = client_type(transport, cache=None)
                await stack.enter_async_context(client)
                if not ready.done():
                    ready.set_result(client)
                await stop.wait()
        except asyncio.CancelledError:
            if not ready.done():
                ready.cancel()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            else:
                shown = repr(exc)  # the HTTP stack's errors quote the URL, query values too
                if self._redactor is not None:
                    shown = self._redactor.redact(shown)
                _log.debug("MCP server %r: the session ended with %s", self.name, shown)
            if not isinstance(exc, Exception):
                raise
        finally:
            if self._ready is ready:
                self.broken = True

    async def _transport(self, stack: AsyncExitStack) -> Any:
        if self._url is not None:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            http = await stack.enter_async_context(create_mcp_http_client(headers=self._headers))
            return streamable_http_client(self._url, http_client=http)
        from mcp.client.stdio import get_default_environment

        from loom_nb.agent._mcp_stdio import stdio_transport

        if self._errlog is not None:  # a connection dropped without a close (another loop's)
            self._errlog.close()
        self._last_words = b""
        # Open until the connection is closed; then its end is kept (``_keep_last_words``).
        self._errlog = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close() or the next start
        assert self._argv is not None

        def started(process: StdioProcess) -> None:
            self.process = process

        return stdio_transport(
            self._argv,
            env={**get_default_environment(), **(self._env or {})},
            cwd=self._cwd,
            errlog=self._errlog,
            on_start=started,
        )

    def stderr_tail(self, lines: int = 20) -> str:
        """The last lines the stdio server wrote to stderr ("" for HTTP or before a start),
        without the command line's secret arguments (a server may echo its command line)."""
        log = self._errlog
        data = self._last_words if log is None else _tail_of(log)
        return self.redact("\n".join(data.decode("utf-8", "replace").splitlines()[-lines:]))

    def redact(self, text: str) -> str:
        """``text`` without the URL's query values, path token, user or password, or the
        command line's secret arguments."""
        return self._redactor.redact(text) if self._redactor is not None else text

    def cause(self, exc: BaseException) -> BaseException | None:
        """What an error about ``exc`` is chained to: ``exc``, or None when its traceback would
        quote a secret of the URL or command line (its account is in the error's message,
        redacted)."""
        if self._redactor is not None and self._redactor.quotes_a_secret(exc):
            return None
        return exc

    def start_error(self, what: str) -> ConfigurationError:
        """The refusal for a server that did not start, quoting its last stderr lines."""
        what = self.redact(what)
        process = self.process
        code = f" (exit code {process.returncode})" if process and process.returncode else ""
        tail = self.stderr_tail()
        quoted = f"\nLast lines of its stderr:\n{tail}" if tail else ""
        return ConfigurationError(
            f"MCP server {self.name!r} ({self.where}){code} {what}. Check that the command or URL "
            f"is right and that the server runs on its own.{quoted}",
            code="mcp_server_failed",
            server=self.name,
            stderr=tail,
        )

    async def failure_reason(self, exc: BaseException) -> tuple[str, str] | None:
        """For a call that raised: ``("mcp_server_exited", why)`` when the connection ended."""
        process = self.process
        if not (self.dead or _connection_closed(exc)):
            return None
        self.broken = True
        for _ in range(100):  # the pipe closes a moment before the exit is observed
            if process is None or process.returncode is not None:
                break
            await asyncio.sleep(0.01)
        code = process.returncode if process is not None else None
        if process is not None and process.overflowed:
            why = "sent a message over the size cap, so the connection was closed"
        elif code is not None:
            why = f"exited (code {code}) during the call"
        else:
            why = "closed the connection during the call"
        tail = self.stderr_tail(5)
        quoted = f" Last lines of its stderr: {tail}" if tail else ""
        return (
            "mcp_server_exited",
            f"the MCP server {why}; it is started again for the next call.{quoted}",
        )


def _connection_closed(exc: BaseException) -> bool:
    code = getattr(exc, "code", None)
    return code == -32000 and "connection closed" in str(exc).lower()


def describe(exc: BaseException) -> str:
    """A short one-line account of an exception (groups flattened)."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e) for e in exc.exceptions)[:500]
    return (str(exc) or type(exc).__name__)[:500]


def _tail_of(log: IO[bytes]) -> bytes:
    """The last 16 KiB of a stderr file (b"" when it cannot be read)."""
    try:
        size = log.seek(0, os.SEEK_END)
        log.seek(max(0, size - 16384))
        return log.read()
    except (OSError, ValueError):
        return b""
