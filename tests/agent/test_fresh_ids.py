"""The call ids a response is shown under: fresh where the transcript used them, and the
transcript's fold of what it used (ids, inline bytes) is read, never written, by the renaming."""

from __future__ import annotations

import base64

from loom_nb.agent._loop import _FACTS, _fresh_ids
from loom_nb.content import (
    DataSource,
    ImagePart,
    LlmResponse,
    Message,
    TextPart,
    ToolCall,
    ToolResultPart,
    ToolUsePart,
)


def _response(*ids: str) -> LlmResponse:
    return LlmResponse(
        content="", tool_calls=[ToolCall(id=i, name="add", input={"a": 1}) for i in ids]
    )


def test_a_used_id_and_a_repeat_within_the_response_are_renamed() -> None:
    transcript = [
        Message(role="user", content="go"),
        Message(role="assistant", content=[ToolUsePart(id="c1", name="add", input={"a": 1})]),
    ]
    shown, renamed = _fresh_ids(_response("c1", "c2", "c2"), _FACTS(transcript).ids)
    assert renamed == {0: "c1_2", 2: "c2_2"}
    assert [call.id for call in shown.tool_calls] == ["c1_2", "c2", "c2_2"]


def test_renaming_leaves_the_folded_ids_of_the_transcript_as_they_were() -> None:
    transcript = [Message(role="user", content="go")]
    first = _fresh_ids(_response("c1", "c1"), _FACTS(transcript).ids)[1]
    assert first == {1: "c1_2"}
    assert _FACTS(transcript).ids == set()  # the ids of this response are not the transcript's
    assert _fresh_ids(_response("c1"), _FACTS(transcript).ids)[1] == {}  # nothing to rename


def test_the_fold_follows_the_transcript_as_it_grows_and_when_a_part_list_changes() -> None:
    png = base64.b64encode(b"\x89PNG" + b"\0" * 96).decode()
    image = ImagePart(media_type="image/png", source=DataSource(data=png))
    transcript = [Message(role="user", content=[TextPart(text="look"), image])]
    assert (_FACTS(transcript).ids, _FACTS(transcript).inline) == (set(), 100)
    transcript.append(
        Message(role="assistant", content=[ToolUsePart(id="c1", name="add", input={"a": 1})])
    )
    transcript.append(
        Message(role="user", content=[ToolResultPart(tool_use_id="c1", content=[image])])
    )
    facts = _FACTS(transcript)
    assert (facts.ids, facts.inline) == ({"c1"}, 200)
    # a part list changed in place since the last turn: the fold starts again and sees it
    transcript[1].content.append(ToolUsePart(id="c7", name="add", input={}))  # type: ignore[union-attr]
    transcript[0].content.remove(image)  # type: ignore[union-attr]
    facts = _FACTS(transcript)
    assert (facts.ids, facts.inline) == ({"c1", "c7"}, 100)
