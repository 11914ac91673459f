"""Shared fixtures of the provider tests: a sleep that never waits, and a retry policy using it."""

from __future__ import annotations

import pytest

from loom_nb.providers._http import RetryPolicy


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
