"""The request guard: structure, provenance and inline caps in one walk (ADR 0120 decisions 5 and 7).

``guard_request`` is the gate every request passes before a provider sees it. It refuses:

- structure: a ``tool_use`` outside an assistant message, a ``tool_result`` outside a user message,
  media outside a user message, a ``reasoning`` part outside an assistant message
  (``reasoning_outside_assistant``) or one whose fields are not plain strings / plain JSON
  (``bad_reasoning``, ``untrusted_in_reasoning``), a malformed or mismatched media type, bad base64, a malformed ref
  (address, declared size);
- tool pairing, as every vendor pairs them (or answers 400): each ``tool_use`` id is unique in the
  request (``duplicate_tool_use_id``); a ``tool_result`` answers a call of the assistant message
  right before its user message (``orphan_tool_result`` when no earlier message made the call,
  ``stale_tool_result`` when an older one did), once (``duplicate_tool_result``); and that user
  message answers every call (``unanswered_tool_use``). A request may end on an assistant message
  whose calls are still open (a parked agent turn);
- size: an inline part over ``max_inline_bytes`` or a request over ``max_inline_total_bytes``
  (``OversizedInlinePartError``: store the bytes and send a ref);
- provenance: untrusted text in the system prompt or an assistant message, an untrusted value
  anywhere in a ``tool_use`` (id, name, input at any depth, ``provider_data``; the input walk is
  iterative and capped), untrusted media naming a stored ref, an untrusted mark in the tool
  menu (a spec's name, description or ``input_schema`` at any depth; a malformed spec is
  ``bad_tool_spec``).

and rewrites, copy-on-write, only what provenance requires: untrusted text in a user message or a
tool result is fenced (the fence IS the mark: the fenced part carries no ``origin``), a tool
result's ``origin`` moves onto its media items, and an untrusted file loses its ``name``.
Untrusted media keeps its ``origin`` so the provider mapper can bracket it where its wire shape
allows (``fence_untrusted_media``).

The output is a fixed point: guarding it again returns it unchanged, so providers may guard what
the effect layer already guarded without double-fencing. Fences in ``messages[i]`` use the nonce
of the INPUT request cut after that message (``fence_nonce`` of ``messages[: i + 1]`` with the same
system prompt, tools, settings and schema; for the last message, ``fence_nonce(request)``), computed
only when something must be fenced and only after the whole request passed every check. So a
fence is written once, on the turn its message arrives, and stays byte for byte the same on every
later turn: a long run does not re-fence its transcript, and the vendors' prompt caches keep
their prefix. Every refusal is a ``GuardError`` with a stable ``code``; a dict
that does not fit the model is a ``ContentValidationError``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from loom_nb.content import (
    LlmRequest,
    parse_request,
)
from loom_nb.guard._checked import Mark, handed, in_hand
from loom_nb.guard._checks import (
    check_json_value,
    refuse,
)
from loom_nb.guard._message_walk import MessageWalk
from loom_nb.guard._part_checks import check_tools
from loom_nb.guard._rewrite import Fences
from loom_nb.guard._walk import EMPTY_JSON_SEEN, Lineages, media_cache_kept, remembering
from loom_nb.limits import (
    MAX_INLINE_BYTES,
    MAX_INLINE_TOTAL_BYTES,
)

__all__ = [
    "caches_kept",
    "check_tool_input",
    "checked_already",
    "guard_request",
    "guard_with_media",
    "guarded_already",
    "supported_already",
]


def check_tool_input(value: Any, *, where: str = "input") -> None:
    """Refuse a tool call's input the guard would refuse: untrusted inside, over the node or depth cap, not JSON.

    The agent loop calls this at dispatch to replace an over-cap call with a placeholder before
    it enters the transcript (decision 7), so the guard never has to refuse every later request.
    """
    check_json_value(value, where, in_tool_use=True)


def guard_request(
    request: LlmRequest | dict[str, Any],
    *,
    max_inline_bytes: int = MAX_INLINE_BYTES,
    max_inline_total_bytes: int = MAX_INLINE_TOTAL_BYTES,
) -> LlmRequest:
    """Validate structure and provenance of ``request`` and return what a provider may send.

    Untrusted text in user messages and tool results comes back fenced; everything else is
    returned as it was (the very same objects when nothing needed fencing). Raises a
    ``GuardError`` (``OversizedInlinePartError`` for the inline caps) naming the place and the
    remedy, or ``ContentValidationError`` for a dict that does not fit the content model.
    """
    return _guard(request, max_inline_bytes, max_inline_total_bytes)[0]


def guard_with_media(
    request: LlmRequest | dict[str, Any],
    *,
    max_inline_bytes: int = MAX_INLINE_BYTES,
    max_inline_total_bytes: int = MAX_INLINE_TOTAL_BYTES,
) -> tuple[LlmRequest, frozenset[tuple[str, str]] | None]:
    """``guard_request``, and the media the walk met on the way: every ``(modality, media_type)``
    pair of the request's media parts (tool-result items included), so a capability check need
    not walk the messages again (``capabilities.guard_supported``).

    The pairs are None when they cannot stand for the parts: the guard returned at once for a
    request handed over (no walk), or a part, its ``type`` or its ``media_type`` was not of the
    exact built-in class (a subclass could compare equal to another pair and hide it); walk the
    media then (``iter_media``).
    """
    guarded, walk = _guard(request, max_inline_bytes, max_inline_total_bytes)
    if walk is None or walk.media_kinds is None:
        return guarded, None
    return guarded, frozenset(walk.media_kinds)


def _guard(
    request: LlmRequest | dict[str, Any], max_inline_bytes: int, max_inline_total_bytes: int
) -> tuple[LlmRequest, MessageWalk | None]:
    """The guarded request and the walk that passed it (None: no walk, it was handed over)."""
    if guarded_already(request, max_inline_bytes, max_inline_total_bytes):
        assert isinstance(request, LlmRequest)
        return request, None  # the journaled call guarded this very request unchanged (_checked)
    req = parse_request(request)
    walk = MessageWalk(max_inline_bytes, max_inline_total_bytes)
    walk.check_system(req.system)
    check_tools(req.tools)
    messages = req.messages
    if not isinstance(messages, list):
        raise refuse("bad_request", "messages", "messages is not a list", "Pass a list of Message.")
    caps = (max_inline_bytes, max_inline_total_bytes)
    lineages = _GUARDED.get(caps)
    if lineages is None:  # a new cap setting; kept only by a walk that remembers
        lineages = Lineages()
        if remembering():
            _GUARDED[caps] = lineages
    start, dirty, seen, fences = 0, [], EMPTY_JSON_SEEN, None
    last = lineages.take(messages)
    if last is not None:
        # An already-guarded prefix of this very transcript is not walked again: the walk
        # resumes from the state it ended in (issue 15: a turn costs what it added). The prefix
        # must be the same message objects with the same parts (``Seen``: nothing is compared by
        # value, and a part list changed in place is walked again). The entry was taken out
        # first, so a refusal below leaves no half-extended state behind.
        seen, guarded = last
        walk, start, dirty, fences = guarded.walk, len(seen), guarded.dirty, guarded.fences
    dirty += walk.check_messages(messages, start)
    if walk.unanswered is not None:
        raise walk.unanswered
    fences = fences if fences is not None else Fences()
    if remembering():
        lineages.put(seen.grown(messages, start), _Guarded(walk, dirty, fences))
    if not dirty:
        return req, walk
    return req.model_copy(update={"messages": fences.rebuilt(req, messages, dirty, walk)}), walk


class _Guarded:
    """The walk's state after the last message of a request the guard passed."""

    __slots__ = ("dirty", "fences", "walk")

    def __init__(self, walk: MessageWalk, dirty: list[int], fences: Fences) -> None:
        self.walk = walk
        self.dirty = dirty
        self.fences = fences


_GUARDED: dict[tuple[int, int], Lineages[_Guarded]] = {}
"""Per cap setting (the effect and the provider guard with different caps), the last requests
passed, one entry per transcript (``Lineages``)."""


def _walked_unchanged(request: Any, mark: Mark) -> bool:
    """Whether the guard's last walk under the mark's caps was of exactly ``request``'s messages
    (the same objects, their part lists and JSON unchanged since)."""
    messages = getattr(request, "messages", None)
    if not isinstance(messages, list):
        return False
    verified = mark.verified
    if verified is not None:
        return verified[0] is messages and verified[1] == len(messages)
    lineages = _GUARDED.get((mark.max_inline_bytes, mark.max_inline_total_bytes))
    for seen, _ in lineages.entries if lineages is not None else ():
        if len(seen) == len(messages) and seen.prefix_of(messages):
            mark.verified = (messages, len(messages))
            return True
    return False


def guarded_already(request: Any, max_inline_bytes: int, max_inline_total_bytes: int) -> bool:
    """Whether ``request`` is the one handed over (``handing_over``), guarded unchanged under caps
    at most these."""
    mark = handed(request)
    if (
        mark is None
        or mark.max_inline_bytes > max_inline_bytes
        or mark.max_inline_total_bytes > max_inline_total_bytes
    ):
        return False
    return _walked_unchanged(request, mark)


def supported_already(request: Any, capabilities: Any) -> bool:
    """Whether ``request`` is the one handed over, unchanged since guarded, and was checked
    against this very capabilities object."""
    mark = handed(request)
    return (
        mark is not None and mark.capabilities is capabilities and _walked_unchanged(request, mark)
    )


def checked_already(
    request: Any, capabilities: Any, max_inline_bytes: int, max_inline_total_bytes: int
) -> bool:
    """Whether a provider may skip its own guard and capability check of ``request``: it is the
    request handed over (``handing_over``), or that request with other settings or output schema
    (the provider's ``effective_request`` of it: the very same messages, tools and system, the
    only fields either check reads), guarded unchanged under caps at most these and checked
    against this very ``capabilities`` object, with every ref resolved (the effect hands over
    only a request its resolution returned as it was, so one holding no ref). The guard had
    nothing to fence in it, so it has nothing to fence in this one either, whatever the settings
    its nonces would cover. Asking once keeps a turn at one ``guard_request`` (issue 31)."""
    mark = in_hand()
    if (
        mark is None
        or mark.capabilities is not capabilities
        or mark.max_inline_bytes > max_inline_bytes
        or mark.max_inline_total_bytes > max_inline_total_bytes
    ):
        return False
    given = mark.request
    if request is not given and not (
        isinstance(request, LlmRequest)
        and request.messages is given.messages
        and request.tools is given.tools
        and request.system is given.system
    ):
        return False
    return _walked_unchanged(request, mark)


@contextmanager
def caches_kept() -> Iterator[None]:
    """Run a one-off guard or media walk without it taking the place of the last transcript's.

    The guard and ``iter_media`` keep the last requests they walked, one per transcript, so the
    next turn walks only what it added (issue 15). A probe (the agent's check that a tool result
    could be sent) must not evict those entries, or the next turn would walk its whole
    transcript again: inside this block both caches are used as usual, and on leaving it they
    are put back as they were.
    """
    saved = {params: list(lineages.entries) for params, lineages in _GUARDED.items()}
    with media_cache_kept():
        try:
            yield
        finally:
            for params in list(_GUARDED):
                if params in saved:
                    _GUARDED[params].entries[:] = saved[params]
                else:
                    del _GUARDED[params]
