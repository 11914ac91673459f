"""Attachments to parts: what ``await chat(text, *attachments)`` accepts, and the user message.

An attachment is a path (``str`` or ``os.PathLike``), ``bytes``, a PIL image, or a part. Paths and
bytes are sniffed (``loom_nb.media``): an image becomes an ``ImagePart``, audio an ``AudioPart``,
anything else a ``FilePart`` (PDF, text); bytes over the inline cap go into the store and travel
by ref. A ``str`` is always a path: text goes in the first argument.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from loom_nb.content import (
    AudioPart,
    FilePart,
    ImagePart,
    Message,
    Part,
    TextPart,
    ToolResultPart,
    ToolUsePart,
    to_parts,
)
from loom_nb.errors import ConfigurationError, MediaError
from loom_nb.media import image_from_pil, part_of_bytes, read_path
from loom_nb.store import ContentStore
from loom_nb.taint import Untrusted

__all__ = ["attachment_part", "unanswered_calls", "user_message"]

StoreGetter = Callable[[], ContentStore]


def attachment_part(item: Any, index: int, store: StoreGetter, tenant: str) -> Part:
    """One attachment as a part; bytes over the inline cap are stored through ``store()``."""
    if isinstance(item, TextPart | ImagePart | AudioPart | FilePart | ToolResultPart):
        return item  # a tool result must answer a call: the guard checks that, with its codes
    if isinstance(item, ToolUsePart):
        raise ConfigurationError(
            f"attachment {index} is a tool_use part; only the model makes tool calls (they "
            "arrive in its replies), so a user message cannot carry one.",
            code="invalid_attachment",
        )
    pil = sys.modules.get("PIL.Image")
    if pil is not None and isinstance(item, pil.Image):
        return _with_store(lambda s: image_from_pil(item, store=s, tenant=tenant), store)
    if isinstance(item, str | os.PathLike):
        data, name = read_path(item)
        return _with_store(
            lambda s: part_of_bytes(data, name=name, store=s, tenant=tenant), store, len(data)
        )
    if isinstance(item, bytes | bytearray | memoryview):
        data = bytes(item)
        return _with_store(lambda s: part_of_bytes(data, store=s, tenant=tenant), store, len(data))
    raise MediaError(
        f"attachment {index} is a {type(item).__name__}; attach a path, bytes, a PIL image or a "
        "part (ImagePart / AudioPart / FilePart / TextPart).",
        code="invalid_attachment",
    )


def _with_store(
    make: Callable[[ContentStore | None], Part], store: StoreGetter, size: int | None = None
) -> Part:
    """Build the part inline when it fits; only an oversized one opens (or creates) the store."""
    from loom_nb.limits import MAX_INLINE_BYTES

    if size is not None and size <= MAX_INLINE_BYTES:
        return make(None)
    return make(store())


def unanswered_calls(history: Sequence[Message]) -> list[Part]:
    """Error results for the last assistant turn's tool calls: a plain chat turn runs no tools."""
    if not history or history[-1].role != "assistant" or isinstance(history[-1].content, str):
        return []  # no assistant turn last, or one of plain text: no call to answer
    return [
        ToolResultPart(
            tool_use_id=part.id if isinstance(part.id, str) else str(part.id.value),
            content="not run: this turn was a plain chat message; use `await chat.run(...)` to "
            "let the model call tools.",
            is_error=True,
        )
        for part in to_parts(history[-1].content)
        if isinstance(part, ToolUsePart)
    ]


def user_message(
    text: Any,
    attachments: Sequence[Any],
    history: Sequence[Message],
    store: StoreGetter,
    tenant: str,
) -> Message:
    """The user turn: answers to unanswered calls, the text, then the attachments' parts."""
    if not isinstance(text, str | Untrusted):
        raise ConfigurationError(
            f"the message text is a str, not {type(text).__name__}; attachments (paths, bytes, "
            "images, parts) go after it: await chat('describe this', 'photo.png').",
            code="invalid_prompt",
        )
    parts: list[Part] = unanswered_calls(history)
    if not parts and not attachments and type(text) is str and text:
        return Message(role="user", content=text)  # plain text: no part to build first
    if isinstance(text, Untrusted) or text:
        parts.append(TextPart(text=text))
    parts.extend(attachment_part(a, n, store, tenant) for n, a in enumerate(attachments))
    if not parts:
        raise ConfigurationError(
            "nothing to send: give some text or an attachment.", code="empty_prompt"
        )
    if len(parts) == 1 and isinstance(text, str) and isinstance(parts[0], TextPart):
        return Message(role="user", content=text)
    return Message(role="user", content=parts)
