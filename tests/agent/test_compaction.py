"""Pair-aware compaction decisions: triggers, the cut that never orphans tool results, the summary message."""

from __future__ import annotations

import pytest

from loom_nb.agent import Compaction
from loom_nb.agent._compaction import (
    SUMMARY_ORIGIN,
    holds_tool_results,
    is_tainted,
    summary_message,
    transcript_bytes,
)
from loom_nb.content import Message, TextPart, ToolResultPart, ToolSpec, ToolUsePart
from loom_nb.errors import ConfigurationError
from loom_nb.taint import Untrusted


def _turns(pairs: int) -> list[Message]:
    """user, then `pairs` × (assistant tool_use, user tool_result)."""
    out = [Message(role="user", content="start")]
    for i in range(pairs):
        out.append(
            Message(role="assistant", content=[ToolUsePart(id=f"c{i}", name="f", input={"i": i})])
        )
        out.append(
            Message(role="user", content=[ToolResultPart(tool_use_id=f"c{i}", content=f"r{i}")])
        )
    return out


def test_after_messages_triggers_only_past_the_threshold() -> None:
    """The message trigger fires when the transcript has more messages than after_messages."""
    c = Compaction(after_messages=5, keep_recent=2)
    assert not c.due(_turns(2))  # 5 messages
    assert c.due(_turns(3))  # 7 messages


def test_after_bytes_triggers_on_canonical_size() -> None:
    """The byte trigger measures the transcript as canonical JSON."""
    messages = _turns(3)
    size = transcript_bytes(messages)
    assert not Compaction(after_bytes=size, keep_recent=1).due(messages)
    assert Compaction(after_bytes=size - 1, keep_recent=1).due(messages)


def test_cut_never_starts_the_tail_on_tool_results() -> None:
    """With keep_recent landing on a result message, the cut moves back to the assistant turn (one extra)."""
    messages = _turns(3)  # [u, a0, r0, a1, r1, a2, r2]
    c = Compaction(after_messages=1, keep_recent=1)
    cut = c.cut(messages)
    assert cut == 5
    assert messages[cut].role == "assistant"
    assert len(messages) - cut == 2  # keep_recent + 1
    assert not holds_tool_results(messages[cut])


def test_cut_on_an_assistant_turn_stays() -> None:
    """A cut that already starts on an assistant turn keeps exactly keep_recent messages."""
    messages = _turns(3)
    assert Compaction(after_messages=1, keep_recent=2).cut(messages) == 5
    assert Compaction(after_messages=1, keep_recent=4).cut(messages) == 3


def test_keep_recent_zero_folds_everything() -> None:
    """keep_recent=0 keeps no message: the cut is the end of the transcript."""
    messages = _turns(2)
    c = Compaction(after_messages=1, keep_recent=0)
    assert c.cut(messages) == len(messages)
    assert c.due(messages)


def test_nothing_to_fold_is_not_due() -> None:
    """When the kept tail would be the whole transcript there is nothing to compact."""
    assert not Compaction(after_messages=1, keep_recent=10).due(_turns(2))


def test_decisions_are_deterministic() -> None:
    """The same transcript gives the same decision and cut every time (replay compacts on the same turns)."""
    c = Compaction(after_messages=3, keep_recent=3)
    runs = {(c.due(_turns(n)), c.cut(_turns(n))) for n in range(6) for _ in range(3)}
    assert len(runs) == len({(c.due(_turns(n)), c.cut(_turns(n))) for n in range(6)})


def test_summary_request_carries_prefix_menu_and_prompt() -> None:
    """The default summary call sends the folded messages, the menu and a final summary prompt."""
    c = Compaction(after_messages=1, keep_recent=1)
    spec = ToolSpec(name="f", description="d", input_schema={"type": "object"})
    request = c.summary_request(_turns(1), [spec])
    assert request.tools == [spec]
    assert request.system == c.system
    assert request.messages[:3] == _turns(1)
    assert request.messages[-1] == Message(role="user", content=c.prompt)


def test_summary_of_untrusted_content_is_marked() -> None:
    """A summary folded from untrusted content is itself untrusted; a clean one is not."""
    clean = summary_message("s", tainted=False)
    marked = summary_message("s", tainted=True)
    assert clean.role == marked.role == "user"
    assert isinstance(marked.content, list)
    assert isinstance(marked.content[1], TextPart)
    assert marked.content[1].origin == SUMMARY_ORIGIN
    assert isinstance(clean.content, list)
    assert isinstance(clean.content[1], TextPart)
    assert clean.content[1].origin is None


def test_is_tainted_finds_every_kind_of_mark() -> None:
    """Taint is found in part origins, Untrusted text, untrusted tool results and nested result parts."""
    assert not is_tainted(_turns(2))
    assert is_tainted([Message(role="user", content=[TextPart(text="x", origin="web")])])
    assert is_tainted([Message(role="user", content=[TextPart(text=Untrusted("x", "web"))])])
    assert is_tainted(
        [
            Message(
                role="user", content=[ToolResultPart(tool_use_id="a", content=Untrusted("x", "w"))]
            )
        ]
    )
    nested = ToolResultPart(tool_use_id="a", content=[TextPart(text="x", origin="w")])
    assert is_tainted([Message(role="user", content=[nested])])


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"after_messages": 0},
        {"after_messages": True},
        {"after_bytes": -1},
        {"after_messages": 3, "keep_recent": -1},
        {"after_messages": 3, "summarize": "no"},
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, object]) -> None:
    """Settings that could not trigger or cut sensibly are a ConfigurationError."""
    with pytest.raises(ConfigurationError) as info:
        Compaction(**kwargs)  # type: ignore[arg-type]
    assert info.value.code == "invalid_compaction"


def test_empty_summary_is_replaced() -> None:
    """An empty summary would be an empty text block the vendors refuse; a stand-in text is used."""
    message = summary_message("", tainted=False)
    assert isinstance(message.content, list)
    body = message.content[1]
    assert isinstance(body, TextPart)
    assert body.text
