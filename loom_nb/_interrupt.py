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
per event loop, only in an IPython kernel's main thread (a kernel application started, not a
process that merely imported ipykernel), and never over a wakeup socket someone else set
(asyncio's own ``add_signal_handler`` sets one: signals already wake that loop). It changes no
signal's handler. The socket pair is made once per process and never closed: a closed one's fd
number could be reused by another file, which the signal handler would then write into.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
import threading
import weakref

__all__ = ["wake_on_signals"]

_sockets: tuple[socket.socket, socket.socket] | None = None
"""The process's wakeup socket pair (reader, writer): made once, never closed, so the fd the
signal handler writes to is never reused by another file while it is set."""
_watched: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
"""The loops that read the pair (one in a kernel: its main loop)."""


def in_kernel() -> bool:
    """Whether this process is an IPython kernel (its application started, not only imported)."""
    app = sys.modules.get("ipykernel.kernelapp")
    return app is not None and bool(app.IPKernelApp.initialized())


def wake_on_signals() -> bool:
    """Make signals wake the running event loop of an IPython kernel's main thread (once per
    loop); anywhere else (a script, another thread, no running loop) do nothing.

    Returns whether signals wake the loop now through the socket installed here.
    """
    global _sockets
    if threading.current_thread() is not threading.main_thread() or not in_kernel():
        return False
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False
    if _sockets is None:
        reader, writer = socket.socketpair()
        reader.setblocking(False)
        writer.setblocking(False)
        _sockets = (reader, writer)
    reader, writer = _sockets
    try:
        previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    except (ValueError, OSError):  # not the main interpreter
        return False
    if previous not in (-1, writer.fileno()):
        try:
            signal.set_wakeup_fd(previous)  # someone else's: their loop is woken already
            return False
        except (ValueError, OSError):  # theirs is gone (closed): ours stays
            pass
    if loop not in _watched:
        loop.add_reader(reader.fileno(), _drain, reader)
        _watched.add(loop)
    return True


def _drain(reader: socket.socket) -> None:
    """Read what the signal handler wrote (the signal numbers: nothing to do with them here)."""
    try:
        while reader.recv(4096):
            pass
    except (BlockingIOError, InterruptedError):
        pass
