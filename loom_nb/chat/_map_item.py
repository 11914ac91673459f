"""One item of a map: its journaled model call, and a finished one served from the log.

``run_item(plan, index, provider=..., journal=...)`` is the whole of what any process needs to
work item ``index`` of a map, given its plan (``_map_plan.load_plan`` rebuilds one from the
journal): it opens the item's execution ``<map id>/<index>``, makes the model call as its step
``#map:<index>:model`` through ``create_llm_effect`` (budget, guard, capabilities, resolving stored
media for the plan's tenant, the provider, prompt caching keyed by the chat's id), and completes
the execution, which gives its writer lease back. A step that fails is journaled as failed by the
journal, the lease is given back too (``give_back``) and the error is raised; the item runs again
(superseding the failure) when it is asked again, by this process or another. An answer that does
not validate into the plan's output type leaves the step completed (it was paid for) and the
execution open: ``redo=True`` (``retry_failed``) supersedes it and asks again. An item whose step already completed is served from the log (no call). ``chat.map`` drives
it in this process; a worker on another (``loom-nb map work ID``) calls the same function.

``item_latencies(journal, plan)`` is how long each item's step took, by the journal's clock (the
same for an item that ran now and one served from the log).

``served(plan, index, outcome)`` is the answer a finished item gave, read from the outcome
``step_outcomes`` found, without opening its execution: a map of a thousand finished items is
served by a few queries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loom_nb.content import LlmResponse
from loom_nb.errors import LoomError
from loom_nb.journal import Execution, Journal, LlmEffect, create_llm_effect
from loom_nb.journal._outcomes import give_back, step_durations
from loom_nb.providers._structured import validate_output
from loom_nb.store import ContentStore, Principal, StoreResolver

if TYPE_CHECKING:
    from loom_nb.chat._map_plan import MapPlan
    from loom_nb.journal._outcomes import StepOutcome
    from loom_nb.providers import LlmProvider
    from loom_nb.spending import Budget

__all__ = ["item_effect", "item_latencies", "recorded_error", "run_item", "served", "step_id_of"]

STOPPED_TYPES = frozenset({"CancelledError", "KeyboardInterrupt", "BudgetExceededError"})
"""Journaled error types of an item that did not fail but was stopped (in flight, or refused by a
spending limit before any I/O): it runs again."""


def step_id_of(index: int) -> str:
    """The step id of item ``index`` in its execution."""
    return f"#map:{index}:model"


def item_effect(
    plan: MapPlan,
    provider: LlmProvider,
    *,
    store: ContentStore | None = None,
    budget: Budget | None = None,
) -> LlmEffect:
    """The journaled model call every item of ``plan`` makes (one object for all of them)."""
    return create_llm_effect(
        provider,
        resolve_content=StoreResolver(store) if store is not None else None,
        output_type=plan.output_type,
        budget=budget,
        cache="auto",
        cache_key=plan.chat_id,
    )


async def run_item(
    plan: MapPlan,
    index: int,
    *,
    provider: LlmProvider | None = None,
    journal: Journal,
    store: ContentStore | None = None,
    budget: Budget | None = None,
    effect: LlmEffect | None = None,
    redo: bool = False,
    execution: Execution | None = None,
) -> LlmResponse:
    """Run item ``index`` of ``plan`` as its journaled step (or serve it when it finished).

    Give ``provider`` (and ``store`` when the items carry stored media, ``budget`` for limits),
    or an ``effect`` made by ``item_effect`` to share one among many items. Returns the answer,
    its ``output`` validated when the plan has an output type; raises what the call raised
    (``ProviderError``, ``BudgetExceededError``, ``StructuredOutputError`` ...), journaled.
    ``redo`` asks the model again although the step completed (its answer did not validate).
    ``execution``: the item's execution, already opened (``open_new`` starts many at once).
    """
    if effect is None:
        if provider is None:
            raise TypeError("run_item needs a provider or an effect")
        effect = item_effect(plan, provider, store=store, budget=budget)
    if execution is None:
        execution = journal.execution(plan.item_id(index), principal=Principal(tenant=plan.tenant))
    if redo and execution.status != "completed":
        execution.seek(0, supersede=True)  # the answer on record did not validate: ask again
    try:
        response = await effect(execution, step_id_of(index), plan.request(index))
    except BaseException:
        give_back(journal, execution.execution_id)  # any process may run it again, at once
        raise
    await execution.complete({"ok": True})
    return response


def served(plan: MapPlan, index: int, output: Any) -> LlmResponse:
    """The recorded answer of a finished item, validated like a live one."""
    response = LlmResponse.model_validate(output)
    if plan.output_type is None:
        return response
    vendor = plan.provider.get("provider")
    return validate_output(response, plan.output_type, vendor=str(vendor or "provider"))


def recorded_error(outcome: StepOutcome, index: int) -> LoomError | None:
    """The error a failed item's step journaled, as a ``LoomError``; None when it was stopped
    (in flight, or by a spending limit: it did not fail, it runs again)."""
    error = outcome.error or {}
    if error.get("type") in STOPPED_TYPES:
        return None
    code = error.get("code")
    message = error.get("message") or "the item failed"
    return LoomError(
        f"{message} (item {index}, recorded in the journal; `chat.map(..., retry_failed=True)` "
        "runs the failed items again)",
        code=code if isinstance(code, str) and code else "map_item_failed",
        index=index,
        error_type=error.get("type"),
        recorded=True,
    )


def item_latencies(journal: Journal, plan: MapPlan) -> list[float | None]:
    """Seconds each item's journaled step took (None where it has not ended), in item order."""
    ids = [plan.item_id(index) for index in range(len(plan))]
    found = step_durations(journal, ids)
    return [found.get(item) for item in ids]
