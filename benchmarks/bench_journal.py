"""Journal benchmarks: journaled steps per second (live, replayed) and bytes journaled per turn.

Run: ``python benchmarks/bench_journal.py``. Every ratio is against a baseline measured in the
same run, on the same disk, with the same SQLite durability setting (WAL, synchronous=NORMAL):

1. Steps/s. The baseline is a plain SQLite insert loop: one autocommitted INSERT of a
   comparable row per iteration, into a table shaped like the journal's. A live journaled step
   round-trips its input and output through JSON and appends two events, step_started and
   step_completed: in one commit for a synchronous ``fn`` (the headline number), in two for an
   async ``fn`` (its start is committed before it runs; printed as well).
   Targets: live >= 0.5x the bare insert rate; replay >= 5x live. The bound beside it: the
   journal's own SQL alone, with no Python of the journal around it (the same rows, read back
   from a live run, inserted two per statement by the journal's INSERT into a file the journal
   migrated, so with its indexes, one autocommit per step): what any journal writing these rows
   in this schema reaches. Live steps are judged against it as well.
2. Bytes per turn. A 50-turn agent-style run whose transcript carries ten 1 MiB images by ref
   (``ImagePart`` with a ``RefSource``), each turn journaling a model-call step whose input is
   the whole transcript so far. Bytes journaled per turn must not depend on the media size:
   the same run with 1 KiB images grows by the same amount.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _report import Row, emit, quick

from loom_nb.content import ImagePart, LlmRequest, Message, RefSource, TextPart
from loom_nb.journal import Journal
from loom_nb.journal._sql import INSERTS
from loom_nb.store import LocalContentStore

STEPS = 2000
ROUNDS = 3 if quick() else 7
SYNCHRONOUS = "NORMAL"


def bare_inserts(path: Path, n: int) -> float:
    """Rows per second of a plain autocommitted INSERT loop (WAL, same synchronous setting)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={SYNCHRONOUS}")
    conn.execute(
        "CREATE TABLE events (seq INTEGER PRIMARY KEY, execution_id TEXT, "
        "kind TEXT, step_id TEXT, position INTEGER, payload TEXT, created TEXT)"
    )
    conn.execute("CREATE INDEX events_by_execution ON events (execution_id, seq)")
    start = time.perf_counter()
    for i in range(n):
        conn.execute(
            "INSERT INTO events (execution_id, kind, step_id, position, payload, created) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            ("bench", "step_completed", f"step-{i}", i, '{"input":1,"output":2}', "2026-01-01"),
        )
    elapsed = time.perf_counter() - start
    conn.close()
    return n / elapsed


def add_one(x: int) -> int:
    """A synchronous step: its start and outcome are journaled in one commit."""
    return x + 1


async def add_one_async(x: int) -> int:
    """An asynchronous step: its start is journaled (committed) before it runs, then its outcome."""
    return x + 1


async def journaled_steps(path: Path, n: int, fn: Any = add_one) -> tuple[float, float]:
    """Steps per second live, then replayed (a fresh Execution over the same journal)."""
    journal = Journal(path, synchronous=SYNCHRONOUS)
    execution = journal.execution("bench")
    start = time.perf_counter()
    for i in range(n):
        await execution.execute(f"step-{i}", fn, i)
    live = n / (time.perf_counter() - start)

    start = time.perf_counter()
    replay = journal.execution("bench")
    for i in range(n):
        await replay.execute(f"step-{i}", fn, i)
    replayed = n / (time.perf_counter() - start)
    assert not replay.is_replaying
    journal.close()
    return live, replayed


def journal_sql_alone(journaled: Path, path: Path) -> float:
    """Steps per second of the journal's own INSERTs alone: ``journaled``'s step rows, two per
    statement and one autocommit per step, into a file the journal migrated (same schema,
    indexes and durability), with no Python of the journal around them."""
    Journal(path, synchronous=SYNCHRONOUS).close()  # the schema and its indexes
    source = sqlite3.connect(journaled)
    rows = source.execute(
        "SELECT kind, step_id, position, payload, created, ordinal FROM events "
        "WHERE execution_id = 'bench' AND kind IN ('step_started', 'step_completed') ORDER BY seq"
    ).fetchall()
    source.close()
    steps = []
    for first, second in zip(rows[0::2], rows[1::2], strict=True):
        steps.append(["bound", *first[:5], first[5], "bound", *second[:5], second[5]])
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={SYNCHRONOUS}")
    statement = INSERTS[2]
    start = time.perf_counter()
    for values in steps:
        conn.execute(statement, values)
    elapsed = time.perf_counter() - start
    conn.close()
    return len(steps) / elapsed


async def agent_run(folder: Path, image_size: int, turns: int = 50) -> list[int]:
    """Payload bytes journaled after each turn of a run citing ten images by ref."""
    store = LocalContentStore(folder / "store")
    # No store for the journal: every byte of every step stays in the log, none is claim-checked.
    journal = Journal(folder / "journal.sqlite")
    images = []
    for i in range(10):
        data = hashlib.sha256(str(i).encode()).digest() * (image_size // 32)
        images.append(store.put(data, "bench"))
    execution = journal.execution("agent")
    messages: list[Message] = [
        Message(
            role="user",
            content=[TextPart(text="Compare these images.")]
            + [ImagePart(media_type="image/png", source=RefSource(ref=ref)) for ref in images],
        )
    ]
    growth: list[int] = []
    conn = sqlite3.connect(folder / "journal.sqlite")

    def measure() -> int:
        return int(
            conn.execute("SELECT COALESCE(SUM(LENGTH(payload)), 0) FROM events").fetchone()[0]
        )

    for turn in range(turns):
        before = measure()
        request = LlmRequest(messages=messages)

        def call(_input: Any, turn: int = turn) -> dict[str, Any]:
            return {"content": f"turn {turn}: the images differ in hue.", "tool_calls": []}

        output = await execution.execute(f"#turn:{turn}:llm", call, request)
        messages = [
            *messages,
            Message(role="assistant", content=output["content"]),
            Message(role="user", content=f"Look again, turn {turn}."),
        ]
        growth.append(measure() - before)
    conn.close()
    journal.close()
    return growth


def main() -> None:
    """Run every benchmark and print the ratios."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        # The machine may be shared: interleave the rounds and keep each one's best (timeit's rule).
        bares, lives, replays, async_lives, alones = [], [], [], [], []
        for round_ in range(ROUNDS):
            bares.append(bare_inserts(folder / f"bare-{round_}.sqlite", STEPS))
            live_, replayed_ = asyncio.run(
                journaled_steps(folder / f"journal-{round_}.sqlite", STEPS)
            )
            lives.append(live_)
            replays.append(replayed_)
            alones.append(
                journal_sql_alone(
                    folder / f"journal-{round_}.sqlite", folder / f"alone-{round_}.sqlite"
                )
            )
            async_live, _ = asyncio.run(
                journaled_steps(folder / f"async-{round_}.sqlite", STEPS, add_one_async)
            )
            async_lives.append(async_live)
        bare, live, replayed = max(bares), max(lives), max(replays)
        alone = max(alones)
        async_live = max(async_lives)
        # Ratios within a round compare runs seconds apart, under the same background load.
        live_ratio = statistics.median(lv / b for lv, b in zip(lives, bares, strict=True))
        replay_ratio = statistics.median(r / lv for r, lv in zip(replays, lives, strict=True))
        print(
            f"durability: WAL, synchronous={SYNCHRONOUS}; {STEPS} steps, best of {ROUNDS} interleaved rounds"
        )
        print(f"bare SQLite inserts : {bare:10.0f} rows/s")
        print(
            f"journaled, live     : {live:10.0f} steps/s  ({live / bare:.2f}x bare; target >= 0.5x)"
        )
        print(
            f"journal SQL alone   : {alone:10.0f} steps/s  ({alone / bare:.2f}x bare: the bound; "
            f"live is {live / alone:.2f} of it)"
        )
        print(
            f"journaled, replayed : {replayed:10.0f} steps/s  ({replayed / live:.1f}x live; target >= 5x)"
        )
        print(
            f"median of per-round ratios: live {live_ratio:.2f}x bare, replay {replay_ratio:.1f}x live"
        )
        print(
            f"journaled, live, async fn (start committed before it runs: two commits): "
            f"{async_live:.0f} steps/s ({async_live / bare:.2f}x bare)"
        )

        big_dir, small_dir = folder / "big", folder / "small"
        big_dir.mkdir()
        small_dir.mkdir()
        big = asyncio.run(agent_run(big_dir, 1024 * 1024))
        small = asyncio.run(agent_run(small_dir, 1024))
        print("bytes journaled per turn, 50 turns, ten images by ref:")
        print(
            f"  1 MiB images: first {big[0]}, median {statistics.median(big):.0f}, last {big[-1]}, total {sum(big)}"
        )
        print(
            f"  1 KiB images: first {small[0]}, median {statistics.median(small):.0f}, last {small[-1]}, total {sum(small)}"
        )
        worst = max(abs(b - s) for b, s in zip(big, small, strict=True))
        print(
            f"  largest per-turn difference between the two runs: {worst} bytes "
            f"(the refs' declared sizes have more digits); 1 MiB/1 KiB total ratio "
            f"{sum(big) / sum(small):.3f} for a 1024x media size ratio"
        )
        emit(
            [
                Row("SQLite live steps / bare inserts", live / bare, 0.5, ">=", reach=alone / bare),
                Row(
                    "SQLite live steps / bare vs its SQL alone",
                    live / bare,
                    alone / bare,
                    "",
                    "bound",
                ),
                Row("SQLite replay / live", replayed / live, 5.0, ">="),
                Row("SQLite live / bare, median of per-round ratios", live_ratio),
                Row("SQLite replay / live, median of per-round ratios", replay_ratio),
                Row("SQLite live async fn / bare inserts", async_live / bare),
                Row("journal bytes, 1 MiB / 1 KiB images", sum(big) / sum(small)),
            ]
        )


if __name__ == "__main__":
    main()
