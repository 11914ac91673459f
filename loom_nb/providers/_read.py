"""Reading an answer within bounds: a capped body, server-sent events parsed with capped lines.

A server decides how much it sends; a client that reads whatever comes holds whatever comes. So
every read of a vendor's answer here has a ceiling (issue 30 item 5): ``read_body`` stops at
``limit`` decoded bytes (a declared ``content-length`` over it is refused before reading, a gzip
bomb is counted as it inflates), and ``iter_sse`` splits the byte stream into lines itself,
instead of httpx's line decoder, which would grow one endless line without bound before handing
it over, and caps each line and each event. Past a ceiling the bytes read are dropped and the
call ends with ``ProviderError(code="response_too_large")``, never retried: the same request
would be answered the same way.

``decode_json`` caps the other dimension, depth: nesting deeper than ``MAX_RESPONSE_DEPTH`` (a
100,000-deep answer would otherwise be a bare ``RecursionError``, or a response the journal cannot
serialize) is ``ProviderError(code="malformed_response")``. ``sse_events`` parses a body already read (an error answered in SSE form, whose first event is
the error JSON: ``sse_error_data``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from loom_nb.errors import ProviderError

__all__ = [
    "MAX_RESPONSE_DEPTH",
    "SseEvent",
    "decode_json",
    "is_json",
    "iter_sse",
    "read_body",
    "read_whole",
    "sse_error_data",
    "sse_events",
    "too_large",
    "with_body",
]

MAX_RESPONSE_DEPTH = 200
"""Deepest nesting accepted in a vendor's JSON (the guard's tool-input cap; real answers nest a
few levels, and deeper values could not be journaled)."""


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Whether ``value`` nests deeper than ``limit`` (iterative: any depth is safe to check)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            if depth >= limit and node:
                return True
            stack.extend(
                (child, depth + 1) for child in node.values() if isinstance(child, dict | list)
            )
        elif isinstance(node, list):
            if depth >= limit and node:
                return True
            stack.extend((child, depth + 1) for child in node if isinstance(child, dict | list))
    return False


def decode_json(text: str | bytes, *, provider: str, what: str) -> Any:
    """The JSON value of ``text`` (a body or an SSE event); too deep or not JSON is ``malformed_response``."""
    try:
        value = _json_decode(text if isinstance(text, str) else text.decode("utf-8"))
    except RecursionError:
        value = None
        deep = True
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise ProviderError(
            f"{provider} sent {what} that is not JSON ({type(exc).__name__}). Retry, or check "
            "base_url.",
            code="malformed_response",
            provider=provider,
        ) from None
    else:
        deep = _depth_exceeds(value, MAX_RESPONSE_DEPTH)
    if deep:
        raise ProviderError(
            f"{provider} sent {what} nested deeper than {MAX_RESPONSE_DEPTH} levels; no real "
            "answer does. Check base_url points at the vendor's API.",
            code="malformed_response",
            provider=provider,
        )
    return value


_json_decode = json.JSONDecoder().decode


def too_large(who: str, what: str, limit: int) -> ProviderError:
    """The ``response_too_large`` refusal of ``what`` (a body, an SSE line, an SSE event)."""
    return ProviderError(
        f"{who} sent {what} larger than {limit} bytes; it was dropped unread past that. No real "
        "answer is that large: check base_url, or pass a larger max_response_bytes= to the "
        "provider if this model really answers so much.",
        code="response_too_large",
        limit=limit,
        retryable=False,
    )


def _encoded(response: httpx.Response) -> bool:
    encoding = response.headers.get("content-encoding", "").strip().lower()
    return encoding not in ("", "identity")


async def read_body(
    response: httpx.Response, *, limit: int | None, who: str, cut: bool = False
) -> bytes:
    """The decoded body of a streamed ``response``, at most ``limit`` bytes (None: no limit).

    Past ``limit`` it raises ``response_too_large``, or with ``cut`` returns the first ``limit``
    bytes (an error body: its status matters more than its end). The caller closes ``response``.
    """
    if limit is not None and not cut and not _encoded(response):
        declared = response.headers.get("content-length", "").strip()
        if declared.isdigit() and int(declared) > limit:
            raise too_large(who, "a body", limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if limit is not None and size > limit:
            if cut:
                chunks.append(chunk[: len(chunk) - (size - limit)])
                break
            chunks.clear()  # release what was read before refusing
            raise too_large(who, "a body", limit)
        chunks.append(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


_BODY_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


def with_body(response: httpx.Response, body: bytes) -> httpx.Response:
    """A response like ``response`` (status, headers, request) whose content is ``body``, decoded.

    The header that described the encoding on the wire is dropped: ``body`` is already decoded.
    """
    headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in _BODY_HEADERS]
    return httpx.Response(
        response.status_code,
        headers=headers,
        content=body,
        request=response.request,
        extensions=response.extensions,
    )


async def read_whole(
    client: httpx.AsyncClient,
    request: httpx.Request,
    *,
    who: str,
    deadline: float | None,
    limit: int | None,
) -> httpx.Response:
    """Send ``request`` and read its whole body, within ``deadline`` seconds and ``limit`` bytes.

    Past the deadline: ``ProviderError(code="request_timeout")``, retryable (issue 30 item 4). An
    error status's body is cut at ``limit`` rather than refused.
    """
    timer = asyncio.timeout(deadline)
    try:
        async with timer:
            sent = await client.send(request, stream=True)
            try:
                body = await read_body(sent, limit=limit, who=who, cut=not sent.is_success)
            finally:
                await sent.aclose()
    except TimeoutError:
        if not timer.expired():
            raise
        raise ProviderError(
            f"{who} did not finish answering within the request's total deadline of {deadline} s "
            "(the server kept the connection open without completing the answer). Retry, or "
            "pass a larger request_deadline= to the provider.",
            code="request_timeout",
            retryable=True,
        ) from None
    return with_body(sent, body)


def is_json(content_type: str | None) -> bool:
    """Whether a content type is JSON (``application/json``, ``application/problem+json`` ...)."""
    essence = (content_type or "").split(";", 1)[0].strip().lower()
    return essence == "application/json" or essence.endswith("+json")


@dataclass(frozen=True)
class SseEvent:
    """One server-sent event: its ``event:`` name (None when unnamed) and its joined ``data:`` lines."""

    event: str | None
    data: str
    id: str | None = None


class _Events:
    """The WHATWG event rules over lines: fields gathered, an event dispatched at a blank line."""

    __slots__ = ("data", "event_id", "held", "limit", "name", "who")

    def __init__(self, limit: int | None, who: str) -> None:
        self.name: str | None = None
        self.event_id: str | None = None
        self.data: list[str] = []
        self.held = 0
        self.limit = limit
        self.who = who

    def line(self, line: str, size: int = 0) -> SseEvent | None:
        """Take one line (without its end; ``size`` its length in bytes); the event it completes."""
        if not line:
            event = SseEvent(self.name, "\n".join(self.data), self.event_id) if self.data else None
            self.name, self.data, self.held = None, [], 0
            return event
        if line.startswith(":"):
            return None
        key, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if key == "data":
            self.held += size + 1
            if self.limit is not None and self.held > self.limit:
                self.data = []
                raise too_large(self.who, "an SSE event", self.limit)
            self.data.append(value)
        elif key == "event":
            self.name = value or None
        elif key == "id":
            self.event_id = value
        return None


_LINE_ENDS = (b"\n", b"\r")


async def iter_sse(
    response: httpx.Response, *, limit: int | None = None, who: str = "the server"
) -> AsyncIterator[SseEvent]:
    """Parse a ``text/event-stream`` body into events (WHATWG rules), no line or event over ``limit``.

    Lines may end in ``\\n``, ``\\r\\n`` or ``\\r``; ``data:`` lines of one event are joined with
    ``\\n``; lines starting with ``:`` are comments; one space after the colon is dropped; an
    event is dispatched at a blank line and a trailing event without one is discarded. httpx has
    already undone any ``Content-Encoding: gzip``. A line or an event over ``limit`` bytes (None:
    no limit) is ``response_too_large``, raised as soon as it passes the limit.
    """
    events = _Events(limit, who)
    pieces: list[bytes] = []  # the start of a line not ended yet
    held = 0
    skip_lf = False  # the last chunk ended in \r: a \n starting the next one ends the same line
    async for chunk in response.aiter_bytes():
        if skip_lf and chunk:
            skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if not chunk:
            continue
        if b"\n" not in chunk and b"\r" not in chunk:
            pieces.append(chunk)
            held += len(chunk)
            if limit is not None and held > limit:
                pieces.clear()
                raise too_large(who, "an SSE line", limit)
            continue
        if pieces:
            pieces.append(chunk)
            chunk = b"".join(pieces)
            pieces, held = [], 0
        lines = chunk.splitlines(keepends=True)
        tail = lines[-1]
        if not tail.endswith(_LINE_ENDS):
            lines.pop()
            pieces, held = [tail], len(tail)
        elif tail.endswith(b"\r"):
            skip_lf = True
        for raw in lines:
            if limit is not None and len(raw) > limit + 2:
                raise too_large(who, "an SSE line", limit)
            line = raw.rstrip(b"\r\n")
            event = events.line(line.decode("utf-8", "replace"), len(line))
            if event is not None:
                yield event
        if limit is not None and held > limit:
            raise too_large(who, "an SSE line", limit)


def _lines(body: bytes) -> Iterator[str]:
    for raw in body.splitlines():
        yield raw.decode("utf-8", "replace")


def sse_events(body: bytes) -> Iterable[SseEvent]:
    """The events of an SSE body already read whole (the trailing one dispatched too)."""
    events = _Events(None, "the server")
    for line in _lines(body):
        event = events.line(line)
        if event is not None:
            yield event
    last = events.line("")
    if last is not None:
        yield last


def sse_error_data(body: bytes) -> str | None:
    """The data of the first event of an error body in SSE form (``data: {"error": ...}``), or None.

    Some compatible servers answer an error with the content type of the stream that was asked
    for; the error JSON is the first event's data.
    """
    head = body.lstrip()[:6]
    if not (head.startswith((b"data:", b"event:", b"id:", b":"))):
        return None
    for event in sse_events(body):
        return event.data
    return None
