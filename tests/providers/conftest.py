"""Shared fixtures of the provider tests: a sleep that never waits, a retry policy using it, a live server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from loom_nb.providers._http import RetryPolicy
from tests.providers.live_server import LiveServer, serve


class RecordingSleep:
    """An injectable ``sleep`` that records each delay and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture
def sleeps() -> RecordingSleep:
    """The delays the provider under test asked to wait."""
    return RecordingSleep()


@pytest.fixture
def fast_retries(sleeps: RecordingSleep) -> RetryPolicy:
    """Three retries, no real waiting, jitter pinned to its floor."""
    return RetryPolicy(max_retries=3, sleep=sleeps, jitter=lambda: 0.0)


@pytest.fixture
def live_server() -> Iterator[LiveServer]:
    """A real HTTP server on 127.0.0.1 (``tests/providers/live_server.py``), shut down after the test."""
    server = LiveServer()
    httpd, thread = serve(server)
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
