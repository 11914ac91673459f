"""What a model turn cost, from the ``genai-prices`` price table, or None: never a guess.

A price needs the vendor and the model. The vendor is known for the shipped providers
(Anthropic, OpenAI at its own endpoint, Gemini); an OpenAI-compatible server at another
``base_url`` is looked up by that URL, which genai-prices matches for the hosted vendors it knows
(OpenRouter, Together, Groq ...) and not for a local Ollama. The model is the one the vendor
reported in the response, else the provider's. When any of that is missing, or genai-prices has no
price for the pair, the cost is None and the views say "cost unknown".

Cached input is priced as such (issue 29): ``Usage.input_tokens`` counts every input token and
``cache_read_tokens`` / ``cache_write_tokens`` say how many of them the prompt cache served or
stored, which is the split genai-prices takes (its ``input_tokens`` also counts all input). For
Anthropic the raw usage kept in ``provider_data`` also says how many writes were for the 1-hour
cache, priced at its own rate. A response a ``FallbackProvider`` answered is priced for the
provider that answered it.

A response a vendor batch API answered (``provider_data["batch_id"]``, set by
``providers._batch``) is priced at the batch rate: genai-prices' ``processing: batch`` price
variant where it has one (most current Anthropic and OpenAI models), else half the standard
price, the discount both vendors document for their batch APIs (Anthropic's batch-processing
guide, "Pricing": 50% of standard rates; OpenAI's Batch API guide: 50% off the synchronous
price). Recording the mark on the response, not on the call, keeps a resumed or replayed map
priced the same.

``genai-prices`` is imported on first use (it loads its price snapshot then), and never
fetches prices over the network: ``update_prices`` is not started, so the HTTP client that
genai-prices imports for it (``httpx2``) stands in until something uses it (``loom_nb._deferred``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from loom_nb._deferred import Deferred, import_deferring
from loom_nb.content import LlmResponse, Usage
from loom_nb.spending import format_cost

if TYPE_CHECKING:
    from loom_nb.chat._records import ChatTurn
    from loom_nb.journal import Journal

__all__ = [
    "Priced",
    "Served",
    "Totals",
    "answered",
    "answerer",
    "can_price",
    "format_cost",
    "identity_of",
    "price_for",
    "price_of",
    "responses_usage",
    "run_responses",
    "run_usage",
    "served_price",
    "vendor_of",
]

Served = tuple[Mapping[str, Any], int]
"""``(identity, count)``: the first ``count`` answers of a run were answered by the provider
``identity`` names (a run resumed on another provider replays them), the rest by the chat's."""

_VENDORS = {
    "AnthropicProvider": "anthropic",
    "OpenAIProvider": "openai",
    "OpenAIResponsesProvider": "openai",
    "GeminiProvider": "google",
}
_OPENAI_URLS = {"https://api.openai.com/v1", "https://api.openai.com"}


def vendor_of(provider: object) -> tuple[str | None, str | None]:
    """``(genai-prices provider id, api url)`` for a provider; ``(None, None)`` when unknown."""
    vendor = _VENDORS.get(type(provider).__name__)
    base_url = getattr(provider, "base_url", None)
    base_url = base_url.strip().rstrip("/") if isinstance(base_url, str) else None
    if vendor == "openai" and base_url and base_url.lower() not in _OPENAI_URLS:
        return None, base_url  # a compatible server: only its URL can name the vendor
    if vendor is None:
        return None, None
    return vendor, None


def identity_of(provider: object) -> dict[str, Any]:
    """What a chat journals about the provider that answers its turns (and prices them by).

    ``{"provider": class name, "model", "vendor", "api_url"}``: the vendor and API URL as
    ``vendor_of`` finds them (a URL only for a compatible server, without credentials or query),
    and for a ``FallbackProvider`` its ``members`` by label, so a chat resumed later, on any
    provider, prices each recorded turn by what answered it.
    """
    vendor, url = vendor_of(provider)
    model = getattr(provider, "model", None)
    identity: dict[str, Any] = {
        "api_url": _without_secrets(url) if url is not None else None,
        "model": model if isinstance(model, str) and model else None,
        "provider": type(provider).__name__,
        "vendor": vendor,
    }
    labels, members = getattr(provider, "labels", None), getattr(provider, "providers", None)
    if callable(getattr(provider, "answered_by", None)) and isinstance(labels, list | tuple):
        # a FallbackProvider: each member by the label ``response.provider`` names it with
        pairs = zip(labels, members if isinstance(members, list | tuple) else (), strict=False)
        identity["members"] = {str(label): identity_of(member) for label, member in pairs}
    return identity


def _without_secrets(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def price_of(provider: object, response: LlmResponse) -> Decimal | None:
    """The USD price of one response's usage, or None when the vendor or model has no known price."""
    return price_for(identity_of(provider), response)


def price_for(identity: Mapping[str, Any] | None, response: LlmResponse) -> Decimal | None:
    """The USD price of one response answered by the provider ``identity`` names (``identity_of``).

    A fallback's identity names its members: the one that answered (``response.provider``) sets
    the price.
    """
    identity = answerer(identity, response)
    if identity is None:
        return None
    vendor, url = identity.get("vendor"), identity.get("api_url")
    vendor = vendor if isinstance(vendor, str) else None
    url = url if isinstance(url, str) else None
    if vendor is None and url is None:
        return None
    model = response.model or identity.get("model")
    if not isinstance(model, str) or not model:
        return None
    batch = bool(response.provider_data.get("batch_id"))
    return _lookup(response.usage, model, vendor, url, _one_hour_writes(response, vendor), batch)


class Priced:
    """The price of one answer, looked up when first read: ``ChatTurn`` takes it as its ``cost``.

    genai-prices' calculation costs about a tenth of a millisecond, more than the rest of a
    turn's bookkeeping, and most turns' costs are read once if at all (``chat.cost`` sums them
    then; a displayed view's header reads them as turns land).
    """

    __slots__ = ("identity", "response")

    def __init__(self, identity: Mapping[str, Any] | None, response: LlmResponse) -> None:
        self.identity = identity
        self.response = response

    def value(self) -> Decimal | None:
        """``price_for(identity, response)``."""
        return price_for(self.identity, self.response)


def answerer(
    identity: Mapping[str, Any] | None, response: LlmResponse | None
) -> Mapping[str, Any] | None:
    """The identity of the provider that gave ``response``: ``identity`` itself, or for a
    fallback the member ``response.provider`` names (None when it names none of them)."""
    identity = identity or {}
    members = identity.get("members")
    if not isinstance(members, dict):
        return identity
    label = response.provider if response is not None else None
    member = members.get(label) if label is not None else None
    return member if isinstance(member, dict) else None


def answered(identity: Mapping[str, Any] | None, response: LlmResponse | None) -> dict[str, Any]:
    """``{"provider", "model"}`` of a turn: the class and model that answered it, as recorded."""
    who = answerer(identity, response) or identity or {}
    model = response.model if response is not None else None
    return {"model": model or who.get("model"), "provider": who.get("provider")}


def can_price(provider: object) -> bool:
    """Whether ``price_of`` knows a price for calls to ``provider`` (every one of a fallback's)."""
    members = getattr(provider, "providers", None)
    if getattr(provider, "answered_by", None) is not None and isinstance(members, list | tuple):
        return bool(members) and all(can_price(member) for member in members)
    return price_of(provider, LlmResponse()) is not None


def _one_hour_writes(response: LlmResponse, vendor: str | None) -> int:
    """Anthropic's cache writes for the 1-hour cache (raw usage ``cache_creation``), else 0."""
    if vendor != "anthropic":
        return 0
    raw = response.provider_data.get("usage")
    creation = raw.get("cache_creation") if isinstance(raw, dict) else None
    value = creation.get("ephemeral_1h_input_tokens") if isinstance(creation, dict) else None
    return value if isinstance(value, int) and 0 < value <= response.usage.cache_write_tokens else 0


def _lookup(
    usage: Usage,
    model: str,
    vendor: str | None,
    url: str | None,
    one_hour: int = 0,
    batch: bool = False,
) -> Decimal | None:
    try:
        prices = import_deferring("genai_prices", {"httpx2": Deferred()})
    except ImportError:  # the package is a dependency; a broken install costs "unknown"
        return None
    split: dict[str, int] = {}
    if usage.cache_read_tokens:
        split["cache_read_tokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        split["cache_write_tokens"] = usage.cache_write_tokens
    if one_hour:
        split["cache_write_1h_tokens"] = one_hour
    where: dict[str, Any] = (
        {"provider_id": vendor} if vendor is not None else {"provider_api_url": url}
    )
    try:
        counted = prices.Usage(
            input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, **split
        )
        total = getattr(prices.calc_price(counted, model, **where), "total_price", None)
        if not isinstance(total, Decimal) or not batch:
            return total if isinstance(total, Decimal) else None
        context = {"processing": "batch"}
        discounted = getattr(
            prices.calc_price(counted, model, **where, price_context=context), "total_price", None
        )
    except (LookupError, ValueError):
        return None
    if isinstance(discounted, Decimal) and discounted != total:
        return discounted  # genai-prices knows this model's batch rates
    return total / 2  # the vendors' documented batch discount: half the standard price


def run_responses(journal: Journal, run_id: str) -> list[LlmResponse]:
    """Every model answer an agent run journaled (model and compaction steps), in order."""
    responses: list[LlmResponse] = []
    for event in journal.events(run_id):
        if event.kind != "step_completed" or not isinstance(event.step_id, str):
            continue
        if not event.step_id.endswith((":model", ":compact")):
            continue
        payload = event.payload if isinstance(event.payload, dict) else {}
        try:
            responses.append(LlmResponse.model_validate(payload.get("output")))
        except ValueError:
            continue
    return responses


def served_price(served: Served | None, index: int, response: LlmResponse) -> Decimal | None:
    """The price of a run's ``index``-th answer by the provider that gave it, when the answer is
    one ``served`` names and that provider can price its model; None otherwise (the chat's
    provider prices it: a run approved after a resume on another vendor, resumed again)."""
    if served is None or index >= served[1]:
        return None
    return price_for(served[0], response)


def run_usage(
    journal: Journal, run_id: str, identity: Mapping[str, Any] | None
) -> tuple[Usage, Decimal | None]:
    """Tokens and cost of every model call an agent run journaled (live or replayed), priced by
    the provider ``identity`` (``responses_usage``)."""
    return responses_usage(run_responses(journal, run_id), identity)


def responses_usage(
    responses: Sequence[LlmResponse],
    identity: Mapping[str, Any] | None,
    served: Served | None = None,
) -> tuple[Usage, Decimal | None]:
    """Tokens and cost of a run's answers, priced by the provider ``identity`` (``identity_of``);
    with ``served``, its first answers by the provider that gave them (``served_price``).

    The cost is None unless every call has a known price; a run that made no call (refused by
    a spending limit before its first) cost nothing.
    """
    usage = sum((r.usage for r in responses), Usage())
    prices = []
    for index, response in enumerate(responses):
        price = served_price(served, index, response)
        prices.append(price if price is not None else price_for(identity, response))
    if any(p is None for p in prices):
        return usage, None
    return usage, sum((p for p in prices if p is not None), Decimal(0))


class Totals:
    """A chat's summed usage and cost, computed again only where the turns changed (the header
    and every displayed view read them on each update of a long chat)."""

    def __init__(self) -> None:
        # (turns, usage, summed cost: None once a turn's price is unknown)
        self._memo: tuple[tuple[ChatTurn, ...], Usage, Decimal | None] | None = None

    def of(self, turns: Sequence[ChatTurn]) -> tuple[Usage, Decimal | None]:
        """Usage and cost of ``turns`` (cost None when any turn's price is unknown, or no turns)."""
        turns = tuple(turns)  # the turn objects themselves: a changed list never matches
        memo = self._memo
        if memo is not None and memo[0] == turns:
            return memo[1], memo[2] if turns else None
        begin, usage, cost = 0, Usage(), Decimal(0)
        known = True
        if memo is not None and len(memo[0]) <= len(turns) and turns[: len(memo[0])] == memo[0]:
            begin = len(memo[0])  # the chat only grew: add the new turns to the last sums
            usage = memo[1]
            known = memo[2] is not None
            cost = memo[2] if memo[2] is not None else Decimal(0)
        for turn in turns[begin:]:
            usage = usage + turn.usage  # cached tokens summed too
            if turn.cost is None:
                known = False
            else:
                cost += turn.cost
        running = cost if known else None
        self._memo = (turns, usage, running)
        return usage, running if turns else None  # no turns: no cost to speak of
