"""A class on one PostgreSQL: processes of many student kernels, each with its journal open.

``run_class(url, processes, kernels, turns)`` starts ``processes`` processes (forked from a
server that imported loom_nb once, so a class starts in a second, not in six imports). Each
opens ``kernels`` journals at ``url`` (one per kernel, held for the whole session, as a notebook
holds its chat's journal) and says so; once every process holds its connections, each kernel,
on a thread of its own, has a conversation of ``turns`` turns with a scripted model (a journaled
``Chat``), and the journals are closed.

Each process reports how many kernels opened their journal, how many turns were journaled, and
every failure as ``{"at": "open" | "turn", "code": ..., "message": ...}``.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
from typing import Any

from loom_nb.chat import Chat
from loom_nb.errors import LoomError
from loom_nb.journal import Journal
from loom_nb.providers import ScriptedProvider


def failure(at: str, exc: BaseException) -> dict[str, Any]:
    """A failure as reported to the test."""
    code = exc.code if isinstance(exc, LoomError) else type(exc).__name__
    return {"at": at, "code": code, "message": str(exc)}


def kernels_of(
    url: str, kernels: int, turns: int, name: str, ready: Any, go: Any, results: Any
) -> None:
    """One process of the class (the target of each process ``run_class`` starts)."""
    failures: list[dict[str, Any]] = []
    journals: list[Journal] = []
    for _ in range(kernels):
        try:
            journals.append(Journal(url, pool_size=1, timeout=10))
        except Exception as exc:  # reported, whatever it is
            failures.append(failure("open", exc))
    ready.put(name)
    go.wait(120)
    done = [0]
    lock = threading.Lock()

    def kernel(index: int, journal: Journal) -> None:
        script = [{"text": f"answer {turn}"} for turn in range(turns)]
        chat = Chat(ScriptedProvider(script), journal=journal, id=f"{name}-kernel-{index}")

        async def talk() -> None:
            for turn in range(turns):
                await chat(f"question {turn}")
                with lock:
                    done[0] += 1

        try:
            asyncio.run(talk())
        except Exception as exc:  # reported, whatever it is
            with lock:
                failures.append(failure("turn", exc))

    threads = [
        threading.Thread(target=kernel, args=(i, journal)) for i, journal in enumerate(journals)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for journal in journals:
        journal.close()
    results.put({"name": name, "opened": len(journals), "turns": done[0], "failures": failures})


def run_class(
    url: str, *, processes: int, kernels: int, turns: int, held: Any = None
) -> list[dict[str, Any]]:
    """Run the class; return each process's report. ``held(count)``, if given, is called once
    every process holds its journals open (``count`` of them), before anyone talks."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    ready, results, go = context.Queue(), context.Queue(), context.Event()
    workers = [
        context.Process(target=kernels_of, args=(url, kernels, turns, f"p{i}", ready, go, results))
        for i in range(processes)
    ]
    for worker in workers:
        worker.start()
    try:
        for _ in workers:
            ready.get(timeout=180)
        if held is not None:
            held(processes * kernels)
        go.set()
        reports = [results.get(timeout=300) for _ in workers]
    finally:
        go.set()
        for worker in workers:
            worker.join(30)
            if worker.is_alive():
                worker.kill()
    return reports
