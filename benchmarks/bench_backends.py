"""Team backend benchmarks (issue 16): the PostgreSQL journal and the S3 content store vs bare clients.

Run: ``python benchmarks/bench_backends.py``. It needs PostgreSQL (``$LOOM_TEST_POSTGRES``, else
``postgresql://postgres@127.0.0.1:5432/test``) and starts moto's S3 server on 127.0.0.1 (or uses
``$LOOM_TEST_S3_ENDPOINT``). Every ratio is against a baseline measured in the same run on the same
server, with the same durability setting (``synchronous_commit=off``, the journal's default):

1. Journal live steps/s on PostgreSQL vs bare autocommitted INSERTs of a comparable row into a
   table shaped like the journal's, over one psycopg connection. A live synchronous step appends
   step_started and step_completed in one commit. Target >= 0.5x.
2. S3 put and get throughput (MB/s) of ``S3ContentStore`` vs obstore's bare ``put``/``get`` of
   the same bytes on the same server. The store adds hashing, the tenant marker and the
   conditional create on put, and the hash check on get. Target >= 0.8x for each.
3. Four writers on four different executions, each a separate process with its own connection,
   vs one: total steps/s ratio. Target >= 2.5x (bounded by the cores this machine has).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import obstore
import psycopg

from loom_nb.journal import Journal
from loom_nb.store import S3ContentStore

STEPS = 1000
ROUNDS = 5
BLOB = 4 * 1024 * 1024
BLOBS = 12
WRITERS = 4
PG = os.environ.get("LOOM_TEST_POSTGRES") or "postgresql://postgres@127.0.0.1:5432/test"


def fresh_schema() -> tuple[str, str]:
    schema = f"loom_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in PG else "?"
    return f"{PG}{sep}options=-csearch_path%3D{schema}", schema


def drop_schema(schema: str) -> None:
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


def bare_inserts(url: str, n: int) -> float:
    """Rows per second of a plain autocommitted INSERT loop on the server."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = off")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS bare (seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
            "execution_id TEXT, kind TEXT, step_id TEXT, position INTEGER, payload TEXT, "
            "created TEXT, ordinal INTEGER)"
        )
        conn.execute("CREATE UNIQUE INDEX IF NOT EXISTS bare_o ON bare (execution_id, ordinal)")
        conn.execute("CREATE INDEX IF NOT EXISTS bare_e ON bare (execution_id, seq)")
        run = uuid.uuid4().hex
        start = time.perf_counter()
        for i in range(n):
            conn.execute(
                "INSERT INTO bare (execution_id, kind, step_id, position, payload, created, "
                "ordinal) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (run, "step_completed", f"s{i}", i, '{"input":1,"output":2}', "2026", i),
            )
        return n / (time.perf_counter() - start)


def add_one(x: int) -> int:
    return x + 1


async def _steps(url: str, execution_id: str, n: int) -> float:
    journal = Journal(url)
    execution = journal.execution(execution_id)
    start = time.perf_counter()
    for i in range(n):
        await execution.execute(f"step-{i}", add_one, i)
    rate = n / (time.perf_counter() - start)
    journal.close()
    return rate


def journal_steps(url: str, n: int) -> float:
    """Live journaled steps per second on one execution."""
    return asyncio.run(_steps(url, f"bench-{uuid.uuid4().hex[:8]}", n))


def _writer(url: str, n: int, barrier: Any, out: Any) -> None:
    barrier.wait()
    start = time.perf_counter()
    asyncio.run(_steps(url, f"w-{os.getpid()}-{uuid.uuid4().hex[:6]}", n))
    out.put((start, time.perf_counter()))


def writers(url: str, count: int, n: int) -> float:
    """Total steps per second of ``count`` processes, each on its own execution."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(count)
    out = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(url, n, barrier, out)) for _ in range(count)]
    for p in procs:
        p.start()
    spans = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join()
    return count * n / (max(e for _, e in spans) - min(s for s, _ in spans))


def s3_server() -> tuple[str, Any]:
    endpoint = os.environ.get("LOOM_TEST_S3_ENDPOINT")
    server = None
    if not endpoint:
        from moto.server import ThreadedMotoServer

        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
    httpx.put(f"{endpoint}/loom-bench", timeout=10)
    return endpoint, server


def s3_rates(endpoint: str) -> dict[str, float]:
    """MB/s of put and get: the store vs obstore's bare calls on the same server and bytes."""
    prefix = uuid.uuid4().hex[:8]
    store = S3ContentStore(
        f"s3://loom-bench/{prefix}/store",
        endpoint=endpoint,
        access_key_id="bench",
        secret_access_key="bench",  # noqa: S106 (the local server takes any key)
    )
    bare = store._s3  # the same client and connection pool, without the store's layer
    blobs = [os.urandom(BLOB) for _ in range(BLOBS)]
    mb = BLOBS * BLOB / 1e6
    rates: dict[str, list[float]] = {
        "store_put": [],
        "bare_put": [],
        "store_get": [],
        "bare_get": [],
    }
    for r in range(3):
        start = time.perf_counter()
        for i, data in enumerate(blobs):
            obstore.put(bare, f"bare/{r}/{i}", data)
        rates["bare_put"].append(mb / (time.perf_counter() - start))
        start = time.perf_counter()
        refs = [store.put(data + bytes([r]), "bench") for data in blobs]  # new bytes each round
        rates["store_put"].append(mb / (time.perf_counter() - start))
        start = time.perf_counter()
        for i in range(BLOBS):
            bytes(obstore.get(bare, f"bare/{r}/{i}").bytes())
        rates["bare_get"].append(mb / (time.perf_counter() - start))
        start = time.perf_counter()
        for ref in refs:
            store.get(ref.address)
        rates["store_get"].append(mb / (time.perf_counter() - start))
    return {k: statistics.median(v) for k, v in rates.items()}


def main() -> None:
    print(f"PostgreSQL {PG}; {os.cpu_count()} cores")
    url, schema = fresh_schema()
    try:
        Journal(url).close()  # migrate once, outside the timings
        bare = statistics.median(bare_inserts(url, STEPS) for _ in range(ROUNDS))
        live = statistics.median(journal_steps(url, STEPS) for _ in range(ROUNDS))
        print(
            f"journal: bare INSERT {bare:,.0f}/s; live steps {live:,.0f}/s -> {live / bare:.2f}x (target >= 0.5x)"
        )
        one = statistics.median(writers(url, 1, STEPS) for _ in range(3))
        four = statistics.median(writers(url, WRITERS, STEPS) for _ in range(3))
        print(
            f"writers: 1 process {one:,.0f} steps/s; {WRITERS} processes on {WRITERS} executions "
            f"{four:,.0f} steps/s -> {four / one:.2f}x (target >= 2.5x; {os.cpu_count()} cores)"
        )
    finally:
        drop_schema(schema)
    endpoint, server = s3_server()
    try:
        r = s3_rates(endpoint)
        print(
            f"s3 put: bare {r['bare_put']:.0f} MB/s, store {r['store_put']:.0f} MB/s -> "
            f"{r['store_put'] / r['bare_put']:.2f}x (target >= 0.8x; {BLOB >> 20} MiB blobs)"
        )
        print(
            f"s3 get: bare {r['bare_get']:.0f} MB/s, store {r['store_get']:.0f} MB/s -> "
            f"{r['store_get'] / r['bare_get']:.2f}x (target >= 0.8x)"
        )
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
