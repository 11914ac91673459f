"""A run-time mend for ipykernel 7.4.0's stale shell parent, which leaves a cell at ``[*]``.

ipykernel 7.4.0 handles a comm message that reaches the main shell while an awaiting cell holds
it beside that cell (so a widget's Stop button works mid-cell). Around that handling,
``Kernel.shell_main`` saves the shell's parent request and, in a ``finally``, puts it back, in the
one context every main-shell request shares. When the cell ends and the next queued cell starts
before the comm message is done, that ``finally`` gives the *next* cell the ended cell's
request as parent: the next cell's idle status then names the cell before, and JupyterLab, which
waits for an idle carrying its own request's id, never marks the cell done. A widget front end
that sends a message as a cell ends (the transcript's splices handshake when its module loads, a
click) makes "Run All" stall on a finished cell on a loaded machine.

The comm message's own handling runs in a copy of the shared context, so the shared parent it
"restores" was never changed by it: the restore can only be stale or a no-op. The mend makes it
always right: it watches ``dispatch_shell`` calls made with ``concurrent=True`` (only that comm
path makes them) for the parent current when they start, and when ``set_parent`` is then handed
that very parent object back while another request has since become the shell's parent, it keeps
the current one (and refreshes the kernel's snapshot for threads from it) instead.

It is applied once per kernel, by the first loom_nb widget made in it, and only to a kernel whose
class runs exactly the faulty ``shell_main`` (recognized by the SHA-256 of its source), so a fixed
ipykernel is left alone. ``LOOM_NB_KEEP_IPYKERNEL=1`` turns it off.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import textwrap
import threading
import types
from typing import Any

__all__ = ["FAULTY_SHELL_MAIN", "faulty", "mend_kernel", "mend_running_kernel"]

FAULTY_SHELL_MAIN = frozenset({"34c43e31dd6421b3e260f5d97ca63700a34b64ec54bcbfbfc56d48ebfff82e25"})
"""SHA-256 of the dedented source of ``Kernel.shell_main`` in the ipykernel releases with the
fault (7.4.0; 7.3.0 and earlier do not handle comm messages beside a cell)."""

_MENDED = "_loom_nb_parent_mended"
"""The instance attribute that marks a kernel already mended."""


_KNOWN: dict[type, bool] = {}
"""``faulty``'s answer per class (a source is read once)."""


def faulty(kernel_class: type) -> bool:
    """Whether ``kernel_class`` runs the faulty ``shell_main`` (its source's hash is known)."""
    known = _KNOWN.get(kernel_class)
    if known is None:
        known = _KNOWN[kernel_class] = _hash_of(kernel_class) in FAULTY_SHELL_MAIN
    return known


def _hash_of(kernel_class: type) -> str | None:
    """SHA-256 of ``kernel_class.shell_main``'s dedented source (None: none to read)."""
    shell_main = getattr(kernel_class, "shell_main", None)
    if shell_main is None:
        return None
    try:
        source = textwrap.dedent(inspect.getsource(shell_main))
    except (OSError, TypeError):  # no source to compare (a frozen or compiled install)
        return None
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def mend_kernel(kernel: Any) -> bool:
    """Mend ``kernel`` (an ipykernel ``Kernel``) when its class has the fault; True when it is
    mended (now or before), False when it is left as it is (no fault, or turned off)."""
    if getattr(kernel, _MENDED, False):
        return True
    if os.environ.get("LOOM_NB_KEEP_IPYKERNEL") == "1" or not faulty(type(kernel)):
        return False
    dispatch_shell = kernel.dispatch_shell
    set_parent = kernel.set_parent
    saved: list[object] = []  # the parents concurrent dispatches started under, to be put back
    lock = threading.Lock()  # subshell threads dispatch and set parents too

    async def mended_dispatch_shell(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("concurrent"):
            return await dispatch_shell(*args, **kwargs)
        # shell_main saved this very object before it started the task (the task's context is
        # a copy of shell_main's, so its parent is the same object).
        parent = self.get_parent("shell")
        with lock:
            saved.append(parent)
        return await dispatch_shell(*args, **kwargs)

    def mended_set_parent(self: Any, ident: Any, parent: Any, channel: str = "shell") -> None:
        if channel == "shell" and saved:
            with lock:
                index = next((i for i, earlier in enumerate(saved) if earlier is parent), None)
                if index is not None:
                    del saved[index]
            if index is not None:  # the comm path putting back the parent it started under
                current = self.get_parent("shell")
                if current is not parent:  # another request became the parent meanwhile
                    ident = self._get_shell_context_var(self._shell_parent_ident)
                    parent = current
        set_parent(ident, parent, channel=channel)

    kernel.dispatch_shell = types.MethodType(mended_dispatch_shell, kernel)
    kernel.set_parent = types.MethodType(mended_set_parent, kernel)
    setattr(kernel, _MENDED, True)
    return True


def mend_running_kernel() -> bool:
    """Mend the ipykernel this code runs in, if any and if faulty (``mend_kernel``); False
    outside a kernel."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        return False
    return mend_kernel(kernel)
