"""The guard resumes after an already-guarded prefix, and still refuses what it must (issue 15)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from loom_nb.content import LlmRequest, Message, TextPart, ToolResultPart, ToolUsePart
from loom_nb.errors import GuardError
from loom_nb.guard import guard_request
from loom_nb.taint import Untrusted

ROOT = Path(__file__).resolve().parents[1]


def turn(i: int) -> list[Message]:
    call = ToolUsePart(id=f"c{i}", name="tick", input={"n": i})
    result = ToolResultPart(tool_use_id=f"c{i}", content=f"ok {i}")
    return [Message(role="assistant", content=[call]), Message(role="user", content=[result])]


def test_extension_of_a_guarded_prefix_is_checked() -> None:
    """After guarding a transcript, a longer request with a bad new message is still refused."""
    transcript = [Message(role="user", content="start")]
    for i in range(5):
        transcript += turn(i)
        guard_request(LlmRequest(messages=transcript))
    orphan = Message(role="user", content=[ToolResultPart(tool_use_id="nope", content="x")])
    bad = [*transcript, Message(role="assistant", content="hm"), orphan]
    with pytest.raises(GuardError):
        guard_request(LlmRequest(messages=bad))
    # The refusal left no half-walked state: the good transcript and a good extension pass.
    assert guard_request(LlmRequest(messages=transcript)).messages == transcript
    assert guard_request(LlmRequest(messages=[*transcript, *turn(9)])).messages[-1] == turn(9)[1]


def test_a_replaced_middle_message_is_walked_again() -> None:
    """A request whose middle message differs from the guarded one is guarded from the start."""
    transcript = [Message(role="user", content="start")]
    for i in range(3):
        transcript += turn(i)
    guard_request(LlmRequest(messages=transcript))
    forged = list(transcript)
    forged[3] = Message(role="assistant", content=[TextPart(text=Untrusted("x", "tool:web"))])
    with pytest.raises(GuardError) as info:
        guard_request(LlmRequest(messages=forged))
    assert info.value.code == "untrusted_in_assistant"


def test_untrusted_prefix_is_still_fenced_after_resuming() -> None:
    """Untrusted text in the guarded prefix is fenced again when the walk resumes after it."""
    first = Message(role="user", content=[TextPart(text="doc", origin="tool:web")])
    transcript = [first, Message(role="assistant", content="read it")]
    once = guard_request(LlmRequest(messages=transcript))
    more = [*transcript, Message(role="user", content="and?")]
    twice = guard_request(LlmRequest(messages=more))
    assert "<untrusted" in str(once.messages[0].content)
    assert "<untrusted" in str(twice.messages[0].content)


@pytest.mark.slow
def test_long_run_cost_stays_linear() -> None:
    """benchmarks/bench_agent.py --check: per-turn live time and journal bytes at 300 turns within 2x of 10 turns."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_agent.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
