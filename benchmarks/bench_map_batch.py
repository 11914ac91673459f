"""Benchmark: what ``chat.map(..., mode="batch")`` costs per item, against the live map, same run.

Both maps run N items through an ``AnthropicProvider`` on ``httpx.MockTransport`` (answers at
once: the vendor's own time is left out) and a fresh SQLite journal. The live map makes N
Messages calls (concurrency 8); the batch map builds each body by the live path (a scratch
journal per map), submits one batch, polls it once (no waiting), downloads the results and
journals each item's step. Printed: seconds per map and per item, and the batch / live ratio,
best of a few interleaved runs. The batch path's own work should stay within a small multiple of
the live one's: it runs each item's effect twice (to build the body, then to journal the answer).

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


def _live_client() -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.MockTransport(lambda r: httpx.Response(200, json=MESSAGE))
    )


async def _run(mode: str, n: int, where: Path) -> float:
    client = AnthropicBatches().client() if mode == "batch" else _live_client()
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
    best = {"live": float("inf"), "batch": float("inf")}
    for _ in range(rounds):
        for mode in ("live", "batch"):
            with tempfile.TemporaryDirectory() as tmp:
                best[mode] = min(best[mode], await _run(mode, n, Path(tmp)))
    for mode, seconds in best.items():
        print(f"{mode:5} map of {n} items: {seconds:.3f} s, {1000 * seconds / n:.2f} ms per item")
    print(f"batch / live per item: {best['batch'] / best['live']:.2f}x")
    emit([Row(f"batch / live per item, {n} items", best["batch"] / best["live"])])


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 100 if quick() else 300))
