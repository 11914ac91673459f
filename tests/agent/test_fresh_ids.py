"""The call ids a response is shown under: fresh where the transcript used them, and the
transcript's fold of used ids is read, never written, by the renaming."""

from __future__ import annotations

from loom_nb.agent._loop import _USED_IDS, _fresh_ids
from loom_nb.content import LlmResponse, Message, ToolCall, ToolUsePart


def _response(*ids: str) -> LlmResponse:
    return LlmResponse(
        content="", tool_calls=[ToolCall(id=i, name="add", input={"a": 1}) for i in ids]
    )


def test_a_used_id_and_a_repeat_within_the_response_are_renamed() -> None:
    transcript = [
        Message(role="user", content="go"),
        Message(role="assistant", content=[ToolUsePart(id="c1", name="add", input={"a": 1})]),
    ]
    shown, renamed = _fresh_ids(_response("c1", "c2", "c2"), transcript)
    assert renamed == {0: "c1_2", 2: "c2_2"}
    assert [call.id for call in shown.tool_calls] == ["c1_2", "c2", "c2_2"]


def test_renaming_leaves_the_folded_ids_of_the_transcript_as_they_were() -> None:
    transcript = [Message(role="user", content="go")]
    first = _fresh_ids(_response("c1", "c1"), transcript)[1]
    assert first == {1: "c1_2"}
    assert _USED_IDS(transcript) == set()  # the ids of this response are not the transcript's
    assert _fresh_ids(_response("c1"), transcript)[1] == {}  # asked again: nothing to rename
