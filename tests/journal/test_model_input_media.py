"""The model step's hashing tells whether a request holds media (``ModelBase.media``).

A live step skips the media walk (pins, the effect's capability check and resolution) when the
canonical JSON of its messages names no ``media_type``: every media part's JSON names it, in a
message or in a tool result, so a request with media is never taken for one without.
"""

from __future__ import annotations

from typing import get_args

from loom_nb.capabilities import Capabilities
from loom_nb.content import (
    AudioPart,
    ContentRef,
    DataSource,
    FilePart,
    ImagePart,
    LlmRequest,
    Message,
    RefSource,
    TextPart,
    ToolResultPart,
    ToolUsePart,
)
from loom_nb.content._parts import MediaPart
from loom_nb.journal._requests import ModelBase, model_input

REF = RefSource(ref=ContentRef(address="sha256:" + "a" * 64, size=3))
PARTS = [
    ImagePart(media_type="image/png", source=REF),
    AudioPart(media_type="audio/wav", source=DataSource(data=b"RIFF")),
    FilePart(media_type="application/pdf", source=REF),
]


def _media(
    messages: list[Message], previous: ModelBase | None = None, position: int = 0
) -> ModelBase:
    return model_input(LlmRequest(messages=messages), previous, position, Capabilities()).base


def test_every_media_part_is_seen_in_a_message_and_in_a_tool_result() -> None:
    assert {type(part) for part in PARTS} == set(get_args(MediaPart))
    for part in PARTS:
        assert _media([Message(role="user", content=[TextPart(text="see"), part])]).media
        call = ToolUsePart(id="t1", name="look", input={})
        result = ToolResultPart(tool_use_id="t1", content=[part])
        messages = [
            Message(role="user", content="go"),
            Message(role="assistant", content=[call]),
            Message(role="user", content=[result]),
        ]
        assert _media(messages).media


def test_text_naming_the_key_is_not_media_and_a_grown_transcript_keeps_the_answer() -> None:
    plain = [Message(role="user", content='say "media_type": "image/png"')]
    base = _media(plain)
    assert base.media is False
    pictured = [
        *plain,
        Message(role="assistant", content="ok"),
        Message(role="user", content=[PARTS[0]]),
    ]
    grown = _media(pictured, base, 1)
    assert grown.media is True
    # A later text-only turn keeps "has media" from the prefix it shares (walked, never skipped).
    later = [
        *pictured,
        Message(role="assistant", content="a cat"),
        Message(role="user", content="and?"),
    ]
    assert _media(later, grown, 2).media is True


def test_a_tool_input_with_the_key_only_costs_a_walk() -> None:
    call = ToolUsePart(id="t1", name="f", input={"media_type": "x"})
    messages = [Message(role="user", content="go"), Message(role="assistant", content=[call])]
    assert _media(messages).media is True
