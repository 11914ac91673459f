"""A displayed Chat stays live: its views follow turns, streams, approvals and undo (weakly held)."""

from __future__ import annotations

import asyncio
import gc
import json
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from loom_nb import (
    Capabilities,
    Chat,
    Journal,
    ScriptedProvider,
    UnsupportedModalityError,
    tool,
)
from loom_nb.demo import chart_png
from tests.chat.hanging import Hanging
from tests.display import displayed


@tool(requires_approval=True)
def send_email(to: str, body: str) -> str:
    """Send an email.

    Args:
        to: The address.
        body: The text.
    """
    return f"sent to {to}"


def _displayed(chat: Chat) -> tuple[Any, dict[str, Any]]:
    """Display ``chat`` once: the view made for it (the one the bundle names) and the bundle's data."""
    data = displayed(chat)
    model_id = data["application/vnd.jupyter.widget-view+json"]["model_id"]
    (view,) = [v for v in chat._views or () if v.model_id == model_id]
    return view, data


def _texts(view: Any) -> list[str]:
    """Each card's role and text, as the front end gets them."""
    out = []
    for message in view.messages:
        texts = [i.get("text", i.get("kind")) for i in message["items"]]
        out.append(f"{message['role']}: {' '.join(str(t) for t in texts)}")
    return out


async def test_every_display_follows_the_turns_and_the_saved_html_stays() -> None:
    """Two displays of one chat both show each new turn, its tokens and the header; the static HTML is the snapshot."""
    provider = ScriptedProvider(
        [
            {"text": "Hello.", "usage": {"input_tokens": 7, "output_tokens": 1}},
            {"text": "Fine.", "usage": {"input_tokens": 12, "output_tokens": 2}},
        ]
    )
    chat = Chat(provider, system="Be brief.", journal=Journal(), id="live")
    first, data = _displayed(chat)
    second, _ = _displayed(chat)
    assert first is not second
    await chat("hi")
    await chat("how are you?")
    for view in (first, second):
        assert _texts(view) == [
            "system: Be brief.",
            "user: hi",
            "assistant: Hello.",
            "user: how are you?",
            "assistant: Fine.",
        ]
        assert view.header == "chat live · 2 turns · 19 in · 3 out · cost unknown"
        assert view.messages[2]["stats"]["output_tokens"] == 1
        assert view.messages[4]["stats"]["input_tokens"] == 12
        assert not view.decidable
    # The bundle itself is the chat as it was when displayed (in a shell, the output it was
    # published as is then updated under its display id: tests/chat/test_saved_display.py).
    assert "chat live · 0 turns" in data["text/html"]
    assert "Hello." in first.to_static_html()  # the view's own static form is current


async def test_a_streamed_reply_shows_in_the_view_as_it_arrives() -> None:
    """While a reply streams, the view shows the user's message and the text so far; then the turn."""
    provider = ScriptedProvider([{"text": "streamed words here"}], chunk_size=5)
    chat = Chat(provider, journal=Journal(), id="stream", stream=True)
    view, _ = _displayed(chat)
    live: list[str] = []
    headers: list[str] = []
    view.observe(lambda change: live.append(change["new"]), names="live_text")
    view.observe(lambda change: headers.append(change["new"]), names="header")
    shown_while_streaming: list[list[str]] = []

    def on_text(_delta: str) -> None:
        shown_while_streaming.append(_texts(view))

    await chat("go", on_text=on_text)
    assert live == ["strea", "streamed w", "streamed words ", "streamed words here", ""]
    assert shown_while_streaming[0] == ["user: go"]  # the message in flight, before its answer
    assert any(h.endswith("· replying") for h in headers)
    assert _texts(view) == ["user: go", "assistant: streamed words here"]
    assert view.header == "chat stream · 1 turn · 0 in · 0 out · cost unknown"
    assert view.live_text == ""


async def test_the_views_stop_button_keeps_the_partial_text_marked_stopped() -> None:
    """While a reply streams the view is stoppable; its stop message stops the turn, the card says stopped."""
    provider = Hanging("Par", "tial")
    journal = Journal()
    chat = Chat(provider, journal=journal, id="viewstop", stream=True)  # type: ignore[arg-type]
    view, _ = _displayed(chat)
    sent: list[dict[str, Any]] = []
    view.send = lambda content, buffers=None: sent.append(content)
    assert view.stoppable is False
    replies: list[dict[str, Any]] = []
    view._on_custom_msg(view, {"type": "stop", "ticket": "early"}, [])
    replies.extend(sent)
    assert replies == [{"ticket": "early", "type": "stop", "error": "no reply is in flight"}]

    task = asyncio.ensure_future(chat("talk", on_text=lambda _d: None))
    await provider.started.wait()
    assert view.stoppable is True
    assert view.live_text == "Partial"
    sent.clear()
    view._on_custom_msg(view, {"type": "stop", "ticket": "t1"}, [])
    assert sent == [{"ticket": "t1", "type": "stop", "ok": True}]
    reply = await task
    assert reply.content == "Partial"
    assert chat.turns[-1].status == "stopped"
    assert view.stoppable is False
    assert view.live_text == ""
    assert _texts(view) == ["user: talk", "assistant: Partial"]
    assert view.messages[-1]["stats"]["status"] == "stopped"
    assert "Partial" in view.to_static_html()
    assert "stopped" in view.to_static_html()
    kinds = [(e.kind, e.step_id) for e in journal.events("viewstop")]
    assert ("step_completed", "#chat:0:model") not in kinds


def test_on_stop_must_be_callable() -> None:
    """A view refuses a non-callable on_stop with a typed error."""
    from loom_nb import ContentValidationError, TranscriptView

    view = TranscriptView([])
    with pytest.raises(ContentValidationError) as info:
        view.on_stop = "stop"  # type: ignore[assignment]
    assert info.value.code == "invalid_callback"
    view.on_stop = lambda: True
    assert view.stoppable is True
    view.on_stop = None
    assert view.stoppable is False


async def test_approve_in_the_view_resumes_and_the_same_view_shows_the_result() -> None:
    """A parked run's view has buttons; its decision resumes the run and that view shows the tool result and reply."""
    provider = ScriptedProvider(
        [
            {
                "tool_calls": [
                    {"id": "c1", "name": "send_email", "input": {"to": "bo", "body": "x"}}
                ]
            },
            {"text": "Sent it."},
        ]
    )
    chat = Chat(provider, tools=[send_email], journal=Journal(), id="appr")
    view, _ = _displayed(chat)  # displayed before the run: it follows the park too
    await chat.run("mail bo")
    assert view.decidable
    assert view.awaiting == ["c1"]
    assert "awaiting approval: c1" in view.header
    task = view.decide("c1", True)  # what the Approve button does
    await task
    assert chat.turns[-1].status == "completed"
    texts = _texts(view)
    assert texts[-1] == "assistant: Sent it."
    assert texts[-2].startswith("user: tool_result")
    result = view.messages[-2]["items"][0]
    assert result["tool_use_id"] == "c1"
    assert "sent to bo" in json.dumps(result)
    assert view.approvals["c1"] == {"state": "approved", "by": "the notebook view", "reason": None}
    assert not view.decidable
    assert "awaiting" not in view.header


async def test_decline_in_the_view_shows_the_declined_result() -> None:
    """Declining in the view resumes the run with a declined result, shown in the same view."""
    provider = ScriptedProvider(
        [
            {
                "tool_calls": [
                    {"id": "c1", "name": "send_email", "input": {"to": "bo", "body": "x"}}
                ]
            },
            {"text": "Not sent."},
        ]
    )
    chat = Chat(provider, tools=[send_email], journal=Journal(), id="decl")
    await chat.run("mail bo")
    view, _ = _displayed(chat)  # displayed while parked
    await view.decide("c1", False)
    result = view.messages[-2]["items"][0]
    assert result["is_error"] is True
    assert "declined" in json.dumps(result)
    assert view.approvals["c1"]["state"] == "declined"
    assert _texts(view)[-1] == "assistant: Not sent."


async def test_undo_and_a_refused_turn_show_in_the_view() -> None:
    """undo() removes the turn from the view; a refused turn leaves it as it was."""
    provider = ScriptedProvider([{"text": "1"}, {"text": "2"}], capabilities=Capabilities())
    chat = Chat(provider, journal=Journal(), id="undo")
    view, _ = _displayed(chat)
    await chat("a")
    await chat("b")
    chat.undo()
    assert _texts(view) == ["user: a", "assistant: 1"]
    assert view.header.startswith("chat undo · 1 turn")
    with pytest.raises(UnsupportedModalityError):
        await chat("look", chart_png("x"))
    assert _texts(view) == ["user: a", "assistant: 1"]
    assert not view.header.endswith("replying")


async def test_the_chat_holds_its_views_weakly_and_skips_closed_ones() -> None:
    """A closed view is never updated again, and one nobody holds is collected."""
    chat = Chat(ScriptedProvider([{"text": "1"}, {"text": "2"}]), journal=Journal(), id="weak")
    kept, _ = _displayed(chat)
    closed, _ = _displayed(chat)
    closed.close()
    await chat("a")
    assert _texts(kept) == ["user: a", "assistant: 1"]
    assert _texts(closed) == []
    assert chat._views is not None
    assert len(chat._views) == 1
    dropped, _ = _displayed(chat)
    assert len(chat._views) == 2
    dropped.close()  # ipywidgets lets go of a closed widget; the chat does not hold it
    del dropped
    gc.collect()
    assert len(chat._views) == 1
    await chat("b")
    assert len(_texts(kept)) == 4


def test_without_the_notebook_layer_the_display_is_static(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no widget layer a chat displays as static HTML and keeps no views."""
    monkeypatch.setitem(sys.modules, "loom_nb.widgets._transcript", None)
    chat = Chat(ScriptedProvider([{"text": "1"}]), journal=Journal(), id="core")
    data = displayed(chat)
    assert set(data) == {"text/html", "text/plain"}
    assert chat._views is None
    asyncio.run(chat("a"))  # no views to update: the turn just lands
    assert len(chat.history) == 2


CELLS = [
    """
from loom_nb import Chat, Journal, ScriptedProvider
chat = Chat(ScriptedProvider([{"text": "first answer", "usage": {"input_tokens": 9, "output_tokens": 2}},
                              {"text": "second answer"}], chunk_size=4),
            journal=Journal(), id="kernel", stream=True)
chat
""",
    'reply = await chat("one", on_text=lambda d: None)',
    'reply = await chat("two", on_text=lambda d: None)',
]


@pytest.fixture
def jupyter_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Jupyter and IPython config/data/runtime dirs inside tmp_path (nothing written to home)."""
    for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
        folder = tmp_path / var.lower()
        folder.mkdir()
        monkeypatch.setenv(var, str(folder))
    return tmp_path


@pytest.mark.slow
def test_in_a_kernel_the_displayed_view_gets_the_later_turns(jupyter_env: Path) -> None:
    """Run in a real kernel: the view displayed in cell 1 receives the turns of cells 2 and 3 over the comm."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    client = NotebookClient(
        nb,
        kernel_name="python3",
        timeout=120,
        store_widget_state=True,
        resources={"metadata": {"path": str(jupyter_env)}},
    )
    client.execute()
    (output,) = nb.cells[0].outputs
    model_id = output["data"]["application/vnd.jupyter.widget-view+json"]["model_id"]
    assert "chat kernel · 2 turns" in output["data"]["text/html"]  # the saved static HTML follows
    assert nb.cells[1].outputs == []  # nothing printed: the view shows the stream
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    view = state[model_id]["state"]
    assert view["header"] == "chat kernel · 2 turns · 9 in · 2 out · cost unknown"
    texts = [item.get("text") for message in view["messages"] for item in message["items"]]
    assert texts == ["one", "first answer", "two", "second answer"]
    assert view["live_text"] == ""


async def test_a_view_that_cannot_update_never_fails_the_turn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A broken view, or a journal read for the views that fails, is logged; the turn lands anyway."""
    journal = Journal()
    chat = Chat(ScriptedProvider([{"text": "one"}, {"text": "two"}]), journal=journal, id="broken")
    view, _ = _displayed(chat)

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("the comm is gone")

    view._follow = broken  # type: ignore[method-assign]
    assert (await chat("first")).content == "one"
    assert "a displayed view could not be updated" in caplog.text
    assert any(r.levelname == "WARNING" for r in caplog.records)
    assert chat._views is not None
    assert chat._views.live() == []  # dropped: never updated again
    caplog.clear()
    _displayed(chat)  # a working view, so the journal read behind the views is made again
    chat.approvals = broken  # type: ignore[method-assign]  # the journal read behind the views
    assert (await chat("second")).content == "two"
    assert "the displayed views could not be updated" in caplog.text
    assert [t.status for t in chat.turns] == ["completed", "completed"]
    completed = [e.step_id for e in journal.events("broken") if e.kind == "step_completed"]
    assert completed == ["#chat:0:model", "#chat:1:model"]


async def test_a_live_run_shows_as_replying_not_awaiting_approval() -> None:
    """During a run (new, or resumed after approval) the header and view say replying, never awaiting approval."""
    seen: list[tuple[str, str, bool]] = []

    @tool(requires_approval=True)
    def deploy(target: str) -> str:
        """Deploy.

        Args:
            target: Where.
        """
        seen.append((chat.header(), view.header, view.decidable))
        return "done"

    @tool
    def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: The key.
        """
        seen.append((chat.header(), view.header, view.decidable))
        return "found"

    provider = ScriptedProvider(
        [
            {"tool_calls": [{"id": "k1", "name": "lookup", "input": {"key": "a"}}]},
            {"tool_calls": [{"id": "d1", "name": "deploy", "input": {"target": "prod"}}]},
            {"text": "Deployed."},
        ]
    )
    chat = Chat(provider, tools=[lookup, deploy], journal=Journal(), id="live")
    view, _ = _displayed(chat)
    await chat.run("deploy it")
    assert "awaiting approval: d1" in chat.header()
    assert view.decidable
    await chat.approve()
    assert len(seen) == 2
    for header, shown, decidable in seen:
        assert "awaiting" not in header
        assert "awaiting" not in shown
        assert shown.endswith("· replying")
        assert not decidable
    assert "awaiting" not in chat.header()
