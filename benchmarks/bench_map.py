"""Benchmark: what ``chat.map`` adds per item on top of a bare ``asyncio.gather`` of provider calls.

N inputs (N = 100 and 1,000) go to ``AnthropicProvider("claude-sonnet-4-5")`` over an
``httpx.MockTransport`` that answers every call with a recorded Messages API body (pydantic-ai's
``tool-roundtrip-nonstream`` recording in ``tests/fixtures/provider-traffic``), at the same
concurrency (8), two ways, in the same run:

- bare: ``asyncio.gather`` of ``provider.complete(request)`` under an ``asyncio.Semaphore(8)``,
  each request the system prompt and the input (what a hand-written loop does, journaling nothing);
- map: ``await chat.map(inputs, concurrency=8)`` on a file journal (what a notebook uses): the
  map's definition journaled, each item's user message built, its model step journaled in its own
  execution (guard, capabilities, budget, the call, the outcome) and completed, the pacer, the
  progress and the result;
- served: the same map run again, every item served from the journal (no call);
- journaled: the bound a journal puts on any map, the bare gather with each call made the one
  step of its own execution on the same kind of journal (``journal.execution(id)``,
  ``execution.execute(step, call)``, ``execution.complete()``: the durable start, outcome and
  completion that make a finished item never paid twice after a crash), and no guard, plan,
  pacer, progress or result. ``map/journaled`` is what the map adds on top of that bound.

Printed: milliseconds per item for each, the ratio map/bare with the target (at most 1.3x) and
the ratio to the target, once with the mock answering at once (the ratio is then loom_nb's own
CPU per item against the HTTP client's and the mapping's: the worst case) and once with the mock
answering after 20 ms (a fast real model; the journal work then overlaps the calls in flight).

``--check`` (for CI, where timings are noisy) asserts only a growth ratio: map's cost per item at
1,000 items is at most 1.5x its cost at 100 items (nothing in a map may grow with its size).
Run: ``python benchmarks/bench_map.py`` (about half a minute).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml
from _report import Row, emit, quick

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from loom_nb import Chat, Journal, LlmRequest, Message  # noqa: E402
from loom_nb.providers import AnthropicProvider  # noqa: E402

SIZES = (100, 1000)
CONCURRENCY = 8
ROUNDS = 1 if quick() else 3
TARGET = 1.3
LATENCIES = (0.0, 0.020)
RECORDING = ROOT / "tests/fixtures/provider-traffic/anthropic/tool-roundtrip-nonstream.yaml"
SYSTEM = "Answer in one sentence."


def recorded_body() -> dict[str, Any]:
    """The recorded text answer (the cassette's second interaction)."""
    cassette = yaml.safe_load(RECORDING.read_text(encoding="utf-8"))
    body: dict[str, Any] = cassette["interactions"][1]["response"]["parsed_body"]
    return body


def provider(latency: float) -> AnthropicProvider:
    body = recorded_body()

    async def answer(_request: httpx.Request) -> httpx.Response:
        if latency:
            await asyncio.sleep(latency)
        return httpx.Response(200, json=body)

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    return AnthropicProvider("claude-sonnet-4-5", api_key="benchmark-key-0000", http_client=client)


def inputs(n: int) -> list[str]:
    return [f"What is the weather in city number {i}?" for i in range(n)]


async def bare(n: int, latency: float) -> float:
    """Seconds for ``n`` provider calls gathered at the map's concurrency."""
    model = provider(latency)
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(text: str) -> None:
        async with gate:
            await model.complete(
                LlmRequest(messages=[Message(role="user", content=text)], system=SYSTEM)
            )

    start = time.perf_counter()
    await asyncio.gather(*(one(text) for text in inputs(n)))
    return time.perf_counter() - start


async def journaled(n: int, latency: float, folder: Path, tag: str) -> float:
    """Seconds for the bare gather with each call journaled as the step of its own execution."""
    model = provider(latency)
    gate = asyncio.Semaphore(CONCURRENCY)
    journal = Journal(str(folder / f"{tag}-steps.sqlite"))

    async def one(index: int, text: str) -> None:
        async with gate:
            execution = journal.execution(f"bound/{index}")

            async def call(_input: Any) -> dict[str, Any]:
                request = LlmRequest(messages=[Message(role="user", content=text)], system=SYSTEM)
                response = await model.complete(request)
                return response.model_dump(mode="json")

            await execution.execute("call", call, text)
            await execution.complete({"ok": True})

    start = time.perf_counter()
    await asyncio.gather(*(one(i, text) for i, text in enumerate(inputs(n))))
    elapsed = time.perf_counter() - start
    journal.close()
    return elapsed


async def mapped(n: int, latency: float, folder: Path, tag: str) -> tuple[float, float]:
    """Seconds for ``chat.map`` of ``n`` inputs, then for the same map served from the journal."""
    journal = Journal(str(folder / f"{tag}.sqlite"))
    chat = Chat(provider(latency), journal=journal, id=f"bench-{tag}", system=SYSTEM)
    start = time.perf_counter()
    result = await chat.map(inputs(n), concurrency=CONCURRENCY, progress=False)
    live = time.perf_counter() - start
    assert not result.errors, result
    assert result.ran == n, result
    start = time.perf_counter()
    again = await chat.map(inputs(n), concurrency=CONCURRENCY, progress=False)
    served = time.perf_counter() - start
    assert again.served == n, again
    journal.close()
    return live, served


async def measure(latency: float, folder: Path) -> dict[int, tuple[float, float, float, float]]:
    """Per item (seconds), best of ``ROUNDS`` interleaved rounds: bare, map, served, journaled."""
    best: dict[int, list[float]] = {n: [float("inf")] * 4 for n in SIZES}
    for round_ in range(ROUNDS):
        for n in SIZES:
            tag = f"{n}-{latency}-{round_}"
            b = await bare(n, latency)
            m, s = await mapped(n, latency, folder, tag)
            j = await journaled(n, latency, folder, tag)
            best[n] = [min(old, new / n) for old, new in zip(best[n], (b, m, s, j), strict=True)]
    return {n: (v[0], v[1], v[2], v[3]) for n, v in best.items()}


async def main(check: bool) -> None:
    with tempfile.TemporaryDirectory() as folder:
        results = {latency: await measure(latency, Path(folder)) for latency in LATENCIES}
    print(
        f"chat.map vs asyncio.gather of provider.complete, concurrency {CONCURRENCY}, file journal"
    )
    print(
        f"{'mock latency':>12} {'items':>6} {'bare ms':>8} {'map ms':>8} {'served ms':>9} "
        f"{'map/bare':>8} {'target':>6} {'/target':>7} {'journaled ms':>12} {'bound':>6} "
        f"{'map/journaled':>13}"
    )
    report: list[Row] = []
    for latency, rows in results.items():
        for n, (b, m, s, j) in rows.items():
            ratio = m / b
            print(
                f"{latency * 1000:>10.0f}ms {n:>6} {b * 1000:>8.3f} {m * 1000:>8.3f} "
                f"{s * 1000:>9.3f} {ratio:>7.2f}x {TARGET:>5.1f}x {ratio / TARGET:>6.2f}x "
                f"{j * 1000:>12.3f} {j / b:>5.2f}x {m / j:>12.2f}x"
            )
            at = f"{n} items, mock latency {latency * 1000:.0f} ms"
            report.append(Row(f"map / bare, {at}", ratio, TARGET, "<=", reach=j / b))
            report.append(Row(f"journaled / bare (bound), {at}", j / b))
            report.append(Row(f"map / journaled, {at}", m / j))
    print(
        "bound: the bare gather with each call journaled in its own execution / bare "
        "(no map can beat it on this journal); map/journaled: what the map adds to it"
    )
    small, large = (results[0.0][n][1] for n in SIZES)
    growth = large / small
    print(f"growth: map's cost per item at {SIZES[1]} items / at {SIZES[0]} items = {growth:.2f}x")
    report.append(Row(f"map per item, {SIZES[1]} / {SIZES[0]} items", growth))
    emit(report)
    if check:
        assert growth <= 1.5, f"chat.map's cost per item grows with the map's size: {growth:.2f}x"
        print("check passed: per-item cost does not grow with the map's size (<= 1.5x)")


if __name__ == "__main__":
    asyncio.run(main("--check" in sys.argv[1:]))
