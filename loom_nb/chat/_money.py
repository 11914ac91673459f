"""A chat's money: the budget its limits make, what its turns spent, and how the views say it.

``Chat(..., limits=Limits(...))`` bounds the whole chat, ``chat.run(..., limits=...)`` one agent
run (issue 29). Before each model call the journaled step asks a ``Budget`` built here: one meter
for the chat (what the chat's turns spent so far: the same totals ``chat.usage`` and
``chat.cost`` show) and one for the run (from zero at the run's start). Calls are priced with
genai-prices (``_cost``), cached tokens at their own rates, for the provider that answered.

The views show, per turn and in the chat's totals, how many input tokens the prompt cache served
and stored, and (after a ``FallbackProvider`` chose) which provider and model answered.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from loom_nb.chat._cost import Served, can_price, price_of, run_responses, served_price
from loom_nb.chat._records import ChatTurn
from loom_nb.content import LlmResponse, Usage
from loom_nb.errors import ConfigurationError
from loom_nb.providers._defaults import default_max_tokens, default_thinking_budget
from loom_nb.spending import Budget, Limits, Meter, Pricer, Spent

if TYPE_CHECKING:
    from loom_nb.journal import Journal

__all__ = ["check_limits", "make_budget", "spent_of", "tokens_text"]


def check_limits(limits: Any, where: str) -> Limits | None:
    """``limits`` if it is a ``Limits`` or None; ``ConfigurationError`` otherwise."""
    if limits is None or isinstance(limits, Limits):
        return limits
    raise ConfigurationError(
        f"{where}: limits is a Limits(max_cost=..., max_input_tokens=..., max_output_tokens=..., "
        f"max_requests=...) or None, not {type(limits).__name__}.",
        code="invalid_argument",
    )


def pricer(provider: object, served: Served | None = None) -> Pricer:
    """The budget's pricing of ``provider``'s answers (None asks whether they have a price).

    With ``served``, the first answers the budget records are priced by the provider that
    answered them, not by ``provider``: a run resumed on another vendor replays its recorded
    answers first, and another vendor's price table does not know their model.
    """
    recorded = 0

    def price(response: LlmResponse | None) -> Decimal | None:
        nonlocal recorded
        if response is None:
            return Decimal(0) if can_price(provider) else None
        recorded += 1
        price = served_price(served, recorded - 1, response)
        return price if price is not None else price_of(provider, response)

    return price


def spent_of(turns: Sequence[ChatTurn], journal: Journal | None) -> Spent:
    """What ``turns`` spent: their tokens and cost as the chat's totals count them, and calls."""
    spent = Spent()
    for turn in turns:
        spent.input_tokens += turn.usage.input_tokens
        spent.output_tokens += turn.usage.output_tokens
        if turn.kind == "run" and turn.run_id is not None and journal is not None:
            spent.requests += len(run_responses(journal, turn.run_id))
        elif turn.response is not None:
            spent.requests += 1
        if turn.cost is None or spent.cost is None:
            spent.cost = None
        else:
            spent.cost += turn.cost
    return spent


def make_budget(
    provider: object,
    chat_limits: Limits | None,
    turns: Sequence[ChatTurn],
    journal: Journal | None,
    run_limits: Limits | None = None,
    *,
    scope: str = "run",
    served: Served | None = None,
) -> Budget | None:
    """The budget for the next model calls (None when no limit is set).

    ``run_limits`` bound one run or one map (``scope``: ``"run"``, ``"map"``) from zero;
    ``served``: the answers a resumed run replays first, and who answered them (``pricer``).
    """
    meters: list[Meter] = []
    if chat_limits is not None and not chat_limits.is_empty():
        meters.append(Meter(chat_limits, spent_of(turns, journal), "chat"))
    if run_limits is not None and not run_limits.is_empty():
        meters.append(Meter(run_limits, Spent(), scope))
    if not meters:
        return None
    return Budget(
        meters,
        price=pricer(provider, served),
        default_max_tokens=default_max_tokens(provider),
        default_thinking_budget=default_thinking_budget(provider),
    )


def tokens_text(usage: Usage) -> str:
    """``1,000 in (900 cached, 100 to cache) · 10 out`` (cache parts only when non-zero)."""
    cache = []
    if usage.cache_read_tokens:
        cache.append(f"{usage.cache_read_tokens:,} cached")
    if usage.cache_write_tokens:
        cache.append(f"{usage.cache_write_tokens:,} to cache")
    extra = f" ({', '.join(cache)})" if cache else ""
    return f"{usage.input_tokens:,} in{extra} · {usage.output_tokens:,} out"
