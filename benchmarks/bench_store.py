"""Benchmark LocalContentStore put and verified get against hashlib.sha256 over the same bytes.

Prints, for 1 MiB and 64 MiB blobs, each operation's throughput as a ratio to hashing the same
bytes in the same run (higher is better). Targets: put >= 0.5x hashing speed (it hashes, writes,
fsyncs and renames), verified get >= 0.7x (it reads and re-hashes). Each put stores fresh bytes,
so dedupe never short-cuts the write. ``put nosync`` is the same put with ``durable=False``: the
gap between the two is the disk's flush, not the store's code. Usage: ``python benchmarks/bench_store.py [--dir DIR]``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _report import Row, emit

from loom_nb.content import ContentRef
from loom_nb.store import LocalContentStore

SIZES = {"1 MiB": (1 << 20, 15), "64 MiB": (64 << 20, 3)}
TARGETS = {"put": 0.5, "get": 0.7}


def best(fn: Callable[[int], object], rounds: int) -> float:
    """The fastest of ``rounds`` timed calls (the least disturbed by other load)."""
    times = []
    for i in range(rounds):
        start = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - start)
    return min(times)


def measure(directory: Path, label: str, size: int, rounds: int) -> dict[str, float]:
    """Best seconds for sha256, durable put, put without fsync, and verified get of one size."""
    base = bytearray(os.urandom(size))
    blobs = []
    for i in range(rounds):
        base[:8] = i.to_bytes(8, "little")  # distinct bytes each round: no dedupe short-cut
        blobs.append(bytes(base))
    name = label.replace(" ", "")
    times = {"sha256": best(lambda i: hashlib.sha256(blobs[i]).digest(), rounds)}
    with LocalContentStore(directory / f"{name}-nosync", durable=False) as fast:
        times["put nosync"] = best(lambda i: fast.put(blobs[i], "bench"), rounds)
    with LocalContentStore(directory / name) as store:
        refs: list[ContentRef] = []
        times["put"] = best(lambda i: refs.append(store.put(blobs[i], "bench")), rounds)
        times["get"] = best(lambda i: store.get(refs[i].address), rounds)
    return times


def run(directory: Path) -> bool:
    """Time each size; print throughput and ratios to hashing; return whether every target was met."""
    ok = True
    print(
        f"{'size':>7}  {'sha256 MiB/s':>12}  {'put MiB/s':>9}  {'put x':>6}  "
        f"{'put nosync x':>12}  {'get MiB/s':>9}  {'get x':>6}"
    )
    for label, (size, rounds) in SIZES.items():
        times = measure(directory, label, size, rounds)
        mib = size / (1 << 20)
        hashing = times["sha256"]
        ratios = {op: hashing / times[op] for op in ("put", "put nosync", "get")}
        print(
            f"{label:>7}  {mib / hashing:12.0f}  {mib / times['put']:9.0f}  {ratios['put']:6.2f}  "
            f"{ratios['put nosync']:12.2f}  {mib / times['get']:9.0f}  {ratios['get']:6.2f}"
        )
        emit([Row(f"{op} / sha256, {label}", ratios[op], t, ">=") for op, t in TARGETS.items()])
        for op, target in TARGETS.items():
            if ratios[op] < target:
                ok = False
                print(
                    f"  below target: {op} at {ratios[op]:.2f}x of hashing speed (target {target}x)"
                )
    return ok


def main() -> int:
    """Run the benchmark in a scratch directory (or ``--dir``) and exit 1 if a target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="where to create the scratch stores")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as scratch:
        return 0 if run(Path(scratch)) else 1


if __name__ == "__main__":
    sys.exit(main())
