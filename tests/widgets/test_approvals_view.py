"""Approvals in TranscriptView (awaiting, Approve / Decline, who decided) and per-turn tokens and latency."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from loom_nb import TranscriptView
from loom_nb.agent import ToolDefinition, agent_loop
from loom_nb.content import LlmResponse, Message, ToolCall, ToolUsePart, Usage
from loom_nb.errors import ContentValidationError
from loom_nb.journal import Journal
from loom_nb.providers import ScriptedProvider
from loom_nb.render import render_transcript
from tests.display import displayed
from tests.render.safety import unsafe_parts

CALL = Message(
    role="assistant", content=[ToolUsePart(id="call_1", name="delete", input={"table": "x"})]
)


def _tool_view(view: TranscriptView) -> dict[str, Any]:
    return view.messages[0]["items"][0]


def _click(view: TranscriptView, call_id: str, approved: Any) -> dict[str, Any]:
    """What the front end's Approve / Decline button sends, through the comm handler."""
    replies: list[dict[str, Any]] = []
    view.send = replies.append  # type: ignore[method-assign]
    view._handle_custom_msg(
        {"type": "decision", "call_id": call_id, "approved": approved, "ticket": "7"}, []
    )
    assert len(replies) == 1
    return replies[0]


def test_awaiting_call_is_marked_in_views_and_static_html() -> None:
    """await_approval marks the card; the saved HTML names the call awaiting approval."""
    view = TranscriptView([CALL])
    view.await_approval("call_1")
    assert view.awaiting == ["call_1"]
    assert _tool_view(view)["approval"] == {"state": "awaiting", "by": None, "reason": None}
    html = view.to_static_html()
    assert "tool call · delete · call call_1" in html
    assert ">awaiting approval" in html
    assert view.decidable is False  # no callback: no buttons


def test_approve_click_calls_on_decision_and_records_who() -> None:
    """A click calls on_decision(call_id, True); the card and static HTML then say who approved."""
    seen: list[tuple[str, bool]] = []
    view = TranscriptView([CALL], on_decision=lambda call_id, ok: seen.append((call_id, ok)))
    assert view.decidable is True
    view.await_approval("call_1")
    reply = _click(view, "call_1", True)
    assert reply == {"ticket": "7", "type": "decision", "ok": True}
    assert seen == [("call_1", True)]
    assert view.awaiting == []
    assert "✓ approved by you, in this view" in view.to_static_html()


def test_decline_is_recorded_and_a_second_click_is_refused() -> None:
    """Declining is shown as declined; a call no longer awaiting cannot be decided again."""
    seen: list[tuple[str, bool]] = []
    view = TranscriptView([CALL], on_decision=lambda call_id, ok: seen.append((call_id, ok)))
    view.await_approval("call_1")
    assert _click(view, "call_1", False)["ok"] is True
    assert "✗ declined by you, in this view; the call was not run" in view.to_static_html()
    again = _click(view, "call_1", True)
    assert "not awaiting approval" in again["error"]
    assert seen == [("call_1", False)]


def test_a_failing_callback_leaves_the_call_awaiting_with_the_reason() -> None:
    """If on_decision raises, the card says why and stays awaiting (nothing is lost)."""

    def boom(call_id: str, approved: bool) -> None:
        raise RuntimeError("the run is gone")

    view = TranscriptView([CALL], on_decision=boom)
    view.await_approval("call_1")
    reply = _click(view, "call_1", True)
    assert reply["error"] == "RuntimeError: the run is gone"
    assert view.awaiting == ["call_1"]
    assert "the decision failed: RuntimeError: the run is gone" in view.to_static_html()


def test_an_async_callback_is_scheduled_and_its_failure_shown() -> None:
    """An async on_decision (chat.decide) runs on the loop; a failure returns the call to awaiting."""
    calls: list[tuple[str, bool]] = []

    async def decide(call_id: str, approved: bool) -> str:
        calls.append((call_id, approved))
        await asyncio.sleep(0)
        if call_id == "bad":
            raise ContentValidationError("no parked run", code="nothing_parked")
        return "resumed"

    async def scenario() -> tuple[Any, TranscriptView]:
        view = TranscriptView(
            [
                Message(
                    role="assistant",
                    content=[ToolUsePart(id=i, name="d", input={}) for i in ("ok", "bad")],
                )
            ],
            on_decision=decide,
        )
        view.await_approval("ok", "bad")
        good = view.decide("ok", True)
        bad = view.decide("bad", True)
        assert await good == "resumed"
        with pytest.raises(ContentValidationError):
            await bad
        await asyncio.sleep(0)
        return good, view

    _, view = asyncio.run(scenario())
    assert calls == [("ok", True), ("bad", True)]
    assert view.approvals["ok"]["state"] == "approved"
    assert view.approvals["bad"] == {
        "state": "awaiting",
        "by": None,
        "reason": "the decision failed: no parked run",
    }


def test_bad_decision_input_is_refused_with_codes() -> None:
    """A non-bool decision, an unknown state, a non-callable callback: typed errors."""
    view = TranscriptView([CALL], on_decision=lambda *_: None)
    view.await_approval("call_1")
    assert "True or False" in _click(view, "call_1", "yes")["error"]
    with pytest.raises(ContentValidationError) as state:
        view.set_approval("call_1", "maybe")
    assert state.value.code == "invalid_approval_state"
    with pytest.raises(ContentValidationError) as callback:
        TranscriptView([CALL], on_decision="approve")  # type: ignore[arg-type]
    assert callback.value.code == "invalid_callback"
    plain = TranscriptView([CALL])
    plain.await_approval("call_1")
    with pytest.raises(ContentValidationError) as no_cb:
        plain.decide("call_1", True)
    assert no_cb.value.code == "no_decision_callback"


def test_hostile_reason_and_who_are_escaped() -> None:
    """A reason with markup reaches the static HTML escaped."""
    view = TranscriptView([CALL])
    view.set_approval("call_1", "declined", by="<b>x</b>", reason='<img src=x onerror="alert(1)">')
    html = view.to_static_html()
    assert unsafe_parts(html) == []
    assert "declined by &lt;b&gt;x&lt;/b&gt;: &lt;img" in html


def _tools() -> list[ToolDefinition]:
    return [ToolDefinition("delete", "Delete rows", fn=lambda v: "deleted", requires_approval=True)]


def _script() -> list[Any]:
    return [
        LlmResponse(
            tool_calls=[ToolCall(id="c1", name="delete", input={"t": "x"})],
            stop_reason="tool_use",
            usage=Usage(input_tokens=120, output_tokens=14),
        ),
        LlmResponse(content="**done**", usage=Usage(input_tokens=150, output_tokens=3)),
    ]


def test_parked_execution_shows_awaiting_then_who_decided() -> None:
    """A parked run's view says which call awaits approval; after resume, who decided and how."""
    start = [{"role": "user", "content": "clean up"}]
    with Journal(":memory:") as journal:
        provider = ScriptedProvider(_script())
        parked = asyncio.run(agent_loop(journal.execution("run"), provider, _tools(), start))
        assert parked.status == "parked"
        html = render_transcript(journal.execution("run"))
        assert "tool call · delete · call c1" in html
        assert ">awaiting approval" in html
        assert TranscriptView(journal.execution("run")).awaiting == ["c1"]
        result_html = displayed(parked)["text/html"]
        assert ">awaiting approval" in result_html  # AgentResult's display too
        done = asyncio.run(
            agent_loop(
                journal.execution("run"),
                provider,
                _tools(),
                start,
                approve={"c1": {"approved": True, "reason": "ok'd by Ana"}},
            )
        )
        assert done.status == "completed"
        after = render_transcript(journal.execution("run"))
        assert "✓ approved by the resume call: ok&#x27;d by Ana" in after
        assert "awaiting approval" not in after


def test_journaled_turns_show_tokens_and_latency() -> None:
    """Each assistant turn of a journaled run shows its reported tokens and the call's latency."""
    start = [{"role": "user", "content": "clean up"}]
    with Journal(":memory:") as journal:
        provider = ScriptedProvider(_script())
        asyncio.run(
            agent_loop(journal.execution("run"), provider, _tools(), start, approve={"c1": True})
        )
        view = TranscriptView(journal.execution("run"))
        stats = {v["index"]: v.get("stats") for v in view.messages}
        assert stats[1]["input_tokens"] == 120
        assert stats[3]["output_tokens"] == 3
        assert stats[3]["latency_s"] >= 0
        html = view.to_static_html()
        assert "120 in · 14 out tokens · " in html
        assert "150 in · 3 out tokens · " in html
        assert stats[0] is None  # the user's turn has none


def test_appending_a_response_shows_its_usage_and_latency() -> None:
    """view.append(response, latency_s=...) shows the turn's tokens and seconds; none without usage."""
    view = TranscriptView([Message(role="user", content="hi")])
    view.append(
        LlmResponse(content="hello", usage=Usage(input_tokens=1200, output_tokens=40)),
        latency_s=1.26,
    )
    view.append(LlmResponse(content="quiet"))
    assert view.messages[1]["stats"] == {
        "input_tokens": 1200,
        "output_tokens": 40,
        "latency_s": 1.26,
    }
    assert "stats" not in view.messages[2]
    assert "1,200 in · 40 out tokens · 1.3 s" in view.to_static_html()
    with pytest.raises(ContentValidationError) as bad:
        view.append(LlmResponse(content="x"), latency_s=-1)
    assert bad.value.code == "invalid_latency"
