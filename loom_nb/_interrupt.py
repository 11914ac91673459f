"""Interrupting a notebook cell that awaits: signals wake the kernel's event loop.

A kernel interrupts a running cell with SIGINT. ipykernel 7 ends a cell that *awaits* (a model's
reply, an MCP tool call) by cancelling it from a Python-level signal handler, and CPython runs
that handler in the main thread only once the main thread runs Python again. The kernel has other
threads (its shell channel, control and iopub threads), the signal may land on one of them, and
the main thread sleeps in the event loop's poll until its next timer or I/O: the cell goes on
until what it awaits ends by itself (measured with ipykernel 7.4: interrupting
``await asyncio.sleep(30)`` answered after 30 s; a hung MCP call never did).

CPython's remedy is ``signal.set_wakeup_fd``: the C-level handler also writes the signal's
number to a socket, which the loop watches here, so the poll returns at once and the kernel's
handler runs (the same cell then answers in about 0.2 s). ``wake_on_signals`` installs it once
per event loop, only in an IPython kernel's main thread, and never over a wakeup socket someone
else set (asyncio's own ``add_signal_handler`` sets one: signals already wake that loop). It
changes no signal's handler.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
import threading
import weakref

__all__ = ["wake_on_signals"]

_woken: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[socket.socket, ...]] = (
    weakref.WeakKeyDictionary()
)


def wake_on_signals() -> bool:
    """Make signals wake the running event loop of an IPython kernel's main thread (once per
    loop); anywhere else (a script, another thread, no running loop) do nothing.

    Returns whether signals wake the loop now through the socket installed here.
    """
    if "ipykernel" not in sys.modules or threading.current_thread() is not threading.main_thread():
        return False
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False
    if loop in _woken:
        return bool(_woken[loop])
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    try:
        previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    except (ValueError, OSError):  # not the main interpreter, or the fd refused
        previous = None
    if previous != -1:
        if previous is not None:
            signal.set_wakeup_fd(previous)  # someone else's: their loop is woken already
        reader.close()
        writer.close()
        _woken[loop] = ()
        return False
    loop.add_reader(reader.fileno(), _drain, reader)
    _woken[loop] = (reader, writer)  # kept open for the loop's life
    return True


def _drain(reader: socket.socket) -> None:
    """Read what the signal handler wrote (the signal numbers: nothing to do with them here)."""
    try:
        while reader.recv(4096):
            pass
    except (BlockingIOError, InterruptedError):
        pass
