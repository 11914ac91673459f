"""How much of the possible saving Chat's default prompt caching makes (``bench_cache.py``).

The benchmark's server plays Anthropic's prompt cache by its documented rules; its bound prices
the same requests as the best placement of markers, known in hindsight, would. Costs are counted,
not timed, so they are the same on every machine.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from types import ModuleType

import pytest

from loom_nb.content import Usage
from loom_nb.settings import PromptCache
from tests.benchmark_modules import benchmark_module


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    """benchmarks/bench_cache.py, imported as the benchmarks import it (their folder on sys.path)."""
    with benchmark_module("bench_cache") as module:
        yield module


def test_the_bound_reads_what_was_sent_before_and_writes_what_is_sent_again(
    bench: ModuleType,
) -> None:
    big, small = ("system", 1500), ("user-1", 100)
    prompts = [
        [big, small],  # written up to where the next request stops sharing it: all of it
        [big, small, ("assistant-1", 50), ("user-2", 30)],  # reads 1,600, writes 80
        [big, ("other", 10)],  # reads the system prompt alone; nothing later shares more
        [("tiny", 20)],  # shares nothing
    ]
    usages = bench.hindsight_usage(prompts, [7, 8, 9, 10])
    assert [(u.input_tokens, u.cache_read_tokens, u.cache_write_tokens) for u in usages] == [
        (1600, 0, 1600),
        (1680, 1600, 0),
        (1510, 1500, 0),
        (20, 0, 0),
    ]
    assert [u.output_tokens for u in usages] == [7, 8, 9, 10]
    # A prefix under the minimum is never written, so never read either.
    short = bench.hindsight_usage([[("a", 600)], [("a", 600), ("b", 5)]], [1, 1])
    assert [(u.cache_read_tokens, u.cache_write_tokens) for u in short] == [(0, 0), (0, 0)]


async def test_auto_makes_nearly_all_the_saving_any_marker_placement_could(
    bench: ModuleType, tmp_path: Path
) -> None:
    off_usage, off, server = await bench.run("off", tmp_path)
    auto_usage, auto, _ = await bench.run("auto", tmp_path)
    assert off is not None
    assert auto is not None
    assert off_usage.cache_read_tokens == 0
    assert auto_usage.input_tokens == off_usage.input_tokens
    best, bound = bench.hindsight_bound(server)
    assert sum(best, Usage()).input_tokens == off_usage.input_tokens
    assert bound <= auto < off
    assert (off - auto) / (off - bound) >= Decimal("0.95")
    # A policy that marks only the tools and the system prompt (never a turn's end) makes about
    # 0.6 of the possible saving: the check above tells a good placement from a poor one.
    tools_only, poor, _ = await bench.run("poor", tmp_path, PromptCache(turns=0))
    assert poor is not None
    assert tools_only.cache_read_tokens > 0
    assert (off - poor) / (off - bound) < Decimal("0.7")
