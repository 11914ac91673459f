"""Benchmark: what ``chat.map(..., mode="batch")`` costs per item, against the live map, same run.

Both maps run N items through an ``AnthropicProvider`` on ``httpx.MockTransport`` (answers at
once: the vendor's own time is left out) and a fresh SQLite journal. The live map makes N
Messages calls (concurrency 8); the batch map builds each body by the live path (a scratch
journal per map), submits one batch, polls it once (no waiting), downloads the results and
journals each item's step. Printed: seconds per map and per item, and the batch / live ratio,
best of a few interleaved runs. The batch path runs each item's effect twice: once to build the
body (guard, capabilities, media, settings, budget; nothing journaled), then to journal the answer.

The reference beside it: the live map without its N Messages exchanges. Each exchange is timed
alone in the same round: the live map's own request bodies (recorded as it sent them) posted
again through the same kind of client and transport, eight at a time as the map sends them, each
answer made and read as bytes (not parsed: a batch map parses every answer too, from the results
file). The reference is ``(live - exchanges) / live``. It is not a floor: a batch map also skips
the live map's concurrency (a task per item, the gate, the pacing) while it guards and maps
every body once more, and adds its submit, poll and download; batch / reference below 1 says the
first outweighs the second. (It was called a bound while the body was built through a scratch
journal, which put the batch map at 1.4-1.85x of it.)

Run: ``python benchmarks/bench_map_batch.py [N]`` from the repository root (default N = 300).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

import httpx
from _report import Row, emit, quick

from loom_nb import AnthropicProvider, Chat, Journal
from loom_nb.chat import _map_batch
from tests.providers.batch_fake import AnthropicBatches, fixture

MESSAGE = fixture("anthropic/results.jsonl")[0]["result"]["message"]


async def _no_wait(seconds: float) -> None:
    return None


def _live_client(sent: list[httpx.Request] | None = None) -> httpx.AsyncClient:
    """The live map's client: every Messages call answered at once with the recorded message
    (``sent``, when given, keeps each request)."""

    def answer(request: httpx.Request) -> httpx.Response:
        if sent is not None:
            sent.append(request)
        return httpx.Response(200, json=MESSAGE)

    return httpx.AsyncClient(transport=httpx.MockTransport(answer))


async def exchanges(sent: list[httpx.Request], concurrency: int = 8) -> float:
    """Seconds to post ``sent`` again (same bodies and headers), ``concurrency`` at a time, through
    a client like the live map's, each answer read as bytes (``post`` reads the body): the HTTP a
    batch map skips."""
    client = _live_client()
    gate = asyncio.Semaphore(concurrency)

    async def post(request: httpx.Request) -> None:
        async with gate:
            await client.post(str(request.url), content=request.content, headers=request.headers)

    start = time.perf_counter()
    await asyncio.gather(*(post(request) for request in sent))
    elapsed = time.perf_counter() - start
    await client.aclose()
    return elapsed


async def _run(mode: str, n: int, where: Path, client: httpx.AsyncClient) -> float:
    """Seconds for a ``mode`` map of ``n`` items whose provider talks through ``client``."""
    provider = AnthropicProvider(
        "claude-sonnet-4-5", api_key="sk-ant-bench-key", http_client=client
    )
    chat = Chat(provider, journal=Journal(str(where / f"{mode}.sqlite")), id="bench")
    words = [f"question {i}" for i in range(n)]
    start = time.perf_counter()
    result = await chat.map(words, mode=mode, progress=False)
    elapsed = time.perf_counter() - start
    assert not result.errors, result.errors
    chat.journal.close()
    return elapsed


async def main(n: int, rounds: int = 3) -> None:
    _map_batch.BatchOptions.sleep = staticmethod(_no_wait)  # type: ignore[assignment]
    best = {"live": float("inf"), "batch": float("inf"), "exchanges": float("inf")}
    for _ in range(rounds):
        for mode in ("live", "batch"):
            sent: list[httpx.Request] = []
            client = AnthropicBatches().client() if mode == "batch" else _live_client(sent)
            with tempfile.TemporaryDirectory() as tmp:
                best[mode] = min(best[mode], await _run(mode, n, Path(tmp), client))
            if mode == "live":
                assert len(sent) == n, (len(sent), n)
                best["exchanges"] = min(best["exchanges"], await exchanges(sent))
    for mode in ("live", "batch"):
        seconds = best[mode]
        print(f"{mode:5} map of {n} items: {seconds:.3f} s, {1000 * seconds / n:.2f} ms per item")
    ratio = best["batch"] / best["live"]
    reference = (best["live"] - best["exchanges"]) / best["live"]
    print(
        f"the live map's {n} Messages exchanges alone: {best['exchanges']:.3f} s, "
        f"{1000 * best['exchanges'] / n:.2f} ms per item"
    )
    print(
        f"batch / live per item: {ratio:.2f}x; the reference (the live map without its "
        f"exchanges) {reference:.2f}x: the batch map costs {ratio / reference:.2f}x of it"
    )
    emit([Row(f"batch / live per item, {n} items", ratio, reference, "", "reference")])


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 100 if quick() else 300))
