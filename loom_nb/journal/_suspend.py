"""Journal a step's start only if it suspends: ``StartOnSuspend`` (see ``_execution``).

A step whose function is async has its ``step_started`` committed just before its awaitable first
suspends (where crashes, cancellations and other tasks can happen), so a log cut short shows
which step was in flight; an awaitable that finishes without ever suspending gets its start and
its outcome in one commit, as a synchronous step does. The wrapper is a hand-written
``yield from``, so the wrapped awaitable sees exactly the sends, throws and close it would have.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any

__all__ = ["StartOnSuspend"]


class StartOnSuspend:
    """Await ``awaitable``, calling ``on_suspend`` once, just before it first suspends.

    Delegates exactly as ``yield from`` does (sent values, thrown exceptions such as a
    cancellation, ``close``); an awaitable that returns or raises without suspending never calls
    ``on_suspend``. If ``on_suspend`` raises (the journal refused the start), the awaitable is
    closed and the error propagates: nothing runs past a start that is not durable.
    """

    __slots__ = ("_awaitable", "_on_suspend")

    def __init__(self, awaitable: Awaitable[Any], on_suspend: Callable[[], None]) -> None:
        self._awaitable = awaitable
        self._on_suspend = on_suspend

    def __await__(self) -> Generator[Any, Any, Any]:
        inner = self._awaitable.__await__()
        if not hasattr(inner, "send"):  # a plain iterator: the start first, as before
            self._on_suspend()
            return (yield from inner)
        try:
            signal = inner.send(None)
        except StopIteration as stop:
            return stop.value
        try:
            self._on_suspend()
        except BaseException:
            inner.close()
            raise
        while True:
            try:
                sent = yield signal
            except GeneratorExit:
                inner.close()
                raise
            except BaseException as exc:
                try:
                    signal = inner.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    signal = inner.send(sent)
                except StopIteration as stop:
                    return stop.value
