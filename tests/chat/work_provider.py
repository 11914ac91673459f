"""The provider of the map-worker tests: ``echo <text>``, each call logged, optionally SIGKILLing.

``make()`` is what ``loom-nb map work ID --provider tests.chat.work_provider:make`` builds in a
worker process; the kernel's side of a test builds the same with ``Logged(log)``. Each call
appends ``start <text> <pid>`` to the log, waits a little, and ``end <text> <pid>`` when it
answers (O_APPEND lines: atomic between processes). ``$LOOM_TEST_WORK_LOG`` names the log in a
worker, ``$LOOM_TEST_WORK_KILL_AT`` the call during which the worker SIGKILLs itself, and
``$LOOM_TEST_WORK_GATE`` a file each call waits for (after logging its start) before it answers:
the test opens the gate once every worker has the calls in flight it needs, so that a slow
start under load (one worker answering most items before another began) cannot take a
worker's chance to reach its ``kill_at``. A kernel's ``Logged(log, hold=...)`` keeps each call
from answering until ``hold()`` is true (or ``HOLD`` seconds passed), so that a test can see
what the kernel shows while others answer, however the machine schedules the processes.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from collections.abc import Callable
from typing import Any

from loom_nb import LlmRequest, LlmResponse, ScriptedProvider, Usage, text_of

HOLD = 120.0
"""The longest a held call waits for its ``hold()`` (then it answers, and the test says why)."""


def _append(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


class Logged:
    """Answers ``echo <last user text>``; logs each call's start and end; may SIGKILL its process."""

    name = "echo"
    model = "echo-1"

    def __init__(
        self,
        log: str,
        *,
        kill_at: int = 0,
        delay: tuple[float, float] = (0.005, 0.03),
        gate: str | None = None,
        hold: Callable[[], bool] | None = None,
    ) -> None:
        self.capabilities = ScriptedProvider([]).capabilities
        self.log = log
        self.kill_at = kill_at
        self.delay = delay
        self.gate = gate
        self.hold = hold
        self.calls = 0

    async def complete(self, request: LlmRequest, **_options: Any) -> LlmResponse:
        self.calls += 1
        nth = self.calls
        text = text_of(request.messages[-1].content)  # raw-content: the item's text
        _append(self.log, f"start {text} {os.getpid()}")
        # The gate is a file another process creates: looked at, not awaited.
        while self.gate is not None and not os.path.exists(self.gate):  # noqa: ASYNC110, ASYNC240
            await asyncio.sleep(0.01)
        await asyncio.sleep(random.uniform(*self.delay))
        deadline = time.monotonic() + HOLD
        # A condition of the test's progress view, looked at between sleeps (no event to await).
        while self.hold is not None and not self.hold() and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.02)
        if nth == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        _append(self.log, f"end {text} {os.getpid()}")
        return LlmResponse(
            content=f"echo {text}",
            stop_reason="end_turn",
            usage=Usage(input_tokens=3, output_tokens=2),
        )

    def stream(self, request: LlmRequest, **_options: Any) -> Any:
        raise NotImplementedError("the worker tests do not stream")


def make() -> Logged:
    """The provider of a worker process (``--provider tests.chat.work_provider:make``)."""
    return Logged(
        os.environ["LOOM_TEST_WORK_LOG"],
        kill_at=int(os.environ.get("LOOM_TEST_WORK_KILL_AT", "0")),
        gate=os.environ.get("LOOM_TEST_WORK_GATE"),
    )
