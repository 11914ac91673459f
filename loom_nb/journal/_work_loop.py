"""``work_items``: one worker's loop over a work queue, items run concurrently under their claims (issue 32).

A worker claims as many items as it has free slots (``concurrency``), runs each through
``run(item)`` inside the item's fence (``queue.fenced``: the item's execution, named by
``execution_of(item)``, accepts writes only while the claim holds), and settles it: ``complete``
when ``run`` returned, ``fail`` with the error when it raised. A heartbeat extends the leases of
the items in flight every third of a lease, so only a worker that died or stalled loses its
items. What can happen to an item besides:

- its claim was lost (the worker stalled past its lease and another claimed the item): the
  fence refused the step's outcome, and the item is left to its new holder; the stalled
  worker itself never claims an item it is still running (``claim(..., running=...)``): its
  heartbeat renews that claim instead;
- its execution is held by another live writer (``ExecutionBusyError``, the previous holder
  still finishing after its lease ran out), or this process still runs it under an earlier
  claim (the fence refuses a second: ``execution_fenced``): the item is given back untried,
  claimable again after half a lease.

The loop ends when the queue is finished (nothing pending or claimed by anyone), or, with
``wait=False``, as soon as it finds nothing to claim; or when ``stop`` is set (the items in
flight are finished first).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from loom_nb.errors import ExecutionBusyError, JournalError
from loom_nb.journal._work import Claim, WorkQueue

__all__ = ["WorkReport", "work_items", "worker_id"]


@dataclass
class WorkReport:
    """What one worker's loop did: the items it completed, failed, lost and gave back."""

    worker: str
    """The worker's id."""
    done: list[str] = field(default_factory=list)
    """Items it completed."""
    failed: list[str] = field(default_factory=list)
    """Items it failed (``run`` raised)."""
    lost: list[str] = field(default_factory=list)
    """Items whose claim another worker took over while it ran them."""
    released: list[str] = field(default_factory=list)
    """Items given back untried: another live writer held their execution, or this process
    still ran them under an earlier claim."""


def worker_id() -> str:
    """A new worker id: host, pid and a random suffix (unique across processes and loops)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


async def work_items(
    queue: WorkQueue,
    run: Callable[[str], Awaitable[object]],
    *,
    execution_of: Callable[[str], str],
    worker: str | None = None,
    concurrency: int = 8,
    lease: float = 30.0,
    max_attempts: int | None = None,
    wait: bool = True,
    poll: float = 0.5,
    stop: asyncio.Event | None = None,
) -> WorkReport:
    """Work ``queue``'s items with up to ``concurrency`` in flight; see the module docstring."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise JournalError(
            f"concurrency must be an int of at least 1, not {concurrency!r}.",
            code="invalid_argument",
        )
    report = WorkReport(worker or worker_id())
    flying: dict[asyncio.Task[None], Claim] = {}
    beat = asyncio.ensure_future(_heartbeat(queue, flying, lease))
    try:
        while True:
            free = concurrency - len(flying)
            stopping = stop is not None and stop.is_set()
            claims = []
            if free and not stopping:
                claims = queue.claim(
                    report.worker,
                    limit=free,
                    lease=lease,
                    max_attempts=max_attempts,
                    running=[claim.item for claim in flying.values()],
                )
            for claim in claims:
                task = asyncio.ensure_future(_one(queue, claim, run, execution_of, report, lease))
                flying[task] = claim
            if not flying:
                if stopping or not wait or queue.counts().finished:
                    return report
                await asyncio.sleep(poll)  # others hold the rest: theirs may yet expire
                continue
            if claims and len(flying) < concurrency:
                continue  # more may be claimable right away
            finished, _ = await asyncio.wait(
                flying, timeout=poll, return_when=asyncio.FIRST_COMPLETED
            )
            for task in finished:
                del flying[task]
                task.result()
    finally:
        beat.cancel()
        for task in flying:
            task.cancel()
        if flying:
            await asyncio.gather(*flying, return_exceptions=True)
        with contextlib.suppress(asyncio.CancelledError):
            await beat


async def _one(
    queue: WorkQueue,
    claim: Claim,
    run: Callable[[str], Awaitable[object]],
    execution_of: Callable[[str], str],
    report: WorkReport,
    lease: float,
) -> None:
    """Run one claimed item inside its fence and settle it."""
    item = claim.item
    try:
        try:
            with queue.fenced(claim, execution_of(item)):
                await run(item)
        except asyncio.CancelledError:
            with contextlib.suppress(JournalError):  # stopped: another worker may take it now
                queue.release(claim)
            raise
        except Exception as exc:
            code = exc.code if isinstance(exc, JournalError) else None
            if isinstance(exc, ExecutionBusyError) and code == "claim_lost":
                report.lost.append(item)
            elif isinstance(exc, ExecutionBusyError) or code == "execution_fenced":
                # Another live writer holds the execution, or this process still runs the item
                # under another claim (another loop of it, e.g. a second map joining the same
                # queue; one loop never claims what it runs): given back untried.
                queue.release(claim, delay=lease / 2)
                report.released.append(item)
            else:
                queue.fail(claim, f"{type(exc).__name__}: {exc}")
                report.failed.append(item)
            return
        queue.complete(claim)
        report.done.append(item)
    except ExecutionBusyError as exc:  # settling found the claim taken over
        if exc.code != "claim_lost":
            raise
        report.lost.append(item)


async def _heartbeat(
    queue: WorkQueue, flying: dict[asyncio.Task[None], Claim], lease: float
) -> None:
    """Extend the claims in flight every third of a lease (best effort: a failed beat is retried)."""
    while True:
        await asyncio.sleep(lease / 3)
        claims = list(flying.values())
        with contextlib.suppress(JournalError):
            queue.extend(claims, lease=lease)
