"""A request the journaled model call has just guarded and checked, handed to its provider.

``create_llm_effect`` runs ``guard_request`` and ``assert_request_supported`` before resolving
media (ADR 0120 decisions 6, 7); the shipped providers run both again on what they are given,
for callers who skipped them. When the effect hands the provider the very request it checked
(nothing fenced, nothing resolved), that second pass can only repeat the first: the guard's caps
there are looser and the capabilities the same object. ``handing_over`` says so for the duration
of the provider call; ``handed`` gives the caps and capabilities of that request object, and the
guard's ``guarded_already`` / ``supported_already`` (in ``_request``) return at once for it as long
as its messages are still the very objects the guard walked, unchanged (the guard's own ``Seen``,
compared by identity and exact bytes only: nothing is decided by a value's ``__eq__``).
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar, Token
from typing import Any

__all__ = ["Mark", "handed", "handing_over", "in_hand"]


class Mark:
    """What ``handing_over`` says about one request object while the provider call runs."""

    __slots__ = (
        "capabilities",
        "max_inline_bytes",
        "max_inline_total_bytes",
        "request",
        "verified",
    )

    def __init__(
        self, request: Any, max_inline_bytes: int, max_inline_total_bytes: int, capabilities: Any
    ) -> None:
        self.request = request
        self.max_inline_bytes = max_inline_bytes
        self.max_inline_total_bytes = max_inline_total_bytes
        self.capabilities = capabilities
        self.verified: tuple[list[Any], int] | None = None
        """The message list found unchanged since guarded by the first check of this call, and
        its length then (the provider's capability check and guard run one right after the
        other, with no code of anyone else's in between: the second only confirms it is the same
        list, as long)."""


_HANDED: ContextVar[Mark | None] = ContextVar("loom_nb_checked_request", default=None)


def handing_over(
    request: Any,
    max_inline_bytes: int,
    max_inline_total_bytes: int,
    capabilities: Any,
    *,
    walked: bool = False,
) -> contextlib.AbstractContextManager[None]:
    """While the provider call runs: ``request`` passed the guard under these caps and the
    capability check against ``capabilities`` (the object itself).

    ``walked``: the caller's ``guard_request`` of this very request returned it a moment ago,
    with no code of anyone else's run since, so its message list is the one the guard walked,
    as long: the provider's checks confirm that without a pass over the transcript.
    """
    mark = Mark(request, max_inline_bytes, max_inline_total_bytes, capabilities)
    if walked:
        mark.verified = (request.messages, len(request.messages))
    return _HandingOver(mark)


class _HandingOver(contextlib.AbstractContextManager[None]):
    """``handing_over``'s block (a plain class: every model call enters one)."""

    __slots__ = ("_mark", "_token")

    def __init__(self, mark: Mark) -> None:
        self._mark = mark
        self._token: Token[Mark | None] | None = None

    def __enter__(self) -> None:
        self._token = _HANDED.set(self._mark)

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _HANDED.reset(self._token)
            self._token = None


def handed(request: Any) -> Mark | None:
    """The mark ``request`` (this very object) was handed over with, or None."""
    mark = _HANDED.get()
    if mark is None or mark.request is not request:
        return None
    return mark


def in_hand() -> Mark | None:
    """The mark of the request being handed over now, whatever request asks (None: none is)."""
    return _HANDED.get()
