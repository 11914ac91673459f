"""Spending limits: ``Limits`` and the ``Budget`` that keeps them, refusing a call before any I/O.

A notebook left running an agent must not spend without bound (issue 29). ``Limits(max_cost=...,
max_input_tokens=..., max_output_tokens=..., max_requests=...)`` bounds what a chat (``Chat(...,
limits=)``) or one agent run (``chat.run(..., limits=)``) may spend. A ``Budget`` holds one
``Meter`` per limit in force (the chat's, the run's), each with what was spent under it so far.

The journaled model step asks the budget before it does anything else (``admit``): a call that
would start with any limit reached is refused with ``BudgetExceededError`` naming the limit and
what was spent, and since the refusal is raised inside the step, the journal records it
(``step_failed``, code ``budget_exceeded``). Nothing is lost: raise the limit and call again, and
a refused agent run resumes at the refused step (its earlier steps are served from the log).

What can be known before a call is kept exactly: the number of requests, and the output tokens,
since ``admit`` caps the call's ``max_tokens`` to what is left. Input tokens and cost are known
only once the answer arrives, so one call may take them past their limit; every call after it is
refused. Each answer (live or served from the log) is counted by ``record``: a budget measures
what the chat's totals say was spent. ``max_cost`` needs prices: a model without a known price is
refused up front (code ``cost_unknown``) rather than allowed to spend an amount nobody can see.

This module is in the core layer; the price of an answer comes from a callable the caller gives
(the conversation layer prices with genai-prices).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from loom_nb.errors import BudgetExceededError, ConfigurationError

__all__ = ["Budget", "Limits", "Meter", "Pricer", "Spent", "format_cost"]

Pricer = Callable[[Any], Decimal | None]
"""The USD price of one ``LlmResponse`` (None: unknown); called with None to ask whether the
provider's calls have a known price at all (``Decimal(0)`` when they do)."""

_TOKEN_LIMITS = ("max_input_tokens", "max_output_tokens", "max_requests")


@dataclass(frozen=True, init=False)
class Limits:
    """What a chat or a run may spend: USD cost, input and output tokens, model requests.

    ``Limits(max_cost=0.50)`` or ``Limits(max_output_tokens=20_000, max_requests=30)``; a limit
    left None is not enforced. ``max_cost`` takes a ``Decimal``, an int, a float or a decimal
    string (USD). A negative or non-numeric value is ``ConfigurationError(code="invalid_limit")``.
    """

    max_cost: Decimal | None = None
    """Most USD the calls may cost, priced by genai-prices with cached tokens at their rates."""
    max_input_tokens: int | None = None
    """Most input tokens (cached ones included) the calls may read."""
    max_output_tokens: int | None = None
    """Most tokens the calls may generate; each call's ``max_tokens`` is capped to what is left."""
    max_requests: int | None = None
    """Most model calls."""

    def __init__(
        self,
        max_cost: Decimal | float | str | None = None,
        max_input_tokens: int | None = None,
        max_output_tokens: int | None = None,
        max_requests: int | None = None,
    ) -> None:
        object.__setattr__(self, "max_cost", _cost_limit(max_cost))
        for name, value in zip(
            _TOKEN_LIMITS, (max_input_tokens, max_output_tokens, max_requests), strict=True
        ):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 0
            ):
                raise ConfigurationError(
                    f"Limits({name}=...) is a whole number >= 0 or None, not {value!r}.",
                    code="invalid_limit",
                    field=name,
                )
            object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        set_ = [f"{n}={getattr(self, n)!r}" for n in ("max_cost", *_TOKEN_LIMITS)]
        return "Limits(" + ", ".join(s for s in set_ if not s.endswith("=None")) + ")"

    def is_empty(self) -> bool:
        """Whether no limit is set."""
        return all(getattr(self, n) is None for n in ("max_cost", *_TOKEN_LIMITS))


def _cost_limit(value: Any) -> Decimal | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, Decimal | int | float | str):
        raise ConfigurationError(
            f"Limits(max_cost=...) is an amount in USD (Decimal, int, float or str), not "
            f"{type(value).__name__}.",
            code="invalid_limit",
            field="max_cost",
        )
    try:
        amount = Decimal(str(value)) if not isinstance(value, Decimal) else value
    except InvalidOperation:
        amount = Decimal("NaN")
    if not amount.is_finite() or amount < 0:
        raise ConfigurationError(
            f"Limits(max_cost=...) is a finite amount >= 0 in USD, not {value!r}.",
            code="invalid_limit",
            field="max_cost",
        )
    return amount


@dataclass
class Spent:
    """What was spent under one limit: tokens, requests and USD (``cost`` None once unknown)."""

    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    cost: Decimal | None = field(default_factory=lambda: Decimal(0))

    def describe(self) -> str:
        """``3 requests, 12,000 in / 800 out tokens, $0.0210`` (the cost as ``format_cost``)."""
        money = format_cost(self.cost)
        return (
            f"{self.requests} request{'s' if self.requests != 1 else ''}, "
            f"{self.input_tokens:,} in / {self.output_tokens:,} out tokens, {money}"
        )


@dataclass
class Meter:
    """One ``Limits`` in force and what was spent under it; ``scope`` names it in refusals."""

    limits: Limits
    spent: Spent = field(default_factory=Spent)
    scope: str = "chat"


class Budget:
    """The limits in force for a sequence of model calls, checked before each and fed after it.

    ``meters`` are the limits (a chat's, a run's), each with what was spent under it already;
    ``price`` prices one answer (see ``Pricer``); ``default_max_tokens`` is the output cap a
    call has when its settings set none (a provider's own default, None: unbounded), and
    ``default_thinking_budget`` the thinking budget (None: the provider does not think).
    """

    def __init__(
        self,
        meters: list[Meter],
        *,
        price: Pricer | None = None,
        default_max_tokens: int | None = None,
        default_thinking_budget: int | None = None,
    ) -> None:
        self.meters = [m for m in meters if not m.limits.is_empty()]
        self._price = price
        self._default_max_tokens = default_max_tokens
        self._default_thinking_budget = default_thinking_budget

    def __bool__(self) -> bool:
        return bool(self.meters)

    def admit(self, max_tokens: int | None, thinking_budget: int | None = None) -> int | None:
        """Refuse the next call if a limit is reached; else the ``max_tokens`` it must use.

        ``max_tokens`` and ``thinking_budget`` are the call's own settings (None: the provider's
        defaults). Returns the capped value when the output limit leaves less than that, else
        None (no change). Raises ``BudgetExceededError`` (before any I/O), also when the cap
        could not hold the thinking budget.
        """
        cap: int | None = None
        for meter in self.meters:
            limits, spent = meter.limits, meter.spent
            if limits.max_requests is not None and spent.requests >= limits.max_requests:
                raise _refusal(meter, "max_requests", limits.max_requests, spent.requests)
            if (
                limits.max_input_tokens is not None
                and spent.input_tokens >= limits.max_input_tokens
            ):
                raise _refusal(
                    meter, "max_input_tokens", limits.max_input_tokens, spent.input_tokens
                )
            if limits.max_cost is not None:
                self._check_cost(meter, limits.max_cost)
            if limits.max_output_tokens is not None:
                left = limits.max_output_tokens - spent.output_tokens
                if left <= 0:
                    raise _refusal(
                        meter, "max_output_tokens", limits.max_output_tokens, spent.output_tokens
                    )
                cap = left if cap is None else min(cap, left)
        if cap is None:
            return None
        if thinking_budget is None:
            thinking_budget = self._default_thinking_budget
        if thinking_budget is not None and cap <= thinking_budget:
            meter = next(m for m in self.meters if m.limits.max_output_tokens is not None)
            raise _refusal(
                meter,
                "max_output_tokens",
                meter.limits.max_output_tokens,
                meter.spent.output_tokens,
                why=f" The {cap} tokens left cannot hold the call's thinking budget "
                f"({thinking_budget}).",
            )
        current = max_tokens if max_tokens is not None else self._default_max_tokens
        return cap if current is None or cap < current else None

    def _check_cost(self, meter: Meter, allowed: Decimal) -> None:
        spent = meter.spent.cost
        known = spent is not None and (self._price is not None and self._price(None) is not None)
        if not known:
            raise BudgetExceededError(
                f"the {meter.scope}'s max_cost of ${allowed} cannot be kept: the model's price is "
                "unknown to genai-prices (or an earlier answer's was), so what a call costs cannot "
                "be counted. Nothing was sent. Use a priced model, or limit tokens instead "
                "(Limits(max_input_tokens=..., max_output_tokens=...)).",
                code="cost_unknown",
                limit="max_cost",
                allowed=str(allowed),
                spent=None,
                scope=meter.scope,
            )
        assert spent is not None
        if spent >= allowed:
            raise _refusal(meter, "max_cost", f"${allowed}", format_cost(spent))

    def record(self, response: Any) -> None:
        """Count one answer (an ``LlmResponse``, live or served from the log) under every limit."""
        usage = response.usage
        price = self._price(response) if self._price is not None else None
        for meter in self.meters:
            spent = meter.spent
            spent.requests += 1
            spent.input_tokens += usage.input_tokens
            spent.output_tokens += usage.output_tokens
            spent.cost = None if price is None or spent.cost is None else spent.cost + price


def format_cost(cost: Decimal | None) -> str:
    """``$0.0123`` (four decimals; six below a cent), ``$0`` for nothing, ``<$0.000001`` for a
    positive cost that six decimals would round to zero, or ``cost unknown``.

    In the core layer so that every view of money (a chat's header, a comparison's cells and
    totals, a map's progress, the CLI) writes it the same way. A cost that was spent never reads
    as ``$0.000000``, which looks free.
    """
    if cost is None:
        return "cost unknown"
    if cost == 0:
        return "$0"
    if cost >= Decimal("0.01"):
        return f"${cost:.4f}"
    text = f"${cost:.6f}"
    return "<$0.000001" if cost > 0 and text == "$0.000000" else text


def _refusal(
    meter: Meter, limit: str, allowed: object, spent: object, why: str = ""
) -> BudgetExceededError:
    where = {
        "run": "chat.run(..., limits=Limits(...))",
        "map": "chat.map(..., limits=Limits(...))",
    }.get(meter.scope, "chat.limits = Limits(...)")
    return BudgetExceededError(
        f"the {meter.scope}'s spending limit {limit}={allowed} is reached (spent {spent}; in "
        f"all {meter.spent.describe()}), so the next model call was refused before anything was "
        f"sent.{why} To go on, raise the limit ({where}) and call again: a refused run resumes "
        "where it stopped.",
        limit=limit,
        allowed=allowed,
        spent=spent,
        scope=meter.scope,
    )
