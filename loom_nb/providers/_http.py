"""The HTTP layer every vendor provider shares: keys, retries with backoff, and streamed calls.

Vendors differ in how they map a request and how they spell an error; they do not differ in
what a user of an HTTP client expects, so that lives here once:

- ``resolve_api_key(explicit, env_var, provider)`` reads the key from the argument or the
  environment and wraps it in ``Secret``, whose ``repr``/``str`` never show it. A missing key is a
  ``ConfigurationError`` naming the variable to set.
- ``send_json`` POSTs a JSON body and returns the 2xx response. It retries 429, 5xx and
  Anthropic's 529 (the vendor's ``parse_error`` decides through ``ProviderError.retryable``, so
  OpenAI's ``insufficient_quota`` 429 is not retried) with exponential backoff and jitter,
  honouring ``retry-after`` / ``retry-after-ms`` (seconds or an HTTP date, capped); other 4xx are
  raised at once. A connection failure is ``ProviderError(code="provider_unreachable")``, a
  timeout ``code="provider_timeout"``; both are retried.
- ``stream_json`` does the same for a streamed call and hands the response's server-sent events
  (``iter_sse``) to the vendor's decoder. A failure before any chunk was yielded is retried
  silently; a failure after some output yields a ``reset`` chunk first, so a consumer drops the
  failed attempt's deltas (ADR 0120 decision 8) instead of concatenating two attempts.

Hardening (issue 14 item 6):

- ``redact_error`` removes the configured key (and so ``Bearer <key>``) from a ``ProviderError``'s
  message, arguments and details before it leaves the provider: a 401 that quotes the
  Authorization header must not carry the key into a traceback, a log, the journal's
  ``step_failed`` row or the HTML that shows it;
- ``decode_json`` parses a body or an SSE event: nesting deeper than ``MAX_RESPONSE_DEPTH`` (a
  100,000-deep answer would otherwise be a bare ``RecursionError``, or a response the journal
  cannot serialize) is ``ProviderError(code="malformed_response")``;
- a streamed attempt has a total deadline (``stream_deadline`` seconds, beside the read timeout
  that every keep-alive resets): a server trickling comments forever ends with
  ``ProviderError(code="stream_timeout")``, retried like a timeout.

Bounds (issue 30 items 4, 5 and 8):

- a non-streamed attempt has one too (``request_deadline``): a body trickled a byte at a time
  resets the read timeout forever, so the attempt ends with ``code="request_timeout"``, retried;
- a body, one SSE line and one SSE event hold at most ``max_response_bytes`` (decoded, so a gzip
  bomb counts what it inflates to). Past it the read stops, what was read is dropped and the call
  ends with ``code="response_too_large"``, not retried (the same request would get the same
  answer). A declared ``content-length`` over the cap is refused before reading. An error body
  is cut at the cap instead: its status still decides the retry;
- a 2xx ``application/json`` answer to a streamed request (a gateway that does not stream) is
  the response: parsed as a non-streamed one, yielded as chunks, never retried (it was answered,
  and on a paid gateway paid for). An error body in SSE form (``data: {"error": ...}``) is read
  by its first event (``sse_error_data``), so the server's message survives;
- an error answered off the vendor's own host names that host (``speaker``): "the
  OpenAI-compatible server at 127.0.0.1:4000 answered HTTP 400", never "OpenAI answered".

Sleeping and jitter go through ``RetryPolicy``, so tests inject a recording ``sleep`` and never
wait. Nothing here knows a vendor's wire shape; the pure mappers live in ``*_wire`` modules.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from loom_nb._interrupt import wake_on_signals
from loom_nb.content import LlmResponse
from loom_nb.errors import ConfigurationError, ProviderError
from loom_nb.providers._base import LlmStreamChunk, chunks_of
from loom_nb.providers._read import (
    MAX_RESPONSE_DEPTH,
    SseEvent,
    decode_json,
    is_json,
    iter_sse,
    read_body,
    read_whole,
    sse_error_data,
    with_body,
)

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_REQUEST_DEADLINE",
    "DEFAULT_STREAM_DEADLINE",
    "DEFAULT_TIMEOUT",
    "MAX_RESPONSE_DEPTH",
    "RETRYABLE_STATUSES",
    "RetryPolicy",
    "Secret",
    "SseEvent",
    "check_limit",
    "decode_json",
    "encode_json",
    "error_code_for_status",
    "http_error",
    "iter_sse",
    "redact_error",
    "resolve_api_key",
    "send_json",
    "speaker",
    "sse_error_data",
    "stream_json",
]

DEFAULT_TIMEOUT = httpx.Timeout(600.0, connect=10.0)
"""Per-request timeout: long reads (a model may think for minutes), a short connect."""

DEFAULT_STREAM_DEADLINE = 1800.0
"""Longest one streamed attempt may take in total, in seconds (``stream_deadline=`` changes it)."""

DEFAULT_REQUEST_DEADLINE = 1800.0
"""Longest one non-streamed attempt may take in total, in seconds (``request_deadline=`` changes
it): above the 600 s read timeout, so a model thinking for minutes before its first byte is fine."""

DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""Most bytes one body, SSE line or SSE event may hold (``max_response_bytes=`` changes it); real
answers are kilobytes, a long one with images a few megabytes."""

VENDOR_HOSTS = {
    "Anthropic": "api.anthropic.com",
    "Gemini": "generativelanguage.googleapis.com",
    "OpenAI": "api.openai.com",
}
"""Each vendor's own API host: an answer from any other host is named by that host (``speaker``)."""

RETRYABLE_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
"""Statuses worth another attempt (429 rate limit, 5xx, Anthropic's 529 overloaded)."""


class Secret:
    """An API key that never shows itself: ``repr``, ``str`` and f-strings print ``Secret('***')``.

    Call ``reveal()`` only where the key goes into a request header.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The key itself, for the request header."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


def resolve_api_key(
    explicit: str | Secret | None, env_var: str, provider: str, *, fallback_env: Sequence[str] = ()
) -> Secret:
    """The key passed in, else the one in ``env_var`` (then in each of ``fallback_env``).

    Neither is a ``ConfigurationError`` naming ``env_var``.
    """
    if isinstance(explicit, Secret):
        return explicit
    value = explicit or ""
    for name in (env_var, *fallback_env):
        if value:
            break
        value = os.environ.get(name, "").strip()
    if not value:
        raise ConfigurationError(
            f"no API key for {provider}: set the {env_var} environment variable or pass "
            f"api_key=... to the provider (or use ScriptedProvider to run offline).",
            code="missing_api_key",
            env_var=env_var,
            provider=provider,
        )
    return Secret(value)


async def _real_sleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait between attempts.

    The n-th retry waits ``min(max_delay, base_delay * 2**n)`` scaled by a jitter factor in
    ``[0.5, 1.0)``, or what the server's ``retry-after`` says, capped at ``max_retry_after``.
    """

    max_retries: int = 3
    """Retries after the first attempt (0 disables retrying)."""
    base_delay: float = 0.5
    """Seconds before the first retry, before jitter."""
    max_delay: float = 8.0
    """Longest computed backoff, in seconds."""
    max_retry_after: float = 60.0
    """Longest wait honoured from a ``retry-after`` header, in seconds."""
    sleep: Callable[[float], Awaitable[None]] = field(default=_real_sleep, compare=False)
    """How to wait (tests inject one that records the delay and returns at once)."""
    jitter: Callable[[], float] = field(default=random.random, compare=False)
    """A source of numbers in [0, 1) for the jitter."""

    def delay(self, retry: int, response: httpx.Response | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (0-based)."""
        hinted = _retry_after_seconds(response) if response is not None else None
        if hinted is not None:
            return max(0.0, min(hinted, self.max_retry_after))
        backoff: float = min(self.max_delay, self.base_delay * 2.0**retry)
        return backoff * (0.5 + 0.5 * self.jitter())


def _retry_after_seconds(response: httpx.Response) -> float | None:
    millis = response.headers.get("retry-after-ms")
    if millis is not None:
        try:
            return float(millis) / 1000.0
        except ValueError:
            pass
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return when.timestamp() - time.time()


def check_limit(name: str, value: object, *, integer: bool = False) -> None:
    """Refuse a limit that is not a positive number (an int with ``integer``) or None.

    The refusal is a ``ConfigurationError`` with code ``bad_<name>``, raised at construction.
    """
    if value is None:
        return
    whole = isinstance(value, int) or not integer
    if isinstance(value, int | float) and not isinstance(value, bool) and whole and value > 0:
        return
    unit = "bytes" if integer else "seconds"
    raise ConfigurationError(
        f"{name} must be a positive {'whole ' if integer else ''}number of {unit} or None, not "
        f"{value!r}.",
        code=f"bad_{name}",
    )


def speaker(provider: str, url: httpx.URL | str | None) -> tuple[str, str | None]:
    """Who answered at ``url``, for an error message, and the host when it is not the vendor's own.

    On the vendor's own host (``VENDOR_HOSTS``) it is the vendor ("OpenAI"); anywhere else it is
    "the OpenAI-compatible server at HOST:PORT", so an error from a gateway or a local server is
    never blamed on the vendor.
    """
    if url is None:
        return provider, None
    parsed = httpx.URL(url) if isinstance(url, str) else url
    host = parsed.host
    if not host or VENDOR_HOSTS.get(provider.split(" ")[0]) == host:
        return provider, None
    where = f"{host}:{parsed.port}" if parsed.port is not None else host
    return f"the {provider}-compatible server at {where}", where


def _url_of(response: httpx.Response) -> httpx.URL | None:
    try:
        return response.request.url
    except RuntimeError:  # a Response built by hand, with no request
        return None


def error_code_for_status(status: int) -> str:
    """The stable ``ProviderError.code`` for an HTTP status."""
    codes = {
        400: "invalid_request",
        401: "authentication_failed",
        403: "permission_denied",
        404: "not_found",
        413: "request_too_large",
        429: "rate_limited",
        503: "provider_overloaded",
        529: "provider_overloaded",
    }
    if status in codes:
        return codes[status]
    return "provider_server_error" if status >= 500 else "provider_rejected"


def http_error(
    response: httpx.Response,
    *,
    provider: str,
    error_type: str | None,
    message: str,
    retryable: bool | None = None,
    **details: Any,
) -> ProviderError:
    """A ``ProviderError`` for an error response (vendors' ``parse_error`` build theirs with this).

    ``retryable`` defaults to whether the status is in ``RETRYABLE_STATUSES``.
    """
    status = response.status_code
    request_id = response.headers.get("request-id") or response.headers.get("x-request-id")
    if request_id:
        details.setdefault("request_id", request_id)
    wait = _retry_after_seconds(response)
    if wait is not None:  # what a caller pacing many calls waits (chat.map)
        details.setdefault("retry_after", wait)
    who, host = speaker(provider, _url_of(response))
    if host is not None:
        details.setdefault("host", host)
    hint = _remedy(status)
    return ProviderError(
        f"{who} answered HTTP {status}"
        + (f" ({error_type})" if error_type else "")
        + f": {message}. {hint}",
        code=error_code_for_status(status),
        provider=provider,
        status=status,
        error_type=error_type,
        retryable=status in RETRYABLE_STATUSES if retryable is None else retryable,
        **details,
    )


def _remedy(status: int) -> str:
    if status in {401, 403}:
        return "Check the API key and that it may use this model."
    if status == 429:
        return "Slow down or check the account's quota, then retry."
    if status >= 500:
        return "The vendor had a problem; retry later."
    return "Fix the request (see the message) and send it again."


_REDACTED = "***"


def _scrub(value: Any, secrets: tuple[str, ...], depth: int = 0) -> Any:
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, _REDACTED)
        return value
    if depth > MAX_RESPONSE_DEPTH:
        return value
    if isinstance(value, dict):
        return {
            _scrub(k, secrets, depth + 1): _scrub(v, secrets, depth + 1) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return type(value)(_scrub(v, secrets, depth + 1) for v in value)
    return value


def redact_error(error: ProviderError, secrets: tuple[Secret | str | None, ...]) -> ProviderError:
    """``error`` with every configured secret replaced by ``***`` in its message and details (in place).

    Vendors echo what they were sent: a 401 may quote ``Authorization: Bearer <key>``. Secrets
    shorter than 8 characters are left alone (they would match ordinary words).
    """
    keys = tuple(
        key
        for key in (s.reveal() if isinstance(s, Secret) else s for s in secrets)
        if key and len(key) >= 8
    )
    if not keys:
        return error
    error.message = _scrub(error.message, keys)
    error.args = tuple(_scrub(list(error.args), keys))
    error.details = _scrub(error.details, keys)
    if error.error_type is not None:
        error.error_type = _scrub(error.error_type, keys)
    return error


def encode_json(body: Mapping[str, Any]) -> bytes:
    """The request body bytes: compact JSON, UTF-8 kept (the same body always gives the same bytes)."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


ParseError = Callable[[httpx.Response], ProviderError]


def _build(
    client: httpx.AsyncClient,
    url: str,
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    timeout: httpx.Timeout | float | None,
) -> httpx.Request:
    merged = {"content-type": "application/json", **headers}
    return client.build_request(
        "POST", url, headers=merged, content=encode_json(body), timeout=timeout
    )


def _transport_error(exc: httpx.HTTPError, provider: str, url: str) -> ProviderError:
    # httpx messages name the URL and the failure, never the headers (where the key lives).
    where = httpx.URL(url).copy_with(query=None)
    if isinstance(exc, httpx.TimeoutException):
        return ProviderError(
            f"{provider} did not answer in time at {where} ({type(exc).__name__}). "
            "Retry, or pass a larger timeout= to the provider.",
            code="provider_timeout",
            provider=provider,
            retryable=True,
        )
    return ProviderError(
        f"could not reach {provider} at {where} ({type(exc).__name__}: {exc}). "
        "Check the network and base_url, then retry.",
        code="provider_unreachable",
        provider=provider,
        retryable=True,
    )


async def send_json(
    client: httpx.AsyncClient,
    url: str,
    *,
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    provider: str,
    parse_error: ParseError,
    policy: RetryPolicy | None = None,
    http_timeout: httpx.Timeout | float | None = DEFAULT_TIMEOUT,
    request_deadline: float | None = DEFAULT_REQUEST_DEADLINE,
    max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
) -> httpx.Response:
    """POST ``body`` as JSON and return the 2xx response, retrying what is worth retrying.

    Raises the ``ProviderError`` from ``parse_error`` for an error response that is not retried
    (or when retries run out), and ``provider_unreachable`` / ``provider_timeout`` for transport
    failures after the last retry. Each attempt ends after ``request_deadline`` seconds in total
    (``request_timeout``, retried; None: no total deadline); a body over ``max_response_bytes``
    is ``response_too_large`` (not retried; an error body is cut there instead).
    """
    wake_on_signals()  # a kernel's interrupt ends the wait at once (loom_nb._interrupt)
    policy = policy or RetryPolicy()
    who = speaker(provider, url)[0]
    retry = 0
    while True:
        request = _build(client, url, headers, body, http_timeout)
        response: httpx.Response | None = None
        try:
            response = await read_whole(
                client, request, who=who, deadline=request_deadline, limit=max_response_bytes
            )
        except httpx.HTTPError as exc:
            error = _transport_error(exc, provider, url)
            if retry >= policy.max_retries:
                raise error from exc
        except ProviderError as exc:
            exc.provider = exc.provider or provider
            if not exc.retryable or retry >= policy.max_retries:
                raise
        else:
            if response.is_success:
                return response
            error = parse_error(response)
            if not error.retryable or retry >= policy.max_retries:
                raise error
        await policy.sleep(policy.delay(retry, response))
        retry += 1


StreamDecoder = Callable[[AsyncIterator[SseEvent]], AsyncIterator[LlmStreamChunk]]
WholeParser = Callable[[bytes, int], LlmResponse]


async def _before(step: Awaitable[Any], deadline: float | None, who: str) -> Any:
    """Await ``step``, but not past ``deadline`` (loop time): then ``stream_timeout``."""
    if deadline is None:
        return await step
    remaining = deadline - asyncio.get_running_loop().time()
    try:
        async with asyncio.timeout(max(remaining, 0.0)):
            return await step
    except TimeoutError:
        raise ProviderError(
            f"the stream from {who} did not finish within its total deadline (the server kept "
            "the connection open without completing the answer). Retry, or pass a larger "
            "stream_deadline= to the provider.",
            code="stream_timeout",
            retryable=True,
        ) from None


async def stream_json(
    client: httpx.AsyncClient,
    url: str,
    *,
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    provider: str,
    parse_error: ParseError,
    decode: StreamDecoder,
    policy: RetryPolicy | None = None,
    http_timeout: httpx.Timeout | float | None = DEFAULT_TIMEOUT,
    stream_deadline: float | None = DEFAULT_STREAM_DEADLINE,
    max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
    parse_whole: WholeParser | None = None,
) -> AsyncIterator[LlmStreamChunk]:
    """POST ``body`` and yield the chunks ``decode`` makes of the SSE response, with retries.

    ``decode`` turns the events into chunks and raises ``ProviderError`` for an error the stream
    itself reports (``retryable`` decides whether to try again). A retry after some chunks were
    yielded is announced with a ``reset`` chunk. Nothing is retried once ``done`` was yielded.
    Each attempt ends after ``stream_deadline`` seconds in total (None: no total deadline) with
    ``ProviderError(code="stream_timeout")``, however the server keeps the connection alive. No
    SSE line or event may exceed ``max_response_bytes`` (``response_too_large``).

    A 2xx ``application/json`` answer is the whole response (a server that does not stream):
    ``parse_whole(body, status)`` reads it and its chunks are yielded; it is never retried.
    """
    wake_on_signals()  # a kernel's interrupt ends the wait at once (loom_nb._interrupt)
    policy = policy or RetryPolicy()
    who = speaker(provider, url)[0]
    retry = 0
    loop = asyncio.get_running_loop()
    while True:
        emitted = False
        response: httpx.Response | None = None
        deadline = None if stream_deadline is None else loop.time() + stream_deadline
        try:
            request = _build(client, url, headers, body, http_timeout)
            response = await _before(client.send(request, stream=True), deadline, who)
            try:
                if not response.is_success:
                    read = read_body(response, limit=max_response_bytes, who=who, cut=True)
                    raw = await _before(read, deadline, who)
                    raise parse_error(with_body(response, raw))
                if parse_whole is not None and is_json(response.headers.get("content-type")):
                    read = read_body(response, limit=max_response_bytes, who=who)
                    raw = await _before(read, deadline, who)
                    try:
                        whole = parse_whole(raw, response.status_code)
                    except ProviderError as exc:
                        exc.retryable = False  # answered (and paid for): never sent again
                        raise
                    for chunk in chunks_of(whole):
                        yield chunk
                    return
                events = iter_sse(response, limit=max_response_bytes, who=who)
                chunks = decode(events).__aiter__()
                while True:
                    try:
                        chunk = await _before(chunks.__anext__(), deadline, who)
                    except StopAsyncIteration:
                        break
                    yield chunk
                    if chunk.kind == "done":
                        return
                    emitted = True
            finally:
                await response.aclose()
            raise ProviderError(
                f"the stream from {who} ended before its final event; the connection may have "
                "dropped. Retry the call.",
                code="stream_incomplete",
                retryable=True,
            )
        except httpx.HTTPError as exc:
            error = _transport_error(exc, provider, url)
            if retry >= policy.max_retries:
                raise error from exc
        except ProviderError as exc:
            exc.provider = exc.provider or provider
            if not exc.retryable or retry >= policy.max_retries:
                raise
        if emitted:
            yield LlmStreamChunk(kind="reset")
        await policy.sleep(policy.delay(retry, response))
        retry += 1
