"""Where the media of a request sits: one walk shared by the guard, the capability check and resolution.

Media may appear directly in a user message or inside a tool result in one (ADR 0120 decision 7);
every consumer that cares about media (``assert_request_supported`` of decision 6, content
resolution of decision 4, the providers' fencing) needs the same list with the same locations, so
it lives here once. A location prints as a path (``messages[3].content[1].content[0]``) that error
messages quote verbatim.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from loom_nb.content import (
    AudioPart,
    FilePart,
    ImagePart,
    LlmRequest,
    MediaPart,
    Message,
    ReasoningPart,
    ToolResultPart,
    ToolUsePart,
)

__all__ = [
    "EMPTY_JSON_SEEN",
    "EMPTY_SEEN",
    "MediaLocation",
    "PrefixFold",
    "Seen",
    "iter_media",
    "media_cache_kept",
    "part_path",
]


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


class _Never:
    """Stands in a snapshot for a part list that cannot be trusted to compare honestly (a list
    subclass): two instances never compare equal, so a message holding one is never shared."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = object.__hash__


_SNAPSHOT_NODES = 10_000
"""The most containers and values a snapshot of one part's JSON copies; a bigger (or cyclic) value
gets a ``_Never``, so its message is walked again on every request (the guard refuses it anyway)."""


def _snapshot(value: dict[str, Any]) -> Any:
    """A copy of ``value``'s containers (dicts and lists, at any depth) sharing its leaves.

    Compared with ``==`` against the live value it shows any change made in place since, however
    deep: a live container is never the same object as its copy, so it is compared by value, while
    the shared leaves compare by identity first. A dict or list subclass (its ``==`` could lie) or
    more than ``_SNAPSHOT_NODES`` nodes (or a cycle) gives a ``_Never``.
    """
    top: dict[str, Any] = {}
    work: list[tuple[Any, Any]] = [(value, top)]
    nodes = 0
    while work:
        source, target = work.pop()
        items = source.items() if type(source) is dict else enumerate(source)
        for key, item in items:
            nodes += 1
            if nodes > _SNAPSHOT_NODES:
                return _Never()
            kind = type(item)
            if kind is dict or kind is list:
                copy: Any = {} if kind is dict else []
                work.append((item, copy))
                item = copy
            elif isinstance(item, (dict, list)):
                return _Never()
            if type(target) is dict:
                target[key] = item
            else:
                target.append(item)
    return top


def _json_fields(part: object, lists: list[Any], copies: list[Any]) -> None:
    """Add the mutable JSON of a part that the guard checks and a request sends (a tool call's
    ``input`` and ``provider_data``, a reasoning part's ``provider_data``) with their snapshots."""
    if isinstance(part, ToolUsePart):
        fields: tuple[object, ...] = (part.input, part.provider_data)
    elif isinstance(part, ReasoningPart):
        fields = (part.provider_data,)
    else:
        return
    for value in fields:
        if type(value) is dict:
            lists.append(value)
            copies.append(_snapshot(value))
        elif isinstance(value, dict):
            lists.append(_Never())
            copies.append(_Never())


def _part_lists(message: object, json: bool) -> tuple[list[Any], list[Any]]:
    """The mutable part lists of ``message`` (its content, each tool result's content) and copies.

    With ``json``, a tool call's input and a reasoning part's provider_data (mutable dicts too)
    come with a snapshot of their containers (``_snapshot``). Anything that is not a plain list (or dict)
    gets a pair of ``_Never`` stand-ins, so it never matches.
    """
    content = getattr(message, "content", None) if isinstance(message, Message) else None
    if content is None or isinstance(content, str):
        return [], []
    if type(content) is not list:
        return [_Never()], [_Never()]
    lists: list[Any] = [content]
    copies: list[Any] = [list(content)]
    for part in content:
        if isinstance(part, ToolResultPart):
            inner = part.content
            if type(inner) is list:
                lists.append(inner)
                copies.append(list(inner))
            elif isinstance(inner, list):
                lists.append(_Never())
                copies.append(_Never())
        elif json and isinstance(part, (ToolUsePart, ReasoningPart)):
            _json_fields(part, lists, copies)
    return lists, copies


class Seen:
    """Messages a cache has walked, with a copy of every part list in them taken when walked.

    Messages and parts are frozen, but a message's ``content`` (and a tool result's) is a list
    that can be changed in place after it was walked (``msg.content.append(...)``). So a prefix
    counts as already walked only when (a) the new transcript starts with the same message
    objects (or equal ones) and (b) every part list of those messages still holds exactly the
    parts it held then. Both are list compares in C, identity first: O(parts) per turn, no
    re-walk. A message that is equal but not the same object is compared by value against the
    walked one, which (b) shows unchanged; the walked object stays the reference.

    ``json``: also track the JSON a part carries in mutable dicts (a tool call's input, a
    reasoning part's provider_data), for the consumers that read it (the guard checks it, the
    journal records it); ``EMPTY_JSON_SEEN`` starts such a Seen. The media walk and the folds
    over tool ids and inline sizes do not read it, so they skip those compares.
    """

    __slots__ = ("copies", "ends", "json", "lists", "messages")

    def __init__(self, json: bool = False) -> None:
        self.json = json
        """Whether tool inputs and reasoning provider_data are tracked (see the class doc)."""
        self.messages: list[Any] = []
        self.lists: list[Any] = []
        """Every part list of ``messages``, in order."""
        self.copies: list[Any] = []
        """``copies[i]``: what ``lists[i]`` held when its message was walked."""
        self.ends: list[int] = []
        """``ends[m]``: the end of message m's lists in ``lists``."""

    def __len__(self) -> int:
        return len(self.messages)

    def unchanged(self) -> bool:
        """Whether no part list of the walked messages changed since they were walked."""
        return self.lists == self.copies

    def prefix_of(self, new: Sequence[Any]) -> bool:
        """Whether ``new`` starts with every message walked here, all of them unchanged."""
        k = len(self.messages)
        return 0 < k <= len(new) and new[:k] == self.messages and self.lists == self.copies

    def common(self, new: Sequence[Any]) -> int:
        """How many leading messages of ``new`` are the same objects as here, and unchanged."""
        old = self.messages
        limit = min(len(old), len(new))
        keep = 0
        while keep < limit and new[keep] is old[keep]:
            keep += 1
        while keep > 0:
            end = self.ends[keep - 1]
            if self.lists[:end] == self.copies[:end]:
                break
            keep -= 1
        return keep

    def grown(self, new: Sequence[Any], keep: int) -> Seen:
        """These messages' first ``keep`` (checked by the caller) followed by ``new[keep:]``.

        When ``keep`` is all of them this Seen is extended in place and returned (a cache owns
        its Seen and replaces it by the result; copying would cost the transcript's length).
        """
        if keep and keep == len(self.messages) and self not in _EMPTIES:
            seen = self
        else:
            seen = Seen(self.json)
            if keep:
                end = self.ends[keep - 1]
                seen.messages, seen.lists = self.messages[:keep], self.lists[:end]
                seen.copies, seen.ends = self.copies[:end], self.ends[:keep]
        messages, lists, copies, ends = seen.messages, seen.lists, seen.copies, seen.ends
        json = self.json
        for index in range(keep, len(new)):
            message = new[index]
            more, snapshot = _part_lists(message, json)
            messages.append(message)
            lists += more
            copies += snapshot
            ends.append(len(lists))
        return seen


EMPTY_SEEN = Seen()
"""No messages walked (a cache's start); ``grown`` from it gives a new Seen."""
EMPTY_JSON_SEEN = Seen(json=True)
"""``EMPTY_SEEN`` for a consumer that reads tool inputs and reasoning provider_data."""
_EMPTIES = (EMPTY_SEEN, EMPTY_JSON_SEEN)


class PrefixFold(Generic[T]):
    """A fold over a transcript that walks only the messages added since the previous call.

    ``fold(messages)`` returns the state after ``step(state, message)`` for every message;
    when ``messages`` starts with the previous call's messages (the same objects, their part
    lists unchanged, see ``Seen``), only the rest is folded into the previous state, else it
    starts again from ``start()``. The returned state must be treated as read-only, and as
    valid until the next call (it is extended in place: copying it would cost the transcript).
    """

    def __init__(self, start: Callable[[], T], step: Callable[[T, Any], None]) -> None:
        self._start = start
        self._step = step
        self._last: tuple[Seen, T] | None = None

    def __call__(self, messages: Sequence[Any]) -> T:
        if not isinstance(messages, list):
            messages = list(messages)
        last = self._last
        if last is not None and last[0].prefix_of(messages):
            seen, begin, state = last[0], len(last[0]), last[1]
        else:
            seen, begin, state = EMPTY_SEEN, 0, self._start()
        self._last = None  # a step that raises leaves no half-folded state behind
        for index in range(begin, len(messages)):
            self._step(state, messages[index])
        self._last = (seen.grown(messages, begin), state)
        return state


class _MediaCache:
    """The last transcript walked and the media found in it, so a grown transcript is walked only
    where it grew (issue 15: an agent turn must not cost the whole transcript again)."""

    __slots__ = ("found", "seen")

    def __init__(self) -> None:
        self.seen = EMPTY_SEEN
        self.found: list[MediaLocation] = []


_MEDIA_CACHE = _MediaCache()


def iter_media(request: LlmRequest) -> Iterator[MediaLocation]:
    """Yield every media part of ``request`` in message order, tool-result items included.

    Walks whatever it is given without judging it: media in an assistant message is yielded too
    (the guard refuses it; a capability check must not skip it). Anything that is not a message
    or a part is passed over, so a half-built request never raises here. Messages the previous
    call already walked (the same objects, as a prefix, their part lists unchanged) are not walked
    again.
    """
    messages: object = request.messages  # a model_construct'ed request may hold anything
    if not isinstance(messages, list):
        return
    cache = _MEDIA_CACHE
    if cache.seen.prefix_of(messages):
        start, found = len(cache.seen), list(cache.found)
    else:
        start, found = 0, []
    for mi in range(start, len(messages)):
        found.extend(_media_of(mi, messages[mi]))
    fresh = _MediaCache()
    fresh.seen, fresh.found = (cache.seen if start else EMPTY_SEEN).grown(messages, start), found
    globals()["_MEDIA_CACHE"] = fresh
    yield from found


@contextmanager
def media_cache_kept() -> Iterator[None]:
    """Put ``iter_media``'s last walked transcript back after the block (see ``caches_kept``)."""
    kept = _MEDIA_CACHE
    try:
        yield
    finally:
        globals()["_MEDIA_CACHE"] = kept
