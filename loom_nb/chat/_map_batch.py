"""``chat.map(..., mode="batch")``: a map's items through the vendor's batch API (issue 32 item 3).

Half the price, answered within 24 hours, and durable like a live map. The batch is the map's
execution ``<map>/batch-<g>`` (``g`` counts the batches of one map: a map run again after its
batch finished, with ``retry_failed=True``, sends its failed items in the next one), whose steps
are, in order:

1. ``#batch:plan``: which items go, in which chunks (a vendor takes at most ``max_requests``
   requests and ``max_bytes`` bytes per batch), and a digest (``tag``) of each chunk's bodies;
2. ``#batch:submit:<k>``: chunk ``k`` submitted, its ``BatchState`` (the vendor's batch id)
   journaled before anything waits on it. A submit begun before and never answered (a crash
   during the request, a lost answer) may have created a batch: for OpenAI the step looks for a
   batch tagged with the same digest and adopts it; Anthropic's API cannot be asked, so the step
   refuses (``batch_submit_uncertain``, nothing sent) until the map runs with
   ``retry_failed=True``, after the user checked the console;
3. ``#batch:poll:<n>``: each poll of the unfinished chunks, journaled, with the progress bar
   showing the vendor's request counts (requests processing as "in flight", of the batch's
   total); a poll waits ``poll_interval`` seconds first, except the polls a resumed run serves
   from the log. A poll that fails for a passing reason (network, 5xx, after the provider's own
   retries) leaves the state as it was until the next one. Stop (the bar's button, an interrupt of ``map_sync``) ends the waiting: the
   items are not run (``map_stopped``), the batch goes on at the vendor, and the next run of
   the map polls it again.

A kernel that dies while the batch runs therefore resumes (the same cell again, or the same code
in a new process on the same journal) by replaying the plan, the submits and the polls from the
log and polling the same batch: no second submission. The execution is opened with
``divergence="ignore_inputs"``: a resumed run whose finished items are fewer (some results were
journaled before the crash) still follows the recorded batch.

Once every chunk ended, each item's result becomes that item's journaled model step, through the
same ``item_effect`` as a live map (same step id, same journaled request, the answer as its
output), so a ``MapResult``, a re-run, ``retry_failed`` and the journal read the same as live:
the answer (priced at the batch rate: ``provider_data["batch_id"]``), or the item's own error
(``batch_item_errored`` / ``_expired`` / ``_canceled`` / ``_missing``, or the structured-output
error). Then the batch execution completes.

The body of each item is what a live call would send, built by running the same effect on a
stand-in of the item's execution that journals nothing (its id and the plan's principal), with a
provider stand-in that takes the final request (guarded, capability-checked, media resolved for
the plan's tenant, settings and prompt caching applied) and asks the real provider for its
``wire_body``. ``limits=`` are checked per item there, before
anything is submitted: each item counts as a request (``max_requests`` bounds how many go; the
rest fail with ``budget_exceeded`` and run on a later call with a higher limit), while cost and
token limits compare with what was spent before the batch (its cost is known when it ends; once
submitted, a batch is paid as a whole).
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import hashlib
import inspect
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel

from loom_nb.chat._map_item import item_effect, run_item, step_id_of
from loom_nb.chat._map_plan import principal_of
from loom_nb.content import LlmRequest, LlmResponse
from loom_nb.errors import BudgetExceededError, LoomError, ProviderError
from loom_nb.providers._batch import BatchApi, BatchItem, BatchState
from loom_nb.providers.batches import batch_api
from loom_nb.settings import ModelSettings
from loom_nb.store import Principal

if TYPE_CHECKING:
    from loom_nb.chat._map import MapRun
    from loom_nb.chat._map_result import MapResult
    from loom_nb.journal import Execution

__all__ = ["POLL_INTERVAL", "BatchOptions", "run_batch_map"]

POLL_INTERVAL = 30.0
"""Seconds between two polls of a running batch (vendors answer within minutes to hours)."""

_ITEM: contextvars.ContextVar[int] = contextvars.ContextVar("loom_batch_item")


class BatchOptions:
    """How a batch map waits: ``poll_interval`` seconds between polls, through ``sleep``."""

    poll_interval: float = POLL_INTERVAL
    sleep: Callable[[float], Awaitable[None]] = staticmethod(asyncio.sleep)


def _journaled(state: BatchState) -> dict[str, Any]:
    """A state as a step journals it: without the custom ids (the plan step holds them), so a
    poll of a 50,000-item batch is a small row."""
    return state.model_dump(mode="json", exclude={"custom_ids"})


def _state(data: Any, chunk: dict[str, Any]) -> BatchState:
    """A journaled state, with its chunk's custom ids back."""
    ids = [custom_id_of(i) for i in chunk["items"]]
    return BatchState.model_validate(data).model_copy(update={"custom_ids": ids})


def custom_id_of(index: int) -> str:
    """The ``custom_id`` of item ``index`` (both vendors take ``[A-Za-z0-9_-]{1,64}``)."""
    return f"item-{index}"


async def run_batch_map(run: MapRun, options: BatchOptions | None = None) -> MapResult:
    """Run ``run``'s map through the provider's batch API (see the module docstring).

    A provider without one is refused (``ConfigurationError``, code ``batch_unsupported``)
    before anything is journaled or sent.
    """
    api = batch_api(run.chat.provider)
    options = options or BatchOptions()

    async def drive(todo: list[int]) -> None:
        await _BatchMap(run, api, options).drive(todo)

    return await run.go(drive=drive)


class _Stand:
    """The real provider as the item effect sees it, but ``complete`` goes to ``answer``."""

    def __init__(
        self,
        provider: Any,
        answer: Callable[[int, LlmRequest, ModelSettings | None], Awaitable[LlmResponse]],
    ) -> None:
        self._provider = provider
        self._answer = answer
        self.name = getattr(provider, "name", None) or type(provider).__name__

    def __getattr__(self, name: str) -> Any:
        return getattr(self._provider, name)

    async def complete(
        self,
        request: LlmRequest,
        *,
        settings: ModelSettings | None = None,
        output_type: type[BaseModel] | None = None,
    ) -> LlmResponse:
        return await self._answer(_ITEM.get(), request, settings)

    def stream(self, *_args: Any, **_kwargs: Any) -> Any:
        raise NotImplementedError("a batch item is never streamed")


class _Collected(Exception):
    """Raised by the collecting stand-in once it holds an item's body."""


class _Unjournaled:
    """An item's execution as the collecting effect sees it: the item's id and the plan's
    principal (media is resolved for that tenant, as on the live path), and steps that run with
    nothing journaled (``LlmEffect`` hands a stand-in the plain ``execute`` contract). The same
    effect then guards, checks capabilities, resolves media, applies the settings and the
    budget, and gives the stand-in provider the request a live call would send; only the body
    is kept, and the item's real step is journaled when its result comes (``_settle``)."""

    __slots__ = ("execution_id", "principal")

    def __init__(self, execution_id: str, principal: Principal) -> None:
        self.execution_id = execution_id
        self.principal = principal

    async def execute(self, step_id: str, fn: Callable[[Any], Any], input: Any) -> Any:
        """Run ``fn(input)`` (awaited when it returns an awaitable) and journal nothing."""
        result = fn(input)
        return await result if inspect.isawaitable(result) else result


class _BatchMap:
    def __init__(self, run: MapRun, api: BatchApi, options: BatchOptions) -> None:
        self.run = run
        self.api = api
        self.options = options
        self.plan = run.plan
        self.bodies: dict[int, dict[str, Any]] = {}
        self.refused: dict[int, LoomError] = {}

    # -- the batch's own execution ----------------------------------------------------------

    def _execution(self) -> Execution:
        journal = self.run.chat.journal
        generation = 0
        while True:
            execution = journal.execution(
                f"{self.plan.map_id}/batch-{generation}",
                principal=principal_of(self.plan),
                divergence="ignore_inputs",
            )
            if execution.status != "completed":
                return execution
            generation += 1

    async def drive(self, todo: list[int]) -> None:
        execution = self._execution()
        chunks = await execution.execute(
            "#batch:plan", lambda _: self._chunks(todo), {"todo": len(todo)}
        )
        states = []
        tried = {  # submits begun before (a crash, or an answer that never came)
            e.step_id
            for e in self.run.chat.journal.events(execution.execution_id)
            if e.kind in ("step_started", "step_failed")
        }
        for k, chunk in enumerate(chunks):

            async def submit(
                _: Any, chunk: dict[str, Any] = chunk, again: bool = f"#batch:submit:{k}" in tried
            ) -> dict[str, Any]:
                return await self._submit(chunk, again=again)

            data = await execution.execute(f"#batch:submit:{k}", submit, {"tag": chunk["tag"]})
            states.append(_state(data, chunk))
        polled = await self._poll(execution, states, chunks)
        if polled is None:
            return  # stopped: the items are not run; the next run polls the same batch
        states = polled
        outcomes: dict[str, LlmResponse | Exception] = {}
        for state in states:
            outcomes.update(await self.api.results(state))
        for index, error in self.refused.items():
            outcomes[custom_id_of(index)] = error
        sent = {i for chunk in chunks for i in chunk["items"]} | set(self.refused)
        await self._settle([i for i in todo if i in sent], outcomes)
        for index in todo:
            if index not in sent:  # a resumed run with more to do than the batch it follows
                self.run.errors[index] = LoomError(
                    f"item {index} was not in the batch this map followed (its run started "
                    "before the item was due). Run the map again to send it in the next batch.",
                    code="batch_item_not_sent",
                    index=index,
                )
        settled = self.run.errors.keys() | {
            i for i, r in enumerate(self.run.responses) if r is not None
        }
        if sent <= settled:
            await execution.complete({"batches": [s.batch_id for s in states]})

    async def _chunks(self, todo: Sequence[int]) -> list[dict[str, Any]]:
        await self._collect(todo)
        chunks: list[dict[str, Any]] = []
        current: list[int] = []
        size = 0
        for index in todo:
            if index not in self.bodies:
                continue  # refused before any I/O (a spending limit): settled as failed
            body = len(json.dumps(self.bodies[index]))
            if current and (
                len(current) >= self.api.max_requests or size + body > self.api.max_bytes
            ):
                chunks.append(self._chunk(current))
                current, size = [], 0
            current.append(index)
            size += body
        if current:
            chunks.append(self._chunk(current))
        return chunks

    def _chunk(self, indices: list[int]) -> dict[str, Any]:
        digest = hashlib.sha256()
        for index in indices:
            digest.update(custom_id_of(index).encode())
            digest.update(json.dumps(self.bodies[index], sort_keys=True).encode())
        return {"items": indices, "tag": digest.hexdigest()}

    async def _submit(self, chunk: dict[str, Any], *, again: bool) -> dict[str, Any]:
        indices = list(chunk["items"])
        missing = [i for i in indices if i not in self.bodies]
        if missing:  # a resumed process: the plan was served from the log, not collected
            await self._collect(missing)
        items = [
            BatchItem(custom_id=custom_id_of(i), body=self.bodies[i])
            for i in indices
            if i in self.bodies
        ]
        state = await self.api.find(chunk["tag"], items)
        if state is None:
            if again and not self.api.can_find and not self.run.retry_failed:
                raise ProviderError(
                    f"an earlier run began submitting this map's batch to {self.api.vendor} and "
                    "never saw the answer, so a batch may exist already (its API cannot look it "
                    "up). Nothing was sent. Check the vendor's console and cancel such a batch, "
                    "then run the map with retry_failed=True to submit it again.",
                    code="batch_submit_uncertain",
                    provider=self.api.vendor,
                )
            state = await self.api.submit(items, tag=chunk["tag"])
        return _journaled(state)

    async def _poll(
        self, execution: Execution, states: list[BatchState], chunks: list[dict[str, Any]]
    ) -> list[BatchState] | None:
        """Poll until every chunk ended (None: the map was stopped first)."""
        self._show(states)
        round_ = 0
        while not all(s.ended for s in states):
            if self._stopped():
                return None
            if not execution.is_replaying:
                await self.options.sleep(self.options.poll_interval)
                if self._stopped():
                    return None

            async def poll(_: Any, current: list[BatchState] = states) -> list[dict[str, Any]]:
                return [_journaled(s if s.ended else await self._poll_one(s)) for s in current]

            data = await execution.execute(f"#batch:poll:{round_}", poll, {"round": round_})
            states = [_state(d, c) for d, c in zip(data, chunks, strict=True)]
            self._show(states)
            round_ += 1
        return states

    async def _poll_one(self, state: BatchState) -> BatchState:
        """The chunk's new state; a poll that failed for a passing reason (the provider's own
        retries spent on a network outage, a 5xx) leaves it as it was until the next poll, so a
        24-hour batch survives a bad minute."""
        try:
            return await self.api.poll(state)
        except ProviderError as exc:
            if not exc.retryable:  # a 4xx: the batch or the key is wrong, polling again won't help
                raise
            return state

    def _stopped(self) -> bool:
        """Whether Stop was pressed (read after every wait: it happens while we sleep)."""
        return self.run._stopping

    def _show(self, states: Sequence[BatchState]) -> None:
        progress = self.run.progress
        progress.in_flight = sum(s.counts.processing for s in states)
        progress.limit = sum(s.counts.total for s in states)
        progress.update(force=True)

    # -- bodies: the live path, with nothing journaled ----------------------------------------

    async def _collect(self, indices: Sequence[int]) -> None:
        provider = self.run.chat.provider
        principal = principal_of(self.plan)
        # The limits see each submitted item as a request (max_requests bounds the batch); a copy,
        # so the real budget counts the answers once, when they come.
        budget = copy.deepcopy(self.run.budget)

        async def take(index: int, request: LlmRequest, settings: ModelSettings | None) -> Any:
            self.bodies[index] = self.api.provider.wire_body(
                request, settings=settings, output_type=self.plan.output_type
            )
            raise _Collected

        effect = item_effect(
            self.plan, _Stand(provider, take), store=self.run.chat._store, budget=budget
        )
        for index in indices:
            token = _ITEM.set(index)
            try:
                item = _Unjournaled(self.plan.item_id(index), principal)
                await effect(cast("Execution", item), step_id_of(index), self.plan.request(index))
            except _Collected:
                if budget is not None:
                    budget.record(LlmResponse())
            except BudgetExceededError as exc:
                self.refused[index] = exc
            finally:
                _ITEM.reset(token)

    # -- results: each item's journaled model step --------------------------------------------

    async def _settle(
        self, todo: Sequence[int], outcomes: dict[str, LlmResponse | Exception]
    ) -> None:
        run = self.run

        async def answer(index: int, _request: LlmRequest, _settings: Any) -> LlmResponse:
            outcome = outcomes[custom_id_of(index)]  # every sent item has one (results())
            if isinstance(outcome, Exception):
                raise outcome
            return outcome

        effect = item_effect(self.plan, _Stand(run.chat.provider, answer), store=run.chat._store)
        for index in todo:
            token = _ITEM.set(index)
            try:
                response = await run_item(self.plan, index, journal=run.chat.journal, effect=effect)
            except LoomError as exc:
                run._failed(index, exc, live=True)
            else:
                if run.budget is not None:
                    run.budget.record(response)
                run._answered(index, response, live=True)
            finally:
                _ITEM.reset(token)
            run.progress.update()
