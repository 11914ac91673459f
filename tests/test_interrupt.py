"""Signals wake a kernel's event loop (``loom_nb._interrupt``), so an interrupt ends an awaiting
cell at once. The real kernel is in tests/agent/test_mcp.py (a hung MCP call interrupted)."""

from __future__ import annotations

import asyncio
import signal
import socket
import threading
import time
import weakref
from collections.abc import Iterator

import pytest

from loom_nb import _interrupt
from loom_nb._interrupt import wake_on_signals


@pytest.fixture
def kernel_like(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A process that looks like an IPython kernel, with no wakeup socket set; restored after."""
    monkeypatch.setattr(_interrupt, "in_kernel", lambda: True)
    monkeypatch.setattr(_interrupt, "_sockets", None)
    monkeypatch.setattr(_interrupt, "_watched", weakref.WeakSet())
    previous = signal.set_wakeup_fd(-1)
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous)
        for sock in _interrupt._sockets or ():
            sock.close()


def test_outside_a_kernel_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A script, or a process that imported ipykernel without starting a kernel (this test
    process may have), keeps its signal setup as it is."""

    assert not _interrupt.in_kernel()

    async def main() -> bool:
        return wake_on_signals()

    before = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(before)
    assert asyncio.run(main()) is False
    assert signal.set_wakeup_fd(before) == before


@pytest.mark.usefixtures("kernel_like")
def test_a_signal_landing_on_another_thread_wakes_the_loop_at_once() -> None:
    """SIGUSR1 delivered to a worker thread: the main thread's handler runs while the loop would
    otherwise sleep 20 s in its poll (it did before: the handler ran when the poll timed out)."""
    seen: list[float] = []
    previous_handler = signal.getsignal(signal.SIGUSR1)

    async def main() -> float:
        assert wake_on_signals() is True
        assert wake_on_signals() is True  # once per loop: nothing more installed
        loop = asyncio.get_running_loop()
        done = asyncio.Event()

        def handler(signum: int, frame: object) -> None:
            seen.append(time.monotonic())
            loop.call_soon_threadsafe(done.set)

        signal.signal(signal.SIGUSR1, handler)

        def signal_from_a_worker() -> None:
            time.sleep(0.5)  # the main thread is asleep in the loop's poll by then
            signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)

        worker = threading.Thread(target=signal_from_a_worker)
        sent = time.monotonic()
        worker.start()
        await asyncio.wait_for(done.wait(), 20)
        worker.join()
        return seen[0] - sent

    try:
        waited = asyncio.run(main())
    finally:
        signal.signal(signal.SIGUSR1, previous_handler)
    assert waited < 10  # at once (0.5 s), not when the 20 s wait ended


@pytest.mark.usefixtures("kernel_like")
def test_a_wakeup_socket_someone_else_set_is_kept() -> None:
    """asyncio's own signal handlers set a wakeup socket: it stays, and nothing is installed."""
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    signal.set_wakeup_fd(writer.fileno())

    async def main() -> bool:
        return wake_on_signals()

    try:
        assert asyncio.run(main()) is False
        assert signal.set_wakeup_fd(writer.fileno()) == writer.fileno()
    finally:
        signal.set_wakeup_fd(-1)
        reader.close()
        writer.close()


@pytest.mark.usefixtures("kernel_like")
def test_only_the_main_thread_with_a_running_loop_installs_it() -> None:
    """No running loop, or a loop in another thread: nothing to wake, nothing installed."""
    assert wake_on_signals() is False
    answers: list[bool] = []

    def in_thread() -> None:
        async def main() -> None:
            answers.append(wake_on_signals())

        asyncio.run(main())

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join()
    assert answers == [False]
    assert signal.set_wakeup_fd(-1) == -1


@pytest.mark.usefixtures("kernel_like")
def test_the_wakeup_socket_outlives_every_loop() -> None:
    """A second loop reads the same socket pair; the first loop's end closes nothing, so the fd
    the signal handler writes to never becomes another file's."""
    import gc

    async def main() -> bool:
        return wake_on_signals()

    assert asyncio.run(main()) is True
    assert _interrupt._sockets is not None
    reader, writer = _interrupt._sockets
    gc.collect()
    assert asyncio.run(main()) is True
    assert _interrupt._sockets == (reader, writer)
    assert writer.fileno() != -1
    assert reader.fileno() != -1
    assert signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False) == writer.fileno()
