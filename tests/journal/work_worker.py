"""One of several worker processes working one queue, for the work-queue tests.

``python work_worker.py JOURNAL QUEUE CALLS [--kill-at N] [--concurrency C] [--lease S] [--hold S]``
works queue QUEUE of the journal at JOURNAL (``work_items``): each item runs one journaled step,
``call``, in execution ``QUEUE/ITEM``, whose function stands for a provider call: it appends
``start ITEM PID`` to CALLS, waits a little, and appends ``end ITEM PID`` when the call
completes. With ``--kill-at N`` the process SIGKILLs itself in the middle of its Nth call
(after ``start``, before ``end``). With ``--hold S`` each call takes S seconds (a slow worker); with ``--stop-at N`` the process
SIGSTOPs itself in its Nth call (the test continues it later): ``--stop-when before`` the step's
start is journaled (before the call goes out), or ``after`` it (the default).
Workers start together: each touches ``CALLS.ready.PID`` and waits for ``CALLS.go``; each call
then waits (after logging its start) for ``CALLS.open``, which the test makes once every worker
has the calls out it needs (its ``--kill-at`` for one that is to die mid-call), so that a worker
starved at the start cannot find the items all answered by the others.
Prints one JSON line with what the loop did.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

from loom_nb.journal import Journal, work_items


def _append(path: str, line: str) -> None:
    # O_APPEND writes of one short line are atomic between processes.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("journal")
    parser.add_argument("queue")
    parser.add_argument("calls")
    parser.add_argument("--kill-at", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--lease", type=float, default=1.0)
    parser.add_argument("--hold", type=float, default=0.0)
    parser.add_argument("--stop-at", type=int, default=0)
    parser.add_argument("--stop-when", choices=("before", "after"), default="after")
    args = parser.parse_args()
    journal = Journal(args.journal, lease_ttl=args.lease)
    queue = journal.work_queue(args.queue)
    made = [0]
    pid = os.getpid()

    async def call(item: str) -> dict[str, Any]:
        made[0] += 1
        nth = made[0]
        _append(args.calls, f"start {item} {pid}")
        if nth == args.stop_at and args.stop_when == "before":
            # Stalled before the call went out: its step's start is not journaled yet.
            os.kill(pid, signal.SIGSTOP)
        await asyncio.sleep(0.001)  # the first suspension: the step's start is journaled
        if nth == args.stop_at and args.stop_when == "after":
            # Stalled with the call out (a long pause); no transaction is open here.
            os.kill(pid, signal.SIGSTOP)
        while not os.path.exists(f"{args.calls}.open"):  # noqa: ASYNC110, ASYNC240 (another process makes it)
            await asyncio.sleep(0.01)
        await asyncio.sleep(args.hold or random.uniform(0.005, 0.03))
        if nth == args.kill_at:
            os.kill(pid, signal.SIGKILL)
        _append(args.calls, f"end {item} {pid}")
        return {"item": item, "pid": pid}

    async def run(item: str) -> None:
        execution = journal.execution(f"{args.queue}/{item}")
        await execution.execute("call", call, item)
        await execution.complete({"item": item})

    # Start together: say ready, then wait for the test's go (so none finishes alone).
    Path(f"{args.calls}.ready.{pid}").touch()
    while not Path(f"{args.calls}.go").exists():
        time.sleep(0.01)
    report = asyncio.run(
        work_items(
            queue,
            run,
            execution_of=lambda item: f"{args.queue}/{item}",
            concurrency=args.concurrency,
            lease=args.lease,
            poll=0.1,
        )
    )
    journal.close()
    print(
        json.dumps(
            {
                "pid": pid,
                "done": len(report.done),
                "failed": report.failed,
                "lost": report.lost,
                "released": report.released,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
