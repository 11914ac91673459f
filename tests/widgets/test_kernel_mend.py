"""The run-time mend of ipykernel 7.4.0's stale shell parent (``loom_nb.widgets._kernel_parent``).

The real kernel is tested end to end in ``tests/test_kernel_parent.py``; here the mend's rule
runs on a stand-in kernel with the same parent bookkeeping (a context variable, as ipykernel
keeps it), and its guards (only a faulty class, once, not when turned off) on classes of both
kinds.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import pytest

from loom_nb.widgets import _kernel_parent
from loom_nb.widgets._kernel_parent import faulty, mend_kernel, mend_running_kernel


class StandIn:
    """The parts of ipykernel's ``Kernel`` the mend uses, with its parent kept the same way."""

    def __init__(self) -> None:
        self._shell_parent: contextvars.ContextVar[Any] = contextvars.ContextVar("parent")
        self._shell_parent_ident: contextvars.ContextVar[Any] = contextvars.ContextVar("ident")
        self._shell_parent.set({})
        self._shell_parent_ident.set(b"")
        self.snapshot: contextvars.Context = contextvars.copy_context()
        self.dispatched: list[Any] = []

    async def shell_main(self, msg: Any) -> None:
        """ipykernel 7.4.0's comm path: save, dispatch in a copied context, put back."""
        shell_parent = self.get_parent("shell")
        shell_ident = self._get_shell_context_var(self._shell_parent_ident)
        try:
            task = asyncio.create_task(
                self.dispatch_shell(msg, concurrent=True), context=contextvars.copy_context()
            )
            await task
        finally:
            self.set_parent(shell_ident, shell_parent, channel="shell")

    async def dispatch_shell(self, msg: Any, *, concurrent: bool = False) -> None:
        self.set_parent(b"comm", msg, channel="shell")
        self.dispatched.append(msg)
        await msg["wait"].wait()

    def set_parent(self, ident: Any, parent: Any, channel: str = "shell") -> None:
        self._shell_parent_ident.set(ident)
        self._shell_parent.set(parent)
        self.snapshot = contextvars.copy_context()

    def get_parent(self, channel: str = "shell") -> Any:
        return self._get_shell_context_var(self._shell_parent)

    def _get_shell_context_var(self, var: contextvars.ContextVar[Any]) -> Any:
        return var.get()


@pytest.fixture
def faulty_stand_in(monkeypatch: pytest.MonkeyPatch) -> StandIn:
    """A stand-in whose class the mend takes for the faulty one."""
    monkeypatch.setattr(_kernel_parent, "faulty", lambda kernel_class: kernel_class is StandIn)
    monkeypatch.delenv("LOOM_NB_KEEP_IPYKERNEL", raising=False)
    return StandIn()


async def _in(context: contextvars.Context, coroutine: Any) -> Any:
    """Run ``coroutine`` as a task in ``context`` (ipykernel runs every main-shell request so)."""
    return await asyncio.create_task(coroutine, context=context)


async def _set(kernel: StandIn, ident: bytes, parent: Any) -> None:
    kernel.set_parent(ident, parent)


async def _cell_ends_during_a_comm(kernel: StandIn) -> tuple[Any, Any]:
    """Cell A is the parent; a comm message is handled beside it; cell B starts (in the shared
    context of the main shell's requests) before the comm handling is done. Returns the parent
    after the comm path's ``finally`` and the kernel's thread snapshot's."""
    shared = contextvars.copy_context()
    cell_a, cell_b = {"id": "A"}, {"id": "B"}
    await _in(shared, _set(kernel, b"a", cell_a))
    comm = {"id": "comm", "wait": asyncio.Event()}
    handling = asyncio.ensure_future(_in(shared, kernel.shell_main(comm)))
    for _ in range(3):
        await asyncio.sleep(0)
    assert kernel.dispatched == [comm]
    await _in(shared, _set(kernel, b"b", cell_b))  # A ended, B started
    comm["wait"].set()
    await handling
    return shared.run(kernel.get_parent, "shell"), kernel.snapshot[kernel._shell_parent]


def test_the_stand_in_has_the_fault() -> None:
    """Unmended, the comm path puts cell A back after cell B started (the fault the mend is for)."""

    async def run() -> tuple[Any, Any]:
        return await _cell_ends_during_a_comm(StandIn())

    parent, snapshot = asyncio.run(run())
    assert parent == {"id": "A"}
    assert snapshot == {"id": "A"}


def test_mended_the_cell_that_started_keeps_its_parent(faulty_stand_in: StandIn) -> None:
    """Mended, B stays the parent, and the snapshot threads read is B's too."""

    async def run() -> tuple[Any, Any]:
        assert mend_kernel(faulty_stand_in)
        return await _cell_ends_during_a_comm(faulty_stand_in)

    parent, snapshot = asyncio.run(run())
    assert parent == {"id": "B"}
    assert snapshot == {"id": "B"}


def test_mended_a_comm_within_one_cell_still_puts_the_cell_back(faulty_stand_in: StandIn) -> None:
    """No cell started meanwhile: the cell's parent and the thread snapshot are the cell's (the
    comm handling's own parent never leaks), and later plain set_parent calls work as before."""
    kernel = faulty_stand_in
    assert mend_kernel(kernel)

    async def run() -> None:
        cell = {"id": "A"}
        kernel.set_parent(b"a", cell)
        comm = {"id": "comm", "wait": asyncio.Event()}
        comm["wait"].set()
        await kernel.shell_main(comm)
        assert kernel.get_parent("shell") is cell
        assert kernel.snapshot[kernel._shell_parent] is cell
        later = {"id": "C"}
        kernel.set_parent(b"c", later)
        assert kernel.get_parent("shell") is later

    asyncio.run(run())


def test_mending_is_once_and_only_for_a_faulty_class(
    faulty_stand_in: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second mend changes nothing; a class without the fault and a kernel with the switch
    set are left as they are."""
    assert mend_kernel(faulty_stand_in)
    wrapped = faulty_stand_in.set_parent
    assert mend_kernel(faulty_stand_in)
    assert faulty_stand_in.set_parent == wrapped

    class Fixed(StandIn):
        pass

    fixed = Fixed()
    assert not mend_kernel(fixed)
    assert "set_parent" not in vars(fixed)

    monkeypatch.setenv("LOOM_NB_KEEP_IPYKERNEL", "1")
    kept = StandIn()
    assert not mend_kernel(kept)
    assert "set_parent" not in vars(kept)


def test_faulty_knows_ipykernel_7_4_0_by_its_source() -> None:
    """The installed ipykernel's Kernel is recognized exactly when it is a release with the
    concurrent comm path whose source hash is listed; a class of another source is not."""
    kernelbase = pytest.importorskip("ipykernel.kernelbase")
    import inspect

    source = inspect.getsource(kernelbase.Kernel.shell_main)
    has_comm_path = "concurrent=True" in source and "self.set_parent(shell_ident" in source
    import ipykernel

    assert faulty(kernelbase.Kernel) == (has_comm_path and ipykernel.__version__ == "7.4.0")
    assert not faulty(StandIn)


def test_outside_a_kernel_nothing_is_mended() -> None:
    """In a plain interpreter (no IPython kernel) the widgets' call is a no-op."""
    assert mend_running_kernel() is False
