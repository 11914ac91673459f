"""The copy-on-write rewrite of a guarded request: fences around untrusted text, names dropped, origins moved.

Only messages the walk marked dirty are rebuilt, each with the nonce of the request cut after it
(``PrefixNonces``), and a rebuilt message is kept across turns (``Fences``) so its fences are
written once and stay byte for byte the same while the transcript grows (issue 15).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loom_nb.content import (
    FilePart,
    LlmRequest,
    Message,
    Part,
    TextPart,
    ToolResultPart,
    canonical_json,
)
from loom_nb.guard._fence import (
    PrefixNonces,
    fence_text,
    request_tail,
)
from loom_nb.taint import Untrusted

if TYPE_CHECKING:
    from loom_nb.guard._message_walk import MessageWalk


class Fences:
    """The guarded form of each rewritten message of a transcript, kept across turns (issue 15).

    A message's fences use its own nonce (``PrefixNonces``: the request cut after it), so once
    rewritten it stays as it is while the transcript grows; only a new system prompt, tool
    menu, settings or schema (the ``tail`` every nonce covers) rewrites them all again.
    """

    __slots__ = ("done", "nonces", "tail")

    def __init__(self) -> None:
        self.nonces = PrefixNonces()
        self.tail: str | None = None
        self.done: dict[int, Message] = {}

    def rebuilt(
        self, req: LlmRequest, messages: list[Message], dirty: list[int], walk: MessageWalk
    ) -> list[Message]:
        """``messages`` with every dirty one rewritten (fenced, names dropped, origins moved)."""
        if walk.fencing:
            tail = request_tail(req)
            if tail != self.tail:
                self.done.clear()
                self.tail = tail
        rebuilt = list(messages)
        done = self.done
        for mi in dirty:
            message = done.get(mi)
            if message is None:
                message = messages[mi]
                assert isinstance(message.content, list)  # only part lists are ever dirty
                nonce = (
                    self.nonces.nonce(messages, mi, self.tail or "", walk.input_json)
                    if mi in walk.fencing
                    else ""
                )
                parts = [_rewrite(part, nonce) for part in message.content]
                message = message.model_copy(update={"content": parts})
                done[mi] = message
            rebuilt[mi] = message
        return rebuilt


def _text_and_origin(text: str | Untrusted, origin: str | None) -> tuple[str, str | None]:
    if isinstance(text, Untrusted):
        value = text.value if isinstance(text.value, str) else canonical_json(text.value)
        return value, origin if origin is not None else text.origin
    return text, origin


def _fenced(text: str | Untrusted, origin: str | None, nonce: str) -> str | None:
    """The fenced form of ``text``, or None when it is trusted (no origin, not Untrusted)."""
    value, effective = _text_and_origin(text, origin)
    if effective is None:
        return None
    return fence_text(value, nonce, effective)


def _rewrite(part: Part, nonce: str) -> Part:
    if isinstance(part, TextPart):
        fenced = _fenced(part.text, part.origin, nonce)
        if fenced is None:
            return part
        return part.model_copy(update={"text": fenced, "origin": None})
    if isinstance(part, FilePart) and part.origin is not None and part.name is not None:
        return part.model_copy(update={"name": None})
    if isinstance(part, ToolResultPart):
        return _rewrite_result(part, nonce)
    return part


def _rewrite_result(part: ToolResultPart, nonce: str) -> ToolResultPart:
    origin = part.origin
    content = part.content
    if not isinstance(content, list):
        fenced = _fenced(content, origin, nonce)
        if fenced is None:
            return part
        return part.model_copy(update={"content": fenced, "origin": None})
    items: list[Any] = []
    for item in content:
        if isinstance(item, TextPart):
            own = item.origin if item.origin is not None else origin
            fenced = _fenced(item.text, own, nonce)
            items.append(
                item if fenced is None else item.model_copy(update={"text": fenced, "origin": None})
            )
        else:
            item_origin = item.origin if item.origin is not None else origin
            update: dict[str, Any] = {}
            if item_origin is not None and item.origin is None:
                update["origin"] = item_origin
            if item_origin is not None and isinstance(item, FilePart) and item.name is not None:
                update["name"] = None
            items.append(item.model_copy(update=update) if update else item)
    return part.model_copy(update={"content": items, "origin": None})
