"""Recordings (JSON Lines export/import) and hash_request's golden hashes."""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loom_nb.content import LlmRequest
from loom_nb.errors import ContentValidationError, JournalError
from loom_nb.journal import CLAIM_MARKER, Journal, create_llm_effect, hash_request
from loom_nb.providers import ScriptedProvider
from loom_nb.store import LocalContentStore, Principal

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
STRING_HASH = "sha256:b9c9b5f1e5dfc39c6c559e7c4915ad1f5c932514bcbbffa49295cc6ed9b3a587"
PARTS_HASH = "sha256:3bff3edcfcfe8dbc0a3c60f37e1e4599d5ff99e282e79a6fe4b8b4fc46d251da"


def never(_: Any) -> Any:
    raise AssertionError("a replayed step must not call its fn")


async def recorded(journal: Journal) -> None:
    execution = journal.execution("demo", principal=Principal("acme"))
    await execution.execute("plan", lambda q: {"steps": [q, "ünï"]}, "go")
    effect = create_llm_effect(ScriptedProvider([{"text": "answer"}]))
    await effect(execution, "llm", {"messages": [{"role": "user", "content": "hi\u2028there"}]})
    await execution.complete({"ok": True})


async def test_export_import_round_trip_replays_without_provider(tmp_path: Path) -> None:
    """An exported recording imported elsewhere replays every step and the model call with no provider."""
    source = Journal(tmp_path / "a.sqlite")
    await recorded(source)
    path = tmp_path / "run.jsonl"
    assert (
        source.export_jsonl("demo", path) == 5 + 1
    )  # started, 2 x (started, completed), completed
    target = Journal(tmp_path / "b.sqlite")
    assert target.import_jsonl(path) == "demo"
    replay = target.execution("demo")
    assert replay.principal == Principal("acme")
    assert await replay.execute("plan", never, "go") == {"steps": ["go", "ünï"]}
    effect = create_llm_effect(ScriptedProvider([]))  # no turns: a live call would fail
    response = await effect(
        replay, "llm", {"messages": [{"role": "user", "content": "hi\u2028there"}]}
    )
    assert response.content == "answer"
    assert replay.status == "completed"
    assert target.export_jsonl("demo", tmp_path / "again.jsonl") == 6
    assert (tmp_path / "again.jsonl").read_text("utf-8") == path.read_text("utf-8")


async def test_recording_lines_are_canonical_reviewable_json(
    tmp_path: Path, open_journal: Callable[..., Journal]
) -> None:
    """Each line is one event as canonical JSON (sorted keys, compact, UTF-8 kept), seq renumbered from 1."""
    journal = open_journal()
    await recorded(journal)
    out = io.StringIO()
    journal.export_jsonl("demo", out)
    lines = out.getvalue().split("\n")
    assert lines[-1] == ""
    records = [json.loads(line) for line in lines[:-1]]
    for line, record in zip(lines, records, strict=False):
        assert line == json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    assert [r["kind"] for r in records][:3] == [
        "execution_started",
        "step_started",
        "step_completed",
    ]
    assert "ünï" in lines[2]


async def test_claim_checked_payloads_are_inlined_on_export(
    tmp_path: Path, open_journal: Callable[..., Journal]
) -> None:
    """Export inlines claim-checked payloads, so the recording imports into a journal without a store."""
    store = LocalContentStore(tmp_path / "store")
    journal = open_journal(store=store, claim_threshold=64)
    big = "z" * 1000
    await journal.execution("r").execute("s", lambda _: big)
    assert CLAIM_MARKER in journal.events("r", resolve_claims=False)[-1].payload["output"]
    out = io.StringIO()
    journal.export_jsonl("r", out)
    assert CLAIM_MARKER not in out.getvalue()
    plain = open_journal()
    plain.import_jsonl(io.StringIO(out.getvalue()), execution_id="copy")
    assert await plain.execution("copy").execute("s", never) == big


async def test_import_reapplies_the_importing_journals_claim_checks(
    tmp_path: Path, open_journal: Callable[..., Journal]
) -> None:
    """Imported into a journal with a store, large payloads are claim-checked again."""
    source = open_journal()
    await source.execution("r").execute("s", lambda _: "y" * 1000)
    out = io.StringIO()
    source.export_jsonl("r", out)
    target = open_journal(store=LocalContentStore(tmp_path / "store"), claim_threshold=64)
    target.import_jsonl(io.StringIO(out.getvalue()))
    assert target.events("r", resolve_claims=False)[-1].payload["claimed"] == ["output"]
    assert await target.execution("r").execute("s", never) == "y" * 1000


async def test_import_of_an_existing_execution_is_refused(
    open_journal: Callable[..., Journal],
) -> None:
    """Importing over an existing execution id raises JournalError('execution_exists'); --as another id works."""
    journal = open_journal()
    await recorded(journal)
    out = io.StringIO()
    journal.export_jsonl("demo", out)
    with pytest.raises(JournalError) as info:
        journal.import_jsonl(io.StringIO(out.getvalue()))
    assert info.value.code == "execution_exists"
    assert journal.import_jsonl(io.StringIO(out.getvalue()), execution_id="demo-2") == "demo-2"
    assert journal.execution("demo-2").status == "completed"


def test_export_of_unknown_execution_is_refused(open_journal: Callable[..., Journal]) -> None:
    """Exporting an id the journal does not hold raises JournalError('execution_not_found')."""
    with pytest.raises(JournalError) as info:
        open_journal().export_jsonl("nope", io.StringIO())
    assert info.value.code == "execution_not_found"


START = '{"created":"2026-01-01T00:00:00+00:00","execution_id":"r","kind":"execution_started","payload":{"principal":null},"position":null,"seq":1,"step_id":null}'


@pytest.mark.parametrize(
    ("text", "code", "needle"),
    [
        ("", "recording_invalid", "empty"),
        (START + "\n{not json", "recording_invalid", "line 2"),
        (START + "\n[1]", "recording_invalid", "line 2"),
        (
            START.replace('"kind":"execution_started"', '"kind":"teleported"'),
            "recording_invalid",
            "kind",
        ),
        (START.replace('"position":null', '"position":"0"'), "recording_invalid", "position"),
        (START.replace("execution_started", "completed"), "recording_invalid", "execution_started"),
        (
            START
            + '\n{"created":"2026-01-01T00:00:01+00:00","execution_id":"r","kind":"step_completed",'
            '"payload":{},"position":0,"seq":2,"step_id":"s"}',
            "journal_corrupt",
            "position 0",
        ),
    ],
)
def test_malformed_recordings_are_refused_with_the_line(
    text: str, code: str, needle: str, open_journal: Callable[..., Journal]
) -> None:
    """A malformed recording raises JournalError naming the problem, and nothing is imported."""
    journal = open_journal()
    with pytest.raises(JournalError) as info:
        journal.import_jsonl(io.StringIO(text))
    assert info.value.code == code
    assert needle in info.value.message
    assert journal.executions() == []


def test_golden_hash_of_string_request() -> None:
    """The string-content golden request hashes to its pinned value (committed recordings keep matching)."""
    request = json.loads((GOLDEN / "string_request.json").read_text("utf-8"))
    assert hash_request(request) == STRING_HASH


def test_golden_hash_of_parts_request() -> None:
    """The parts golden request (media by ref and inline, tool use/result, untrusted text) hashes to its pinned value."""
    request = json.loads((GOLDEN / "hash_parts_request.json").read_text("utf-8"))
    assert hash_request(request) == PARTS_HASH
    assert hash_request(LlmRequest.model_validate(request)) == PARTS_HASH


def _shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: _shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_hash_ignores_dict_order(seed: int) -> None:
    """Reordering every dict's keys in the input does not change the hash."""
    request = json.loads((GOLDEN / "hash_parts_request.json").read_text("utf-8"))
    assert hash_request(_shuffled(request, random.Random(seed))) == PARTS_HASH


def test_hash_is_stable_across_processes_and_hash_seeds() -> None:
    """Fresh interpreters with different PYTHONHASHSEEDs compute the same golden hashes."""
    code = (
        "import json, sys; from loom_nb.journal import hash_request\n"
        "for path in sys.argv[1:]: print(hash_request(json.load(open(path, encoding='utf-8'))))"
    )
    files = [str(GOLDEN / f"{name}.json") for name in ("string_request", "hash_parts_request")]
    for seed in ("0", "12345", "random"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(  # one interpreter per seed hashes both requests
            [sys.executable, "-c", code, *files],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
        assert out.stdout.split() == [STRING_HASH, PARTS_HASH]


def test_hash_of_a_bad_request_is_a_content_error() -> None:
    """hash_request of a dict that is not a request raises ContentValidationError naming the field."""
    with pytest.raises(ContentValidationError) as info:
        hash_request({"messages": [{"role": "robot", "content": "x"}]})
    assert "role" in info.value.message
