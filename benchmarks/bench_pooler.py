"""Journal writes through PgBouncer (transaction pooling) vs directly, in the same run (issue 33).

Run: ``python benchmarks/bench_pooler.py``. It needs PostgreSQL (``$LOOM_TEST_POSTGRES``, else
``postgresql://postgres@127.0.0.1:5432/test``) and PgBouncer: ``$LOOM_TEST_PGBOUNCER``, else one
started for the run when the ``pgbouncer`` binary is installed (as the tests do). Both paths
write to one fresh database, with the journal's default durability, alternating which goes first
in each round; the median of the rounds is printed:

1. One writer: live journaled steps per second on one execution (a step is one INSERT of its
   start and outcome, one commit), and bare autocommitted round trips (``SELECT 1``) per second,
   the pooler's own cost per statement. The bound beside the steps: a step must send at least
   one statement, and through the pooler each statement costs what the pooler adds to a bare
   round trip, so no step through it runs faster than a direct step plus that much: pooled /
   direct steps stay under ``t / (t + (1 / pooled round trips - 1 / direct round trips))``,
   ``t`` the direct step's time, all measured in the same run.
2. Opening a journal: milliseconds per ``Journal(url)`` (connect, check the migrations).
3. A class: CLASS_PROCESSES processes of CLASS_KERNELS journals each, every kernel writing
   CLASS_STEPS steps on a thread of its own, all at once: total steps per second, and how many
   server connections the database had while they wrote (300 journals held directly are 300;
   through the pooler, at most its pool).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psycopg
from _report import Row, emit

from loom_nb.journal import Journal
from tests import services

STEPS = 400
OPENS = 40
ROUNDS = 3
CLASS_PROCESSES = 4
CLASS_KERNELS = 12
CLASS_STEPS = 10
PG = os.environ.get("LOOM_TEST_POSTGRES") or services.POSTGRES_DEFAULT


def add_one(x: int) -> int:
    return x + 1


@contextmanager
def pooler() -> Iterator[str]:
    """PgBouncer's URL: ``$LOOM_TEST_PGBOUNCER``, else one started for the run."""
    given = os.environ.get(services.PGBOUNCER_ENV)
    if given:
        yield given
        return
    with services.pgbouncer(PG) as url:
        yield url


def steps_per_second(url: str, n: int) -> float:
    """Live journaled steps per second on one new execution."""

    async def run() -> float:
        journal = Journal(url)
        execution = journal.execution(f"bench-{uuid.uuid4().hex[:8]}")
        await execution.execute("warm", add_one, 0)
        start = time.perf_counter()
        for i in range(n):
            await execution.execute(f"step-{i}", add_one, i)
        elapsed = time.perf_counter() - start
        journal.close()
        return n / elapsed

    return asyncio.run(run())


def round_trips_per_second(url: str, n: int) -> float:
    """Bare autocommitted ``SELECT 1`` per second on one connection (no prepared statements)."""
    with psycopg.connect(url, autocommit=True, prepare_threshold=None) as conn:
        start = time.perf_counter()
        for _ in range(n):
            conn.execute("SELECT 1")
        return n / (time.perf_counter() - start)


def open_ms(url: str, n: int) -> float:
    """Milliseconds per ``Journal(url)`` (the pool's first connection and the migration check)."""
    journals = []
    start = time.perf_counter()
    for _ in range(n):
        journals.append(Journal(url, pool_size=1))
    elapsed = time.perf_counter() - start
    for journal in journals:
        journal.close()
    return elapsed / n * 1000


def _kernels(url: str, kernels: int, steps: int, ready: Any, go: Any, out: Any) -> None:
    journals = [Journal(url, pool_size=1) for _ in range(kernels)]
    ready.put(1)
    go.wait(120)
    failures = []

    def kernel(journal: Journal) -> None:
        async def run() -> None:
            execution = journal.execution(f"k-{os.getpid()}-{uuid.uuid4().hex[:8]}")
            for i in range(steps):
                await execution.execute(f"s{i}", add_one, i)

        try:
            asyncio.run(run())
        except Exception as exc:  # counted, whatever it is
            failures.append(repr(exc))

    threads = [threading.Thread(target=kernel, args=(j,)) for j in journals]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    end = time.perf_counter()
    for journal in journals:
        journal.close()
    out.put((start, end, failures))


def a_class(url: str, direct: str) -> tuple[float, int, int]:
    """Steps per second of the whole class, the server connections while it wrote, failures."""
    context = multiprocessing.get_context("forkserver")
    ready, go, out = context.Queue(), context.Event(), context.Queue()
    procs = [
        context.Process(target=_kernels, args=(url, CLASS_KERNELS, CLASS_STEPS, ready, go, out))
        for _ in range(CLASS_PROCESSES)
    ]
    for proc in procs:
        proc.start()
    for _ in procs:
        ready.get(timeout=180)
    with psycopg.connect(direct, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    held = int(row[0]) if row else 0
    go.set()
    spans = [out.get(timeout=300) for _ in procs]
    for proc in procs:
        proc.join()
    wall = max(s[1] for s in spans) - min(s[0] for s in spans)
    failures = sum(len(s[2]) for s in spans)
    return CLASS_PROCESSES * CLASS_KERNELS * CLASS_STEPS / wall, held, failures


def median_of(measure: Callable[[str], float], direct: str, pooled: str) -> tuple[float, float]:
    """The median of ROUNDS measurements on each path, alternating which runs first."""
    on_direct, on_pooled = [], []
    for round_ in range(ROUNDS):
        order = [(direct, on_direct), (pooled, on_pooled)]
        for url, results in order if round_ % 2 == 0 else reversed(order):
            results.append(measure(url))
    return statistics.median(on_direct), statistics.median(on_pooled)


def main() -> None:
    database = f"loom_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {database}")
    direct = services.with_database(PG, database)
    try:
        with pooler() as bouncer:
            pooled = services.with_database(bouncer, database)
            Journal(direct).close()  # migrated once, outside the timings
            print(f"PgBouncer (transaction pooling) vs direct, one database, median of {ROUNDS}")
            step_d, step_p = median_of(lambda url: steps_per_second(url, STEPS), direct, pooled)
            print(
                f"  one writer, live steps/s:      direct {step_d:8.0f}  pooler {step_p:8.0f}  "
                f"({step_p / step_d:.2f}x)"
            )
            d, p = median_of(lambda url: round_trips_per_second(url, 2000), direct, pooled)
            print(
                f"  bare round trips/s:            direct {d:8.0f}  pooler {p:8.0f}  ({p / d:.2f}x)"
            )
            # A step sends at least one statement: the pooler adds at least one hop's cost to it.
            step = 1 / step_d
            ceiling = step / (step + max(0.0, 1 / p - 1 / d))
            print(
                f"  bound: a direct step plus one pooler hop, {ceiling:.2f}x; the steps reach "
                f"{step_p / step_d / ceiling:.2f} of it"
            )
            emit(
                [
                    Row(
                        "pooled / direct, one writer's live steps/s",
                        step_p / step_d,
                        ceiling,
                        "",
                        "bound",
                    ),
                    Row("pooled / direct, bare round trips/s", p / d),
                ]
            )
            d, p = median_of(lambda url: open_ms(url, OPENS), direct, pooled)
            print(
                f"  Journal(url) open, ms:         direct {d:8.1f}  pooler {p:8.1f}  ({p / d:.2f}x)"
            )
            emit([Row("pooled / direct, Journal(url) open ms", p / d)])
            kernels = CLASS_PROCESSES * CLASS_KERNELS
            rate_d, held_d, failed_d = a_class(direct, direct)
            rate_p, held_p, failed_p = a_class(pooled, direct)
            emit([Row(f"pooled / direct, {kernels} journals' steps/s", rate_p / rate_d)])
            print(
                f"  class of {kernels} journals ({CLASS_PROCESSES} processes), steps/s: "
                f"direct {rate_d:6.0f}  pooler {rate_p:6.0f}  ({rate_p / rate_d:.2f}x)"
            )
            print(
                f"    server connections held: direct {held_d}  pooler {held_p}; "
                f"failures: direct {failed_d}  pooler {failed_p}"
            )
    finally:
        with psycopg.connect(PG, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")


if __name__ == "__main__":
    main()
