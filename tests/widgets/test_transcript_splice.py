"""TranscriptView sends a growing transcript incrementally: new cards as a splice, not the whole list."""

from __future__ import annotations

import json
from typing import Any

from loom_nb import Chat, Journal, Message, ScriptedProvider, TranscriptView
from loom_nb.content import ToolUsePart
from tests.display import displayed


def _recorded(view: TranscriptView) -> list[dict[str, Any]]:
    """Every comm message the view sends from now on (the data of each ``comm_msg``)."""
    sent: list[dict[str, Any]] = []

    def publish(
        msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None, **_: Any
    ) -> None:
        sent.append(data)

    view.comm.publish_msg = publish  # type: ignore[method-assign,union-attr]
    view._handle_custom_msg({"type": "splices"}, [])  # what the front-end model says first
    return sent


def _state_updates(sent: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m["state"] for m in sent if m.get("method") == "update"]


def _splices(sent: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        m["content"]
        for m in sent
        if m.get("method") == "custom" and m["content"].get("type") == "splice"
    ]


def test_append_sends_only_the_new_card() -> None:
    """After the first cards, append sends a splice of one view; the kernel's trait holds them all."""
    view = TranscriptView(
        [Message(role="user", content="one"), Message(role="assistant", content="two")]
    )
    sent = _recorded(view)
    view.append(Message(role="user", content="three"))
    assert all("messages" not in state for state in _state_updates(sent))
    (splice,) = _splices(sent)
    assert splice["start"] == 2
    assert [v["items"][0]["text"] for v in splice["views"]] == ["three"]
    assert len(view.messages) == 3  # the kernel side is whole (what a later front end reads)
    assert view.messages[2] == splice["views"][0]


def test_before_the_front_end_applies_splices_the_whole_list_syncs() -> None:
    """A client that never said it applies splices (nbclient, an old front end) gets state updates."""
    view = TranscriptView([Message(role="user", content="one")])
    sent: list[dict[str, Any]] = []
    view.comm.publish_msg = lambda _t, data=None, *a, **k: sent.append(data)  # type: ignore[method-assign,union-attr]
    view.append(Message(role="assistant", content="two"))
    assert _splices(sent) == []
    (state,) = [s for s in _state_updates(sent) if "messages" in s]
    assert len(state["messages"]) == 2


def test_a_view_with_nothing_shown_syncs_the_whole_list() -> None:
    """With nothing in common (an empty view), the trait syncs as usual and no splice is sent."""
    view = TranscriptView([])
    sent = _recorded(view)
    view.append(Message(role="user", content="first"))
    assert _splices(sent) == []
    (state,) = [s for s in _state_updates(sent) if "messages" in s]
    assert len(state["messages"]) == 1


def test_an_approval_on_an_early_card_splices_from_that_card() -> None:
    """Marking an early call awaiting re-sends from its card on, not the cards before it."""
    messages = [
        Message(role="user", content="go"),
        Message(role="assistant", content=[ToolUsePart(id="c1", name="send", input={})]),
        *[Message(role="user" if n % 2 else "assistant", content=f"m{n}") for n in range(6)],
    ]
    view = TranscriptView(messages)
    sent = _recorded(view)
    view.await_approval("c1")
    (splice,) = _splices(sent)
    assert splice["start"] == 1
    assert splice["views"][0]["items"][0]["approval"]["state"] == "awaiting"
    assert len(splice["views"]) == len(messages) - 1


def test_a_resync_request_sends_the_whole_state() -> None:
    """A front end that missed a splice asks for a resync and gets every view."""
    view = TranscriptView(
        [Message(role="user", content="a"), Message(role="assistant", content="b")]
    )
    view.append(Message(role="user", content="c"))
    sent = _recorded(view)
    view._handle_custom_msg({"type": "resync"}, [])
    (state,) = _state_updates(sent)
    assert [v["items"][0]["text"] for v in state["messages"]] == ["a", "b", "c"]


async def test_a_displayed_chat_sends_per_turn_what_the_turn_added() -> None:
    """The comm bytes of one turn do not grow with the conversation (turn 5 vs turn 150)."""
    turns = 150
    chat = Chat(
        ScriptedProvider([{"text": f"answer {n}: " + "words " * 20} for n in range(turns)]),
        journal=Journal(),
        id="splice",
    )
    displayed(chat)
    (view,) = list(chat._views or ())
    sent = _recorded(view)
    per_turn: list[int] = []
    for n in range(turns):
        before = len(sent)
        await chat(f"question {n}")
        per_turn.append(sum(len(json.dumps(m)) for m in sent[before:]))
    assert len(view.messages) == 2 * turns
    assert per_turn[-1] < 2 * per_turn[5], (per_turn[5], per_turn[-1])
    assert all("messages" not in state for state in _state_updates(sent[1:]))
