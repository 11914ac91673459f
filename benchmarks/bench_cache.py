"""Benchmark: the share of a 20-turn chat's input tokens the prompt cache serves, and what it costs.

A ``Chat`` on ``AnthropicProvider("claude-sonnet-4-5")`` talks to an ``httpx.MockTransport`` that
plays Anthropic's prompt cache by its documented rules, so the usage each answer reports is
scripted from the very bodies loom_nb sends:

- a request's blocks are the tools, the system blocks and each message's content blocks, in
  order; a ``cache_control`` marker ends a cacheable prefix (string content is one block);
- a prefix is written to the cache at each marker when it is at least 1,024 tokens long (the
  minimum for Sonnet), and read back when a later request has the identical prefix ending at a
  marker or at one of the 20 blocks before a marker (Anthropic's lookback);
- tokens are estimated as a quarter of each block's JSON length.

The same conversation runs with ``cache="auto"`` (Chat's default: breakpoints on the tools, the
system prompt and the ends of the last two turns) and ``cache="off"`` (no markers: nothing is
cached). Printed per mode: input tokens, the cached share (cache reads over all input tokens),
cache writes, and the USD cost from genai-prices with the split; plus what the same usage cost
when every input token was priced at the full input rate (how ``chat.cost`` read before the
split). The last line is the real recording in ``tests/fixtures/provider-traffic-cache``
(pydantic-ai's two-call cache recording): its cached share and cost.

The bound: the same requests (the blocks the server saw, markers aside) priced as no placement
of markers can beat under these rules, known in hindsight. A request can read from the cache
only a prefix an earlier request sent (and wrote: at least the minimum), and pays to write only
what a later request reads again; every other token is plain input. Each token's cheapest way
through the run is that one (written when first sent if it is ever sent again, read after); in a
chat, where each request extends the one before, two markers a request (where the read ends,
where the write ends) reach it. ``cache="auto"``'s cost over ``"off"``'s is printed against the
bound's over ``"off"``'s: how much of the saving any placement could make ``auto`` makes.

Run: ``python benchmarks/bench_cache.py`` (a few seconds).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _report import Row, emit  # noqa: E402
from genai_prices import Usage as PriceUsage  # noqa: E402
from genai_prices import calc_price  # noqa: E402

from loom_nb import Chat, Journal, ModelSettings  # noqa: E402
from loom_nb.content import Usage  # noqa: E402
from loom_nb.providers import AnthropicProvider  # noqa: E402
from loom_nb.providers.anthropic_wire import anthropic_response  # noqa: E402
from loom_nb.settings import CacheSetting  # noqa: E402

TURNS = 20
MIN_CACHEABLE = 1024
LOOKBACK = 20
MODEL = "claude-sonnet-4-5"
SYSTEM = "You are a patient tutor of Python. " + " ".join(
    f"Rule {i}: explain step {i} with a short, runnable example and name the pitfall it avoids."
    for i in range(80)
)
TOOLS = ("run_code", "search_docs")


def tokens(block: Any) -> int:
    return max(1, len(json.dumps(block, sort_keys=True)) // 4)


def blocks_of(body: dict[str, Any]) -> list[tuple[str, int, bool]]:
    """(identity, tokens, marked) of each block, in prompt order."""
    out: list[tuple[str, int, bool]] = []

    def add(kind: str, block: Any) -> None:
        marked = isinstance(block, dict) and "cache_control" in block
        plain = (
            {k: v for k, v in block.items() if k != "cache_control"}
            if isinstance(block, dict)
            else block
        )
        out.append((kind + json.dumps(plain, sort_keys=True), tokens(plain), marked))

    for tool in body.get("tools") or []:
        add("tool:", tool)
    system = body.get("system")
    for block in [{"type": "text", "text": system}] if isinstance(system, str) else system or []:
        add("system:", block)
    for message in body["messages"]:
        content = message["content"]
        for block in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            add(message["role"] + ":", block)
    return out


class CachingServer:
    """Anthropic's prompt cache by its documented rules (see the module docstring)."""

    def __init__(self) -> None:
        self.cache: set[str] = set()
        self.turn = 0
        self.prompts: list[list[tuple[str, int]]] = []
        """Each request's blocks as (identity, tokens), markers aside: what the bound prices."""
        self.outputs: list[int] = []
        """Each answer's output tokens."""

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        blocks = blocks_of(body)
        self.prompts.append([(identity, count) for identity, count, _ in blocks])
        digests, running, sizes = [], hashlib.sha256(), []
        total = 0
        for identity, count, _ in blocks:
            running.update(identity.encode())
            digests.append(running.copy().hexdigest())
            total += count
            sizes.append(total)
        marks = [i for i, (_, _, marked) in enumerate(blocks) if marked]
        read_end = 0
        for mark in marks:
            for pos in range(mark, max(-1, mark - LOOKBACK - 1), -1):
                if digests[pos] in self.cache:
                    read_end = max(read_end, pos + 1)
                    break
        written_end = read_end
        for mark in marks:
            if sizes[mark] >= MIN_CACHEABLE:
                self.cache.add(digests[mark])
                written_end = max(written_end, mark + 1)
        read = sizes[read_end - 1] if read_end else 0
        write = (sizes[written_end - 1] if written_end else 0) - read
        self.turn += 1
        text = f"Step {self.turn}: " + "here is how it works, with an example. " * 12
        self.outputs.append(tokens(text))
        return httpx.Response(
            200,
            json={
                "id": f"msg_{self.turn}",
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "usage": {
                    "input_tokens": total - read - write,
                    "cache_read_input_tokens": read,
                    "cache_creation_input_tokens": write,
                    "output_tokens": tokens(text),
                },
            },
        )


def _common(a: list[tuple[str, int]], b: list[tuple[str, int]]) -> int:
    """How many leading blocks ``a`` and ``b`` share."""
    count = 0
    for left, right in zip(a, b, strict=False):
        if left[0] != right[0]:
            break
        count += 1
    return count


def hindsight_usage(prompts: list[list[tuple[str, int]]], outputs: list[int]) -> list[Usage]:
    """Each request's usage under the best marker placement, known in hindsight (the bound).

    Request ``t`` reads the longest prefix it shares with an earlier request (when that prefix is
    at least ``MIN_CACHEABLE`` tokens, so it could be written), writes from there to the end of
    the longest prefix it shares with a later request (when that is at least the minimum), and
    sends the rest as plain input.
    """
    usages = []
    for t, blocks in enumerate(prompts):
        sizes = [0]
        for _, count in blocks:
            sizes.append(sizes[-1] + count)
        earlier = max((_common(blocks, prompts[r]) for r in range(t)), default=0)
        later = max((_common(blocks, prompts[r]) for r in range(t + 1, len(prompts))), default=0)
        read = sizes[earlier] if sizes[earlier] >= MIN_CACHEABLE else 0
        written = sizes[later] if sizes[later] >= MIN_CACHEABLE else 0
        usages.append(
            Usage(
                input_tokens=sizes[-1],
                output_tokens=outputs[t],
                cache_read_tokens=read,
                cache_write_tokens=max(0, written - read),
            )
        )
    return usages


def split_price(usage: Usage) -> Decimal:
    """The cost of ``usage`` with its cache reads and writes at their own rates."""
    counted = PriceUsage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
    )
    return calc_price(counted, MODEL, provider_id="anthropic").total_price


def hindsight_bound(server: CachingServer) -> tuple[list[Usage], Decimal]:
    """The usages and total cost of ``server``'s requests under the best marker placement (the
    bound): ``hindsight_usage`` of what it was sent, each usage priced by ``split_price``."""
    best = hindsight_usage(server.prompts, server.outputs)
    return best, sum((split_price(usage) for usage in best), Decimal(0))


def flat_price(usage: Usage) -> Decimal:
    """The cost with every input token at the full input rate (before the split was priced)."""
    counted = PriceUsage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
    return calc_price(counted, MODEL, provider_id="anthropic").total_price


async def run(
    mode: str, folder: Path, cache: CacheSetting | None = None
) -> tuple[Usage, Decimal | None, CachingServer]:
    """The chat's usage, its cost and the server that answered it, with ``cache`` (default:
    ``mode``, "auto" or "off") as its cache setting."""
    from loom_nb import tool

    @tool
    def run_code(source: str) -> str:
        """Run a Python snippet and return what it printed."""
        return source

    @tool
    def search_docs(query: str) -> str:
        """Search the Python documentation."""
        return query

    server = CachingServer()
    client = httpx.AsyncClient(transport=httpx.MockTransport(server))
    provider = AnthropicProvider(MODEL, api_key="benchmark-key-0000", http_client=client)
    chat = Chat(
        provider,
        system=SYSTEM,
        tools=[run_code, search_docs],
        journal=Journal(str(folder / f"{mode}.sqlite")),
        id=f"bench-{mode}",
        settings=ModelSettings(cache=mode if cache is None else cache),
    )
    for turn in range(TURNS):
        await chat(f"Question {turn}: what does step {turn} of the lesson show, and why?")
    return chat.usage, chat.cost, server


def row(label: str, usage: Usage, cost: Decimal | None) -> str:
    share = usage.cache_read_tokens / usage.input_tokens if usage.input_tokens else 0.0
    return (
        f"{label:<26} {usage.input_tokens:>9,} {share:>8.1%} {usage.cache_write_tokens:>9,}"
        f" {cost or 0:>11.5f} {flat_price(usage):>11.5f}"
    )


async def main() -> None:
    print(f"{TURNS}-turn chat on {MODEL} (system prompt ~{tokens(SYSTEM):,} tokens, 2 tools)")
    print(
        f"{'mode':<26} {'input tok':>9} {'cached':>8} {'written':>9} {'cost $':>11} {'flat $':>11}"
    )
    with tempfile.TemporaryDirectory() as folder:
        costs = {}
        for mode in ("auto", "off"):
            usage, cost, server = await run(mode, Path(folder))
            costs[mode] = cost
            print(row(f'cache="{mode}"', usage, cost))
    # The "off" run's requests carry no markers: the same blocks "auto" sent, priced at best.
    best, bound = hindsight_bound(server)
    print(row("bound (hindsight)", sum(best, Usage()), bound))
    auto, off = costs["auto"], costs["off"]
    if auto and off:
        print(
            f'cost, cache="auto" / "off": {auto / off:.3f}x; the bound / "off": {bound / off:.3f}x; '
            f"auto / bound: {auto / bound:.3f}x (auto saves {(off - auto) / (off - bound):.1%} of "
            "what any placement of markers could)"
        )
        emit(
            [Row('cost, cache="auto" / "off"', float(auto / off), float(bound / off), "", "bound")]
        )
    recording = ROOT / "tests" / "fixtures" / "provider-traffic-cache" / "anthropic"
    doc = json.loads((recording / "cache-messages-nonstream.json").read_text())
    usage = Usage()
    for interaction in doc["interactions"]:
        usage = usage + anthropic_response(interaction["response"]["body"]).usage
    price_usage = PriceUsage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
    )
    cost = calc_price(price_usage, MODEL, provider_id="anthropic").total_price
    print(row("recorded 2-call chat", usage, cost))
    print("cached = cache reads / all input tokens; flat $ = every input token at the input rate")


if __name__ == "__main__":
    asyncio.run(main())
