"""Team backend benchmarks (issue 16): the PostgreSQL journal and the S3 content store vs bare clients.

Run: ``python benchmarks/bench_backends.py``. It needs PostgreSQL (``$LOOM_TEST_POSTGRES``, else
``postgresql://postgres@127.0.0.1:5432/test``) and starts moto's S3 server on 127.0.0.1 (or uses
``$LOOM_TEST_S3_ENDPOINT``). Every ratio is against a baseline measured in the same run on the same
server, with the same durability setting (``synchronous_commit=off``, the journal's default):

1. Journal live steps/s on PostgreSQL vs bare autocommitted INSERTs of a comparable row into a
   table shaped like the journal's, over one psycopg connection. A live synchronous step appends
   step_started and step_completed in one commit (straight at the server: one prepared INSERT,
   its durability setting kept in the session). Target >= 0.5x. Beside it, the bound: the
   journal's own SQL alone, the same statements with no Python of the journal around.
2. S3 put and get throughput (MB/s) of ``S3ContentStore`` vs obstore's bare ``put``/``get`` on
   the same server through the same client object, at 1, 4 and 16 MiB, fresh random bytes on
   both sides, alternating which side goes first (see ``s3_rates``). The store must hash the
   bytes and write the tenant marker (an empty PUT) on put and hash them on get, so the line also
   prints the ceiling: the bare time plus just that work, measured in the same rounds. Target
   >= 0.8x for each.
3. Four writers on four different executions, each a separate process with its own connection,
   vs one: total steps/s ratio, against the same scaling of bare INSERT loops measured the same
   way in the same run (the ceiling this machine gives: the writers and the server share its
   cores). Target: the journal's scaling >= 0.9 of the bare loops'. Printed beside it: the client
   and server CPU per step, and the most the cores allow with that CPU.

``--check`` runs only the writers (300 steps each) and asserts growth only: the journal's
scaling is at least 0.75 of the bare loops' in the same run.
"""

from __future__ import annotations

import asyncio
import hashlib
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import obstore
import psycopg
from _report import Row, emit, quick

from loom_nb.journal import Journal
from loom_nb.journal._sql import INSERTS
from loom_nb.store import S3ContentStore

STEPS = 1000
ROUNDS = 3 if quick() else 5
WRITERS = 4
SCALING_TARGET = 0.9  # the journal's writers' scaling over that of bare INSERT loops
CHECK_SCALING = 0.75  # --check: the least of that ratio a run may show
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


_BARE_INSERT = (
    "INSERT INTO bare (execution_id, kind, step_id, position, payload, created, ordinal) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s)"
)


def bare_table(url: str) -> None:
    """A table shaped like the journal's events (identity seq, its one index), for the baseline."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS bare (seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
            "execution_id TEXT, kind TEXT, step_id TEXT, position INTEGER, payload TEXT, "
            "created TEXT, ordinal INTEGER)"
        )
        conn.execute("CREATE UNIQUE INDEX IF NOT EXISTS bare_o ON bare (execution_id, ordinal)")


def _tagged(url: str) -> tuple[str, str]:
    """``url`` with an application_name of its own, so its server processes can be found."""
    tag = f"loom-bench-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    return f"{url}{'&' if '?' in url else '?'}application_name={tag}", tag


def _server_cpu(tag: str) -> float:
    """CPU seconds the server processes of connections tagged ``tag`` have used (from /proc)."""
    with psycopg.connect(PG, autocommit=True) as conn:
        pids = [
            row[0]
            for row in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (tag,)
            )
        ]
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


class Span:
    """One writer's run: wall-clock start and end, and the CPU its client and server process used."""

    def __init__(self, start: float, end: float, client_cpu: float, server_cpu: float) -> None:
        self.start, self.end, self.client_cpu, self.server_cpu = start, end, client_cpu, server_cpu


def _bare_loop(url: str, n: int, ready: Any = None) -> Span:
    url, tag = _tagged(url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = off")
        run = uuid.uuid4().hex
        if ready is not None:
            ready.wait()
        cpu, server = time.process_time(), _server_cpu(tag)
        start = time.perf_counter()
        for i in range(n):
            conn.execute(
                _BARE_INSERT,
                (run, "step_completed", f"s{i}", i, '{"input":1,"output":2}', "2026", i),
            )
        end = time.perf_counter()
        return Span(start, end, time.process_time() - cpu, _server_cpu(tag) - server)


def bare_inserts(url: str, n: int) -> float:
    """Rows per second of a plain autocommitted INSERT loop on the server."""
    span = _bare_loop(url, n)
    return n / (span.end - span.start)


def add_one(x: int) -> int:
    return x + 1


async def _step_loop(url: str, n: int, ready: Any = None) -> Span:
    url, tag = _tagged(url)
    journal = Journal(url)
    execution = journal.execution(f"bench-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    if ready is not None:
        ready.wait()
    cpu, server = time.process_time(), _server_cpu(tag)
    start = time.perf_counter()
    for i in range(n):
        await execution.execute(f"step-{i}", add_one, i)
    end = time.perf_counter()
    span = Span(start, end, time.process_time() - cpu, _server_cpu(tag) - server)
    journal.close()
    return span


def journal_steps(url: str, n: int) -> float:
    """Live journaled steps per second on one execution."""
    span = asyncio.run(_step_loop(url, n))
    return n / (span.end - span.start)


def journal_sql_alone(url: str) -> float:
    """Steps per second of the journal's own SQL alone: the rows of a live run's steps, read
    back, sent as the journal sends a step's lone append on a direct connection (its durability
    setting kept in the session, one INSERT of the step's two rows, prepared once it has run a
    few times: ``loom_nb._pg``), with no Python of the journal around."""
    with psycopg.connect(url, autocommit=True) as conn:
        found = conn.execute(
            "SELECT execution_id FROM events WHERE kind = 'step_completed' "
            "AND execution_id LIKE 'bench-%%' LIMIT 1"
        ).fetchone()
        assert found is not None, "run journal_steps first"
        rows = conn.execute(
            "SELECT kind, step_id, position, payload, created, ordinal FROM events "
            "WHERE execution_id = %s AND kind IN ('step_started', 'step_completed') ORDER BY seq",
            (found[0],),
        ).fetchall()
        run = f"bound-{uuid.uuid4().hex[:8]}"
        steps = [
            (run, *first, run, *second)
            for first, second in zip(rows[0::2], rows[1::2], strict=True)
        ]
        conn.execute("SET synchronous_commit = off")
        query = INSERTS[2].replace("?", "%s")
        start = time.perf_counter()
        for values in steps:
            conn.execute(query, values)
        elapsed = time.perf_counter() - start
    return len(steps) / elapsed


def _writer(kind: str, url: str, n: int, barrier: Any, out: Any) -> None:
    if kind == "journal":
        span = asyncio.run(_step_loop(url, n, barrier))
    else:
        span = _bare_loop(url, n, barrier)
    out.put((span.start, span.end, span.client_cpu, span.server_cpu))


def writers(kind: str, url: str, count: int, n: int) -> tuple[float, float, float]:
    """``count`` processes, each on its own execution (journal steps or bare INSERTs), started together.

    Returns the total rate (steps or rows per second, over the span from the first start to the
    last end) and the client and server CPU microseconds per step.
    """
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(count)
    out = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(kind, url, n, barrier, out)) for _ in range(count)]
    for p in procs:
        p.start()
    spans = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join()
    wall = max(e for _, e, _, _ in spans) - min(s for s, _, _, _ in spans)
    steps = count * n
    client = sum(c for _, _, c, _ in spans) / steps * 1e6
    server = sum(v for _, _, _, v in spans) / steps * 1e6
    return steps / wall, client, server


def s3_server() -> tuple[str, Any]:
    """The S3 endpoint: ``$LOOM_TEST_S3_ENDPOINT``, else moto's server in a process of its own.

    Not moto's in-process threaded server: that would run the server on the benchmark's own
    interpreter, so the store's client-side work (hashing) would compete with it for the GIL and
    the bare client's would not.
    """
    endpoint = os.environ.get("LOOM_TEST_S3_ENDPOINT")
    server = None
    if not endpoint:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        moto = Path(sys.executable).with_name("moto_server")
        server = subprocess.Popen(
            [str(moto), "-H", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        endpoint = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                httpx.get(endpoint, timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
    httpx.put(f"{endpoint}/loom-bench", timeout=10)
    return endpoint, server


def s3_rates(
    endpoint: str, size: int, count: int, rounds: int = 5, index: str | None = None
) -> dict[str, float]:
    """MB/s of put and get: the store vs obstore's bare calls, like for like.

    Same server, same client object and connection pool (the store's own ``S3Store``), same
    blob size, fresh random bytes for every put on both sides (prepared before the clock
    starts), and the order of the two sides alternates round by round. Bare put is one PUT of the
    bytes (not obstore's default multipart over 5 MB: the store's conditional create is one PUT); bare get is one GET and the copy into ``bytes`` that the store's ``get`` also returns.
    What is left is the store's own work: hashing, the tenant marker and the conditional create
    on put, the hash check on get. Every round's objects are deleted after it (moto keeps them
    in memory). With ``index`` (a PostgreSQL URL) the store keeps its tenant index there, so a
    put records an upsert instead of writing a marker object, and the ceiling counts the hashing
    only.
    """
    prefix = uuid.uuid4().hex[:8]
    store = S3ContentStore(
        f"s3://loom-bench/{prefix}/store",
        endpoint=endpoint,
        access_key_id="bench",
        secret_access_key="bench",  # noqa: S106 (the local server takes any key)
        index=index,
    )
    mb = count * size / 1e6
    rates: dict[str, list[float]] = {
        "store_put": [],
        "bare_put": [],
        "store_get": [],
        "bare_get": [],
    }
    floor: dict[str, list[float]] = {"hash": [], "marker": []}
    for r in range(rounds):
        for name, seconds in _s3_round(store, r, size, count).items():
            (floor if name in floor else rates)[name].append(
                seconds if name in floor else mb / seconds
            )
    out = {k: statistics.median(v) for k, v in rates.items()}
    # The ceilings: the bare time plus only the work the store cannot skip, measured in the same
    # rounds (SHA-256 of the bytes; on put also one empty PUT, the tenant marker).
    hash_s, marker_s = statistics.median(floor["hash"]), statistics.median(floor["marker"])
    bare_put_s, bare_get_s = mb / out["bare_put"], mb / out["bare_get"]
    out["put_ceiling"] = bare_put_s / (bare_put_s + hash_s + (0 if index else marker_s))
    out["get_ceiling"] = bare_get_s / (bare_get_s + hash_s)
    store.close()
    return out


def _s3_round(store: S3ContentStore, r: int, size: int, count: int) -> dict[str, float]:
    """Seconds of one round of each side (put then get, the order alternating with ``r``)."""
    bare = store._s3  # the same client and connection pool, without the store's layer
    mine = [os.urandom(size) for _ in range(count)]
    theirs = [os.urandom(size) for _ in range(count)]
    refs: list[Any] = []

    def store_put() -> None:
        refs.extend(store.put(data, "bench") for data in mine)

    def bare_put() -> None:
        for i, data in enumerate(theirs):
            # One PUT, as the store's conditional create is (obstore would go multipart over 5 MB).
            obstore.put(bare, f"bare/{r}/{i}", data, use_multipart=False)

    def store_get() -> None:
        for ref in refs:
            store.get(ref.address)

    def bare_get() -> None:
        for i in range(count):
            bytes(obstore.get(bare, f"bare/{r}/{i}").bytes())

    def hashing() -> None:
        for data in mine:
            hashlib.sha256(data).hexdigest()

    def markers() -> None:
        for i in range(count):
            obstore.put(bare, f"bare/{r}/m{i}", b"")

    seconds = {"hash": _timed(hashing), "marker": _timed(markers)}
    for pair in (
        [("store_put", store_put), ("bare_put", bare_put)],
        [("store_get", store_get), ("bare_get", bare_get)],
    ):
        for name, fn in pair if r % 2 else pair[::-1]:
            seconds[name] = _timed(fn)
    for ref in refs:
        store.purge(ref.address)
    obstore.delete(bare, [f"bare/{r}/{i}" for i in range(count)])
    obstore.delete(bare, [f"bare/{r}/m{i}" for i in range(count)])
    return seconds


def _timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def scalings(url: str, steps: int, rounds: int) -> dict[str, tuple[float, float, float, float]]:
    """Per kind (bare INSERTs, journal steps): the median rate of 1 and of ``WRITERS`` processes,
    and the client and server CPU microseconds per step of one."""
    kinds = ("bare", "journal")
    one: dict[str, list[tuple[float, float, float]]] = {kind: [] for kind in kinds}
    four: dict[str, list[tuple[float, float, float]]] = {kind: [] for kind in kinds}
    # Interleaved (bare 1, journal 1, bare 4, journal 4 in every round): a shared machine's load
    # drifts over a run, and measured one kind after the other the drift lands in the ratio.
    for _ in range(rounds):
        for kind in kinds:
            one[kind].append(writers(kind, url, 1, steps))
        for kind in kinds:
            four[kind].append(writers(kind, url, WRITERS, steps))
    scaling: dict[str, tuple[float, float, float, float]] = {}
    for kind in kinds:
        rate1 = statistics.median(r for r, _, _ in one[kind])
        rate4 = statistics.median(r for r, _, _ in four[kind])
        client = statistics.median(c for _, c, _ in one[kind])
        server = statistics.median(v for _, _, v in one[kind])
        scaling[kind] = (rate1, rate4, client, server)
    return scaling


def cpu_bound(rate1: float, client: float, server: float) -> float:
    """The most ``WRITERS`` processes can scale over one: every core busy with the CPU one step
    takes (client + server microseconds), and never more than the writer count."""
    return min(WRITERS, (os.cpu_count() or 1) / ((client + server) / 1e6) / rate1)


def _first_and_cpu(entry: tuple[float, float, float, float]) -> tuple[float, float, float]:
    rate1, _, client, server = entry
    return rate1, client, server


def check() -> None:
    """``--check``: growth only. The journal's writers must grow at least ``CHECK_SCALING`` of
    what bare INSERT loops grow from 1 to ``WRITERS`` processes on the same server, same run."""
    url, schema = fresh_schema()
    try:
        Journal(url).close()
        bare_table(url)
        scaling = scalings(url, 300, 3)
    finally:
        drop_schema(schema)
    journal_x = scaling["journal"][1] / scaling["journal"][0]
    bare_x = scaling["bare"][1] / scaling["bare"][0]
    passed = journal_x >= CHECK_SCALING * bare_x
    print(
        f"check writers: journal {journal_x:.2f}x, bare INSERT {bare_x:.2f}x -> "
        f"{journal_x / bare_x:.2f} of it (at least {CHECK_SCALING:g}) {'ok' if passed else 'FAILED'}"
    )
    sys.exit(0 if passed else 1)


def main() -> None:
    if "--check" in sys.argv:
        check()
    print(f"PostgreSQL {PG}; {os.cpu_count()} cores")
    url, schema = fresh_schema()
    try:
        Journal(url).close()  # migrate once, outside the timings
        bare_table(url)
        # Each round measures all three, one after the other, and the ratios are the medians of
        # the rounds' own: the machine's speed drifts between rounds (by 2x within minutes on a
        # shared VM), and a ratio of two medians taken minutes apart would carry that drift.
        rounds = []
        for _ in range(ROUNDS):
            bare_rate = bare_inserts(url, STEPS)
            rounds.append((bare_rate, journal_steps(url, STEPS), journal_sql_alone(url)))
        bare, live, alone = (statistics.median(r[i] for r in rounds) for i in range(3))
        ratio = statistics.median(r[1] / r[0] for r in rounds)
        bound = statistics.median(r[2] / r[0] for r in rounds)
        print(
            f"journal: bare INSERT {bare:,.0f}/s; live steps {live:,.0f}/s -> {ratio:.2f}x "
            f"(median of {ROUNDS} rounds' ratios; target >= 0.5x: {ratio / 0.5:.2f} of it); the "
            f"journal's SQL alone {alone:,.0f} steps/s = {bound:.2f}x bare, the bound: live is "
            f"{ratio / bound:.2f} of it"
        )
        emit(
            [
                Row("PostgreSQL live steps / bare INSERT", ratio, 0.5, ">=", reach=bound),
                Row("PostgreSQL live steps / bare vs its SQL alone", ratio, bound, "", "bound"),
            ]
        )
        scaling = scalings(url, STEPS, 3 if quick() else 5)
        for kind, label in (("bare", "bare INSERT (the ceiling)"), ("journal", "journal steps")):
            rate1, rate4, client, server = scaling[kind]
            # With every core busy, steps/s cannot pass cores / (CPU per step), however many writers.
            bound = cpu_bound(rate1, client, server)
            print(
                f"writers, {label}: 1 process {rate1:,.0f}/s; {WRITERS} processes on {WRITERS} "
                f"executions {rate4:,.0f}/s -> {rate4 / rate1:.2f}x; CPU per step: client "
                f"{client:.0f} us, server {server:.0f} us, so at most {bound:.2f}x on "
                f"{os.cpu_count()} cores"
            )
            emit([Row(f"writers, {label}: {WRITERS} / 1", rate4 / rate1, bound, "", "bound")])
        journal_x = scaling["journal"][1] / scaling["journal"][0]
        bare_x = scaling["bare"][1] / scaling["bare"][0]
        of_bare = journal_x / bare_x
        # Each kind's scaling is at most its CPU bound (capped at the writer count), so the
        # journal's share of the bare loops' scaling is at most the ratio of the two bounds.
        share_bound = cpu_bound(*_first_and_cpu(scaling["journal"])) / cpu_bound(
            *_first_and_cpu(scaling["bare"])
        )
        print(
            f"writers: journal {journal_x:.2f}x vs the bare-INSERT scaling {bare_x:.2f}x on the "
            f"same server in the same run -> {of_bare:.2f} of it (target >= {SCALING_TARGET:g}: "
            f"{of_bare / SCALING_TARGET:.2f} of the target; bound from the CPU per step "
            f"{share_bound:.2f}, {of_bare / share_bound:.2f} of it; {os.cpu_count()} cores run "
            f"the writers, the server and everything else, load average "
            f"{os.getloadavg()[0]:.1f})"
        )
        emit(
            [
                Row(
                    f"PostgreSQL {WRITERS} writers, journal / bare scaling",
                    of_bare,
                    SCALING_TARGET,
                    ">=",
                    reach=share_bound,
                ),
                Row(
                    f"PostgreSQL {WRITERS} writers, journal / bare scaling vs CPU bound",
                    of_bare,
                    share_bound,
                    "",
                    "bound",
                ),
            ]
        )
        endpoint, server = s3_server()
        try:
            for index, label in ((None, "marker objects"), (url, "PostgreSQL")):
                sizes = (
                    ((4 << 20, 12),) if quick() else ((1 << 20, 24), (4 << 20, 12), (16 << 20, 4))
                )
                for size, count in sizes:
                    r = s3_rates(endpoint, size, count, index=index)
                    print(
                        f"s3 {size >> 20:>2} MiB, index in {label}: put bare {r['bare_put']:.0f} "
                        f"MB/s, store {r['store_put']:.0f} MB/s -> "
                        f"{r['store_put'] / r['bare_put']:.2f}x (ceiling {r['put_ceiling']:.2f}x); "
                        f"get bare {r['bare_get']:.0f} MB/s, store {r['store_get']:.0f} MB/s -> "
                        f"{r['store_get'] / r['bare_get']:.2f}x (ceiling {r['get_ceiling']:.2f}x); "
                        "target >= 0.8x each"
                    )
                    at = f"{size >> 20} MiB, index in {label}"
                    for op in ("put", "get"):
                        ratio = r[f"store_{op}"] / r[f"bare_{op}"]
                        emit(
                            [
                                Row(
                                    f"S3 {op} store / bare, {at}",
                                    ratio,
                                    0.8,
                                    ">=",
                                    reach=r[f"{op}_ceiling"],
                                ),
                                Row(
                                    f"S3 {op} store / bare vs ceiling, {at}",
                                    ratio,
                                    r[f"{op}_ceiling"],
                                    "",
                                    "bound",
                                ),
                            ]
                        )
        finally:
            if server is not None:
                server.terminate()
                server.wait(10)
    finally:
        drop_schema(schema)


if __name__ == "__main__":
    main()
