"""Several processes working one map (issue 32 item 4): ``chat.map(..., join=True)`` and
``loom-nb map work ID``, with workers SIGKILLed mid-call.

The kernel's side runs in the test process; workers are ``python -m loom_nb map work ID``
processes answering with ``tests.chat.work_provider:make``, which logs each call's start and end
to a file they share with the kernel's provider. What must hold: every item answered in the
kernel's ``MapResult``; each item's model step journaled as completed exactly once; a call
completed twice only for an item a killed worker was in the middle of; the items of a killed
worker finished by another (at once: same host, its pid gone); and the kernel's progress counting the others' items.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from loom_nb import Chat, ConfigurationError
from loom_nb.chat._map_plan import load_plan
from loom_nb.cli.map import provider_for
from tests.chat.work_provider import Logged
from tests.conftest import JournalBackend

ROOT = Path(__file__).resolve().parents[2]
LEASE = 60.0
"""The workers' claim lease: long, so that a live worker starved of CPU (a loaded machine) keeps
its items; one it outlived would be claimed and called again by another process, which this
test rightly counts as a double call. A killed worker's claims never wait for it: the workers
share this host, so they are free as soon as its pid is gone."""
START = 300.0
"""Seconds the workers get to start and reach their calls (a Python process each, under load)."""


def _log(path: Path) -> list[tuple[str, str, int]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        what, text, pid = line.split()
        rows.append((what, text, int(pid)))
    return rows


class Spawner:
    """A progress view that starts the workers when the map shows its id, and notes the counts.

    The workers' calls wait at a gate (``work_provider``) which opens once each worker has the
    calls in flight it needs: as many as its ``kill_at`` (so that it is killed mid-call, however
    late it started) or one. The kernel is held until then too, so that all take part."""

    def __init__(self, url: str, log: Path, kills: list[int]) -> None:
        self.url, self.log, self.kills = url, log, kills
        self.gate = log.with_name(log.name + ".gate")
        self.procs: list[subprocess.Popen[str]] = []
        self.seen: list[tuple[int, int, int]] = []  # (done, ran here, served) at each update

    def show(self, progress: Any) -> None:
        self.seen.append((progress.done, progress._ran, progress.served))
        if self.procs:
            return
        for kill_at in self.kills:
            env = {
                **os.environ,
                "PYTHONPATH": str(ROOT),
                "LOOM_TEST_WORK_LOG": str(self.log),
                "LOOM_TEST_WORK_KILL_AT": str(kill_at),
                "LOOM_TEST_WORK_GATE": str(self.gate),
            }
            command = [sys.executable, "-m", "loom_nb", "map", "work", progress.map_id]
            command += ["--journal", self.url, "--provider", "tests.chat.work_provider:make"]
            command += ["--concurrency", "4", "--lease", str(LEASE)]
            self.procs.append(
                subprocess.Popen(
                    command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
                )
            )
        deadline = time.monotonic() + START
        while True:
            started = Counter(pid for what, _, pid in _log(self.log) if what == "start")
            needs = zip(self.procs, self.kills, strict=True)
            if all(p.poll() is not None or started[p.pid] >= max(1, k) for p, k in needs):
                break
            assert time.monotonic() < deadline, ("the workers did not reach their calls", started)
            time.sleep(0.02)
        self.gate.touch()


@pytest.mark.slow
@pytest.mark.parametrize("workers", [2, 4])
async def test_workers_and_a_kernel_share_a_map_through_sigkills(
    journal_backend: JournalBackend, tmp_path: Path, workers: int
) -> None:
    """A kernel and two or four ``loom-nb map work`` processes (half SIGKILLed mid-call) answer
    240 items: each model step completes once, the kernel's result holds every answer."""
    if journal_backend.name == "pgbouncer" and workers == 4:
        pytest.skip("the pooler runs the two-worker case")
    words = [f"w{i:03d}" for i in range(240)]
    log = tmp_path / "calls.log"
    journal = journal_backend.open("map")
    kills = [2 + n if n % 2 == 0 else 0 for n in range(workers)]
    spawner = Spawner(journal_backend.url("map"), log, kills)

    def counted_others() -> bool:  # the kernel's progress has shown items it did not answer
        return any(done > ran + served for done, ran, served in spawner.seen)

    # The kernel's calls answer only once its progress has counted others' items: else, on a
    # loaded machine, the map may end before its queue was looked at while the workers answered.
    kernel = Logged(str(log), delay=(0.02, 0.06), hold=counted_others)
    chat = Chat(kernel, journal=journal, id="mapper")  # type: ignore[arg-type]
    try:
        result = await chat.map(words, concurrency=4, join=True, progress=spawner)
    finally:
        outs = [p.communicate(timeout=240) for p in spawner.procs]
    killed = {p.pid for p in spawner.procs if p.returncode == -9}
    assert len(killed) == workers // 2, [out[1][-2000:] for out in outs]
    for proc, (out, err) in zip(spawner.procs, outs, strict=True):
        if proc.pid not in killed:
            assert proc.returncode == 0, err
            assert json.loads(out.strip().splitlines()[-1])["failed"] == 0
    # The kernel's result: every item, in order, answered.
    assert result.errors == {}
    assert [r.content if r else None for r in result] == [f"echo {w}" for w in words]
    assert result.ran + result.served == len(words)  # the kernel ran some, the workers the rest
    # Each item's model step journaled as completed exactly once.
    plan = load_plan(journal, result.id)
    for index in range(len(words)):
        kinds = [e.kind for e in journal.events(plan.item_id(index), resolve_claims=False)]
        assert kinds.count("step_completed") == 1, (index, kinds)
    # Calls: every item called; twice only where a killed worker was in the middle of it.
    calls = _log(log)
    ends = Counter(text for what, text, _ in calls if what == "end")
    assert set(ends) == set(words)
    for text, count in ends.items():
        if count > 1:
            by = [pid for what, t, pid in calls if what == "end" and t == text]
            assert len([pid for pid in by if pid not in killed]) == 1, (text, by)
    attempts = {item.item: item.attempts for item in journal.work_queue(result.id).items()}
    for pid in killed:
        cut = {t for w, t, p in calls if w == "start" and p == pid} - {
            t for w, t, p in calls if w == "end" and p == pid
        }
        assert cut, f"worker {pid} was killed outside a call"
        for text in cut:
            assert attempts[str(words.index(text))] >= 2
    # The kernel's progress counted the others' items while the map ran, and all at the end.
    assert counted_others(), spawner.seen
    assert spawner.seen[-1][0] == len(words)


async def test_two_kernels_join_one_map(journal_backend: JournalBackend, tmp_path: Path) -> None:
    """Two chats on two journal handles run the same map with ``join=True`` at once: every item
    is called once in all, and both results hold every answer."""
    log = tmp_path / "calls.log"
    words = [f"k{i:02d}" for i in range(30)]
    chats = []
    for _ in range(2):  # two handles on one database: two writers, as two kernels are
        journal = journal_backend.open("map")
        chats.append(Chat(Logged(str(log)), journal=journal, id="mapper"))  # type: ignore[arg-type]
    first, second = await asyncio.gather(
        chats[0].map(words, concurrency=3, join=True, progress=False),
        chats[1].map(words, concurrency=3, join=True, progress=False),
    )
    assert first.id == second.id
    for result in (first, second):
        assert [r.content if r else None for r in result] == [f"echo {w}" for w in words]
    ends = Counter(text for what, text, _ in _log(log) if what == "end")
    assert ends == Counter(words)  # each called once, by one of them
    assert first.ran + second.ran == len(words)


def test_a_worker_builds_its_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--provider MODULE:NAME`` imports a provider or a factory; without it the journaled
    identity builds a vendor provider, and an unknown one asks for ``--provider``."""
    monkeypatch.setenv("LOOM_TEST_WORK_LOG", os.devnull)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert isinstance(provider_for({}, "tests.chat.work_provider:make"), Logged)
    built = provider_for({"provider": "OpenAIProvider", "model": "gpt-x", "api_url": None}, None)
    assert type(built).__name__ == "OpenAIProvider"
    assert built.model == "gpt-x"
    for identity, spec in (({"provider": "ScriptedProvider"}, None), ({}, "no_such_mod:x")):
        with pytest.raises(ConfigurationError) as caught:
            provider_for(identity, spec)
        assert caught.value.code in ("map_provider_unknown", "map_provider_unavailable")


async def test_stop_gives_the_claims_back(journal_backend: JournalBackend, tmp_path: Path) -> None:
    """Stopping a joined map cancels its calls and gives their items back to the queue at once
    (nothing stays claimed for a lease); a second run finishes the map from the journal."""
    if journal_backend.name != "sqlite":
        pytest.skip("the same code on every backend; the process tests cover the servers")
    log = tmp_path / "calls.log"
    words = [f"s{i:02d}" for i in range(20)]
    chat = Chat(
        Logged(str(log), delay=(0.05, 0.1)), journal=journal_backend.open("map"), id="mapper"
    )  # type: ignore[arg-type]

    class StopAtFive:
        def show(self, progress: Any) -> None:
            if progress.done >= 5:
                progress.stop()

    result = await chat.map(words, concurrency=3, join=True, progress=StopAtFive())
    assert result.stopped
    assert {e.code for e in result.errors.values()} == {"map_stopped"}
    counts = chat.journal.work_queue(result.id).counts()
    assert counts.claimed == 0
    assert counts.pending == len(result.errors)
    again = await chat.map(words, concurrency=3, join=True, progress=False)
    assert [r.content if r else None for r in again] == [f"echo {w}" for w in words]
    assert again.ran == len(result.errors)
