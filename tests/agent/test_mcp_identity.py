"""What an MCP server's pin knows it by: no query values, IPv6 in brackets, old keys kept (issue 28)."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import sys
import traceback
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from loom_nb import Chat, ConfigurationError, MCPToolsChangedError, ScriptedProvider
from loom_nb.agent import MCPToolset
from loom_nb.agent._mcp_pins import (
    PIN_PREFIX,
    accept_pin,
    definitions_hash,
    identity_key,
    latest_pin,
)
from loom_nb.agent._mcp_session import MCPSession
from loom_nb.agent._mcp_url import parse_http_url
from loom_nb.journal import Journal
from loom_nb.store import LocalContentStore
from tests.agent.conftest import HOSTILE_SERVER, HOSTILE_TOKEN, free_port, serving_hostile_http

SECRET = "sk-live-7f3a9c1e5b2d"
"""A token as hosted MCP servers take it in the query string; it must be written nowhere."""


@pytest.fixture(autouse=True, scope="module")
def _no_leaks(no_leaked_processes: None) -> None:
    """The module's tests, HTTP server included, leave no process behind."""


def with_token(url: str) -> str:
    return f"{url}?api_key={SECRET}&region=eu"


def everything_written(folder: Path) -> str:
    """Every row of every SQLite table under ``folder``, and every file's bytes, as one text."""
    seen: list[str] = []
    for path in sorted(folder.rglob("*")):
        if not path.is_file():
            continue
        seen.append(path.read_bytes().decode("latin-1"))
        if path.suffix == ".sqlite":
            with closing(sqlite3.connect(path)) as db:
                listed = db.execute("SELECT name FROM sqlite_master WHERE type='table'")
                for (table,) in listed.fetchall():
                    rows = db.execute(f'SELECT * FROM "{table}"')  # noqa: S608 - names from the file
                    seen.extend(repr(row) for row in rows)
    return "\n".join(seen)


async def run_once(server: MCPToolset, folder: Path) -> tuple[str, dict[str, Any] | None, str]:
    """One chat run that calls the server's echo tool, on a file journal and store in ``folder``:
    everything then written there, the server's pin and its ``repr``."""
    journal = Journal(folder / "run.sqlite")
    store = LocalContentStore(folder / "store")
    model = ScriptedProvider(
        [{"tool_calls": [{"id": "e", "name": "echo", "input": {"text": "hi"}}]}, {"text": "done"}]
    )
    async with server:
        result = await Chat(model, tools=[server], journal=journal, store=store, id="c").run("go")
        _, pin = latest_pin(journal, server.name, server.key)
        shown = repr(server)
    assert result.status == "completed"
    journal.close()
    return everything_written(folder), pin, shown


def test_the_key_of_a_url_without_query_or_ipv6_host_is_unchanged() -> None:
    """Journals written before the query rule keep their pins: these keys were computed then."""
    expected = {
        ("http://127.0.0.1:9/mcp", None): (
            "http://127.0.0.1:9/mcp",
            "sha256:e3e98bacb35f3c1b65db641a56ec97ead4540d4f8a85ce957cf21100099cbd54",
        ),
        ("http://me:pw@127.0.0.1:9/mcp", None): (
            "http://127.0.0.1:9/mcp",
            "sha256:e3e98bacb35f3c1b65db641a56ec97ead4540d4f8a85ce957cf21100099cbd54",
        ),
        ("https://x.example:8443/a/b/", None): (
            "https://x.example:8443/a/b/",
            "sha256:8ea85a878b5c3ee17c81a672c22acaa3b3151391c9edbbba9836f2edf94040e4",
        ),
        ("https://x.example/mcp", "web"): (
            "https://x.example/mcp",
            "sha256:cb5edcf88756cdf2b6b5c81d3cc3e6e403c8d6e20e2053bd29d07ee7e8fab3a5",
        ),
    }
    for (url, name), (public, key) in expected.items():
        server = MCPToolset.http(url, name=name)
        assert server.identity["url"] == public
        assert server.key == key


def test_query_values_stay_out_of_the_identity_the_key_and_the_repr() -> None:
    """Only the query's parameter names are kept, sorted; two values of one name are one server."""
    server = MCPToolset.http(f"https://x.example/mcp?region=eu&api_key={SECRET}&region=us")
    assert server.identity == {
        "name": "x.example",
        "transport": "http",
        "url": "https://x.example/mcp?api_key&region",
    }
    assert SECRET not in repr(server)
    assert SECRET not in str(server.identity)
    assert "https://x.example/mcp?api_key&region" in repr(server)
    other = MCPToolset.http("https://x.example/mcp?api_key=another&region=eu")
    assert other.key == server.key
    bare = MCPToolset.http(f"https://x.example/mcp?{SECRET}")  # no name: all of it is a value
    assert bare.identity["url"] == "https://x.example/mcp"
    assert SECRET not in repr(bare)
    with pytest.raises(ConfigurationError) as refused:
        MCPToolset.http(f"ftp://me:{SECRET}@x.example/mcp?api_key={SECRET}")
    assert SECRET not in refused.value.message
    assert "'ftp://x.example/mcp?…'" in refused.value.message


def test_a_message_quoting_the_url_is_redacted() -> None:
    """Text from the HTTP stack that quotes the URL or a value loses the values, user and password."""
    url = parse_http_url(f"https://bot:{SECRET}@x.example/mcp?api_key={SECRET}&region=eu")
    said = f"Client error '401' for url 'https://x.example/mcp?api_key={SECRET}&region=eu'"
    assert url.redact(said) == "Client error '401' for url 'https://x.example/mcp?api_key&region'"
    assert url.redact(f"bad token {SECRET}") == "bad token …"
    assert url.quotes_a_secret(ValueError(f"no: {SECRET}"))
    assert not url.quotes_a_secret(ValueError("All connection attempts failed"))


def test_an_ipv6_host_keeps_its_brackets() -> None:
    """``http://[::1]:8000/mcp`` is not written as the ambiguous ``http://::1:8000/mcp``."""
    server = MCPToolset.http("http://[::1]:8000/mcp")
    assert server.identity["url"] == "http://[::1]:8000/mcp"
    assert "[::1]:8000" in repr(server)
    assert MCPToolset.http("http://[::1]/mcp").identity["url"] == "http://[::1]/mcp"


async def test_a_query_token_reaches_no_row_and_no_file_of_the_journal(
    hostile_http: str, tmp_path: Path
) -> None:
    """A run on a server whose URL carries a token: the token is in no journal row or file."""
    written, pin, _ = await run_once(
        MCPToolset.http(with_token(hostile_http), name="web"), tmp_path
    )
    assert "mcp-pin:web:" in written  # the pin is there, read back from the file
    assert SECRET not in written
    assert pin is not None
    assert pin["server"]["url"] == hostile_http + "?api_key&region"


@pytest.mark.parametrize(
    ("path", "query", "shown", "secret"),
    [
        ("/mcp", f"?api_key={SECRET}&region=eu", "/mcp?api_key&region", SECRET),
        ("/zap/sk-ak-9Qe4Lw7Zt2Vb8Nc5/mcp", "", "/zap/…/mcp", "sk-ak-9Qe4Lw7Zt2Vb8Nc5"),
    ],
)
async def test_an_error_for_a_url_with_a_token_does_not_quote_the_token(
    path: str, query: str, shown: str, secret: str
) -> None:
    """A server that is not there: the refusal names the URL without the query's values or the
    path's token."""
    url = f"http://127.0.0.1:{free_port()}{path}{query}"
    async with MCPToolset.http(url, name="gone", startup_timeout=5) as server:
        with pytest.raises(ConfigurationError) as refused:
            await server.tools()
    assert refused.value.code == "mcp_server_failed"
    assert shown in refused.value.message
    assert secret not in "".join(traceback.format_exception(refused.value))


def legacy_identity(name: str, url: str) -> dict[str, Any]:
    """The identity versions before the query rule recorded: the URL with its query as given."""
    return {"name": name, "transport": "http", "url": url}


async def listing_of(server: MCPToolset) -> dict[str, Any]:
    """The server's listing as a pin records it (hash and tools), read from a scratch journal."""
    scratch = Journal()
    await server.tools(journal=scratch)
    _, pin = latest_pin(scratch, server.name, server.key)
    scratch.close()
    assert pin is not None
    return {"hash": pin["hash"], "tools": pin["tools"]}


async def test_a_pin_recorded_under_the_old_identity_is_honoured_and_recorded_again(
    hostile_http: str, journal: Journal
) -> None:
    """A journal that pinned the server under the URL with its token: no new approval is asked,
    the pin is recorded again under the identity without the token, and the old record stays."""
    url = with_token(hostile_http)
    old_key = identity_key(legacy_identity("web", url))
    async with MCPToolset.http(url, name="web") as server:
        listing = await listing_of(server)
        await accept_pin(journal, "web", old_key, legacy_identity("web", url), listing)
        await server.tools(journal=journal)
        assert server.pending_changes is None
        count, pin = latest_pin(journal, "web", server.key)
    assert server.key != old_key
    assert count == 1
    assert pin is not None
    assert pin["hash"] == listing["hash"]
    assert SECRET not in str(pin)
    assert latest_pin(journal, "web", old_key)[0] == 1  # append-only: the old record stays


async def test_a_changed_menu_is_refused_against_a_pin_under_the_old_identity(
    hostile_http: str, journal: Journal
) -> None:
    """The old pin is the trusted menu: a server offering other definitions is refused, not
    trusted anew on first sight under its new identity."""
    url = with_token(hostile_http)
    async with MCPToolset.http(url, name="web") as server:
        listing = await listing_of(server)
        tools = [
            {**t, "description": "the old description"} if t["name"] == "echo" else t
            for t in listing["tools"]
        ]
        old = {"hash": definitions_hash(tools), "tools": tools}
        await accept_pin(
            journal,
            "web",
            identity_key(legacy_identity("web", url)),
            legacy_identity("web", url),
            old,
        )
        with pytest.raises(MCPToolsChangedError) as refused:
            await server.tools(journal=journal)
        assert refused.value.details["changed"] == ["echo"]
        count, pin = latest_pin(journal, "web", server.key)
        assert (count, pin and pin["hash"]) == (1, old["hash"])
        server.accept_changes()
        assert latest_pin(journal, "web", server.key)[1]["hash"] == listing["hash"]  # type: ignore[index]
    assert all(
        SECRET not in e.execution_id
        for e in journal.executions()
        if e.execution_id.startswith(PIN_PREFIX)
    )


async def test_an_ipv6_server_s_pin_under_the_unbracketed_identity_is_honoured(
    journal: Journal,
) -> None:
    """A pin recorded when ``[::1]`` was written ``::1`` is recorded again under the bracketed
    identity, and a listing that differs from it is refused."""
    server = MCPToolset.http("http://[::1]:8000/mcp", name="local")
    old = legacy_identity("local", "http://::1:8000/mcp")
    tools = [{"name": "echo", "description": "Echo.", "input_schema": {"type": "object"}}]
    pinned = {"hash": definitions_hash(tools), "tools": tools}
    await accept_pin(journal, "local", identity_key(old), old, pinned)
    offered = [{**tools[0], "description": "Echo, and more."}]
    with pytest.raises(MCPToolsChangedError):
        await server._check_pin(journal, {"hash": definitions_hash(offered), "tools": offered})
    count, pin = latest_pin(journal, "local", server.key)
    assert count == 1
    assert pin is not None
    assert pin["hash"] == pinned["hash"]
    assert pin["server"]["url"] == "http://[::1]:8000/mcp"


async def test_a_pin_check_is_not_skipped_for_a_journal_that_reuses_another_s_id(
    hostile_http: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two journals alike to ``id()`` (as a collected journal's id is reused by a new one): the
    second one's pin is still checked, so its pinned menu still refuses a change."""
    import loom_nb.agent._mcp as mcp_module

    monkeypatch.setattr(mcp_module, "id", lambda _obj: 1, raising=False)
    first, second = Journal(tmp_path / "a.sqlite"), Journal(tmp_path / "b.sqlite")
    async with MCPToolset.http(hostile_http, name="web") as server:
        listing = await listing_of(server)
        tools = [{**t, "description": "pinned"} for t in listing["tools"]]
        await accept_pin(
            second,
            "web",
            server.key,
            server.identity,
            {"hash": definitions_hash(tools), "tools": tools},
        )
        await server.tools(journal=first)
        with pytest.raises(MCPToolsChangedError):
            await server.tools(journal=second)
    first.close()
    second.close()


async def test_the_debug_log_of_a_session_that_ends_does_not_quote_the_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A session that ends with an error after it started logs it at DEBUG, without the URL's
    query values (the HTTP stack's message quotes the URL)."""
    url = with_token("https://x.example/mcp")

    class Ends:
        """A client that starts, then ends with the error an HTTP stack raises."""

        def __init__(self, transport: Any, cache: Any) -> None:
            pass

        async def __aenter__(self) -> Ends:
            return self

        async def __aexit__(self, *exc: object) -> None:
            raise RuntimeError(f"Server disconnected for url '{url}'")

    session = MCPSession(
        "x",
        argv=None,
        env=None,
        cwd=None,
        url=url,
        headers=None,
        where="test",
        startup_timeout=5,
        redactor=parse_http_url(url),
    )

    async def no_transport(stack: Any) -> None:
        return None

    session._transport = no_transport  # type: ignore[method-assign]
    ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()
    stop.set()  # the session ends as soon as it started
    with caplog.at_level(logging.DEBUG, logger="loom_nb.agent._mcp_session"):
        await session._run(Ends, ready, stop)
    assert isinstance(ready.result(), Ends)
    logged = caplog.text
    assert "session ended" in logged
    assert "Server disconnected for url 'https://x.example/mcp?api_key&region'" in logged
    assert SECRET not in logged


PATH_TOKEN = "sk-ak-9Qe4Lw7Zt2Vb8Nc5"
"""A token as hosted MCP servers take it in the path (a capability URL); written nowhere."""


@pytest.mark.parametrize(
    ("url", "public"),
    [
        (
            f"https://actions.zapier.com/mcp/{PATH_TOKEN}/sse",
            "https://actions.zapier.com/mcp/…/sse",
        ),
        (
            "https://mcp.pipedream.net/4f1c2e3a-1b2c-4d5e-8f90-123456789abc/gmail",
            "https://mcp.pipedream.net/…/gmail",
        ),
        (f"https://x.example/a/{PATH_TOKEN}?api_key={SECRET}", "https://x.example/a/…?api_key"),
        ("https://x.example/v1/mcp-server-2/mcp", "https://x.example/v1/mcp-server-2/mcp"),
        ("https://x.example/mcp/my-long-server-name", "https://x.example/mcp/my-long-server-name"),
    ],
)
def test_a_path_segment_that_looks_like_a_token_is_not_written(url: str, public: str) -> None:
    """A generated segment (letters and digits, 16 or more; a UUID) is written ``…`` and taken
    out of messages; a named one (short, or letters only) is kept."""
    parsed = parse_http_url(url)
    assert parsed.public == public
    server = MCPToolset.http(url)
    assert server.identity["url"] == public
    assert public in repr(server)
    hidden = [s for s in url.replace("?", "/").split("/") if s and s not in public.split("/")]
    for secret in hidden:
        said = f"Client error '404' for url '{url}' ({secret})"
        assert secret not in parsed.redact(said)
        assert parsed.quotes_a_secret(ValueError(said))


def test_a_percent_encoded_path_token_is_redacted_in_either_spelling() -> None:
    """A token with characters a path escapes: neither spelling reaches a message."""
    token = "sk+live+0123456789abcd"
    url = f"https://x.example/mcp/{token.replace('+', '%2B')}/sse"
    parsed = parse_http_url(url)
    assert parsed.public == "https://x.example/mcp/…/sse"
    assert parsed.redact(f"bad {token} at {url}") == "bad … at https://x.example/mcp/…/sse"


async def test_a_path_token_reaches_no_row_and_no_file_of_the_journal(tmp_path: Path) -> None:
    """A run on a real server whose URL has its token in the path: no row or file holds it."""
    with serving_hostile_http(f"/zap/{PATH_TOKEN}/mcp") as url:
        written, pin, shown = await run_once(MCPToolset.http(url, name="zap"), tmp_path)
    assert "mcp-pin:zap:" in written
    assert PATH_TOKEN not in written
    assert PATH_TOKEN not in shown
    assert pin is not None
    assert pin["server"]["url"] == url.replace(PATH_TOKEN, "…")


ARG_KEY = "ctx7sk-0d1e2f3a4b5c6d7e8f90"
"""A key passed on a stdio server's command line, as some servers' instructions say."""


@pytest.mark.parametrize(
    ("args", "public"),
    [
        (("--api-key", ARG_KEY), ("--api-key", "…")),
        ((f"--token={ARG_KEY}",), ("--token=…",)),
        (("--password", "hunter2"), ("--password", "…")),
        (("4f1c2e3a-1b2c-4d5e-8f90-123456789abc",), ("…",)),
        (("ghp_AbCdEf0123456789xyzW",), ("…",)),
        (("--no-auth", "x.py"), ("--no-auth", "x.py")),
        (("--repository", "/tmp/repo", "mcp-server-time==0.6.2"),) * 2,
    ],
)
def test_a_secret_argument_is_not_written(args: tuple[str, ...], public: tuple[str, ...]) -> None:
    """The value of a secret-named flag, or a generated token, is written ``…``; the rest stays."""
    server = MCPToolset.stdio("npx", "server.js", *args)
    assert server.identity["command"] == ["npx", "server.js", *public]
    assert " ".join(public) in repr(server)
    hidden = [a.split("=")[-1] for a in args if a.split("=")[-1] not in " ".join(public)]
    for secret in hidden:
        assert secret not in repr(server)
        assert secret not in server._session.redact(f"usage: server.js {' '.join(args)}")


def test_a_command_line_without_secrets_keeps_its_key() -> None:
    """Journals written before the argument rule keep their pins: this key was computed then."""
    server = MCPToolset.stdio("uvx", "mcp-server-git", "--repository", "/tmp/repo", name="git")
    assert server.key == identity_key(
        {
            "name": "git",
            "transport": "stdio",
            "command": ["uvx", "mcp-server-git", "--repository", "/tmp/repo"],
        }
    )
    assert server._legacy_keys == ()


async def test_a_secret_argument_reaches_no_row_and_no_file_of_the_journal(
    tmp_path: Path,
) -> None:
    """A run on a real stdio server given its key on the command line: no row or file holds it."""
    written, pin, shown = await run_once(hostile_with("--api-key", ARG_KEY), tmp_path)
    assert "mcp-pin:hostile:" in written
    assert ARG_KEY not in written
    assert ARG_KEY not in shown
    assert pin is not None
    assert pin["server"]["command"][-2:] == ["--api-key", "…"]


async def test_a_server_that_fails_to_start_is_named_without_its_key() -> None:
    """The refusal quotes the command line with the key written ``…``, and its stderr (which
    here prints the command line) without it."""
    script = "import sys; print('started as', sys.argv, file=sys.stderr); sys.exit(3)"
    async with MCPToolset.stdio(
        sys.executable, "-c", script, "--api-key", ARG_KEY, name="broken", startup_timeout=10
    ) as server:
        with pytest.raises(ConfigurationError) as refused:
            await server.tools()
    assert refused.value.code == "mcp_server_failed"
    assert "--api-key …" in refused.value.message
    assert "started as" in refused.value.message  # the stderr tail is quoted ...
    assert ARG_KEY not in "".join(traceback.format_exception(refused.value))  # ... redacted


@pytest.mark.parametrize(
    ("make", "old", "secrets"),
    [
        (  # before the path rule: the URL with its token, the query's names only
            lambda: MCPToolset.http(
                f"http://127.0.0.1:8000/zap/{PATH_TOKEN}/mcp?api_key={SECRET}", name="zap"
            ),
            legacy_identity("zap", f"http://127.0.0.1:8000/zap/{PATH_TOKEN}/mcp?api_key"),
            (PATH_TOKEN, SECRET),
        ),
        (  # before the argument rule: the command line as given
            lambda: MCPToolset.stdio("npx", "server.js", "--api-key", ARG_KEY, name="ctx"),
            {
                "name": "ctx",
                "transport": "stdio",
                "command": ["npx", "server.js", "--api-key", ARG_KEY],
            },
            (ARG_KEY,),
        ),
    ],
    ids=["path token", "secret argument"],
)
async def test_a_pin_recorded_with_the_secret_is_honoured_and_recorded_again(
    make: Callable[[], MCPToolset],
    old: dict[str, Any],
    secrets: tuple[str, ...],
    journal: Journal,
) -> None:
    """A journal that pinned the server by its identity with the secret in it: no new approval,
    the pin recorded again without the secret, and a menu that differs from the old pin is
    still refused."""
    server = make()
    tools = [{"name": "echo", "description": "Echo.", "input_schema": {"type": "object"}}]
    pinned = {"hash": definitions_hash(tools), "tools": tools}
    await accept_pin(journal, server.name, identity_key(old), old, pinned)
    await server._check_pin(journal, pinned)
    count, pin = latest_pin(journal, server.name, server.key)
    assert server.key != identity_key(old)
    assert count == 1
    assert pin is not None
    assert pin["hash"] == pinned["hash"]
    for secret in secrets:
        assert secret not in str(pin)
    offered = [{**tools[0], "description": "Echo, and more."}]
    with pytest.raises(MCPToolsChangedError):
        await server._check_pin(journal, {"hash": definitions_hash(offered), "tools": offered})


def hostile_with(*args: str) -> MCPToolset:
    """The hostile stdio server (as ``hostile()``) with ``args`` added to its command line."""
    return MCPToolset.stdio(
        sys.executable,
        str(HOSTILE_SERVER),
        f"--token={HOSTILE_TOKEN}",
        *args,
        env={"HOSTILE_TOKEN": HOSTILE_TOKEN},
        name="hostile",
    )
