"""Property tests: any JSON value replays as itself; request hashes survive a recording round trip."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

from hypothesis import given, settings

from loom_nb.content import LlmRequest, canonical_json
from loom_nb.journal import Journal, hash_request
from tests.strategies import json_values, requests


@settings(max_examples=60, deadline=None)
@given(value=json_values)
def test_any_json_value_is_returned_the_same_live_and_replayed(value: Any) -> None:
    """For any JSON value, the live output, the replayed output and the value itself are equal."""

    async def run() -> tuple[Any, Any]:
        journal = Journal()
        live = await journal.execution("r").execute("s", lambda _: value, value)
        replayed = await journal.execution("r").execute("s", lambda _: "not called", value)
        return live, replayed

    live, replayed = asyncio.run(run())
    assert live == replayed == value


@settings(max_examples=60, deadline=None)
@given(request=requests)
def test_request_hash_survives_a_json_round_trip(request: LlmRequest) -> None:
    """A request read back from its journaled JSON hashes the same as the original (recordings keep matching)."""
    again = LlmRequest.model_validate(json.loads(canonical_json(request)))
    assert hash_request(again) == hash_request(request)


def test_threads_sharing_a_journal_do_not_interleave_badly(tmp_path: Path) -> None:
    """Threads driving their own executions on one Journal object each get a whole, ordered log."""
    journal = Journal(tmp_path / "j.sqlite")
    errors: list[BaseException] = []

    def worker(name: str) -> None:
        async def run() -> None:
            execution = journal.execution(name)
            for i in range(100):
                assert await execution.execute(f"s{i}", lambda x: x * 2, i) == i * 2

        try:
            asyncio.run(run())
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(f"t{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for n in range(4):
        positions = [e.position for e in journal.events(f"t{n}") if e.kind == "step_completed"]
        assert positions == list(range(100))
