"""Content pins: the stored content a step in flight reads, recorded before it reads it (issue 30).

The content sweep keeps what the journal cites (ADR 0120 decision 10), but a step's input is
journaled with its outcome: while a slow model call is in flight, nothing in the log says which
blobs it fetched, so a sweep run meanwhile reclaimed a ten-day-old image the call was using, and
the next turn failed with ``unresolved_content``. The TTL protects blobs stored recently, not
blobs used recently.

So a step whose input cites stored content (a model request's media refs, anywhere in the
request: the resolver reads them all; or any ref or claim-check marker in another step's input)
writes ``content_pins`` rows, one per address, in the same transaction as its ``step_started``
event, which is then committed BEFORE the step's function runs and reads the store. Its outcome
deletes them in the same transaction as the outcome event, whose journaled input cites the refs
from then on. ``journal.pinned_content`` lists the pins that count: those of an execution whose
writer lease is live (the step is really running: a heartbeat renews the lease through a slow
call) or made since the sweep's cutoff. The pin of a step whose process died lapses with its
lease and the TTL.

Content pins live in a table of their own, not in the start event, so events and recordings keep
their shape (a start's payload is still ``{}``) and the sweep can ask about one address with one
indexed read: just before a blob is erased (after the store has made it unreadable), the sweep asks
again, so a step that started after the sweep looked either is seen and keeps the blob, or finds
the blob already gone and fails before calling the model (``sweep_unpinned_content``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from loom_nb.content import LlmRequest, RefSource
from loom_nb.errors import ConfigurationError
from loom_nb.guard import MediaLocation, iter_media
from loom_nb.journal._backend import JournalBackend
from loom_nb.journal._sql import PINNED, PINNED_ADDRESS
from loom_nb.store._gc import CONTENT_MARKER, cited_in

__all__ = ["MediaOnce", "input_pins", "pinned_content", "request_pins", "request_pins_later"]

Pins = tuple[str, ...]


def request_pins(request: LlmRequest) -> Pins:
    """The addresses of every media ref in a model request (what its resolution will read)."""
    return MediaOnce(request).pins()


class MediaOnce:
    """A model request's media parts, walked once, when first asked.

    A live model step asks twice: for its pins (before the call) and whether there is any media
    to check and resolve (``create_llm_effect``); the second ask reads the first walk's list.
    """

    __slots__ = ("_found", "_request")

    def __init__(self, request: LlmRequest) -> None:
        self._request = request
        self._found: list[MediaLocation] | None = None

    def found(self) -> list[MediaLocation]:
        """Every media part of the request, in message order (``iter_media``)."""
        if self._found is None:
            self._found = list(iter_media(self._request))
        return self._found

    def none(self) -> None:
        """Known to hold no media part (the journaled input's JSON names none): nothing to walk."""
        if self._found is None:
            self._found = []

    def pins(self) -> Pins:
        """The addresses of the request's media refs, sorted, each once."""
        found = self.found()
        if not found:
            return ()
        return tuple(
            sorted(
                {
                    item.part.source.ref.address
                    for item in found
                    if isinstance(item.part.source, RefSource)
                }
            )
        )


def request_pins_later(request: LlmRequest) -> Callable[[], Pins]:
    """``request_pins(request)``, found when asked: a step served from the log reads no
    content, so a replayed model step never walks its request's media for pins."""
    return lambda: request_pins(request)


def input_pins(input_text: str) -> Pins:
    """The addresses a step input's canonical JSON cites (media refs, claim-check markers)."""
    if '"ref":{' not in input_text and CONTENT_MARKER not in input_text:
        return ()  # the common case, without parsing the input again
    try:
        value = json.loads(input_text)
    except (RecursionError, ValueError):
        return ()  # the journal refused such an input already
    return tuple(sorted(cited_in(value)))


def pinned_content(
    backend: JournalBackend,
    *,
    used_since: datetime,
    now: datetime | None,
    address: str | None,
) -> set[str]:
    """The addresses pinned by steps in flight (see ``Journal.pinned_content``)."""
    since = _seconds(used_since, "used_since")
    moment = _seconds(now, "now") if now is not None else time.time()
    query: Callable[[], list[Any]]
    if address is None:
        query = lambda: backend.conn.execute(PINNED, (since, moment)).fetchall()  # noqa: E731
    elif isinstance(address, str):
        query = lambda: backend.conn.execute(  # noqa: E731
            PINNED_ADDRESS, (since, moment, address)
        ).fetchall()
    else:
        raise ConfigurationError(
            f"address is a content address string or None, not {type(address).__name__}.",
            code="invalid_argument",
        )
    with backend.reading():
        rows = backend.read(query)
    return {row[0] for row in rows}


def _seconds(moment: object, name: str) -> float:
    if not isinstance(moment, datetime) or moment.tzinfo is None:
        raise ConfigurationError(
            f"{name} must be a timezone-aware datetime (for example datetime.now(UTC)), not "
            f"{moment!r}.",
            code="naive_datetime",
        )
    return moment.timestamp()
