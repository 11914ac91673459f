"""Where the media of a request sits: one walk shared by the guard, the capability check and resolution.

Media may appear directly in a user message or inside a tool result in one (ADR 0120 decision 7);
every consumer that cares about media (``assert_request_supported`` of decision 6, content
resolution of decision 4, the providers' fencing) needs the same list with the same locations, so
it lives here once. A location prints as a path (``messages[3].content[1].content[0]``) that error
messages quote verbatim.
"""

from __future__ import annotations

import marshal
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import reduce
from operator import iconcat, is_
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
    "LINEAGES",
    "Lineages",
    "MediaLocation",
    "PrefixFold",
    "Seen",
    "iter_media",
    "media_cache_kept",
    "part_path",
    "remembering",
    "walked_once",
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


_SNAPSHOT_BYTES = 1 << 20
"""The most bytes the snapshot of one part's JSON may take; a bigger value never matches, so its
message is walked again on every request (the guard caps tool inputs anyway)."""


def _dumps(value: Any) -> bytes:
    """``value``'s ``marshal`` bytes (format 2: no back-references, so the same value always gives
    the same bytes); ``ValueError`` for anything but exact built-in types."""
    return marshal.dumps(value, 2)


class _NeverSame:
    """Stands for a value that matches no snapshot: it cannot be marshalled, and a fresh one is
    never the same object as another."""

    __slots__ = ()


def _json_fields(part: object, state: _Lists) -> None:
    """Add the mutable JSON of a part that the guard checks and a request sends (a tool call's
    ``input`` and ``provider_data``, a reasoning part's ``provider_data``) with its snapshot."""
    if isinstance(part, ToolUsePart):
        fields: tuple[object, ...] = (part.input, part.provider_data)
    elif isinstance(part, ReasoningPart):
        fields = (part.provider_data,)
    else:
        return
    for value in fields:
        if value is None:
            continue
        try:
            mark: bytes | None = _dumps(value)
        except ValueError:  # a subclass, an Untrusted mark, a cycle or a depth past marshal's
            mark = None
        if mark is None or len(mark) > _SNAPSHOT_BYTES:
            value, mark = _NeverSame(), None
        state.values.append(value)
        state.marks.append(mark)


def _joined(lists: list[list[Any]]) -> list[Any]:
    """The items of ``lists`` one after the other, in a new list (``list += list`` in C, a fifth
    faster than iterating a ``chain`` over many short lists; no item's own code runs)."""
    return reduce(iconcat, lists, [])


_NO_VALUES = marshal.dumps([], 2)
"""``_Lists.mark`` while no value is tracked."""


class _Lists:
    """The mutable state of walked messages: their part lists, with the parts each held, and the
    JSON values they carry, with the ``marshal`` bytes of each, so a change made in place since is
    seen without asking any value's ``__eq__``."""

    __slots__ = ("flat", "lens", "lists", "mark", "marks", "values")

    def __init__(self) -> None:
        self.lists: list[list[Any]] = []
        """Every part list, in order (a message's content, then its tool results' contents)."""
        self.lens: list[int] = []
        """``lens[i]``: how many parts ``lists[i]`` held when its message was walked."""
        self.flat: list[Any] = []
        """The parts of every list when walked, one after the other (they also keep the parts
        alive, so an identity compare cannot meet a recycled id)."""
        self.values: list[Any] = []
        """Every tracked JSON value (tool inputs, provider_data), in order."""
        self.marks: list[bytes | None] = []
        """``marks[i]``: the bytes of ``values[i]`` when its message was walked (None: never matches)."""
        self.mark: bytes | None = _NO_VALUES
        """The bytes of all of ``values`` (None when one never matches)."""

    def add_list(self, parts: list[Any] | None) -> None:
        """Track ``parts`` (None: a list that must never match)."""
        if parts is None:
            self.lists.append([_NeverSame()])
            self.lens.append(1)
            self.flat.append(_NeverSame())
        else:
            self.lists.append(parts)
            self.lens.append(len(parts))
            self.flat += parts

    def sliced(self, ends: tuple[int, int, int]) -> _Lists:
        """A copy of the state of the first messages, up to ``ends``."""
        lists_end, flat_end, values_end = ends
        state = _Lists()
        state.lists, state.lens = self.lists[:lists_end], self.lens[:lists_end]
        state.flat = self.flat[:flat_end]
        state.values, state.marks = self.values[:values_end], self.marks[:values_end]
        state.seal()
        return state

    def prefix_unchanged(self, ends: tuple[int, int, int]) -> bool:
        """``unchanged`` for the first messages only, up to ``ends`` (value by value)."""
        lists_end, flat_end, values_end = ends
        lists = self.lists[:lists_end]
        if list(map(len, lists)) != self.lens[:lists_end]:
            return False
        if not all(map(is_, _joined(lists), self.flat[:flat_end])):
            return False
        marks = self.marks[:values_end]
        if None in marks:
            return False
        try:
            return list(map(_dumps, self.values[:values_end])) == marks
        except ValueError:
            return False

    def seal(self) -> None:
        """Take the bytes of all of ``values``, after values were added (the caller has just
        found the earlier ones unchanged, so each one's bytes in ``marks`` are still its own).

        They are put together from ``marks`` rather than marshalled again: format 2 writes a
        list as ``[``, its length (4 bytes, little-endian) and each item as it would be alone
        (no back-references), so a growing transcript costs a copy, not a walk of its values.
        """
        marks = self.marks
        if None in marks:
            self.mark = None
        else:
            self.mark = b"[" + len(marks).to_bytes(4, "little") + b"".join(marks)  # type: ignore[arg-type]

    def unchanged(self) -> bool:
        """Whether every list still holds the very parts it held and every value the same bytes.

        Identity compares and byte compares only, in C: no ``__eq__`` of anything a caller built
        is ever asked (a value's ``__eq__`` is its own code, and could say anything)."""
        if list(map(len, self.lists)) != self.lens:
            return False
        if not all(map(is_, _joined(self.lists), self.flat)):
            return False
        if not self.values:
            return True
        if self.mark is None:
            return False
        try:
            return _dumps(self.values) == self.mark
        except ValueError:  # something not plain JSON was put in since
            return False


def _add_message(message: object, json: bool, into: _Lists) -> None:
    """Add the part lists of ``message`` (its content, each tool result's content) and, with
    ``json``, the JSON its tool calls and reasoning parts carry. Anything that is not a plain
    list gets a list that never matches, so its message is never taken as unchanged."""
    content = getattr(message, "content", None) if isinstance(message, Message) else None
    if content is None or isinstance(content, str):
        return
    if type(content) is not list:
        into.add_list(None)
        return
    into.add_list(content)
    for part in content:
        if isinstance(part, ToolResultPart):
            inner = part.content
            if type(inner) is list:
                into.add_list(inner)
            elif isinstance(inner, list):
                into.add_list(None)
        elif json and isinstance(part, (ToolUsePart, ReasoningPart)):
            _json_fields(part, into)


class Seen:
    """Messages a cache has walked, with a copy of every part list in them taken when walked.

    Messages and parts are frozen, but a message's ``content`` (and a tool result's) is a list
    that can be changed in place after it was walked (``msg.content.append(...)``). So a prefix
    counts as already walked only when (a) the new transcript starts with the very message
    objects walked and (b) every part list of those messages still holds the very parts it held
    then. Both are identity compares in C: O(parts) per turn, no re-walk.

    Nothing a caller built is ever compared by value (issue 30 item 3): a value's ``__eq__`` is
    its own code, and a ``str`` subclass whose ``__eq__`` always says True would make any
    message "equal" to a walked one. A message that is equal but not the same object is walked
    again.

    ``json``: also track the JSON a part carries in mutable dicts (a tool call's input, a
    reasoning part's provider_data), for the consumers that read it (the guard checks it, the
    journal records it); ``EMPTY_JSON_SEEN`` starts such a Seen. Its snapshot is the value's
    ``marshal`` bytes, which exist only for exact built-in types, compared as bytes. The media
    walk and the folds over tool ids and inline sizes do not read it, so they skip that compare.
    """

    __slots__ = ("ends", "json", "messages", "state")

    def __init__(self, json: bool = False) -> None:
        self.json = json
        """Whether tool inputs and reasoning provider_data are tracked (see the class doc)."""
        self.messages: list[Any] = []
        self.state = _Lists()
        """The part lists and JSON values of ``messages``, with their snapshots."""
        self.ends: list[tuple[int, int, int]] = []
        """``ends[m]``: where message m's lists, parts and JSON values end in ``state``."""

    def __len__(self) -> int:
        return len(self.messages)

    def unchanged(self) -> bool:
        """Whether no part list or tracked JSON of the walked messages changed since they were walked."""
        return self.state.unchanged()

    def prefix_of(self, new: Sequence[Any]) -> bool:
        """Whether ``new`` starts with every message walked here (the same objects), all unchanged."""
        k = len(self.messages)
        return 0 < k <= len(new) and all(map(is_, new, self.messages)) and self.state.unchanged()

    def common(self, new: Sequence[Any]) -> int:
        """How many leading messages of ``new`` are the same objects as here, and unchanged."""
        old = self.messages
        limit = min(len(old), len(new))
        keep = 0
        while keep < limit and new[keep] is old[keep]:
            keep += 1
        while keep > 0 and not self.state.prefix_unchanged(self.ends[keep - 1]):
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
                seen.messages, seen.ends = self.messages[:keep], self.ends[:keep]
                seen.state = self.state.sliced(self.ends[keep - 1])
        messages, ends, state, json = seen.messages, seen.ends, seen.state, self.json
        values = len(state.values)
        for index in range(keep, len(new)):
            message = new[index]
            messages.append(message)
            # A plain text message (the common turn) has no part list and no JSON to track.
            if type(message) is not Message or type(message.content) is not str:
                _add_message(message, json, state)
            ends.append((len(state.lists), len(state.flat), len(state.values)))
        if len(state.values) != values:  # JSON values were added: their bytes join the mark
            state.seal()
        return seen


EMPTY_SEEN = Seen()
"""No messages walked (a cache's start); ``grown`` from it gives a new Seen."""
EMPTY_JSON_SEEN = Seen(json=True)
"""``EMPTY_SEEN`` for a consumer that reads tool inputs and reasoning provider_data."""
_EMPTIES = (EMPTY_SEEN, EMPTY_JSON_SEEN)


LINEAGES = 8
"""How many transcripts each walk cache keeps an entry for (the ones walked most recently)."""


class Lineages(Generic[T]):
    """A walk cache's entries, one per transcript (a request lineage), the most recent first.

    One entry per process would serve one conversation at a time: two chats in a notebook, the
    branches of a map or a fallback's providers would evict each other at every turn, and the
    entry would be offered to whatever request came next (issue 30 item 3). Here each entry is
    found again only by a request that starts with the very message objects it walked, their
    part lists unchanged (``Seen.prefix_of``), so one conversation's walk is never taken for
    another's; the ``size`` used most recently are kept (each holds its transcript alive).
    """

    __slots__ = ("entries", "size")

    def __init__(self, size: int = LINEAGES) -> None:
        self.entries: list[tuple[Seen, T]] = []
        self.size = size

    def take(self, messages: Sequence[Any]) -> tuple[Seen, T] | None:
        """Remove and return the entry whose messages ``messages`` extends, if any."""
        for index, entry in enumerate(self.entries):
            if entry[0].prefix_of(messages):
                del self.entries[index]
                return entry
        return None

    def put(self, seen: Seen, state: T) -> None:
        """Keep ``state`` for the transcript ``seen`` walked, as the most recent entry."""
        self.entries.insert(0, (seen, state))
        del self.entries[self.size :]

    @contextmanager
    def kept(self) -> Iterator[None]:
        """Put the entries back as they were after the block (a one-off walk must not evict them)."""
        saved = list(self.entries)
        try:
            yield
        finally:
            self.entries[:] = saved


class PrefixFold(Generic[T]):
    """A fold over a transcript that walks only the messages added since the previous call.

    ``fold(messages)`` returns the state after ``step(state, message)`` for every message;
    when ``messages`` starts with the messages of an earlier call (the same objects, their part
    lists unchanged, see ``Seen``), only the rest is folded into that call's state, else it
    starts again from ``start()``. An entry is kept per transcript (``Lineages``). The returned
    state must be treated as read-only, and as valid until the next call on the same transcript
    (it is extended in place: copying it would cost the transcript).
    """

    def __init__(self, start: Callable[[], T], step: Callable[[T, Any], None]) -> None:
        self._start = start
        self._step = step
        self._lineages: Lineages[T] = Lineages()

    def __call__(self, messages: Sequence[Any]) -> T:
        if not isinstance(messages, list):
            messages = list(messages)
        last = self._lineages.take(messages)  # a step that raises leaves no half-folded state
        if last is not None:
            seen, begin, state = last[0], len(last[0]), last[1]
        else:
            seen, begin, state = EMPTY_SEEN, 0, self._start()
        for index in range(begin, len(messages)):
            self._step(state, messages[index])
        self._lineages.put(seen.grown(messages, begin), state)
        return state


_ONCE: ContextVar[bool] = ContextVar("loom_nb_walked_once", default=False)


@contextmanager
def walked_once() -> Iterator[None]:
    """Walk requests without keeping them in the walk caches (the guard's, ``iter_media``'s).

    For a request whose messages were validated from dicts just now, by the caller of this block:
    no later request can start with those very message objects, so an entry for them would never
    be found again, would keep the transcript alive and would evict a live conversation's entry;
    recording it costs a pass over every part list. Nothing is skipped but the recording: every
    check still runs on every message.
    """
    token = _ONCE.set(True)
    try:
        yield
    finally:
        _ONCE.reset(token)


def remembering() -> bool:
    """Whether a walk should keep what it walked for the next request (not inside ``walked_once``)."""
    return not _ONCE.get()


_MEDIA_CACHE: Lineages[list[MediaLocation]] = Lineages()
"""The media found in each transcript walked lately, so a grown transcript is walked only where
it grew (issue 15: an agent turn must not cost the whole transcript again)."""


def iter_media(request: LlmRequest) -> Iterator[MediaLocation]:
    """Yield every media part of ``request`` in message order, tool-result items included.

    Walks whatever it is given without judging it: media in an assistant message is yielded too
    (the guard refuses it; a capability check must not skip it). Anything that is not a message
    or a part is passed over, so a half-built request never raises here. Messages an earlier
    call on the same transcript already walked (the same objects, as a prefix, their part lists
    unchanged) are not walked again.
    """
    messages: object = request.messages  # a model_construct'ed request may hold anything
    if not isinstance(messages, list):
        return
    last = _MEDIA_CACHE.take(messages)
    if last is not None:
        seen, start, found = last[0], len(last[0]), list(last[1])
    else:
        seen, start, found = EMPTY_SEEN, 0, []
    for mi in range(start, len(messages)):
        found.extend(_media_of(mi, messages[mi]))
    if remembering():
        _MEDIA_CACHE.put(seen.grown(messages, start), found)
    yield from found


@contextmanager
def media_cache_kept() -> Iterator[None]:
    """Put ``iter_media``'s entries back after the block (see ``caches_kept``)."""
    with _MEDIA_CACHE.kept():
        yield
