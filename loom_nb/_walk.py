"""Where the media of a request sits: one walk shared by the guard, the capability check and resolution.

Media may appear directly in a user message or inside a tool result in one (ADR 0120 decision 7);
every consumer that cares about media (``assert_request_supported`` of decision 6, content
resolution of decision 4, the providers' fencing) needs the same list with the same locations, so
it lives here once. A location prints as a path (``messages[3].content[1].content[0]``) that error
messages quote verbatim.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from loom_nb.content import (
    AudioPart,
    FilePart,
    ImagePart,
    LlmRequest,
    MediaPart,
    Message,
    ToolResultPart,
)

__all__ = ["MediaLocation", "iter_media", "part_path"]


def part_path(
    message_index: int, part_index: int | None = None, item_index: int | None = None
) -> str:
    """The path of a message, a part or an item of a tool result: ``messages[2].content[0].content[1]``."""
    path = f"messages[{message_index}]"
    if part_index is not None:
        path += f".content[{part_index}]"
        if item_index is not None:
            path += f".content[{item_index}]"
    return path


@dataclass(frozen=True, slots=True)
class MediaLocation:
    """One media part of a request and where it is."""

    message_index: int
    """Index of the message in ``request.messages``."""
    part_index: int
    """Index of the part (or of the enclosing tool result) in the message's content."""
    item_index: int | None
    """Index inside the enclosing tool result's content; None for a part directly in the message."""
    part: MediaPart
    """The image, audio or file part."""
    tool_result: ToolResultPart | None
    """The tool result that holds the part, or None."""

    @property
    def path(self) -> str:
        """The part's path, e.g. ``messages[3].content[1].content[0]``."""
        return part_path(self.message_index, self.part_index, self.item_index)

    @property
    def untrusted_origin(self) -> str | None:
        """The part's own ``origin``, else that of its enclosing tool result (None when trusted)."""
        if self.part.origin is not None:
            return self.part.origin
        return self.tool_result.origin if self.tool_result is not None else None


_MEDIA_TYPES = (ImagePart, AudioPart, FilePart)


def iter_media(request: LlmRequest) -> Iterator[MediaLocation]:
    """Yield every media part of ``request`` in message order, tool-result items included.

    Walks whatever it is given without judging it: media in an assistant message is yielded too
    (the guard refuses it; a capability check must not skip it). Anything that is not a message
    or a part is passed over, so a half-built request never raises here.
    """
    messages: object = request.messages  # a model_construct'ed request may hold anything
    if not isinstance(messages, list):
        return
    for mi, message in enumerate(messages):
        if not isinstance(message, Message) or not isinstance(message.content, list):
            continue
        content = message.content
        for pi, part in enumerate(content):
            if isinstance(part, _MEDIA_TYPES):
                yield MediaLocation(mi, pi, None, part, None)
            elif isinstance(part, ToolResultPart) and isinstance(part.content, list):
                for ri, item in enumerate(part.content):
                    if isinstance(item, _MEDIA_TYPES):
                        yield MediaLocation(mi, pi, ri, item, part)
