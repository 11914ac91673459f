"""``MCPToolset``: a Model Context Protocol server's tools in a Chat, fenced, pinned and journaled (issue 28).

Built on the official ``mcp`` SDK (the ``loom_nb[mcp]`` extra): its client session, its
streamable HTTP transport and its message types. The stdio transport is loom_nb's own
(``_mcp_stdio``) so the process can always be reaped and its stderr quoted.

Lifetime. ``async with MCPToolset.stdio(...) as server:`` opens a scope and closes the server at
its end (also on cancellation and on a kernel interrupt, which cancels the cell). The server
process starts only when something live needs it: a run's listing of its tools, or a call. So a
replayed run, whose listing and calls are served from the journal, never starts it. The session
lives in a task of its own (the SDK's transports are task-scoped), so calls may come from any
task of the loop that started it.

Journaled. In a run the toolset is listed as the step ``#mcp:<server>:tools`` (its output is what
the model is shown), and each call is an ordinary tool step whose output is the MCP result with
media stored by ref (``_mcp_results``). A replay serves both from the log; a crash-resume runs
again only the call that was in flight.

Pinned. Each live listing is compared with the journal's pin of the server (``_mcp_pins``): the
first one is recorded, a changed one refuses the run with ``MCPToolsChangedError`` until
``accept_changes()``.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from loom_nb.agent._mcp_argv import CommandLine, parse_command
from loom_nb.agent._mcp_options import TOOL_NAME_BAD, check_options, default_name, safe_name
from loom_nb.agent._mcp_pins import (
    accept_pin,
    definitions_hash,
    diff_listings,
    identity_key,
    latest_pin,
)
from loom_nb.agent._mcp_results import (
    DEFAULT_MAX_TEXT_CHARS,
    MCPTool,
    call_outcome,
    failed_outcome,
)
from loom_nb.agent._mcp_session import MCPSession, describe
from loom_nb.agent._mcp_url import HTTPURL, parse_http_url
from loom_nb.agent._tools import ToolDefinition
from loom_nb.errors import ConfigurationError, LoomError, MCPToolsChangedError

if TYPE_CHECKING:
    from loom_nb.journal import Execution, Journal

__all__ = ["MCPTool", "MCPToolset"]


class MCPToolset:
    """The tools of one MCP server, for ``Chat(provider, tools=[server, ...])`` and ``agent_loop``.

    Build it with ``MCPToolset.stdio(command, *args)`` or ``MCPToolset.http(url)``. Results are
    untrusted unless ``trusted=True``: their text is marked with the origin
    ``mcp:<server>/<tool>`` (fenced by the guard, kept out of later tool calls) and their media is
    stored in the content store and fenced as untrusted media. ``requires_approval`` (True, or a
    collection of tool names: the server's or the menu's, with the prefix) parks those calls for
    a decision; a name no tool has refuses the run (``ConfigurationError``). ``call_timeout`` bounds each call
    in seconds: a call that takes longer, or whose server crashes, is an error result and the run
    goes on. ``prefix`` is put before each tool's name on the model's menu (to tell two servers'
    tools apart). ``store`` keeps media results (default: the run's store, a Chat's own).
    """

    def __init__(
        self,
        *,
        transport: str,
        name: str,
        identity: dict[str, Any],
        argv: list[str] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        url: str | None = None,
        parsed_url: HTTPURL | None = None,
        parsed_command: CommandLine | None = None,
        headers: Mapping[str, str] | None = None,
        trusted: bool = False,
        requires_approval: bool | Collection[str] = False,
        call_timeout: float = 60.0,
        startup_timeout: float = 30.0,
        prefix: str = "",
        store: Any = None,
        journal: Journal | None = None,
        max_text_chars: int = DEFAULT_MAX_TEXT_CHARS,
    ) -> None:
        check_options(name, trusted, requires_approval, call_timeout, startup_timeout, prefix)
        self.name = name
        """The server's name: in origins (``mcp:<name>/<tool>``), step ids and the pin."""
        self.transport = transport
        """``"stdio"`` or ``"http"``."""
        self.identity = identity
        """What the pin knows the server by: name, transport, command or URL (no env, no headers,
        no user, password, query values or path token of the URL, no secret argument)."""
        self.key = identity_key(identity)
        """The ``sha256:`` of ``identity``."""
        # The keys versions before the query, path and argument rules gave this server, where
        # they differ (``_mcp_url``, ``_mcp_argv``): a pin recorded under one is honoured and
        # recorded again under ``key``. Never written.
        self._legacy_keys = tuple(
            identity_key({**identity, "url": form})
            for form in (parsed_url.legacy if parsed_url is not None else ())
        )
        if parsed_command is not None and parsed_command.legacy is not None:
            self._legacy_keys += (identity_key({**identity, "command": [*parsed_command.legacy]}),)
        self.trusted = bool(trusted)
        """Whether results are taken as trusted (not marked, not fenced)."""
        self.requires_approval = requires_approval
        """True (every tool), False, or the names of the tools whose calls park for approval."""
        self.call_timeout = float(call_timeout)
        """Seconds a call may take before it becomes an error result."""
        self.startup_timeout = float(startup_timeout)
        """Seconds the server has to start and answer the handshake."""
        self.prefix = prefix
        """Put before every tool name on the model's menu."""
        self.max_text_chars = int(max_text_chars)
        """Characters of text kept from one result (the rest is cut, with a note)."""
        self._store = store
        self._journal = journal
        self._session = MCPSession(
            name,
            argv=argv,
            env=env,
            cwd=cwd,
            url=url,
            headers=headers,
            where=" ".join(identity["command"]) if argv is not None else str(identity.get("url")),
            startup_timeout=float(startup_timeout),
            redactor=parsed_url if parsed_url is not None else parsed_command,
        )
        self._starting: asyncio.Lock | None = None
        self._starting_loop: asyncio.AbstractEventLoop | None = None
        self._fresh_listing: dict[str, Any] | None = None
        self._pending: tuple[Journal, dict[str, Any]] | None = None
        # The listing hashes verified per journal this process. Keyed by the journal object, not
        # by id(): a collected journal's id can be reused by a new one with other pins.
        self._checked: weakref.WeakKeyDictionary[Journal, set[str]] = weakref.WeakKeyDictionary()

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def stdio(
        cls,
        command: str | os.PathLike[str],
        *args: str | os.PathLike[str],
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        name: str | None = None,
        trusted: bool = False,
        requires_approval: bool | Collection[str] = False,
        call_timeout: float = 60.0,
        startup_timeout: float = 30.0,
        prefix: str = "",
        store: Any = None,
        journal: Journal | None = None,
        max_text_chars: int = DEFAULT_MAX_TEXT_CHARS,
    ) -> MCPToolset:
        """A server run as ``command *args`` and spoken to over its stdin and stdout.

        ``env`` is added to a minimal inherited environment (``HOME``, ``PATH``, ``USER`` ...,
        as the SDK does), ``cwd`` is its working directory. ``name`` defaults to the script's
        (or command's) file name without suffix. Environment values never reach the journal,
        and neither does an argument that looks secret (the value of ``--api-key``, ``--token``
        and the like, a generated token or UUID): the pin, ``repr`` and errors write it ``…``
        (``loom_nb.agent._mcp_argv``). ``env=`` is still the place for a key.
        """
        if not isinstance(command, str | os.PathLike) or not os.fspath(command):
            raise ConfigurationError(
                f"MCPToolset.stdio() needs the command to run (e.g. sys.executable, "
                f"'server.py'), not {command!r}.",
                code="invalid_argument",
            )
        argv = [os.fspath(command)]
        for arg in args:
            if not isinstance(arg, str | os.PathLike):
                raise ConfigurationError(
                    f"MCPToolset.stdio() arguments are strings or paths, not {type(arg).__name__}.",
                    code="invalid_argument",
                )
            argv.append(os.fspath(arg))
        if env is not None and not (
            isinstance(env, Mapping)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
        ):
            raise ConfigurationError(
                "MCPToolset.stdio(env=...) is a mapping of str to str.", code="invalid_argument"
            )
        server = name if name is not None else default_name(argv)
        parsed = parse_command(argv)
        return cls(
            transport="stdio",
            name=server,
            identity={"name": server, "transport": "stdio", "command": [*parsed.public]},
            argv=argv,
            parsed_command=parsed,
            env=env,
            cwd=os.fspath(cwd) if cwd is not None else None,
            trusted=trusted,
            requires_approval=requires_approval,
            call_timeout=call_timeout,
            startup_timeout=startup_timeout,
            prefix=prefix,
            store=store,
            journal=journal,
            max_text_chars=max_text_chars,
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        trusted: bool = False,
        requires_approval: bool | Collection[str] = False,
        call_timeout: float = 60.0,
        startup_timeout: float = 30.0,
        prefix: str = "",
        store: Any = None,
        journal: Journal | None = None,
        max_text_chars: int = DEFAULT_MAX_TEXT_CHARS,
    ) -> MCPToolset:
        """A server reached over streamable HTTP at ``url`` (e.g. ``http://127.0.0.1:8000/mcp``).

        ``headers`` go with every request (an ``Authorization`` token, say). Neither they, nor a
        user and password in the URL, nor the values of its query string (``?api_key=...``)
        reach the journal, ``repr`` or an error message, nor a path segment that looks like a token
        or an id (``https://actions.zapier.com/mcp/sk-ak-.../sse``): the pin knows the server by
        scheme, host, port, the path with such segments written ``…``, and the query's parameter
        names only (``https://x.example/mcp?api_key``; see ``loom_nb.agent._mcp_url``), so URLs
        differing only in a query value or a token segment are one server.
        ``name`` defaults to the URL's host.
        """
        parsed = parse_http_url(url)
        if headers is not None and not (
            isinstance(headers, Mapping)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())
        ):
            raise ConfigurationError(
                "MCPToolset.http(headers=...) is a mapping of str to str.", code="invalid_argument"
            )
        server = name if name is not None else safe_name(parsed.host)
        return cls(
            transport="http",
            name=server,
            identity={"name": server, "transport": "http", "url": parsed.public},
            url=url,
            parsed_url=parsed,
            headers=headers,
            trusted=trusted,
            requires_approval=requires_approval,
            call_timeout=call_timeout,
            startup_timeout=startup_timeout,
            prefix=prefix,
            store=store,
            journal=journal,
            max_text_chars=max_text_chars,
        )

    def __repr__(self) -> str:
        where = self._session.where  # the public command line or URL
        state = "running" if self.running else "not running"
        return f"MCPToolset({self.name!r}, {self.transport}: {where}, {state})"

    # -- lifetime ----------------------------------------------------------------------------

    async def __aenter__(self) -> MCPToolset:
        """Open the toolset's scope; the server starts when first needed, live."""
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Stop the server if it was started (the process is reaped, even when cancelled)."""
        await self.aclose()

    @property
    def running(self) -> bool:
        """True while a started server is connected."""
        return self._session.client is not None and not self._session.dead

    @property
    def pid(self) -> int | None:
        """The stdio server's process id while it runs (None for HTTP or when not running)."""
        process = self._session.process
        return process.pid if process is not None and process.returncode is None else None

    @property
    def starts(self) -> int:
        """How many times this object started the server (a replay starts it 0 times)."""
        return self._session.starts

    def stderr_tail(self, lines: int = 20) -> str:
        """The last lines the stdio server wrote to stderr ("" for HTTP or before a start)."""
        return self._session.stderr_tail(lines)

    async def aclose(self) -> None:
        """Stop the server and wait until its process is reaped (a no-op when never started)."""
        await self._session.close()

    async def _connected(self, journal: Journal | None) -> Any:
        """The connected client, starting (or restarting) the server and checking its pin."""
        loop = asyncio.get_running_loop()
        if self._starting is None or self._starting_loop is not loop:
            self._starting, self._starting_loop = asyncio.Lock(), loop
        session = self._session
        session.leave_foreign_loop()
        async with self._starting:
            if session.client is not None and session.dead:
                await session.close()
            if session.client is None:
                client = await session.start()
                try:
                    self._fresh_listing = await self._list(client)
                except Exception as exc:
                    await session.close()
                    raise session.start_error(
                        f"failed to list its tools ({describe(exc)})"
                    ) from session.cause(exc)
            if self._fresh_listing is not None and journal is not None:
                await self._check_pin(journal, self._fresh_listing)
            return session.client

    # -- listing and pins --------------------------------------------------------------------

    async def _list(self, client: Any) -> dict[str, Any]:
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(100):
            page = await asyncio.wait_for(
                client.list_tools(cursor=cursor, cache_mode="refresh"), self.call_timeout
            )
            for tool in page.tools:
                tools.append(
                    {
                        "name": str(tool.name),
                        "description": str(tool.description or ""),
                        "input_schema": dict(tool.input_schema or {}),
                    }
                )
            cursor = page.next_cursor
            if cursor is None:
                break
        return {"hash": definitions_hash(tools), "tools": tools}

    async def _live_listing(self, journal: Journal | None) -> dict[str, Any]:
        """A fresh listing from the running server (started if needed), checked against the pin."""
        client = await self._connected(journal)
        listing = self._fresh_listing
        self._fresh_listing = None
        if listing is None:
            try:
                listing = await self._list(client)
            except Exception as exc:
                self._session.broken = True
                raise self._session.start_error(
                    f"failed to list its tools ({describe(exc)})"
                ) from self._session.cause(exc)
            if journal is not None:
                await self._check_pin(journal, listing)
        return listing

    async def _check_pin(self, journal: Journal, listing: dict[str, Any]) -> None:
        if listing["hash"] in self._checked.get(journal, ()):
            return
        pin = await self._pin(journal)
        if pin is None:
            await accept_pin(journal, self.name, self.key, self.identity, listing)
        elif pin.get("hash") != listing["hash"]:
            self._pending = (journal, listing)
            diff, names = diff_listings(pin, listing)
            raise MCPToolsChangedError(
                f"MCP server {self.name!r} now offers tool definitions that differ from the ones "
                f"this journal pinned when it first saw the server ({pin.get('hash', '')[:19]}..., "
                f"now {listing['hash'][:19]}...). Tool names, descriptions and schemas reach the "
                "model as instructions, so the run was refused. Review the change:\n"
                f"{diff}\nIf you trust it, call server.accept_changes() (or display "
                "MCPServerView(server) and press Accept) and run again.",
                server=self.name,
                diff=diff,
                pinned=pin.get("hash"),
                offered=listing["hash"],
                added=names["added"],
                removed=names["removed"],
                changed=names["changed"],
            )
        self._checked.setdefault(journal, set()).add(listing["hash"])

    async def _pin(self, journal: Journal) -> dict[str, Any] | None:
        """The journal's pin of this server; one recorded under a legacy key is moved over."""
        _, pin = latest_pin(journal, self.name, self.key)
        for legacy in self._legacy_keys:
            if pin is not None:
                break
            _, pin = latest_pin(journal, self.name, legacy)
            if pin is not None:  # trusted before: recorded again without the URL's secrets
                old = {"hash": pin["hash"], "tools": pin.get("tools", [])}
                pin = await accept_pin(journal, self.name, self.key, self.identity, old)
        return pin

    @property
    def pending_changes(self) -> str | None:
        """The diff of a refused change waiting for ``accept_changes()``, else None."""
        if self._pending is None:
            return None
        journal, listing = self._pending
        _, pin = latest_pin(journal, self.name, self.key)
        return diff_listings(pin or {}, listing)[0]

    def accept_changes(self) -> None:
        """Trust the changed tool definitions that refused the last run: they become the pin.

        Records them in the journal whose pin refused them, so every chat on that journal uses
        them from now on. Raises ``ConfigurationError`` (``nothing_to_accept``) when no run was
        refused for a change by this object.
        """
        if self._pending is None:
            raise ConfigurationError(
                f"MCP server {self.name!r} has no refused change to accept; a run that meets "
                "changed tool definitions is refused with code 'mcp_tools_changed' first.",
                code="nothing_to_accept",
            )
        journal, listing = self._pending
        _drive(accept_pin(journal, self.name, self.key, self.identity, listing))
        self._pending = None
        self._checked.setdefault(journal, set()).add(listing["hash"])

    async def tools(self, *, journal: Journal | None = None) -> list[ToolDefinition]:
        """List the server's tools live (starting it if needed) as ``ToolDefinition``\\ s.

        With a ``journal`` (or the toolset's own), the listing is checked against its pin first.
        In a Chat or ``agent_loop`` the toolset itself is passed instead, so the listing is a
        journaled step that a replay serves without the server.
        """
        book = journal if journal is not None else self._journal
        listing = await self._live_listing(book)
        return self._definitions(listing, book, self._store, "notebook")

    async def tools_for(self, execution: Execution, *, store: Any = None) -> list[ToolDefinition]:
        """The tools this toolset lends a run on ``execution`` (the agent loop calls this).

        The listing is the journaled step ``#mcp:<name>:tools``: live it starts the server and
        checks the pin; replayed it is served from the log and the server is not started.
        """
        journal = execution.journal

        async def listing_step(_input: Any) -> dict[str, Any]:
            return await self._live_listing(journal)

        listing = await execution.execute(
            f"#mcp:{self.name}:tools", listing_step, {"server": self.name}
        )
        principal = execution.principal
        tenant = principal.tenant if principal is not None else "notebook"
        keep = self._store if self._store is not None else store
        return self._definitions(
            listing, journal, keep if keep is not None else journal.store, tenant
        )

    def _definitions(
        self, listing: Any, journal: Journal | None, store: Any, tenant: str
    ) -> list[ToolDefinition]:
        tools = listing.get("tools") if isinstance(listing, dict) else None
        if not isinstance(tools, list):
            raise ConfigurationError(
                f"MCP server {self.name!r}: the journaled listing is malformed.",
                code="mcp_invalid_tool",
            )
        out: list[ToolDefinition] = []
        named = set() if isinstance(self.requires_approval, bool) else set(self.requires_approval)
        unknown = set(named)
        for entry in tools:
            mcp_name = str(entry.get("name"))
            shown = (self.prefix + TOOL_NAME_BAD.sub("_", mcp_name))[:64]
            # a tool is named by its server's name or by its name on the model's menu
            unknown -= {mcp_name, shown}
            approval = (
                self.requires_approval
                if isinstance(self.requires_approval, bool)
                else bool(named & {mcp_name, shown})
            )
            try:
                out.append(
                    MCPTool(
                        shown,
                        str(entry.get("description") or ""),
                        fn=self._caller(mcp_name, journal, store, tenant),
                        input_schema=entry.get("input_schema"),
                        requires_approval=approval,
                        server=self.name,
                        mcp_name=mcp_name,
                        trusted=self.trusted,
                    )
                )
            except LoomError as exc:
                raise ConfigurationError(
                    f"MCP server {self.name!r} offers tool {mcp_name!r} that cannot be put on a "
                    f"model's menu: {exc.message}",
                    code="mcp_invalid_tool",
                    server=self.name,
                    tool=mcp_name,
                ) from exc
        if unknown:
            offered = ", ".join(repr(str(entry.get("name"))) for entry in tools) or "none"
            raise ConfigurationError(
                f"MCPToolset {self.name!r}: requires_approval names "
                f"{', '.join(repr(n) for n in sorted(unknown))}, which is no tool of the server "
                f"(its tools: {offered}), so the run was refused rather than let a call go "
                "without approval. Fix the name (the server's or the menu's, with the prefix), "
                "or pass requires_approval=True.",
                code="invalid_argument",
                server=self.name,
                unknown=sorted(unknown),
            )
        return out

    # -- calls -------------------------------------------------------------------------------

    def _caller(self, mcp_name: str, journal: Journal | None, store: Any, tenant: str) -> Any:
        async def call(arguments: Any) -> dict[str, Any]:
            return await self.call(mcp_name, arguments, journal=journal, store=store, tenant=tenant)

        return call

    async def call(
        self,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        journal: Journal | None = None,
        store: Any = None,
        tenant: str = "notebook",
    ) -> dict[str, Any]:
        """Call ``tool`` live and return its outcome as a run journals it (``{"mcp": {...}}``).

        A timeout, a crashed server or a protocol error is an outcome with an ``error``; a server
        that cannot be (re)started raises ``ConfigurationError`` and a changed menu
        ``MCPToolsChangedError``.
        """
        client = await self._connected(journal if journal is not None else self._journal)
        keep = store if store is not None else self._store
        try:
            result = await asyncio.wait_for(
                client.call_tool(tool, dict(arguments or {})), self.call_timeout
            )
        except TimeoutError:
            return failed_outcome(
                self.name,
                tool,
                "mcp_timeout",
                f"the MCP server did not answer within {self.call_timeout:g} s (call_timeout); "
                "the call was abandoned. Try a smaller request or another tool.",
            )
        except Exception as exc:
            return await self._call_failure(tool, exc)
        return call_outcome(
            result,
            server=self.name,
            tool=tool,
            store=keep,
            tenant=tenant,
            max_text_chars=self.max_text_chars,
        )

    async def _call_failure(self, tool: str, exc: Exception) -> dict[str, Any]:
        reason = await self._session.failure_reason(exc)
        if reason is not None:
            return failed_outcome(self.name, tool, *reason)
        why = self._session.redact(describe(exc))  # journaled and shown to the model
        return failed_outcome(self.name, tool, "mcp_error", f"the call failed: {why}")


def _drive(coroutine: Any) -> Any:
    """Run a coroutine that never suspends (a journal write with a synchronous step) to its end."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise ConfigurationError(
        "accept_changes() had to wait for the journal; nothing was recorded. Try again.",
        code="journal_would_wait",
    )
