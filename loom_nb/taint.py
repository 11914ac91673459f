"""The untrusted mark: ``Untrusted(value, origin)`` (ADR 0085 as carried by ADR 0120 decision 7).

Content that came from outside the application (a web page, a tool's output, a peer agent) is
marked so that the guard can fence it in a user message or refuse it where it could act as an
instruction (system prompt, assistant turn, a tool call). A part marks itself with ``origin``;
any value can be wrapped as ``Untrusted``. Both marks mean the same to the guard.

The mark must survive serialization, or a journaled and replayed transcript would silently
launder untrusted text into trusted text. ``Untrusted`` therefore serializes to a marker object
``{"__loomUntrusted": {"origin": ..., "value": ...}}`` and any such object validates back into
``Untrusted``. A model that emits that marker inside a tool call only makes its own call refused:
the shape fails closed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import ConfigDict, model_serializer, model_validator

from loom_nb._strict import StrictModel

__all__ = [
    "MINTED_MEDIA_ORIGIN_PREFIX",
    "UNTRUSTED_MARKER",
    "Untrusted",
    "contains_untrusted",
    "is_minted_media_origin",
    "mark_untrusted_values",
]

UNTRUSTED_MARKER = "__loomUntrusted"
"""Key of the JSON object an ``Untrusted`` value serializes to."""


MINTED_MEDIA_ORIGIN_PREFIX = "mcp:"
"""Origin prefix of untrusted media whose ref loom_nb minted itself from the party's own bytes.

ADR 0120 decision 7 refuses an untrusted media part that names a stored ref: an untrusted party
must not choose which blob enters the prompt. An MCP server does not choose one: it sends bytes,
the toolset stores them and names the blob by their hash (issue 28), so the server chose the bytes
and never an address. Such a part, inside a tool result with an ``mcp:<server>/<tool>`` origin,
may travel by ref like trusted media and is fenced like any untrusted media.
"""


def is_minted_media_origin(origin: object) -> bool:
    """Whether untrusted media with this origin may name a ref loom_nb minted (inside a tool result)."""
    return isinstance(origin, str) and origin.startswith(MINTED_MEDIA_ORIGIN_PREFIX)


class Untrusted(StrictModel):
    """A value that came from an untrusted source, with where it came from.

    ``Untrusted("page text", "tool:web_fetch")`` may stand wherever text can (a text part's
    ``text``, a tool result's string content, the system prompt) and as any value inside a
    tool call, so that ``guard_request`` sees it and fences or refuses it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: Any
    """The wrapped value: a string, or any JSON value when it sits inside a tool call's input."""
    origin: str
    """Where the value came from, e.g. ``"tool:web_fetch"`` or ``"upload"``; shown in fences."""

    def __init__(self, value: Any = None, origin: str = "untrusted", **data: Any) -> None:
        if data:
            super().__init__(**data)
        else:
            super().__init__(value=value, origin=origin)

    @model_validator(mode="before")
    @classmethod
    def _from_marker(cls, data: Any) -> Any:
        if isinstance(data, dict) and UNTRUSTED_MARKER in data:
            if len(data) != 1 or not isinstance(data[UNTRUSTED_MARKER], dict):
                raise ValueError(f"an {UNTRUSTED_MARKER} marker must be the only key of its object")
            return data[UNTRUSTED_MARKER]
        return data

    @model_serializer(mode="plain")
    def _to_marker(self) -> dict[str, Any]:
        return {UNTRUSTED_MARKER: {"origin": self.origin, "value": self.value}}

    def __str__(self) -> str:
        return str(self.value)


def _children(node: Any) -> Iterator[Any]:
    if isinstance(node, dict):
        yield from node.values()
    elif isinstance(node, list | tuple):
        yield from node


def contains_untrusted(value: Any, *, max_nodes: int = 100_000) -> bool | None:
    """Whether ``value`` holds an ``Untrusted`` (or its JSON marker) at any depth.

    Walks iteratively, so no input depth can raise ``RecursionError``. Returns ``None`` when the
    value has more than ``max_nodes`` nodes: the caller must then fail closed.
    """
    stack = [value]
    seen = 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen > max_nodes:
            return None
        if isinstance(node, Untrusted):
            return True
        if isinstance(node, dict) and UNTRUSTED_MARKER in node:
            return True
        stack.extend(_children(node))
    return False


def mark_untrusted_values(value: Any) -> Any:
    """Return ``value`` with every ``{"__loomUntrusted": ...}`` marker object turned into ``Untrusted``.

    Used when JSON (a journal row, a recording) is read back into models, so the mark survives a
    round trip. Iterative; values without markers are returned as they are (same object).
    """
    if contains_untrusted(value, max_nodes=10**9) is not True:
        return value

    def convert(node: Any) -> Any:
        # Rebuild only containers; markers become Untrusted. An explicit stack keeps this
        # iterative: each frame is (source container, rebuilt container, iterator over keys).
        if isinstance(node, dict) and UNTRUSTED_MARKER in node:
            return Untrusted.model_validate(node)
        return node

    root_holder: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root_holder, 0)]
    while stack:
        src, parent, key = stack.pop()
        converted = convert(src)
        if converted is not src:
            parent[key] = converted
        elif isinstance(src, dict):
            new_dict: dict[str, Any] = dict(src)
            parent[key] = new_dict
            stack.extend((v, new_dict, k) for k, v in src.items())
        elif isinstance(src, list):
            new_list: list[Any] = list(src)
            parent[key] = new_list
            stack.extend((v, new_list, i) for i, v in enumerate(src))
        else:
            parent[key] = src
    return root_holder[0]
