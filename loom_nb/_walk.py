"""Where the media of a request sits: one walk shared by the guard, the capability check and resolution.

Media may appear directly in a user message or inside a tool result in one (ADR 0120 decision 7);
every consumer that cares about media (``assert_request_supported`` of decision 6, content
resolution of decision 4, the providers' fencing) needs the same list with the same locations, so
it lives here once. A location prints as a path (``messages[3].content[1].content[0]``) that error
messages quote verbatim.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from loom_nb.content import (
    AudioPart,
    FilePart,
    ImagePart,
    LlmRequest,
    MediaPart,
    Message,
    ToolResultPart,
)

__all__ = ["MediaLocation", "PrefixFold", "iter_media", "part_path", "shared_prefix"]


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


def _media_of(mi: int, message: object) -> list[MediaLocation]:
    if not isinstance(message, Message) or not isinstance(message.content, list):
        return []
    found: list[MediaLocation] = []
    for pi, part in enumerate(message.content):
        if isinstance(part, _MEDIA_TYPES):
            found.append(MediaLocation(mi, pi, None, part, None))
        elif isinstance(part, ToolResultPart) and isinstance(part.content, list):
            for ri, item in enumerate(part.content):
                if isinstance(item, _MEDIA_TYPES):
                    found.append(MediaLocation(mi, pi, ri, item, part))
    return found


T = TypeVar("T")


class PrefixFold(Generic[T]):
    """A fold over a transcript that walks only the messages added since the previous call.

    ``fold(messages)`` returns the state after ``step(state, message)`` for every message;
    when ``messages`` starts with the previous call's messages (the same objects), only the rest
    is folded into a copy of the previous state, else it starts again from ``start()``.
    The returned state must be treated as read-only.
    """

    def __init__(self, start: Callable[[], T], step: Callable[[T, Any], None]) -> None:
        self._start = start
        self._step = step
        self._last: tuple[list[Any], T] | None = None

    def __call__(self, messages: Sequence[Any]) -> T:
        items = list(messages)
        last = self._last
        if last is not None and shared_prefix(last[0], items):
            begin, state = len(last[0]), copy.copy(last[1])
        else:
            begin, state = 0, self._start()
        for item in items[begin:]:
            self._step(state, item)
        self._last = (items, state)
        return state


class _MediaCache:
    """The last transcript walked and the media found in it, so a grown transcript is walked only
    where it grew (issue 15: an agent turn must not cost the whole transcript again)."""

    __slots__ = ("found", "messages")

    def __init__(self) -> None:
        self.messages: list[object] = []
        self.found: list[MediaLocation] = []


_MEDIA_CACHE = _MediaCache()


def shared_prefix(old: list[Any], new: list[Any]) -> bool:
    """Whether ``new`` starts with ``old``: the same message objects, or equal ones.

    Messages and parts are frozen models, so an object seen before still holds what it held; a
    list comparison checks identity first, in C, and compares content only where objects differ.
    """
    k = len(old)
    return 0 < k <= len(new) and new[:k] == old


def iter_media(request: LlmRequest) -> Iterator[MediaLocation]:
    """Yield every media part of ``request`` in message order, tool-result items included.

    Walks whatever it is given without judging it: media in an assistant message is yielded too
    (the guard refuses it; a capability check must not skip it). Anything that is not a message
    or a part is passed over, so a half-built request never raises here. Messages the previous
    call already walked (the same objects, as a prefix) are not walked again.
    """
    messages: object = request.messages  # a model_construct'ed request may hold anything
    if not isinstance(messages, list):
        return
    cache = _MEDIA_CACHE
    if shared_prefix(cache.messages, messages):
        start, found = len(cache.messages), list(cache.found)
    else:
        start, found = 0, []
    for mi in range(start, len(messages)):
        found.extend(_media_of(mi, messages[mi]))
    fresh = _MediaCache()
    fresh.messages, fresh.found = list(messages), found
    globals()["_MEDIA_CACHE"] = fresh
    yield from found
