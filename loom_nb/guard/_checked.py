"""A request the journaled model call has just guarded and checked, handed to its provider.

``create_llm_effect`` runs ``guard_request`` and ``assert_request_supported`` before resolving
media (ADR 0120 decisions 6, 7); the shipped providers run both again on what they are given,
for callers who skipped them. When the effect hands the provider the very request it checked
(nothing fenced, nothing resolved), that second pass can only repeat the first: the guard's caps
there are looser and the capabilities the same object. ``handing_over`` says so for the duration
of the provider call, and the two checks return at once for that request object, as long as it
still has the messages it was checked with (a request changed in between is checked in full).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

__all__ = ["guarded_already", "handing_over", "supported_already"]

_Checked = tuple[Any, int, int, Any, int, int]
_HANDED: ContextVar[_Checked | None] = ContextVar("loom_nb_checked_request", default=None)


def _shape(request: Any) -> tuple[int, int]:
    """The number of messages and the length of the last one's content (a cheap change check)."""
    messages = request.messages
    if not isinstance(messages, list) or not messages:
        return (-1, -1) if not isinstance(messages, list) else (0, 0)
    content = getattr(messages[-1], "content", None)
    return len(messages), len(content) if isinstance(content, (list, str)) else -1


@contextmanager
def handing_over(
    request: Any, max_inline_bytes: int, max_inline_total_bytes: int, capabilities: Any
) -> Iterator[None]:
    """While the provider call runs: ``request`` passed the guard under these caps and the
    capability check against ``capabilities`` (the object itself)."""
    token = _HANDED.set(
        (request, max_inline_bytes, max_inline_total_bytes, capabilities, *_shape(request))
    )
    try:
        yield
    finally:
        _HANDED.reset(token)


def _handed(request: Any) -> _Checked | None:
    handed = _HANDED.get()
    if handed is None or handed[0] is not request or _shape(request) != handed[4:]:
        return None
    return handed


def guarded_already(request: Any, max_inline_bytes: int, max_inline_total_bytes: int) -> bool:
    """Whether ``request`` is the one handed over, guarded unchanged under caps at most these."""
    handed = _handed(request)
    return (
        handed is not None and handed[1] <= max_inline_bytes and handed[2] <= max_inline_total_bytes
    )


def supported_already(request: Any, capabilities: Any) -> bool:
    """Whether ``request`` is the one handed over, checked against this capabilities object."""
    handed = _handed(request)
    return handed is not None and handed[3] is capabilities
