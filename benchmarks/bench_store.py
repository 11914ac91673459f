"""Benchmark LocalContentStore put / put_file / get / open against the limits of the work they do.

Every figure is measured in the same run, round-robin (each round times every operation once, the
best round counts), so a load change hits the operation and its limit alike:

- ``put`` and ``put_file`` (durable) against the PIPELINED limit ``max(hash, write + fsync)``:
  hashing the bytes alone, and writing them to a new file in the store's directory and syncing it
  alone; a put that ran both side by side with nothing else would take the longer of the two.
  ``put_file`` also reads its source (from the page cache). The store adds a rename, a directory
  sync and the index commit (itself a sync), which dominate at 1 MiB: the target is at 64 MiB.
  The same two halves run side by side by bare code (two threads) are timed too, and each put's
  ratio to that is printed: on a busy machine the two halves do not get two cores, and that bare
  pipeline shows what was attainable in the same minutes.
- ``get`` (the whole blob as ``bytes``) and ``open`` (the blob read through ``store.open`` in
  1 MiB chunks) against the limit ``read + hash``: reading the blob file and hashing it.
- Peak RSS (a fresh subprocess per operation, ``VmHWM`` reset before it on Linux): how much reading a 256 MiB
  blob through ``open`` raises the peak (target <= 64 MiB), against ``get`` (the whole blob), and
  what ``put_file`` of a 256 MiB file raises it by.

  With ``--s3`` the same blob is also read from an S3 store (``$LOOM_TEST_S3_ENDPOINT``, else
  moto's server in a process of its own) through ``open`` and ``get``, and ``put_file`` uploads
  it to a new one.

Targets (64 MiB): put >= 0.9 of its limit, get >= 0.9 of its limit; open of 256 MiB raises RSS by
<= 64 MiB. Usage: ``python benchmarks/bench_store.py [--dir DIR] [--rounds N] [--s3]
[--skip-timing] [--check]``. With ``--check`` (what ``run_all.py --check`` runs) the exit status
is 1 when the RSS target is missed: a bound on memory that does not grow with the blob, never a
timing (the throughput targets are printed and judged in the table, not checked: a loaded
machine moves them).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from _report import Row, emit, quick

from loom_nb.store import LocalContentStore, open_store

SIZES = {"1 MiB": 1 << 20, "64 MiB": 64 << 20}
RSS_SIZE = 256 << 20
RSS_TARGET = 64 << 20
TARGETS = {"put": 0.9, "get": 0.9}
MiB = 1 << 20


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def write_sync(directory: Path, data: bytes) -> None:
    """Write ``data`` to a new file in ``directory`` and sync it (the durable half of a put)."""
    fd, name = tempfile.mkstemp(dir=directory)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fdatasync(fd)
    finally:
        os.close(fd)
        os.unlink(name)


def read_file(path: Path) -> bytes:
    with path.open("rb", buffering=0) as f:
        return f.read()


def measure(directory: Path, label: str, size: int, rounds: int) -> dict[str, float]:
    """Best seconds of each operation and of the bare work it is bounded by, at one size."""
    store = LocalContentStore(directory / label.replace(" ", ""))
    scratch = directory / "scratch"
    scratch.mkdir(exist_ok=True)
    base = bytearray(os.urandom(size))
    best: dict[str, float] = {}
    for i in range(rounds):
        base[:8] = (2 * i).to_bytes(8, "little")  # fresh bytes each put: no dedupe short-cut
        data = bytes(base)
        base[:8] = (2 * i + 1).to_bytes(8, "little")
        source = scratch / "source.bin"
        source.write_bytes(bytes(base))
        read_file(source)  # in the page cache, as a file just written is
        for name, seconds in one_round(store, data, source).items():
            best[name] = min(best.get(name, seconds), seconds)
    store.close()
    return best


def one_round(store: LocalContentStore, data: bytes, source: Path) -> dict[str, float]:
    """One timing of every operation and every bare limit (then the blobs are erased)."""
    address = "sha256:" + hashlib.sha256(data).hexdigest()
    blob = store.path / "objects" / address[7:9] / address[9:]

    def through_open() -> None:
        with store.open(address, tenant="bench") as reader:
            for _ in reader:
                pass

    times = {
        "hash": timed(lambda: hashlib.sha256(data).digest()),
        "write+fsync": timed(lambda: write_sync(store.path / "tmp", data)),
        "pipelined": pipelined(data, store.path / "tmp"),
        "put": timed(lambda: store.put(data, "bench")),
        "put_file": timed(lambda: store.put_file(source, "bench")),
        "read": timed(lambda: read_file(blob)),
        "get": timed(lambda: store.get(address)),
        "open": timed(through_open),
        "read+hash": timed(lambda: hashlib.sha256(read_file(blob)).digest()),
    }
    for entry in store.list():
        store.purge(entry.address)
    return times


def pipelined(data: bytes, directory: Path) -> float:
    """Seconds for a bare hash in one thread while another writes and syncs."""
    hasher = threading.Thread(target=lambda: hashlib.sha256(data).digest())
    start = time.perf_counter()
    hasher.start()
    write_sync(directory, data)
    hasher.join()
    return time.perf_counter() - start


# -- peak RSS, each operation in a fresh process ---------------------------------------------------


def _status(field: str) -> int | None:
    """A ``/proc/self/status`` memory field in bytes (Linux), else None."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def rss_child(operation: str, store_dir: str, target: str) -> None:
    """In a subprocess: print how much ``operation`` raised the peak RSS above the RSS before it.

    On Linux the peak is reset first (``/proc/self/clear_refs``) and read as ``VmHWM``, so the
    imports' own peak does not hide a smaller rise; elsewhere ``ru_maxrss`` is compared.
    """
    store = open_store(store_dir)
    before = _status("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as clear:
            clear.write("5")  # reset the peak (VmHWM) to the current RSS
    except OSError:
        before = None
    if before is None:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if operation == "open":
        with store.open(target, tenant="bench") as reader:
            for _ in reader:
                pass
            assert reader.verified
    elif operation == "get":
        store.get(target)
    else:
        store.put_file(target, "bench")
    peak = _status("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(peak - before)


def rss(directory: Path, s3: str | None = None) -> dict[str, int]:
    """Peak-RSS rise of open, get and put_file over a 256 MiB blob (the file is written in chunks).

    With ``s3`` (an endpoint), the blob is put into an S3 store there too and read back through
    ``open`` and ``get`` (``s3 open``, ``s3 get``).
    """
    source = directory / "big.bin"
    digest = hashlib.sha256()
    with source.open("wb") as out:
        for _ in range(RSS_SIZE // MiB):
            chunk = os.urandom(MiB)
            digest.update(chunk)
            out.write(chunk)
    store_dir = directory / "rss"
    with LocalContentStore(store_dir) as store:
        ref = store.put_file(source, "bench")
    assert ref.address == "sha256:" + digest.hexdigest()
    runs = [
        ("open", "open", str(store_dir), ref.address),
        ("get", "get", str(store_dir), ref.address),
        ("put_file", "put_file", str(store_dir), str(source)),
    ]
    env = dict(os.environ)
    if s3 is not None:
        key = "bench"  # the local server takes any key
        env.update(AWS_ENDPOINT_URL=s3, AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=key)
        url = f"s3://loom-bench/rss-{os.getpid()}-{time.time_ns()}"
        with open_store(url, endpoint=s3, access_key_id=key, secret_access_key=key) as bucket:
            bucket.put_file(source, "bench")
        runs += [
            ("s3 open", "open", url, ref.address),
            ("s3 get", "get", url, ref.address),
            ("s3 put_file", "put_file", f"{url}-put", str(source)),  # a new store: uploaded
        ]
    rises = {}
    for name, operation, where, target in runs:
        out = subprocess.run(
            [sys.executable, __file__, "--rss-child", operation, where, target],
            check=True,
            capture_output=True,
            text=True,
            env=env,
        )
        rises[name] = int(out.stdout.split()[-1])
    return rises


def timings(directory: Path, rounds: int) -> None:
    """Print each operation's ratio to sha256, its limit and its ratio to the limit (and a line
    for each target missed)."""
    rows: list[Row] = []
    print(f"load average {os.getloadavg()[0]:.1f}; best of {rounds} rounds, round-robin")
    print(
        f"{'size':>7} {'op':>8} {'MiB/s':>7} {'x sha256':>8} {'limit':>14} {'limit x':>8} "
        f"{'of limit':>8}"
    )
    for label, size in SIZES.items():
        times = measure(directory, label, size, rounds if size < 8 * MiB else max(rounds // 3, 3))
        pipe = max(times["hash"], times["write+fsync"])
        limits = {
            "put": ("hash ∥ w+fsync", pipe),
            "put_file": ("hash ∥ w+fsync", pipe),
            "get": ("read + hash", times["read"] + times["hash"]),
            "open": ("read + hash", times["read"] + times["hash"]),
        }
        mib = size / MiB
        for op, (name, limit) in limits.items():
            ratio = times["hash"] / times[op]
            of_limit = limit / times[op]
            print(
                f"{label:>7} {op:>8} {mib / times[op]:7.0f} {ratio:8.2f} {name:>14} "
                f"{times['hash'] / limit:8.2f} {of_limit:8.2f}"
            )
            target = TARGETS.get(op)
            judged = target is not None and size >= 8 * MiB
            rows.append(Row(f"{op} / sha256, {label}", ratio))
            rows.append(
                Row(f"{op} of its limit ({name}), {label}", of_limit, target, ">=")
                if judged
                else Row(f"{op} of its limit ({name}), {label}", of_limit)
            )
            if target is not None and size >= 8 * MiB and of_limit < target:
                print(f"  below target: {op} at {of_limit:.2f} of its limit (target {target})")
        bare = times["pipelined"]
        print(
            f"{label:>7} (hash {times['hash'] * 1e3:.1f} ms, write+fsync "
            f"{times['write+fsync'] * 1e3:.1f} ms, read {times['read'] * 1e3:.1f} ms, "
            f"read+hash {times['read+hash'] * 1e3:.1f} ms; a bare hash in one thread while "
            f"another writes and syncs took {bare * 1e3:.1f} ms: put {bare / times['put']:.2f}, "
            f"put_file {bare / times['put_file']:.2f} of that)"
        )
        rows.append(Row(f"put of a hash beside a write+fsync, {label}", bare / times["put"]))
        rows.append(
            Row(f"put_file of a hash beside a write+fsync, {label}", bare / times["put_file"])
        )
    emit(rows)


def run(directory: Path, rounds: int, s3: str | None = None, *, timing: bool = True) -> bool:
    """Print every ratio with its limit (the timings' targets judged in the printout), then the
    RSS rises; return whether the RSS target (``--check``'s) was met."""
    if timing:
        timings(directory, rounds)
    ok = True
    rises = rss(directory, s3)
    print(
        f"peak RSS rise over a {RSS_SIZE // MiB} MiB blob (target: open <= {RSS_TARGET // MiB} "
        "MiB): "
        + ", ".join(f"{name} {rise / MiB:.1f} MiB" for name, rise in rises.items())
        + f"; open / get {rises['open'] / max(rises['get'], 1):.3f}"
    )
    rows = [
        Row(
            f"open / get peak RSS rise, {RSS_SIZE // MiB} MiB", rises["open"] / max(rises["get"], 1)
        )
    ]
    for name in ("open", "s3 open"):
        if name in rises:
            rows.append(
                Row(f"{name} peak RSS rise, MiB / 64 MiB", rises[name] / RSS_TARGET, 1.0, "<=")
            )
        if rises.get(name, 0) > RSS_TARGET:
            ok = False
            print(f"  below target: {name} raised the peak RSS by more than 64 MiB")
    emit(rows)
    return ok


def main() -> int:
    """Run the benchmark in a scratch directory (or ``--dir``)."""
    if len(sys.argv) == 5 and sys.argv[1] == "--rss-child":
        rss_child(*sys.argv[2:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="where to create the scratch stores")
    parser.add_argument(
        "--rounds", type=int, default=3 if quick() else 9, help="rounds at 1 MiB (a third at 64)"
    )
    parser.add_argument(
        "--check", action="store_true", help="exit 1 when the RSS target is missed (no timings)"
    )
    parser.add_argument(
        "--s3",
        action="store_true",
        help="also measure open/get RSS on S3 ($LOOM_TEST_S3_ENDPOINT, else moto's server)",
    )
    parser.add_argument("--skip-timing", action="store_true", help="only the RSS measurements")
    args = parser.parse_args()
    server = None
    endpoint = None
    if args.s3:
        sys.path.insert(0, str(Path(__file__).parent))
        from bench_backends import s3_server

        endpoint, server = s3_server()
    try:
        with tempfile.TemporaryDirectory(dir=args.dir) as scratch:
            timing = not (args.skip_timing or args.check)
            rss_met = run(Path(scratch), args.rounds, endpoint, timing=timing)
    finally:
        if server is not None:
            server.terminate()
            server.wait(10)
    return 0 if rss_met or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
