"""Chat from synchronous code, and a reply that was never awaited said out loud.

``chat.sync(...)`` and ``chat.run_sync(...)`` run the coroutine on ONE private event loop in a
daemon thread (started on first use) and wait for it. The same path serves a plain script (no
loop) and a notebook cell (the kernel's loop is running, and a loop cannot be re-entered; no
``nest_asyncio``): the cell's thread waits, the reply streams, views update and ``chat.stop()``
works from any thread. One loop for every synchronous call also keeps a provider's HTTP client
on the loop it first used (``asyncio.run`` would make a new loop per call, and a pooled
connection cannot move between loops). An interrupt (Ctrl-C, the kernel's stop button) while
waiting stops the reply (its partial text kept, as the Stop button does) and is raised again.

``chat("...")`` returns a ``Pending`` rather than a bare coroutine: awaited it is the same thing,
but shown in a cell (``repr``, ``_repr_html_``, ``_repr_mimebundle_``) it says that nothing was
sent and what to write instead, and dropped without being awaited it warns
(``NotAwaitedWarning``, a ``RuntimeWarning``) with the same advice, where Python's own warning
names only the coroutine.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import html
import threading
import warnings
from collections.abc import Callable, Coroutine, Generator
from typing import Any, Generic, TypeVar

from loom_nb.errors import ConfigurationError

__all__ = ["NotAwaitedWarning", "Pending", "run_blocking"]

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


class NotAwaitedWarning(RuntimeWarning):
    """A chat call was dropped without being awaited, so nothing was sent."""


class Pending(Coroutine[Any, Any, T]):
    """What ``chat(...)`` and ``chat.run(...)`` return: await it (``await chat(...)``).

    It is a coroutine (``asyncio.create_task`` takes it); shown in a cell or dropped unawaited it
    tells the user to write ``await`` or the ``sync`` form.
    """

    __slots__ = ("_advice", "_coro", "_fresh")

    def __init__(self, coro: Coroutine[Any, Any, T], what: str, sync: str) -> None:
        self._coro = coro
        self._fresh = True  # neither awaited, nor shown, nor closed yet
        self._advice = (
            f"{what} was not sent: it runs only when awaited. Write `await {what}` (in a "
            f"notebook cell or async code) or `{sync}` (in plain code)."
        )

    def __await__(self) -> Generator[Any, None, T]:
        self._fresh = False
        return self._coro.__await__()

    def send(self, value: Any) -> Any:
        """Advance the wrapped coroutine (what an event loop does)."""
        self._fresh = False
        return self._coro.send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        """Raise into the wrapped coroutine."""
        self._fresh = False
        if val is None and tb is None:
            return self._coro.throw(typ)
        return self._coro.throw(typ, val, tb)  # pragma: no cover - the old three-argument form

    def close(self) -> None:
        """Close the wrapped coroutine without running it."""
        self._fresh = False
        self._coro.close()

    def __repr__(self) -> str:
        if self._fresh:  # shown to the user, who now knows: it will never run, close it quietly
            self.close()
        return self._advice

    def _repr_html_(self) -> str:
        return f'<div class="loom-not-sent"><b>Not sent.</b> {html.escape(repr(self))}</div>'

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": repr(self), "text/html": self._repr_html_()}

    def __del__(self) -> None:
        if getattr(self, "_fresh", False):
            self._coro.close()  # never started: closing it keeps Python's own warning away
            warnings.warn(self._advice, NotAwaitedWarning, stacklevel=2)


def _private_loop() -> asyncio.AbstractEventLoop:
    """The process's one loop for synchronous calls, running in a daemon thread."""
    global _loop, _thread
    with _lock:
        if _loop is None or _thread is None or not _thread.is_alive():
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            thread = threading.Thread(target=serve, name="loom_nb-sync", daemon=True)
            thread.start()
            ready.wait()
            _loop, _thread = loop, thread
        return _loop


def run_blocking(
    awaitable: Coroutine[Any, Any, T], *, on_interrupt: Callable[[], bool] | None = None
) -> T:
    """Run ``awaitable`` to its end on the private loop and return its value (or raise its error).

    A ``KeyboardInterrupt`` while waiting calls ``on_interrupt`` (the chat's ``stop``: True when
    it stopped a reply, which then settles with its partial text), or cancels the call, waits
    for it to settle, and is raised again. The call's future exists before the call can start,
    so an interrupt at any moment (even one that lands as the call is handed to the loop, which
    may have reached the call's first await by then) finds it to stop and wait for.
    """
    if threading.current_thread() is _thread:
        awaitable.close()
        raise ConfigurationError(
            "a synchronous chat call (chat.sync / chat.run_sync / Chat.resume) was made from code "
            "that a synchronous chat call is running (a tool, a callback): it would wait for "
            "itself. Make that code async and `await` the chat instead.",
            code="sync_in_sync",
        )
    call = _Call(awaitable, _private_loop())
    try:
        call.start()
        return _wait(call.future)
    except KeyboardInterrupt:
        if on_interrupt is None or not on_interrupt():
            call.cancel()  # nothing to stop yet (or no stop): cancel the call itself
        with contextlib.suppress(BaseException):  # the interrupt is what the caller hears about
            _wait(call.future)
        raise


class _Call(Generic[T]):
    """One coroutine on the private loop, and the future a waiting thread reads its end from.

    The future resolves only when the coroutine has ended (or was cancelled before it began),
    never while it still unwinds: a cancelled call's cleanup is over once its waiter returns.
    """

    def __init__(self, awaitable: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop) -> None:
        self.future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._awaitable = awaitable
        self._loop = loop
        self._task: asyncio.Task[None] | None = None  # held here: a pending task is not collected

    def start(self) -> None:
        """Hand the call to the loop (from the waiting thread)."""
        self._loop.call_soon_threadsafe(self._begin)

    def cancel(self) -> None:
        """Cancel the call (from the waiting thread): before it began, or while it runs."""
        if not self.future.cancel():  # it began: cancel its task (after ``_begin``, in order)
            self._loop.call_soon_threadsafe(self._cancel_task)

    def _begin(self) -> None:
        if not self.future.set_running_or_notify_cancel():
            self._awaitable.close()  # cancelled before it began: it never runs
            return
        self._task = self._loop.create_task(self._run())

    async def _run(self) -> None:
        try:
            result = await self._awaitable
        except BaseException as exc:  # its error, or its cancellation, is the waiter's to raise
            self.future.set_exception(exc)
            if not isinstance(exc, Exception | asyncio.CancelledError):
                raise  # SystemExit and the like end the loop's task as well
        else:
            self.future.set_result(result)

    def _cancel_task(self) -> None:
        if self._task is not None:
            self._task.cancel()


def _wait(future: concurrent.futures.Future[T]) -> T:
    # A short timeout keeps the wait interruptible by Ctrl-C on every platform.
    while True:
        try:
            return future.result(timeout=0.25)
        except concurrent.futures.TimeoutError:
            continue
