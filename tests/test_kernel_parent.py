"""The ipykernel fault behind the saved-chat browser test's expected failure, without a browser.

ipykernel 7.4 handles a comm message that reaches the main shell while an awaiting cell holds it
beside that cell; around it, it saves the shell's parent request and puts it back afterwards, in
the one context all the main shell's requests share. When the cell ends and the next queued cell
starts before the comm message is done, the next cell's parent is overwritten with the ended
cell's request: its idle status then names the cell before, and JupyterLab, waiting for an idle
with its own request's id, never marks it done. A widget front end that sends a message as a cell
ends (the chat's splices handshake, under load) makes a Lab page stall on its last cell.

The first test expects the fault in a kernel as ipykernel ships it: it lines the kernel's tasks
up by timing, which most runs (not all) reproduce, so it is not strict; once a fixed ipykernel
makes it pass every time, the expected failure can go. The second runs the same sequence in a
kernel loom_nb has mended (``loom_nb.widgets._kernel_parent``, what making any loom_nb widget does
in a faulty kernel) and requires every cell's idle to be its own.
"""

from __future__ import annotations

import time
from typing import Any

import pytest


def _idle_parents(client: Any, wanted: set[str]) -> list[str | None]:
    """The parents of the idle statuses the kernel sends, until each of ``wanted`` has had one or
    the kernel has gone quiet for 3 s (how a lost idle shows)."""
    parents: list[str | None] = []
    while not wanted.issubset(parents):
        try:
            message = client.get_iopub_msg(timeout=3)
        except Exception:  # queue.Empty: the kernel has gone quiet
            break
        if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
            parents.append(message["parent_header"].get("msg_id"))
    return parents


def _lost_idles(setup: str) -> list[int]:
    """Run the sequence in a fresh kernel after ``setup``; the await counts after which the
    second cell got no idle status of its own."""
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3")
    lost: list[int] = []
    try:
        reply = client.execute_interactive(setup + "\nimport asyncio, time", timeout=60)
        assert reply["content"]["status"] == "ok", reply["content"]  # a first cell differs too
        # The awaits after the block that line the kernel's tasks up (4 here), twice over.
        for yields in (3, 4, 5, 3, 4, 5):
            first = client.execute(
                f"time.sleep(1.5)\nfor _ in range({yields}):\n    await asyncio.sleep(0)"
            )
            second = client.execute("await asyncio.sleep(0.1)")
            time.sleep(0.3)  # the first cell blocks its loop: the comm message waits for it
            comm = client.session.msg("comm_msg", {"comm_id": "none", "data": {}})
            client.shell_channel.send(comm)
            parents = _idle_parents(client, {first, second})
            assert first in parents
            if second not in parents:
                lost.append(yields)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    return lost


@pytest.mark.slow
@pytest.mark.xfail(
    reason="ipykernel 7.4: a comm message as an awaiting cell ends gives the next cell a stale "
    "parent, so its idle status names the cell before",
    strict=False,  # it lines the kernel's tasks up by their timing: most runs, not all
)
def test_a_comm_message_as_a_cell_ends_leaves_the_next_cells_idle_its_own() -> None:
    """A comm message that arrives while a cell blocks its loop, handled as the cell ends (after
    a few more awaits) and the next cell starts: each cell still gets its own idle status."""
    lost = _lost_idles("")
    assert lost == [], f"the second cell got no idle status of its own after {lost} awaits"


@pytest.mark.slow
def test_in_a_mended_kernel_every_cell_gets_its_own_idle() -> None:
    """The same sequence after loom_nb has mended the kernel (when ipykernel has the fault; a
    fixed one is left alone and must pass as it is): no cell loses its idle status."""
    lost = _lost_idles(
        "from loom_nb.widgets._kernel_parent import faulty, mend_running_kernel\n"
        "from ipykernel.kernelbase import Kernel\n"
        "assert mend_running_kernel() == faulty(Kernel)"
    )
    assert lost == [], f"the second cell got no idle status of its own after {lost} awaits"
