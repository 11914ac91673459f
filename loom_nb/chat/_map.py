"""``chat.map(inputs)``: one independent, journaled turn per input, concurrent, resumable (issue 32).

Exploratory prompting is rarely one question: the same prompt over twenty examples, then over five
thousand rows. ``await chat.map(inputs)`` runs one turn per input, each seeded with the chat's
system prompt, tools, settings and history (``_map_plan``), and leaves the chat itself as it was:
its history, turns, usage and cost are not extended.

Durable. The map is an execution of the chat's journal, ``<chat id>/map-<key>``, whose first step
is its definition; each item is the one model step of its own execution ``<map>/<i>``
(``_map_item``), so items finish in any order without disturbing each other's replay. Before
anything runs, the outcomes of all items are read at once (``step_outcomes``): finished items are
served from the journal (no model call), failed ones are served as failed (their recorded error)
unless ``retry_failed=True``, and the rest run. Re-running the cell, or the same code in a new
process after a crash, therefore pays only for what never finished; an item in flight when the
process died left only its start and runs again.

Concurrent. At most ``concurrency`` calls are in flight; a rate limit halves that and waits for the
vendor's Retry-After, then it climbs back (``_map_pace``). A failing item is journaled as failed
and the others go on; a spending limit (``limits=``, with the chat's own limits) stops starting
new items. ``max_requests`` is kept exactly (no more calls are in flight than it has left);
tokens and cost are known only once answers arrive, so the calls in flight when a limit is
reached may take it past (as ``Limits`` says of one call, here up to ``concurrency``). Stop (the progress bar's button, ``MapProgress.stop``, an interrupt of ``map_sync``)
starts nothing more and cancels the calls in flight, which the journal records as failed (never
completed): they run again next time, and the result says ``stopped``. Cancelling the awaiting
task does the same and propagates the cancellation.

Seams. ``mode="batch"`` sends the items through the vendor's batch API instead (``MAP_MODES``,
``_map_batch``): the same plan, item executions and result, driven by one journaled batch.
``join=True`` (the default on a PostgreSQL journal) works the map with other processes through
the journal's work queue (``_map_join``, which drives the items in place of ``_drive``: each call
inside its claim's fence). A worker in another process rebuilds the plan with ``load_plan`` and
calls ``run_item``: what it finishes, this map serves.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable
from decimal import Decimal
from functools import partial
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from loom_nb.chat._cost import identity_of, price_for
from loom_nb.chat._map_item import item_effect, item_latencies, recorded_error, run_item, served
from loom_nb.chat._map_join import join_map, joins
from loom_nb.chat._map_pace import THROTTLED, Pacer
from loom_nb.chat._map_plan import MapPlan, journal_plan, make_plan, principal_of
from loom_nb.chat._map_progress import MapProgress, show_progress
from loom_nb.chat._map_result import MapResult
from loom_nb.chat._money import check_limits, make_budget
from loom_nb.chat._sync import Pending, run_blocking
from loom_nb.content import LlmResponse
from loom_nb.errors import (
    BudgetExceededError,
    ConfigurationError,
    ExecutionBusyError,
    LoomError,
)
from loom_nb.journal._open_many import open_new
from loom_nb.journal._outcomes import give_back, step_outcomes
from loom_nb.providers.batches import batch_api
from loom_nb.spending import Budget, Limits

if TYPE_CHECKING:
    from loom_nb.chat._chat import Chat

__all__ = ["MAP_MODES", "ChatMaps", "MapRun", "run_map"]

MAX_THROTTLED = 8
"""How many times one item is sent again after a rate limit before it counts as failed."""


async def _batch_map(run: MapRun) -> MapResult:
    # Imported here: the batch machinery (and the vendors' batch wire formats) loads with the
    # first batch map, not with every Chat.
    from loom_nb.chat._map_batch import run_batch_map

    return await run_batch_map(run)


MAP_MODES: dict[str, Callable[..., Awaitable[MapResult]] | None] = {
    "live": None,
    "batch": _batch_map,
}
"""Ways to run a map: ``live`` is this module's; ``batch`` drives the items through a vendor batch
API (a coroutine function taking the ``MapRun``, ``_map_batch``)."""


class ChatMaps:
    """``chat.map`` and ``chat.map_sync`` of a ``Chat`` (``class Chat(ChatMaps, ...)``)."""

    def map(
        self,
        inputs: Any,
        *,
        concurrency: int = 8,
        output_type: type[BaseModel] | None = None,
        limits: Limits | None = None,
        retry_failed: bool = False,
        mode: str = "live",
        join: bool | None = None,
        progress: Any = None,
    ) -> Pending[MapResult]:
        """One independent turn per input, journaled; returns a ``MapResult`` in input order.

        ``inputs``: strings, ``(text, *attachments)`` tuples, ``{"text", "attachments"}`` dicts, or
        a pandas Series of those. Each turn is seeded with the chat's system prompt, tools,
        settings and history; the chat itself is not extended. At most ``concurrency`` calls are
        in flight (fewer while the vendor rate-limits). ``output_type`` validates every answer
        (``result.outputs``). ``limits`` bounds what the map spends (the chat's limits apply
        too). A re-run serves finished items from the journal; failed items are served as failed
        unless ``retry_failed=True``. ``progress``: a bar in a notebook, a line in a terminal
        (None: automatic, False: none, or a view: an object whose ``show(progress)`` gets the
        ``MapProgress`` on every update). ``join=True`` works the map with other processes
        (another kernel's ``chat.map(..., join=True)``, ``loom-nb map work ID``), claiming its
        items from the journal's work queue; None (the default) joins on a PostgreSQL journal
        (``_map_join``). ``mode="batch"`` sends the items through the vendor's batch API
        (Anthropic, OpenAI: half the price, answered within 24 hours); the batch id is journaled
        and a resumed map polls the same batch (``_map_batch``). Plain code uses
        ``chat.map_sync(...)``.
        """
        chat: Chat = self  # type: ignore[assignment]
        run = run_map(
            chat,
            inputs,
            concurrency=concurrency,
            output_type=output_type,
            limits=limits,
            retry_failed=retry_failed,
            mode=mode,
            join=join,
            progress=progress,
        )
        return Pending(run, "chat.map(...)", "chat.map_sync(...)")

    def map_sync(self, inputs: Any, **options: Any) -> MapResult:
        """``chat.map(inputs, **options)`` from synchronous code; an interrupt stops the map."""
        chat: Chat = self  # type: ignore[assignment]
        holder: list[MapRun] = []
        options["_started"] = holder.append
        call = run_map(chat, inputs, **options)
        return run_blocking(call, on_interrupt=lambda: bool(holder) and holder[0].stop())


async def run_map(
    chat: Chat,
    inputs: Any,
    *,
    concurrency: int = 8,
    output_type: type[BaseModel] | None = None,
    limits: Limits | None = None,
    retry_failed: bool = False,
    mode: str = "live",
    join: bool | None = None,
    progress: Any = None,
    _started: Callable[[MapRun], None] | None = None,
) -> MapResult:
    """``chat.map`` (see ``ChatMaps.map``)."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigurationError(
            f"chat.map: concurrency is a whole number of calls >= 1, not {concurrency!r}.",
            code="invalid_argument",
        )
    map_limits = check_limits(limits, "chat.map()")
    if mode not in MAP_MODES:
        raise ConfigurationError(
            f"chat.map: mode is 'live' or 'batch', not {mode!r}.", code="invalid_argument"
        )
    if mode == "batch":
        batch_api(chat.provider)  # no batch API: refused before anything is journaled or shown
    joined = joins(chat.journal, join)
    identity = identity_of(chat.provider)
    plan = make_plan(
        inputs,
        chat_id=chat.id,
        tenant=chat._tenant,
        base=chat._request(chat.history),
        output_type=output_type,
        provider=identity,
        store=lambda: chat.store,
    )
    budget = make_budget(
        chat.provider, chat.limits, chat.turns, chat.journal, map_limits, scope="map"
    )
    run = MapRun(chat, plan, identity, concurrency, budget, retry_failed)
    run.join = joined
    if _started is not None:
        _started(run)
    show_progress(run.progress, progress)
    batch = MAP_MODES[mode]
    if batch is not None:
        return await batch(run)
    return await run.go()


class MapRun:
    """One run of a map in this process: what is served, what runs, the pacer and the result."""

    def __init__(
        self,
        chat: Chat,
        plan: MapPlan,
        identity: dict[str, Any],
        concurrency: int,
        budget: Budget | None,
        retry_failed: bool,
    ) -> None:
        self.chat = chat
        self.plan = plan
        self.identity = identity
        self.budget = budget
        self.retry_failed = retry_failed
        self.join = False
        """Whether the items come from the shared queue (``chat.map(..., join=True)``)."""
        self.pacer = Pacer(concurrency)
        """The in-flight limit (``max_in_flight``, ``limits`` tell what it did)."""
        n = len(plan)
        self.responses: list[LlmResponse | None] = [None] * n
        self.errors: dict[int, LoomError] = {}
        self.progress = MapProgress(plan.map_id, n, self.stop, price=self._price)
        self.ran = 0
        self.served = 0
        self._stopping = False
        self._halted: BudgetExceededError | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._redo: set[int] = set()  # answered items whose answer did not validate

    def stop(self) -> bool:
        """Start no more items and cancel those in flight; True if the map was running."""
        if self._stopping or self.progress.finished:
            return False
        self._stopping = True
        self.pacer.close()
        for task in list(self._tasks):
            loop = task.get_loop()
            try:
                here = asyncio.get_running_loop()
            except RuntimeError:
                here = None
            if here is loop:
                task.cancel()
            else:  # map_sync runs on the private loop's thread
                loop.call_soon_threadsafe(task.cancel)
        return True

    async def go(self, drive: Callable[[list[int]], Awaitable[None]] | None = None) -> MapResult:
        """Serve what finished, run the rest (``drive``: another way to run them, e.g. a
        vendor batch), and return the result."""
        journal = self.chat.journal
        execution = journal.execution(self.plan.map_id, principal=principal_of(self.plan))
        await journal_plan(execution, self.plan)
        give_back(journal, execution.execution_id)  # another process may complete the map
        todo = self._serve()
        self.progress.update(force=True)
        try:
            if todo:
                if drive is not None:
                    await drive(todo)
                elif self.join:
                    await join_map(self, todo)
                else:
                    await self._drive(todo)
        finally:
            self.progress.finished = True
            self.progress.stopped = self._stopping
            self._sync_pacer()
            self.progress.update(force=True)
        for index in range(len(self.plan)):
            if self.responses[index] is None and index not in self.errors:
                self.errors[index] = self._not_run(index)
        if not self.errors and execution.status != "completed":
            # Best effort: another process working the same map may be completing it now.
            with contextlib.suppress(ExecutionBusyError):
                await execution.complete({"items": len(self.plan)})
        return MapResult(
            id=self.plan.map_id,
            responses=self.responses,
            errors=self.errors,
            inputs=[self.plan.text(i) for i in range(len(self.plan))],
            labels=self.plan.labels,
            price=self._price,
            latencies=partial(item_latencies, self.chat.journal, self.plan),
            served=self.served,
            ran=self.ran,
            stopped=self._stopping,
            pacing={
                "max_in_flight": self.pacer.max_in_flight,
                "throttled": self.pacer.throttles,
                "limits": list(self.pacer.limits),
            },
        )

    def _serve(self) -> list[int]:
        """Serve finished (and, without ``retry_failed``, failed) items; the indices left to run."""
        plan = self.plan
        outcomes = step_outcomes(self.chat.journal, [plan.item_id(i) for i in range(len(plan))])
        todo = []
        for index in range(len(plan)):
            outcome = outcomes.get(plan.item_id(index))
            if outcome is None or outcome.state == "started":
                todo.append(index)
            elif outcome.state == "completed":
                try:
                    response = served(plan, index, outcome.output)
                except LoomError as exc:
                    if self.retry_failed and not outcome.completed:
                        self._redo.add(index)  # its answer did not validate: ask again
                        todo.append(index)
                    else:
                        self._failed(index, exc, live=False)
                else:
                    if self.budget is not None:
                        self.budget.record(response)
                    self._answered(index, response, live=False)
            else:
                error = recorded_error(outcome, index)
                if error is None or self.retry_failed:
                    todo.append(index)
                else:
                    self._failed(index, error, live=False)
        return todo

    async def _drive(self, todo: list[int]) -> None:
        left_to_run = deque(todo)  # a rate-limited item goes back to the end
        attempts: dict[int, int] = {}
        # The items' executions are started together (one transaction per chunk, not one each);
        # each is used once, by the item's first attempt (a retry opens its execution again).
        opened = open_new(
            self.chat.journal,
            [self.plan.item_id(index) for index in todo],
            principal=principal_of(self.plan),
        )
        effect = item_effect(
            self.plan, self.chat.provider, store=self.chat._store, budget=self.budget
        )

        async def worker() -> None:
            while not self._stopping and self._halted is None:
                window = await self.pacer.acquire()
                left = self._requests_left()
                if left is not None and self.pacer.in_flight > max(left, 1):
                    # More calls would be in flight than the limit has requests left: wait for
                    # one to end (a refused call is a failure nobody asked for).
                    self.pacer.release(window, ok=False)
                    await self.pacer.changed()
                    continue
                index = None
                if not self._stopping and self._halted is None:
                    index = left_to_run.popleft() if left_to_run else None
                if index is None:
                    self.pacer.release(window, ok=False)
                    return
                self._sync_pacer()
                call = asyncio.ensure_future(
                    run_item(
                        self.plan,
                        index,
                        journal=self.chat.journal,
                        effect=effect,
                        redo=index in self._redo,
                        execution=opened.pop(self.plan.item_id(index), None),
                    )
                )
                self._tasks.add(call)
                try:
                    response = await call
                except asyncio.CancelledError:
                    current = asyncio.current_task()
                    if call.cancelled() and current is not None and not current.cancelling():
                        self.pacer.release(window, ok=False)  # stopped: the item runs next time
                        return
                    call.cancel()
                    with contextlib.suppress(BaseException):
                        await asyncio.wait([call])
                    raise
                except BudgetExceededError as exc:
                    self.pacer.release(window, ok=False)
                    self._halted = exc
                    self._failed(index, exc, live=True)
                except LoomError as exc:
                    tries = attempts.get(index, 0) + 1
                    if exc.code in THROTTLED and tries <= MAX_THROTTLED:
                        attempts[index] = tries
                        self.pacer.release(window, throttled=exc, ok=False)
                        left_to_run.append(index)
                    else:
                        self.pacer.release(window, ok=False)
                        self._failed(index, exc, live=True)
                except Exception as exc:
                    self.pacer.release(window, ok=False)
                    wrapped = LoomError(
                        f"item {index} failed: {type(exc).__name__}: {exc}",
                        code="map_item_failed",
                        index=index,
                    )
                    wrapped.__cause__ = exc
                    self._failed(index, wrapped, live=True)
                else:
                    self.pacer.release(window, ok=True)
                    self._answered(index, response, live=True)
                finally:
                    self._tasks.discard(call)
                    self._sync_pacer()
                    self.progress.update()

        workers = [
            asyncio.ensure_future(worker()) for _ in range(min(self.pacer.ceiling, len(todo)))
        ]
        try:
            await asyncio.gather(*workers)
        except BaseException:
            for task in workers:
                task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait(workers)
            raise

    def _requests_left(self) -> int | None:
        """The fewest requests any ``max_requests`` limit has left (None: no such limit)."""
        budget = self.budget
        if budget is None:
            return None
        left = [
            m.limits.max_requests - m.spent.requests
            for m in budget.meters
            if m.limits.max_requests is not None
        ]
        return min(left) if left else None

    def _answered(self, index: int, response: LlmResponse, *, live: bool) -> None:
        self.responses[index] = response
        self.errors.pop(index, None)
        self.ran += live
        self.served += not live
        self.progress.record(response, live=live)

    def _failed(self, index: int, error: LoomError, *, live: bool) -> None:
        self.errors[index] = error
        self.ran += live
        self.served += not live
        self.progress.record(None, live=live)

    def _price(self, response: LlmResponse) -> Decimal | None:
        """An answer's USD price (priced when shown: genai-prices takes a while per call)."""
        return price_for(self.identity, response)

    def _not_run(self, index: int) -> LoomError:
        if self._halted is not None:
            halted = self._halted
            return BudgetExceededError(
                f"item {index} was not run: {halted.message}",
                code=halted.code,
                **{"limit": None, "allowed": None, "spent": None, **halted.details},
                index=index,
            )
        return LoomError(
            f"item {index} was not run: the map was stopped. Run the map again to go on (finished "
            "items are served from the journal).",
            code="map_stopped",
            index=index,
        )

    def _sync_pacer(self) -> None:
        state = self.pacer.snapshot()
        self.progress.limit, self.progress.in_flight = state["limit"], state["in_flight"]
