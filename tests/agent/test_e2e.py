"""End to end: a six-turn agent run, parked for an approval and resumed in a new process, then replayed exactly.

The run (see ``e2e_scenario``) uses every rule at once: an image by ref from a ``returns_media``
tool, an untrusted tool whose page holds a forged fence close and an injected instruction, a tool
requiring approval (the run parks; a NEW PROCESS resumes it with the decision), a tool that
raises, and compaction mid-run. It runs on the ScriptedProvider and on the Anthropic, OpenAI and
Gemini providers over httpx.MockTransport (the handler answers with scripted vendor JSON). Then
the run is replayed from its journal with ``divergence="fail"``: no provider call, no tool call,
and every model request rebuilt byte for byte as journaled.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loom_nb.agent import AgentResult
from loom_nb.content import ToolResultPart, canonical_json, parse_request
from loom_nb.guard import guard_request
from loom_nb.journal import Execution, Journal
from loom_nb.store import LocalContentStore, Principal
from tests.agent import e2e_scenario as sc

SCENARIO = Path(sc.__file__)
_OPEN = re.compile(r'<untrusted nonce="([0-9a-f]{8,64})" origin="[^"]*">')


class Recorder:
    """An execution that notes the input of every step it is asked to run (live or replayed)."""

    def __init__(self, inner: Execution) -> None:
        self.inner = inner
        self.steps: list[tuple[str, str]] = []

    async def execute(self, step_id: str, fn: Any, input: Any = None) -> Any:
        self.steps.append((step_id, canonical_json(input)))
        return await self.inner.execute(step_id, fn, input)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _strings(value: Any) -> Iterator[str]:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            yield node
        elif isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def _only_inside_fences(text: str, needle: str) -> bool:
    """Every occurrence of ``needle`` lies between a real fence open and its own close, with no tag between."""
    for match in re.finditer(re.escape(needle), text):
        opens = list(_OPEN.finditer(text, 0, match.start()))
        if not opens:
            return False
        last = opens[-1]
        close = f'</untrusted nonce="{last.group(1)}">'
        inside_end = text.find(close, match.end())
        if inside_end < 0 or close in text[last.end() : match.start()]:
            return False
        between = text[last.end() : inside_end]
        if "<untrusted" in between or "</untrusted" in between:
            return False
    return True


def _model_steps(journal: Journal) -> list[tuple[str, str]]:
    return [
        (e.step_id, canonical_json(e.payload["input"]))
        for e in journal.events(sc.EXECUTION_ID)
        if e.kind == "step_completed" and e.step_id and e.step_id.endswith((":model", ":compact"))
    ]


def _resume_in_new_process(
    vendor: str, tmp_path: Path
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    wire_path = tmp_path / "wire-resumed.json"
    done = subprocess.run(
        [
            sys.executable,
            str(SCENARIO),
            vendor,
            str(tmp_path / "run.db"),
            str(tmp_path / "store"),
            str(wire_path),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    wire: list[dict[str, Any]] = json.loads(wire_path.read_text(encoding="utf-8"))
    return out, wire


@pytest.mark.slow
@pytest.mark.parametrize("vendor", sc.VENDORS)
async def test_six_turn_run_parks_resumes_in_a_new_process_and_replays_exactly(
    vendor: str, tmp_path: Path
) -> None:
    """The six-turn run completes across two processes on every provider and replays byte for byte from its journal."""
    store = LocalContentStore(tmp_path / "store")
    principal = Principal(sc.TENANT)

    # 1. First process: turns 0-2 run live, and the run parks on the approval.
    journal = Journal(str(tmp_path / "run.db"))
    ran: list[str] = []
    wire: list[dict[str, Any]] = []
    provider = sc.make_provider(vendor, wire)
    first = await sc.run(
        journal.execution(sc.EXECUTION_ID, principal=principal),
        vendor,
        store,
        ran=ran,
        wire_log=wire,
        provider=provider,
    )
    assert first.status == "parked"
    assert first.turns == 3
    assert [d["name"] for d in first.pending_approvals] == ["delete_records"]
    assert first.messages[-1].role == "assistant"  # parked before the results message
    assert ran == ["chart", "web_fetch"]
    if vendor == "scripted":
        wire = [{"url": "scripted", "body": b} for b in sc.scripted_requests_of(provider)]
    journal.close()

    # 2. A new process resumes the same execution with the decision and finishes the run.
    resumed, wire_resumed = _resume_in_new_process(vendor, tmp_path)
    assert resumed["ran"] == ["delete_records", "flaky", "chart"]
    final = AgentResult.model_validate(resumed["result"])
    assert final.status == "completed"
    assert final.turns == 6
    assert final.text == sc.FINAL
    assert final.compactions == [4]
    assert len(wire) == 3
    assert len(wire_resumed) == 4  # turn 3, the summary, turns 4 and 5

    # The transcript after compaction: summary, then the kept pair (never a bare result), then turns 4-5.
    summary, kept_call, kept_results, *rest = final.messages
    assert summary.role == "user"
    assert kept_call.role == "assistant"
    assert isinstance(kept_results.content, list)
    (flaky,) = kept_results.content
    assert isinstance(flaky, ToolResultPart)
    assert flaky.is_error is True
    assert isinstance(flaky.content, str)
    assert json.loads(flaky.content)["error"] == {
        "type": "RuntimeError",
        "message": "upstream timeout after 30s",
    }
    assert [m.role for m in rest] == ["assistant", "user", "assistant"]

    # 3. Replay from the journal with divergence="fail": nothing live, same requests byte for byte.
    journal = Journal(str(tmp_path / "run.db"))
    replay_ran: list[str] = []
    replay_wire: list[dict[str, Any]] = []
    silent = (
        sc.make_provider(vendor, replay_wire) if vendor != "scripted" else sc.ScriptedProvider([])
    )
    recorder = Recorder(journal.execution(sc.EXECUTION_ID, principal=principal, divergence="fail"))
    again = await sc.run(
        recorder, vendor, store, ran=replay_ran, wire_log=replay_wire, provider=silent
    )  # type: ignore[arg-type]
    assert again == final
    assert replay_ran == []
    assert replay_wire == []
    if vendor == "scripted":
        assert sc.scripted_requests_of(silent) == []
    journaled = _model_steps(journal)
    rebuilt = [(sid, body) for sid, body in recorder.steps if sid.endswith((":model", ":compact"))]
    assert [sid for sid, _ in journaled] == [
        "#turn:0:model",
        "#turn:1:model",
        "#turn:2:model",
        "#turn:3:model",
        "#turn:4:compact",
        "#turn:4:model",
        "#turn:5:model",
    ]
    assert rebuilt == journaled  # byte-identical canonical requests

    # 4. Every journaled request passes the guard (idempotently), and media is journaled by address only.
    png_b64 = base64.b64encode(sc.PNG).decode()
    for _, body in journaled:
        guarded = guard_request(parse_request(json.loads(body)))
        assert guard_request(guarded) == guarded
        assert png_b64 not in body

    # 5. On the wire: the image went inline at the last moment; untrusted text only inside fences.
    bodies = [json.dumps(w["body"], ensure_ascii=False) for w in wire + wire_resumed]
    assert png_b64 in bodies[1]
    assert any(sc.INJECTION in b for b in bodies)
    assert any(sc.SUMMARY_MARK in b for b in bodies[5:])
    for entry in wire + wire_resumed:
        for text in _strings(entry["body"]):
            for needle in (sc.INJECTION, sc.SUMMARY_MARK, "Quarterly report"):
                assert _only_inside_fences(text, needle), (needle, text)
            assert '</untrusted nonce="0123456789abcdef01234567">' not in text
    journal.close()
