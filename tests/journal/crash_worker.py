"""A multi-step durable run for the crash tests, run as a subprocess.

``python crash_worker.py JOURNAL EFFECTS STEPS [KILL_AT PHASE]`` runs execution "crash": STEPS
steps (even ones synchronous, odd ones async), each appending one line to EFFECTS (its side
effect) and returning a value chained from the previous output, then completes with the final
value and prints it as JSON. With KILL_AT, the process SIGKILLs itself at that step, at PHASE:
``before`` (the step's fn starts, before its effect), ``effect`` (after the effect, before the
step returns) or ``after`` (once execute has returned).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from typing import Any

from loom_nb.journal import Journal


def chained(previous: int, step: int) -> int:
    """The value step ``step`` computes from the previous one (what the run must end with)."""
    return (previous * 31 + step) % 1_000_003


def expected_result(steps: int) -> int:
    """The final value of an uninterrupted run."""
    value = 7
    for step in range(steps):
        value = chained(value, step)
    return value


async def main(journal_path: str, effects: str, steps: int, kill_at: int, phase: str) -> None:
    journal = Journal(journal_path)
    execution = journal.execution("crash")

    def effect(step: int) -> None:
        fd = os.open(effects, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        os.write(fd, f"{step}\n".encode())
        os.close(fd)

    def die(step: int, at: str) -> None:
        if step == kill_at and phase == at:
            os.kill(os.getpid(), signal.SIGKILL)

    def sync_step(payload: dict[str, Any]) -> int:
        die(payload["step"], "before")
        effect(payload["step"])
        die(payload["step"], "effect")
        return chained(payload["value"], payload["step"])

    async def async_step(payload: dict[str, Any]) -> int:
        await asyncio.sleep(0)
        return sync_step(payload)

    value = 7
    for step in range(steps):
        fn = sync_step if step % 2 == 0 else async_step
        value = await execution.execute(f"step-{step}", fn, {"step": step, "value": value})
        die(step, "after")
    await execution.complete(value)
    print(json.dumps({"result": execution.output}))


if __name__ == "__main__":
    path, effects_path, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    at = int(sys.argv[4]) if len(sys.argv) > 4 else -1
    when = sys.argv[5] if len(sys.argv) > 5 else ""
    asyncio.run(main(path, effects_path, count, at, when))
