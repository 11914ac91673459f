"""Several processes working one map: ``chat.map(..., join=True)`` and ``loom-nb map work ID`` (issue 32).

A map's items are also a work queue of the journal (``journal.work_queue(map id)``, keys ``"0"``,
``"1"`` ...). A process that joins the map puts the items the journal has not finished into the
queue (idempotent: every joiner adds the same keys) and then claims them a few at a time
(``work_items``): on PostgreSQL with ``FOR UPDATE SKIP LOCKED``, so two processes never take the
same item, and under a lease, so the items of a process that died (SIGKILL, a crashed kernel)
return to the pool once its lease ran out (at once on its own host, where its pid is gone). While a process runs an item, its claim fences the
item's execution: a process that stalled past its lease, whose item another took over, is
refused when it journals the answer, so an item's model call completes once in the journal.

Who joins. ``chat.map(..., join=True)`` in any kernel (the first one too), and
``loom-nb map work ID`` (``work_map``), which rebuilds the map from its journaled definition
(``load_plan``) and needs only a provider. On a PostgreSQL journal ``join`` is the default
(``join=None``): a map there is always open to workers. On SQLite it is off by default (one
process runs the map, the benchmark's fast path), and ``join=True`` works the same, between the
processes of one machine.

What the first kernel shows. Its progress counts every process's items: the queue's counts
(``queue.follow``, woken by LISTEN/NOTIFY on PostgreSQL) set done and failed, its own answers add
their tokens and cost. When the queue is finished it reads the answers the others journaled
(``step_outcomes``, a few queries) so that its ``MapResult`` holds every item; ``ran`` counts
the items this process called the model for, ``served`` the rest.

A rate limit (429) on an item is waited out (the vendor's Retry-After, else a doubling backoff)
and the item sent again, up to ``MAX_THROTTLED`` times, within its claim; in a kernel the map's
pacer also halves how many calls are in flight, as without workers (``_map_pace``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING

from loom_nb.chat._map_item import STOPPED_TYPES, item_effect, recorded_error, run_item, served
from loom_nb.chat._map_pace import THROTTLED, retry_after_of
from loom_nb.chat._map_plan import MapPlan, load_plan
from loom_nb.content import LlmResponse
from loom_nb.errors import BudgetExceededError, ConfigurationError, ExecutionBusyError, LoomError
from loom_nb.journal import Journal, LlmEffect, WorkCounts, WorkQueue, WorkReport, work_items
from loom_nb.journal._outcomes import step_outcomes

if TYPE_CHECKING:
    from loom_nb.chat._map import MapRun
    from loom_nb.providers import LlmProvider
    from loom_nb.store import ContentStore

__all__ = ["DEFAULT_LEASE", "MAX_THROTTLED", "enqueue", "join_map", "joins", "work_map"]

MAX_THROTTLED = 8
"""How many times one item is sent again after a rate limit before it counts as failed."""
DEFAULT_LEASE = 30.0
"""Seconds a claim on an item lasts without a heartbeat (a dead process's items wait this long)."""


def joins(journal: Journal, join: bool | None) -> bool:
    """Whether a map on ``journal`` is worked through its queue: ``join``, else on PostgreSQL."""
    if join is None:
        return journal.path.startswith(("postgresql://", "postgres://"))
    if not isinstance(join, bool):
        raise ConfigurationError(
            f"chat.map: join is True, False or None (automatic), not {join!r}.",
            code="invalid_argument",
        )
    return join


def key_of(index: int) -> str:
    """The queue key of item ``index``."""
    return str(index)


def enqueue(journal: Journal, plan: MapPlan, *, retry_failed: bool = False) -> WorkQueue:
    """The map's queue, holding every item the journal has not finished (failed items only
    with ``retry_failed``; an item stopped in flight or by a spending limit always)."""
    ids = [plan.item_id(index) for index in range(len(plan))]
    outcomes = step_outcomes(journal, ids)
    todo = []
    for index, execution_id in enumerate(ids):
        outcome = outcomes.get(execution_id)
        if outcome is None or outcome.state == "started":
            todo.append(key_of(index))
        elif outcome.state == "failed":
            stopped = (outcome.error or {}).get("type") in STOPPED_TYPES
            if stopped or retry_failed:
                todo.append(key_of(index))
    queue = journal.work_queue(plan.map_id)
    queue.add(todo)
    queue.retry_failed(todo)  # failed in the queue, but the journal says they run again
    return queue


async def attempt(plan: MapPlan, index: int, journal: Journal, effect: LlmEffect) -> LlmResponse:
    """Run item ``index`` (``run_item``), waiting out rate limits and sending it again."""
    tries = 0
    while True:
        try:
            return await run_item(plan, index, journal=journal, effect=effect)
        except LoomError as exc:
            tries += 1
            if exc.code not in THROTTLED or tries > MAX_THROTTLED:
                raise
            hinted = retry_after_of(exc)
            await asyncio.sleep(hinted if hinted is not None else min(60.0, 0.5 * 2 ** (tries - 1)))


async def work_map(
    journal: Journal,
    map_id: str,
    provider: LlmProvider,
    *,
    store: ContentStore | None = None,
    concurrency: int = 8,
    lease: float = DEFAULT_LEASE,
    worker: str | None = None,
    poll: float = 0.5,
) -> WorkReport:
    """Work map ``map_id`` of ``journal`` with ``provider`` until no item is left to anyone.

    What ``loom-nb map work ID`` runs: the map's definition comes from the journal
    (``load_plan``); failed items stay failed (the kernel that made the map decides about
    ``retry_failed``).
    """
    plan = load_plan(journal, map_id)
    effect = item_effect(plan, provider, store=store)
    queue = enqueue(journal, plan)

    async def run(key: str) -> None:
        await attempt(plan, int(key), journal, effect)

    return await work_items(
        queue,
        run,
        execution_of=lambda key: plan.item_id(int(key)),
        worker=worker,
        concurrency=concurrency,
        lease=lease,
        poll=poll,
    )


async def join_map(run: MapRun, todo: list[int], *, lease: float = DEFAULT_LEASE) -> None:
    """``MapRun._drive`` for a map open to other processes (see the module docstring)."""
    plan, chat = run.plan, run.chat
    journal = chat.journal
    queue = enqueue(journal, plan, retry_failed=run.retry_failed)
    effect = item_effect(plan, chat.provider, store=chat._store, budget=run.budget)
    progress = run.progress
    settled_before = set(range(len(plan))) - set(todo)
    base = (progress.done, progress.failed)
    loop = asyncio.get_running_loop()
    halt = asyncio.Event()
    following = True

    def show(counts: WorkCounts) -> None:  # on the loop: everyone's items, from the queue
        if not following:  # a look that landed as the map ended: the result's counts stand
            return
        progress.done, progress.failed = base[0] + counts.done, base[1] + counts.failed
        progress.update()

    async def one(key: str) -> None:
        index, tries, pacer = int(key), 0, run.pacer
        while True:
            window = await pacer.acquire()  # the map's in-flight limit, halved on a 429
            if pacer.closed:  # stopped
                pacer.release(window, ok=False)
                raise asyncio.CancelledError
            try:
                response = await run_item(
                    plan, index, journal=journal, effect=effect, redo=index in run._redo
                )
            except ExecutionBusyError:
                pacer.release(window, ok=False)
                raise  # another process holds the item: it answers it
            except BudgetExceededError as exc:  # a spending limit: claim nothing more
                pacer.release(window, ok=False)
                run._halted = exc
                halt.set()
                run._failed(index, exc, live=True)
                raise
            except LoomError as exc:
                tries += 1
                if exc.code in THROTTLED and tries <= MAX_THROTTLED:
                    pacer.release(window, throttled=exc, ok=False)
                    continue
                pacer.release(window, ok=False)
                run._failed(index, exc, live=True)
                progress.update()
                raise
            except BaseException:
                pacer.release(window, ok=False)
                raise
            pacer.release(window, ok=True)
            run._answered(index, response, live=True)
            run._sync_pacer()
            progress.update()
            return

    follow = queue.follow(lambda counts: loop.call_soon_threadsafe(show, counts))
    worker = asyncio.ensure_future(
        work_items(
            queue,
            one,
            execution_of=lambda key: plan.item_id(int(key)),
            concurrency=run.pacer.ceiling,
            lease=lease,
            poll=min(1.0, lease / 4),
            stop=halt,
        )
    )
    run._tasks.add(worker)
    try:
        await worker
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise  # the map's own task was cancelled, not stopped
    finally:
        run._tasks.discard(worker)
        follow.stop()
        following = False
    _gather(run, [i for i in todo if i not in settled_before])


def _gather(run: MapRun, indices: Iterable[int]) -> None:
    """Serve the items other processes settled (their answers or errors, from the journal)."""
    plan = run.plan
    left = [i for i in indices if run.responses[i] is None and i not in run.errors]
    outcomes = step_outcomes(run.chat.journal, [plan.item_id(i) for i in left])
    for index in left:
        outcome = outcomes.get(plan.item_id(index))
        if outcome is None or outcome.state == "started":
            continue  # nobody finished it (the map was stopped): ``go`` says so
        if outcome.state == "completed":
            try:
                response = served(plan, index, outcome.output)
            except LoomError as exc:
                run._failed(index, exc, live=False)
            else:
                run._answered(index, response, live=False)
            continue
        error = recorded_error(outcome, index)
        if error is not None:
            run._failed(index, error, live=False)
    # The counts were the queue's while it ran; from here they are this result's.
    progress = run.progress
    progress.done = sum(response is not None for response in run.responses)
    progress.failed = len(run.errors)
