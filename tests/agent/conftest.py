"""Fixtures for the agent tests: a journal per test and helpers to read what it recorded."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loom_nb.agent import MCPToolset
from loom_nb.journal import Journal
from loom_nb.store import LocalContentStore


@pytest.fixture
def journal() -> Iterator[Journal]:
    """An in-memory journal, closed after the test."""
    j = Journal(":memory:")
    yield j
    j.close()


def step_ids(journal: Journal, execution_id: str) -> list[str]:
    """The ids of the completed steps of an execution, in log order."""
    return [
        e.step_id
        for e in journal.events(execution_id)
        if e.kind == "step_completed" and e.step_id is not None
    ]


# -- MCP toolsets (issue 28): a hostile MCP server run as a real subprocess ----------------------

HOSTILE_SERVER = Path(__file__).resolve().parent / "mcp_servers" / "hostile_server.py"
"""The hostile MCP server script (stdio, or ``http PORT``)."""

HOSTILE_TOKEN = f"loom-mcp-test-{os.getpid()}"
"""On the command line of every process the hostile server tests start, so leaks can be counted."""


def hostile_processes() -> list[int]:
    """The pids of live processes started by the hostile server tests (their token in argv)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if HOSTILE_TOKEN.encode() in argv and state != "Z":
            found.append(int(entry.name))
    return found


def child_processes() -> list[int]:
    """The live (not zombie) children of this test process."""
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def hostile(**kwargs: Any) -> MCPToolset:
    """The hostile server over stdio, named ``hostile``, with ``env`` added to its environment."""
    env = {"HOSTILE_TOKEN": HOSTILE_TOKEN, **kwargs.pop("env", {})}
    kwargs.setdefault("name", "hostile")
    return MCPToolset.stdio(
        sys.executable, str(HOSTILE_SERVER), f"--token={HOSTILE_TOKEN}", env=env, **kwargs
    )


@pytest.fixture
def store(tmp_path: Path) -> LocalContentStore:
    """A content store in the test's folder."""
    return LocalContentStore(tmp_path / "store")


@pytest.fixture(scope="module")
def no_leaked_processes() -> Iterator[None]:
    """After the module's tests: no server process, grandchild or child of this process is left."""
    before = set(child_processes())
    yield
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (hostile_processes() or set(child_processes()) - before):
        time.sleep(0.1)
    assert hostile_processes() == []
    assert set(child_processes()) - before == set()


def free_port() -> int:
    """A TCP port free on 127.0.0.1 (for the streamable HTTP server)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def serving_hostile_http(path: str = "/mcp") -> Iterator[str]:
    """The hostile server over streamable HTTP on 127.0.0.1, answering at ``path``: its URL."""
    port = free_port()
    env = {**os.environ, "HOSTILE_TOKEN": HOSTILE_TOKEN}
    process = subprocess.Popen(
        [
            sys.executable,
            str(HOSTILE_SERVER),
            "http",
            str(port),
            f"--token={HOSTILE_TOKEN}",
            f"--path={path}",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the hostile HTTP MCP server did not start") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}{path}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=3)  # a tool still sleeping in a worker thread holds it longer
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def hostile_http() -> Iterator[str]:
    """The hostile server over streamable HTTP on 127.0.0.1: its URL; stopped after the module."""
    with serving_hostile_http() as url:
        yield url
