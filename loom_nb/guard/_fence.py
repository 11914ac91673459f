"""Unforgeable fences around untrusted content (ADR 0120 decision 7; DESIGN.md "Guard and capabilities").

Untrusted text reaches a model only inside a fence::

    <untrusted nonce="N" origin="O">
    ...the text, with fence look-alikes neutralised...
    </untrusted nonce="N">

Two independent properties keep the content from ending its own fence:

- The nonce is a hash over the request (``fence_nonce``; the guard hashes the request cut after
  the message that holds the text, ``PrefixNonces``), and the untrusted text is part of what is
  hashed. To write the right closing tag the text would have to contain the hash of a request
  that contains that very text. The nonce is still deterministic, so a replayed run sends
  the same bytes and recordings match.
- Whatever the nonce, ``neutralize_fences`` defuses every ``<untrusted`` / ``</untrusted``
  look-alike inside the text, so even a guessed or leaked nonce (the one used for a similar
  request, say) cannot close the fence. Look-alikes are matched on a normalized skeleton (see
  ``_guard_skeleton``): any case; NFKC and Unicode confusables (full-width, mathematical,
  Cyrillic, Greek, Armenian letters; other angle brackets, big and fraction slashes,
  backslashes); controls, bidi controls, combining marks and default-ignorable characters as
  filler; HTML, percent and JSON escapes decoded, nested ones too; tags written backwards. The
  bracket of a look-alike becomes ``‹`` (U+2039), which no fence starts with and the skeleton
  does not count as a bracket, so neutralising is idempotent.

The fence is a label, not a sandbox: the refusals of the guard are the structural defence; the
fence tells the model where text it must not obey begins and ends.
"""

from __future__ import annotations

import hashlib
import html
import re
from collections.abc import Mapping, Sequence

from loom_nb.content import (
    AudioPart,
    FilePart,
    ImagePart,
    LlmRequest,
    Part,
    TextPart,
)
from loom_nb.errors import GuardError
from loom_nb.guard._canonical import (
    canonical_message_json,
    canonical_request_json,
    canonical_request_tail,
)
from loom_nb.guard._skeleton import DEFUSED_BRACKET, lookalike_brackets

__all__ = [
    "NONCE_HEX_LENGTH",
    "PrefixNonces",
    "close_fence",
    "fence_nonce",
    "fence_text",
    "fence_untrusted_media",
    "neutralize_fences",
    "open_fence",
]

NONCE_HEX_LENGTH = 24
"""Hex digits of the nonce (96 bits of the request's SHA-256)."""

_NONCE = re.compile(r"[0-9a-f]{8,64}")


def neutralize_fences(text: str) -> str:
    """``text`` with every ``<untrusted`` / ``</untrusted`` look-alike defused (idempotent).

    Look-alikes are found on a normalized skeleton (``_guard_skeleton``: escapes decoded, NFKC,
    Unicode confusables, fillers skipped, backwards tags too). Only the bracket changes (to
    ``‹``; an escaped bracket is replaced whole), so the text still reads the same to a person.
    Text without a look-alike is returned as the same object.
    """
    spans = lookalike_brackets(text)
    if not spans:
        return text
    pieces: list[str] = []
    done = 0
    for start, end in spans:
        pieces += (text[done:start], DEFUSED_BRACKET)
        done = end
    pieces.append(text[done:])
    return "".join(pieces)


def _escape_origin(origin: str) -> str:
    escaped = html.escape(origin, quote=True)
    escaped = "".join(
        c if c.isprintable() and c not in "\u2028\u2029" else f"&#{ord(c)};" for c in escaped
    )
    return neutralize_fences(escaped)


def _check_nonce(nonce: str) -> None:
    if not isinstance(nonce, str) or not _NONCE.fullmatch(nonce):
        raise GuardError(
            f"fence nonce {nonce!r} is not 8-64 lowercase hex digits; "
            "use fence_nonce(request) to derive it",
            code="bad_nonce",
        )


def open_fence(nonce: str, origin: str) -> str:
    """The opening tag ``<untrusted nonce="N" origin="O">``; the origin is escaped so it cannot break the tag."""
    _check_nonce(nonce)
    return f'<untrusted nonce="{nonce}" origin="{_escape_origin(origin)}">'


def close_fence(nonce: str) -> str:
    """The closing tag ``</untrusted nonce="N">``."""
    _check_nonce(nonce)
    return f'</untrusted nonce="{nonce}">'


def fence_text(text: str, nonce: str, origin: str) -> str:
    """Untrusted ``text`` fenced: the opening tag, a newline, the neutralised text, a newline, the closing tag."""
    return f"{open_fence(nonce, origin)}\n{neutralize_fences(text)}\n{close_fence(nonce)}"


def fence_nonce(request: LlmRequest) -> str:
    """The fence nonce of ``request``: the first 24 hex digits of SHA-256 over its canonical JSON.

    The same request always gets the same nonce (replays match byte for byte); content inside the
    request cannot know the hash of the request it is part of. The guard fences the text of the
    last message with this nonce, and that of ``messages[i]`` with the nonce of the request cut
    after it (``PrefixNonces``), so earlier fences do not change as a conversation grows. (The canonical JSON is the exact
    string ``content.canonical_json`` gives, built by a faster encoder.)
    """
    return request_nonce(request)


def request_nonce(request: LlmRequest, known_inputs: Mapping[int, str] | None = None) -> str:
    """``fence_nonce``, reusing tool inputs' canonical JSON the guard already has (see ``canonical_request_json``)."""
    try:
        encoded = canonical_request_json(request, known_inputs=known_inputs).encode("utf-8")
    except (ValueError, TypeError, RecursionError) as exc:
        raise _unhashable(exc) from exc
    return hashlib.sha256(encoded).hexdigest()[:NONCE_HEX_LENGTH]


def _unhashable(exc: Exception) -> GuardError:
    return GuardError(
        f"the request cannot be serialized to canonical JSON ({exc}); "
        "tool inputs, schemas and untrusted values must be plain JSON of modest depth",
        code="unhashable_request",
    )


class PrefixNonces:
    """Fence nonces per message: the nonce of the request cut after that message (issue 15).

    Untrusted text in ``messages[i]`` is fenced with ``fence_nonce`` of the request whose
    messages are ``messages[: i + 1]`` (same system prompt, tools, settings and schema). For the
    last message that is ``fence_nonce(request)`` itself, and it is the nonce the part got on the
    turn it arrived, so a fence never changes as the conversation grows: the guard rewrites
    each message once, and what reaches the vendor keeps its prefix byte for byte (their
    prompt caches key on it). The untrusted text is still inside what is hashed.

    The canonical JSON of a request is ``'{"messages":[' + ",".join(m) + "]," + tail``, so one
    SHA-256 state runs over the messages as they come and is copied at each message that needs
    a nonce; a nonce costs one copy and the tail, never the transcript again.
    """

    __slots__ = ("_count", "_hash", "_states")

    def __init__(self) -> None:
        self._hash = hashlib.sha256(b'{"messages":[')
        self._count = 0
        self._states: dict[int, hashlib._Hash] = {}

    def nonce(
        self, messages: Sequence[object], index: int, tail: str, known_inputs: Mapping[int, str]
    ) -> str:
        """The nonce of ``messages[index]`` under ``tail`` (``canonical_request_tail``).

        ``messages`` must start with the messages this object has already hashed (the guard's
        ``Seen`` prefix check makes sure of that); the ones after are hashed as far as needed.
        """
        state = self._states.get(index)
        if state is None:
            if index < self._count:  # hashed past without a copy: start over, exactly
                return PrefixNonces().nonce(messages, index, tail, known_inputs)
            state = self._advance(messages, index, known_inputs)
        digest = state.copy()
        digest.update(b"]," + tail.encode("utf-8"))
        return digest.hexdigest()[:NONCE_HEX_LENGTH]

    def _advance(
        self, messages: Sequence[object], index: int, known_inputs: Mapping[int, str]
    ) -> hashlib._Hash:
        while self._count <= index:
            message = messages[self._count]
            try:
                encoded = canonical_message_json(message, known_inputs).encode("utf-8")  # type: ignore[arg-type]
            except (ValueError, TypeError, RecursionError) as exc:
                raise _unhashable(exc) from exc
            if self._count:
                self._hash.update(b",")
            self._hash.update(encoded)
            self._count += 1
        state = self._hash.copy()
        self._states[index] = state
        return state


def request_tail(request: LlmRequest) -> str:
    """``canonical_request_tail`` with the guard's error for a request that cannot be hashed."""
    try:
        return canonical_request_tail(request)
    except (ValueError, TypeError, RecursionError) as exc:
        raise _unhashable(exc) from exc


def fence_untrusted_media(part: ImagePart | AudioPart | FilePart, nonce: str) -> list[Part]:
    """Bracket an untrusted media part for the wire: fence-open text, the part unmarked, fence-close text.

    Provider mappers call this with ``fence_nonce(guarded_request)`` on every media part they send
    (the guard has already moved a tool result's ``origin`` onto its media items). A trusted part
    comes back alone; an untrusted file also loses its name, which would otherwise reach a title
    outside the fence.
    """
    if not isinstance(part, ImagePart | AudioPart | FilePart):
        raise GuardError(
            f"fence_untrusted_media() takes an ImagePart, AudioPart or FilePart, not "
            f"{type(part).__name__}; fence text with fence_text().",
            code="bad_part",
        )
    _check_nonce(nonce)
    origin = part.origin
    if origin is None:
        return [part]
    update: dict[str, object] = {"origin": None}
    if isinstance(part, FilePart):
        update["name"] = None
    return [
        TextPart(text=open_fence(nonce, origin)),
        part.model_copy(update=update),
        TextPart(text=close_fence(nonce)),
    ]
