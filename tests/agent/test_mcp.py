"""MCP toolsets over stdio against a real (hostile) MCP server subprocess (issue 28)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from loom_nb import (
    AudioPart,
    Capabilities,
    Chat,
    ConfigurationError,
    FilePart,
    GuardError,
    ImagePart,
    LlmRequest,
    Message,
    RefSource,
    ScriptedProvider,
    TextPart,
    ToolResultPart,
    ToolUsePart,
    Untrusted,
    guard_request,
)
from loom_nb.agent import MCPTool, MCPToolset
from loom_nb.journal import Journal
from loom_nb.store import LocalContentStore
from tests.agent.conftest import HOSTILE_TOKEN, hostile, hostile_processes

IMAGES = Capabilities(image=["image/png"], audio=["audio/wav"], file=["application/pdf"])


@pytest.fixture(autouse=True, scope="module")
def _no_leaks(no_leaked_processes: None) -> None:
    """Every test of this module leaves no server process behind (checked after the last one)."""


def alive(pid: int | None) -> bool:
    """Whether a process runs (a zombie does not count)."""
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def scripted(*calls: tuple[str, dict[str, Any]], caps: Capabilities = IMAGES) -> ScriptedProvider:
    """A model that makes the given calls in one turn, then answers "done"."""
    tool_calls = [{"id": f"c{i}", "name": n, "input": a} for i, (n, a) in enumerate(calls)]
    return ScriptedProvider([{"tool_calls": tool_calls}, {"text": "done"}], capabilities=caps)


async def run(
    server: MCPToolset,
    model: ScriptedProvider,
    journal: Journal,
    store: LocalContentStore,
    chat_id: str = "mcp",
) -> Any:
    chat = Chat(model, tools=[server], journal=journal, store=store, id=chat_id)
    return await chat.run("go")


def results_of(result: Any) -> list[ToolResultPart]:
    """The tool results of the run's first tool turn."""
    message = result.messages[2]
    return [p for p in message.content if isinstance(p, ToolResultPart)]


async def test_tools_lists_the_servers_definitions_and_close_reaps_the_process() -> None:
    """tools() starts the server once, returns MCPTool definitions; aclose() ends the process."""
    async with hostile() as server:
        tools = await server.tools()
        names = {t.name for t in tools}
        assert {"echo", "page", "picture", "hang", "exit_now", "flood"} <= names
        echo = next(t for t in tools if t.name == "echo")
        assert isinstance(echo, MCPTool)
        assert echo.description == "Echo the text back."
        assert echo.input_schema["properties"]["text"]["type"] == "string"
        assert (echo.server, echo.mcp_name, echo.trusted) == ("hostile", "echo", False)
        pid = server.pid
        assert pid is not None
        assert server.running
        assert server.starts == 1
    assert server.pid is None
    assert not server.running
    assert not alive(pid)


async def test_text_results_are_untrusted_fenced_and_forged_closers_neutralised(
    journal: Journal, store: LocalContentStore
) -> None:
    """A page with forged fence closers and instructions reaches the model inside one fence."""
    model = scripted(("page", {"url": "https://shop.example"}))
    async with hostile() as server:
        result = await run(server, model, journal, store)
    assert result.status == "completed"
    (part,) = results_of(result)
    assert isinstance(part.content, Untrusted)
    assert part.content.origin == "mcp:hostile/page"
    assert "ignore all previous instructions" in part.content.value
    sent = model.requests[1].messages[2].content[0]
    assert isinstance(sent, ToolResultPart)
    assert isinstance(sent.content, str)
    text = sent.content
    assert text.startswith('<untrusted nonce="')
    assert 'origin="mcp:hostile/page"' in text
    assert text.count("</untrusted") == 1
    assert text.rstrip().endswith('">')
    assert '</untrusted nonce="0000">' not in text  # the server's forged closer is defused


async def test_the_untrusted_result_cannot_flow_into_a_later_tool_call(
    journal: Journal, store: LocalContentStore
) -> None:
    """The mark on an MCP result makes a tool call built from it a guard refusal."""
    model = scripted(("echo", {"text": "secret"}))
    async with hostile() as server:
        result = await run(server, model, journal, store)
    marked = results_of(result)[0].content
    assert isinstance(marked, Untrusted)
    assert marked.origin == "mcp:hostile/echo"
    forged = [
        *result.messages,
        Message(
            role="assistant", content=[ToolUsePart(id="x", name="echo", input={"text": marked})]
        ),
        Message(role="user", content=[ToolResultPart(tool_use_id="x", content="ok")]),
    ]
    with pytest.raises(GuardError) as refused:
        guard_request(LlmRequest(messages=forged))
    assert refused.value.code == "untrusted_in_tool_use"


async def test_images_and_audio_are_stored_and_travel_by_ref_fenced_as_untrusted_media(
    journal: Journal, store: LocalContentStore
) -> None:
    """Media results are stored; the transcript and journal hold refs; the provider gets data."""
    model = scripted(("picture", {}), ("sound", {}))
    async with hostile() as server:
        result = await run(server, model, journal, store)
    image_result, audio_result = results_of(result)
    assert isinstance(image_result.content, list)
    assert isinstance(audio_result.content, list)
    (image,) = image_result.content
    (audio,) = audio_result.content
    assert isinstance(image, ImagePart)
    assert isinstance(image.source, RefSource)
    assert isinstance(audio, AudioPart)
    assert audio.media_type == "audio/wav"
    assert image.origin == "mcp:hostile/picture"
    assert audio.origin == "mcp:hostile/sound"
    assert store.get(image.source.ref.address).startswith(b"\x89PNG")
    journaled = str([e.payload for e in journal.events("mcp/run-0")])
    assert image.source.ref.address in journaled
    assert "iVBORw0KGgo" not in journaled
    sent = model.requests[1].messages[2].content[0]
    assert isinstance(sent, ToolResultPart)
    assert isinstance(sent.content, list)
    assert sent.content[0].source.kind == "data"
    assert sent.content[0].origin == "mcp:hostile/picture"


async def test_media_the_provider_cannot_take_becomes_a_note_and_fake_images_are_refused(
    journal: Journal, store: LocalContentStore
) -> None:
    """Audio to a provider without audio, and bytes that are no image, become text notes."""
    model = scripted(("sound", {}), ("fake_picture", {}), caps=Capabilities(image=["image/png"]))
    async with hostile() as server:
        result = await run(server, model, journal, store)
    sound, fake = results_of(result)
    assert result.status == "completed"
    assert isinstance(sound.content, list)
    assert isinstance(sound.content[0], TextPart)
    assert "does not take this media type" in str(sound.content[0].text)
    assert isinstance(fake.content, Untrusted)
    assert "not shown" in fake.content.value


async def test_embedded_resources_become_files_and_links_become_text(
    journal: Journal, store: LocalContentStore
) -> None:
    """An embedded PDF is a stored file part (its untrusted name dropped); a link is text."""
    model = scripted(("documents", {}))
    async with hostile() as server:
        result = await run(server, model, journal, store)
    (part,) = results_of(result)
    assert isinstance(part.content, list)
    kinds = [type(p).__name__ for p in part.content]
    assert kinds == ["TextPart", "FilePart", "TextPart"]
    pdf = part.content[1]
    assert isinstance(pdf, FilePart)
    assert pdf.media_type == "application/pdf"
    assert pdf.name is None
    assert "q3 report" in str(part.content[2].text)


async def test_is_error_timeouts_and_a_crash_mid_call_are_error_results_and_the_run_goes_on(
    journal: Journal, store: LocalContentStore
) -> None:
    """fail, hang (call_timeout) and exit_now are error results; the server restarts after."""
    model = ScriptedProvider(
        [
            {"tool_calls": [{"id": "a", "name": "fail", "input": {}}]},
            {"tool_calls": [{"id": "b", "name": "hang", "input": {}}]},
            {"tool_calls": [{"id": "c", "name": "exit_now", "input": {}}]},
            {"tool_calls": [{"id": "d", "name": "echo", "input": {"text": "still here"}}]},
            {"text": "done"},
        ],
        capabilities=IMAGES,
    )
    async with hostile(call_timeout=1.5) as server:
        result = await run(server, model, journal, store)
        assert server.starts == 2  # exit_now killed the first process; echo started another
    assert result.status == "completed"
    answers = [m.content[0] for m in result.messages[2::2] if isinstance(m.content, list)]
    failed, hung, exited, echoed = answers
    assert failed.is_error
    assert "failed on purpose" in str(failed.content)
    assert hung.is_error
    assert "mcp_timeout" in str(hung.content)
    assert exited.is_error
    assert "mcp_server_exited" in str(exited.content)
    assert "exited (code 3)" in str(exited.content)
    assert "exiting mid-call" in str(exited.content)
    assert not echoed.is_error
    assert "still here" in str(echoed.content)
    for answer in (failed, hung, exited):  # the server's words are fenced, errors included
        mark = answer.content.origin if isinstance(answer.content, Untrusted) else answer.origin
        assert mark == "mcp:hostile/" + answer_tool(answer, result)


def answer_tool(answer: ToolResultPart, result: Any) -> str:
    return next(c.name for c in result.tool_calls if c.id == answer.tool_use_id)


async def test_ten_mib_of_output_is_cut_before_the_journal_and_the_transcript(
    journal: Journal, store: LocalContentStore
) -> None:
    """10 MiB of text: the result keeps max_text_chars and says how much was cut."""
    model = scripted(("flood", {"mib": 10}))
    async with hostile(max_text_chars=50_000) as server:
        result = await run(server, model, journal, store)
    (part,) = results_of(result)
    assert isinstance(part.content, Untrusted)
    assert len(part.content.value) < 50_200
    assert "10,435,760 more characters from the server were cut" in part.content.value
    payload = [e.payload for e in journal.events("mcp/run-0") if e.step_id == "#turn:0:tool:c0"]
    assert len(str(payload)) < 200_000


async def test_a_grandchild_of_the_server_is_killed_with_it() -> None:
    """The server's process group is killed on close: a process it spawned does not survive."""
    async with hostile() as server:
        outcome = await server.call("spawn_child")
        assert "spawned" in str(outcome)
        assert len(hostile_processes()) >= 2
    for _ in range(50):
        if not hostile_processes():
            break
        await asyncio.sleep(0.1)
    assert hostile_processes() == []


async def test_cancelling_a_call_in_flight_reaps_the_process() -> None:
    """A task cancelled in the middle of a call (a kernel interrupt) still reaps the server."""
    server = hostile()
    started = asyncio.Event()

    async def cell() -> None:
        async with server:
            await server.tools()
            started.set()
            await server.call("hang")

    task = asyncio.ensure_future(cell())
    await asyncio.wait_for(started.wait(), 30)
    pid = server.pid
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert pid is not None
    assert server.pid is None
    assert pid not in hostile_processes()
    assert not alive(pid)


async def test_a_server_that_does_not_start_is_a_configuration_error_quoting_stderr() -> None:
    """A server that exits at start: ConfigurationError mcp_server_failed with its stderr."""
    async with hostile(env={"HOSTILE_FAIL_START": "1"}) as server:
        with pytest.raises(ConfigurationError) as refused:
            await server.tools()
    assert refused.value.code == "mcp_server_failed"
    assert "cannot open the database at /nowhere" in refused.value.message
    assert "exit code 2" in refused.value.message
    missing = MCPToolset.stdio("/no/such/mcp-server", name="missing")
    with pytest.raises(ConfigurationError) as refused:
        await missing.tools()
    assert refused.value.code == "mcp_server_failed"
    assert missing.pid is None


def deleted_files_open() -> int:
    """How many descriptors of this process point to deleted files (an unnamed temporary file)."""
    count = 0
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):
            count += os.readlink(fd).endswith("(deleted)")
    return count


async def test_a_closed_server_leaves_no_stderr_file_open_and_still_quotes_it() -> None:
    """The server's stderr file is closed with the connection (not left open until the toolset
    is collected), and stderr_tail still quotes the server's last lines after the close."""
    before = deleted_files_open()
    async with hostile(env={"HOSTILE_FAIL_START": "1"}) as server:
        with pytest.raises(ConfigurationError):
            await server.tools()
        assert deleted_files_open() == before
        assert "cannot open the database at /nowhere" in server.stderr_tail()
    async with hostile() as server:
        await server.tools()
        assert deleted_files_open() == before + 1  # the running server's stderr
    assert deleted_files_open() == before
    assert server.stderr_tail() == server.stderr_tail(50)  # read from what was kept


async def test_requires_approval_parks_the_named_tools(
    journal: Journal, store: LocalContentStore
) -> None:
    """requires_approval={"echo"} parks echo's call; approving it runs it."""
    model = scripted(("echo", {"text": "hi"}))
    async with hostile(requires_approval={"echo"}) as server:
        chat = Chat(model, tools=[server], journal=journal, store=store, id="ask")
        parked = await chat.run("go")
        assert parked.status == "parked"
        assert [d["name"] for d in parked.pending_approvals] == ["echo"]
        done = await chat.approve(True)
    assert done.status == "completed"
    assert "hi" in str(done.messages[2].content[0].content)


async def test_requires_approval_takes_the_menu_name_and_refuses_a_name_it_does_not_know(
    journal: Journal, store: LocalContentStore
) -> None:
    """With a prefix, the approvals name the call as the model's menu does (``h_echo``): that
    name parks it as the server's own (``echo``) does. A name no tool has (a typo) refuses the
    run instead of letting every call go without approval."""
    for asked in ({"h_echo"}, {"echo"}):
        model = scripted(("h_echo", {"text": "hi"}))
        async with hostile(prefix="h_", requires_approval=asked) as server:
            chat = Chat(model, tools=[server], journal=journal, store=store, id=f"ask-{min(asked)}")
            parked = await chat.run("go")
        assert parked.status == "parked"
        assert [d["name"] for d in parked.pending_approvals] == ["h_echo"]
    model = scripted(("echo", {"text": "hi"}))
    async with hostile(requires_approval={"ech0"}) as server:
        chat = Chat(model, tools=[server], journal=journal, store=store, id="typo")
        with pytest.raises(ConfigurationError) as refused:
            await chat.run("go")
    assert refused.value.code == "invalid_argument"
    assert "'ech0'" in refused.value.message
    assert "echo" in refused.value.message
    assert model.requests == []


async def test_a_trusted_server_s_results_are_not_marked(
    journal: Journal, store: LocalContentStore
) -> None:
    """trusted=True: text results are plain strings and media carries no origin."""
    model = scripted(("echo", {"text": "plain"}), ("picture", {}))
    async with hostile(trusted=True) as server:
        result = await run(server, model, journal, store)
    text, picture = results_of(result)
    assert text.content == "plain"
    assert text.origin is None
    assert isinstance(picture.content, list)
    assert picture.content[0].origin is None


def test_arguments_are_checked_when_the_toolset_is_built() -> None:
    """Bad arguments are ConfigurationError invalid_argument naming the problem."""
    for build in (
        lambda: MCPToolset.stdio(""),
        lambda: MCPToolset.stdio("python", env={"A": 1}),  # type: ignore[dict-item]
        lambda: MCPToolset.stdio("python", name="bad name"),
        lambda: MCPToolset.stdio("python", call_timeout=0),
        lambda: MCPToolset.stdio("python", requires_approval="echo"),  # type: ignore[arg-type]
        lambda: MCPToolset.http("ftp://example.com/mcp"),
        lambda: MCPToolset.http("http://127.0.0.1:80OO/mcp"),  # a port that is not a number
        lambda: MCPToolset.http("http://127.0.0.1:99999/mcp"),
        lambda: MCPToolset.http("http://[::1/mcp"),
    ):
        with pytest.raises(ConfigurationError) as refused:
            build()
        assert refused.value.code == "invalid_argument"


def test_identity_names_the_command_or_url_but_never_env_headers_or_passwords() -> None:
    """The pin's identity holds the command or URL; env, headers and userinfo stay out."""
    stdio = MCPToolset.stdio("python", "srv.py", env={"TOKEN": "s3cret"})
    assert stdio.name == "srv"
    assert stdio.identity["command"] == ["python", "srv.py"]
    assert "s3cret" not in str(stdio.identity)
    http = MCPToolset.http("http://me:pw@127.0.0.1:9/mcp", headers={"Authorization": "Bearer t"})
    assert http.identity["url"] == "http://127.0.0.1:9/mcp"
    assert http.name == "127.0.0.1"
    assert "pw" not in str(http.identity)
    assert "Bearer" not in str(http.identity)
    assert HOSTILE_TOKEN not in str(stdio.identity)


@pytest.mark.slow
def test_a_kernel_interrupt_reaps_the_server_of_the_running_cell() -> None:
    """In a real IPython kernel, interrupting a cell stuck in an MCP call ends it at once and the
    server process with it (ipykernel 7 alone would wait for the call to end: loom_nb._interrupt)."""

    from jupyter_client.manager import start_new_kernel

    from tests.agent.conftest import HOSTILE_SERVER

    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    manager, client = start_new_kernel(kernel_name="python3", env=env)
    try:
        cell = f"""
import sys
from loom_nb import MCPToolset
server = MCPToolset.stdio(sys.executable, {str(HOSTILE_SERVER)!r}, "--token={HOSTILE_TOKEN}",
                          env={{"HOSTILE_TOKEN": {HOSTILE_TOKEN!r}}}, name="hostile")
async with server:
    await server.tools()
    print("PID", server.pid, flush=True)
    await server.call("hang")
"""
        msg_id = client.execute(cell)
        pid = None
        while pid is None:
            message = client.get_iopub_msg(timeout=60)
            if message["parent_header"].get("msg_id") != msg_id:
                continue
            text = message["content"].get("text", "")
            if message["msg_type"] == "stream" and "PID" in text:
                pid = int(text.split()[1])
        assert alive(pid)
        interrupted = time.monotonic()
        manager.interrupt_kernel()
        reply = client.get_shell_msg(timeout=60)  # the hung call never ends by itself
        while reply["parent_header"].get("msg_id") != msg_id:  # a late kernel_info_reply
            reply = client.get_shell_msg(timeout=60)
        assert time.monotonic() - interrupted < 30
        assert reply["content"]["status"] == "error"
        assert not alive(pid)
        assert pid not in hostile_processes()
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
        for left in hostile_processes():  # a failed interrupt must not fail the next tests
            with contextlib.suppress(OSError):
                os.kill(left, signal.SIGKILL)


async def test_the_views_name_the_server_fence_its_text_and_show_its_media(
    journal: Journal, store: LocalContentStore
) -> None:
    """The transcript HTML labels calls and results with the server, fences, and draws the image."""
    from loom_nb.render import render_transcript
    from loom_nb.store import Principal

    model = scripted(("page", {"url": "https://shop.example"}), ("picture", {}))
    async with hostile() as server:
        result = await run(server, model, journal, store)
    html = render_transcript(result.messages, store=store, principal=Principal(tenant="notebook"))
    assert "tool call · MCP hostile · page · call c0" in html
    assert "result of MCP hostile · picture · c1" in html
    assert "mcp:hostile/page" in html
    assert "ignore all previous instructions" in html
    assert "<script" not in html
    assert html.count("<img") >= 1
    assert "mcp:hostile/picture" in html


def test_a_toolset_used_from_two_event_loops_restarts_and_leaves_no_process() -> None:
    """A connection made in a finished event loop is dropped (its process killed), not reused."""
    server = hostile()

    async def listing() -> int:
        return len(await server.tools())

    assert asyncio.run(listing()) > 5
    first = server._session.process
    assert first is not None
    assert asyncio.run(listing()) > 5  # a new loop: the old connection is left, a new one made
    assert server.starts == 2
    assert first.returncode is not None or not alive(first.pid)
    asyncio.run(server.aclose())
    assert server.pid is None


async def test_agent_loop_takes_a_toolset_and_a_clash_of_names_needs_a_prefix(
    journal: Journal, store: LocalContentStore
) -> None:
    """agent_loop lists a toolset itself (media kept in the resolver's store); a server tool named
    like a function tool is refused until the toolset gets a prefix."""
    from loom_nb import ConfigurationError, agent_loop, tool
    from loom_nb.store import StoreResolver

    @tool
    def echo(text: str) -> str:
        """The user's own echo."""
        return text

    async with hostile() as server:
        with pytest.raises(ConfigurationError) as clash:
            await agent_loop(
                journal.execution("clash"),
                scripted(("echo", {"text": "x"})),
                [server, echo],
                [{"role": "user", "content": "go"}],
            )
        assert clash.value.code == "invalid_tool_definition"
    async with hostile(prefix="h_") as server:
        model = scripted(("h_picture", {}), ("echo", {"text": "mine"}))
        result = await agent_loop(
            journal.execution("prefixed"),
            model,
            [server, echo],
            [{"role": "user", "content": "go"}],
            resolver=StoreResolver(store),
        )
    picture, mine = result.messages[2].content
    assert picture.content[0].origin == "mcp:hostile/picture"
    assert store.has(picture.content[0].source.ref.address)
    assert "mine" in str(mine.content)
    assert "h_echo" in {t.name for t in model.requests[0].tools}
