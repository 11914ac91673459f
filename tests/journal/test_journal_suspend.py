"""StartOnSuspend: a step's start is journaled just before its awaitable first suspends, and only then."""

from __future__ import annotations

import asyncio
import types
from collections.abc import Generator
from typing import Any

import pytest

from loom_nb.journal._suspend import StartOnSuspend


async def test_an_awaitable_that_never_suspends_starts_nothing() -> None:
    """Returning (or raising) without suspending never calls on_suspend."""
    calls: list[str] = []

    async def quick() -> int:
        return 1

    async def failing() -> int:
        raise ValueError("no")

    assert await StartOnSuspend(quick(), lambda: calls.append("start")) == 1
    with pytest.raises(ValueError):
        await StartOnSuspend(failing(), lambda: calls.append("start"))
    assert calls == []


async def test_the_start_comes_before_the_first_suspension_once() -> None:
    """on_suspend runs once, before the awaitable's first suspension, and the result comes through."""
    calls: list[str] = []

    async def slow() -> int:
        calls.append("before")
        await asyncio.sleep(0)
        calls.append("between")
        await asyncio.sleep(0)
        return 2

    assert await StartOnSuspend(slow(), lambda: calls.append("start")) == 2
    assert calls == ["before", "start", "between"]


async def test_a_refused_start_closes_the_awaitable() -> None:
    """When on_suspend raises, the awaitable is closed and runs no further."""
    after: list[str] = []

    async def slow() -> None:
        await asyncio.sleep(0)
        after.append("ran on")

    def refuse() -> None:
        raise RuntimeError("journal refused the start")

    with pytest.raises(RuntimeError):
        await StartOnSuspend(slow(), refuse)
    assert after == []


async def test_a_cancellation_reaches_the_awaitable() -> None:
    """A cancellation thrown into the wrapper is thrown into the awaitable (it can clean up)."""
    cleaned: list[str] = []

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            cleaned.append("cleaned")

    task = asyncio.ensure_future(StartOnSuspend(forever(), lambda: None))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned == ["cleaned"]


async def test_a_plain_iterator_awaitable_starts_first() -> None:
    """An awaitable whose __await__ is a plain iterator (no send) gets its start before it runs."""
    calls: list[str] = []

    class Plain:
        def __await__(self) -> Generator[Any, Any, int]:
            return iter(())  # type: ignore[return-value]

    @types.coroutine
    def run() -> Generator[Any, Any, Any]:
        return (yield from StartOnSuspend(Plain(), lambda: calls.append("start")).__await__())

    assert await run() is None
    assert calls == ["start"]
