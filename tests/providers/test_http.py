"""The shared HTTP layer: keys, retries and backoff, SSE parsing, streamed retries with reset."""

from __future__ import annotations

import email.utils
import gzip
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from loom_nb.errors import ConfigurationError, ProviderError
from loom_nb.providers._base import LlmStreamChunk
from loom_nb.providers._http import (
    RetryPolicy,
    Secret,
    SseEvent,
    http_error,
    iter_sse,
    resolve_api_key,
    send_json,
    stream_json,
)

URL = "https://api.example.test/v1/call"


class Sleeps:
    """A sleep that records the delays instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def policy(sleeps: Sleeps, **kw: float) -> RetryPolicy:
    return RetryPolicy(sleep=sleeps, jitter=lambda: 0.0, **kw)  # type: ignore[arg-type]


def parse_error(response: httpx.Response) -> ProviderError:
    body = response.json() if response.content else {}
    err = body.get("error", {})
    retryable = None if err.get("type") != "insufficient_quota" else False
    return http_error(
        response,
        provider="vendor",
        error_type=err.get("type"),
        message=err.get("message", "?"),
        retryable=retryable,
    )


def scripted(
    responses: list[httpx.Response | Exception],
) -> tuple[httpx.AsyncClient, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        item = responses[len(seen) - 1]
        if isinstance(item, Exception):
            raise item
        return item

    return httpx.AsyncClient(transport=httpx.MockTransport(handler)), seen


def err(
    status: int, etype: str = "x_error", headers: dict[str, str] | None = None
) -> httpx.Response:
    return httpx.Response(
        status, json={"error": {"type": etype, "message": "nope"}}, headers=headers
    )


def ok(body: object = None) -> httpx.Response:
    return httpx.Response(200, json=body if body is not None else {"ok": True})


async def call(client: httpx.AsyncClient, sleeps: Sleeps, **kw: float) -> httpx.Response:
    return await send_json(
        client,
        URL,
        headers={"x-api-key": "sk-live-123"},
        body={"a": 1},
        provider="vendor",
        parse_error=parse_error,
        policy=policy(sleeps, **kw),
    )


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no key passed and none in the environment, the error names the variable to set."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY") as info:
        resolve_api_key(None, "ANTHROPIC_API_KEY", "Anthropic")
    assert info.value.code == "missing_api_key"


def test_key_comes_from_argument_then_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """An explicit key wins over the environment; the environment is read when none is passed."""
    monkeypatch.setenv("VENDOR_KEY", "from-env")
    assert resolve_api_key("explicit", "VENDOR_KEY", "v").reveal() == "explicit"
    assert resolve_api_key(None, "VENDOR_KEY", "v").reveal() == "from-env"


def test_fallback_variables_are_read_in_order_and_the_first_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """resolve_api_key reads env_var, then each fallback; a missing key names env_var."""
    monkeypatch.delenv("FIRST_KEY", raising=False)
    monkeypatch.setenv("SECOND_KEY", " second ")
    key = resolve_api_key(None, "FIRST_KEY", "v", fallback_env=("SECOND_KEY",))
    assert key.reveal() == "second"
    monkeypatch.setenv("FIRST_KEY", "first")
    assert resolve_api_key("", "FIRST_KEY", "v", fallback_env=("SECOND_KEY",)).reveal() == "first"
    monkeypatch.delenv("FIRST_KEY")
    monkeypatch.delenv("SECOND_KEY")
    with pytest.raises(ConfigurationError, match="FIRST_KEY"):
        resolve_api_key(None, "FIRST_KEY", "v", fallback_env=("SECOND_KEY",))


def test_secret_never_shows_itself() -> None:
    """A Secret's repr, str and f-string form hide the key."""
    secret = Secret("sk-live-123")
    for text in (repr(secret), str(secret), f"{secret}", repr([secret])):
        assert "sk-live-123" not in text


async def test_429_honours_retry_after_seconds() -> None:
    """A 429 with retry-after: 2 waits two seconds and then succeeds."""
    client, seen = scripted([err(429, "rate_limit_error", {"retry-after": "2"}), ok()])
    sleeps = Sleeps()
    response = await call(client, sleeps)
    assert response.json() == {"ok": True}
    assert sleeps.delays == [2.0]
    assert len(seen) == 2


async def test_retry_after_http_date_and_cap() -> None:
    """retry-after as an HTTP date is honoured, and a huge one is capped at max_retry_after."""
    soon = email.utils.formatdate(time.time() + 30, usegmt=True)
    client, _ = scripted(
        [err(429, headers={"retry-after": soon}), err(503, headers={"retry-after": "9999"}), ok()]
    )
    sleeps = Sleeps()
    await call(client, sleeps, max_retry_after=60.0)
    assert 25.0 <= sleeps.delays[0] <= 30.0
    assert sleeps.delays[1] == 60.0


async def test_529_and_500_are_retried_with_exponential_backoff() -> None:
    """529 and 500 are retried; the waits double each time (jitter pinned to its floor)."""
    client, seen = scripted([err(529, "overloaded_error"), err(500, "api_error"), ok()])
    sleeps = Sleeps()
    await call(client, sleeps, base_delay=1.0)
    assert sleeps.delays == [0.5, 1.0]
    assert len(seen) == 3


def test_jitter_stays_within_half_and_full_backoff() -> None:
    """Jitter scales the backoff into [50%, 100%) of the exponential delay, capped at max_delay."""
    low = RetryPolicy(base_delay=1.0, jitter=lambda: 0.0)
    high = RetryPolicy(base_delay=1.0, jitter=lambda: 0.999)
    assert low.delay(2) == 2.0
    assert 3.99 < high.delay(2) < 4.0
    assert RetryPolicy(base_delay=1.0, max_delay=8.0, jitter=lambda: 0.999).delay(10) < 8.0


async def test_400_is_not_retried() -> None:
    """A 400 is raised at once as ProviderError with status, vendor type and message."""
    client, seen = scripted([err(400, "invalid_request_error"), ok()])
    sleeps = Sleeps()
    with pytest.raises(ProviderError) as info:
        await call(client, sleeps)
    assert len(seen) == 1
    assert sleeps.delays == []
    assert info.value.status == 400
    assert info.value.error_type == "invalid_request_error"
    assert info.value.code == "invalid_request"
    assert "nope" in info.value.message


async def test_non_retryable_429_is_raised_at_once() -> None:
    """A 429 the vendor marks non-retryable (insufficient_quota) is not retried."""
    client, seen = scripted([err(429, "insufficient_quota"), ok()])
    with pytest.raises(ProviderError) as info:
        await call(client, Sleeps())
    assert len(seen) == 1
    assert info.value.code == "rate_limited"
    assert info.value.retryable is False


async def test_retries_run_out_and_the_last_error_is_raised() -> None:
    """After max_retries the last error surfaces; exactly max_retries + 1 requests were sent."""
    client, seen = scripted([err(503)] * 5)
    with pytest.raises(ProviderError) as info:
        await call(client, Sleeps(), max_retries=2)
    assert len(seen) == 3
    assert info.value.status == 503
    assert info.value.code == "provider_overloaded"


async def test_network_error_is_provider_unreachable_without_the_key() -> None:
    """A connection failure becomes provider_unreachable after retries, and never prints the key."""
    boom = httpx.ConnectError("connection refused")
    client, seen = scripted([boom, boom, boom, boom])
    with pytest.raises(ProviderError) as info:
        await call(client, Sleeps())
    assert info.value.code == "provider_unreachable"
    assert len(seen) == 4
    assert "sk-live-123" not in str(info.value) + repr(info.value)


async def test_timeout_is_provider_timeout_and_retried() -> None:
    """A read timeout is retried and then reported as provider_timeout."""
    client, _seen = scripted([httpx.ReadTimeout("slow"), ok()])
    assert (await call(client, Sleeps())).status_code == 200
    client, _ = scripted([httpx.ReadTimeout("slow")] * 4)
    with pytest.raises(ProviderError, match="did not answer in time") as info:
        await call(client, Sleeps())
    assert info.value.code == "provider_timeout"


async def test_body_is_compact_json_with_content_type() -> None:
    """The body goes out as compact UTF-8 JSON with a JSON content type."""
    client, seen = scripted([ok()])
    await send_json(
        client, URL, headers={}, body={"t": "é", "n": [1]}, provider="v", parse_error=parse_error
    )
    assert seen[0].content == '{"t":"é","n":[1]}'.encode()
    assert seen[0].headers["content-type"] == "application/json"


async def events_of(body: bytes, headers: dict[str, str] | None = None) -> list[SseEvent]:
    response = httpx.Response(200, content=body, headers=headers)
    return [event async for event in iter_sse(response)]


async def test_sse_handles_crlf_lf_multiline_and_comments() -> None:
    """Events split on blank lines with LF or CRLF, data lines join with newlines, comments vanish."""
    body = (
        b": keep-alive\r\n\r\n"
        b'event: message_start\r\ndata: {"a":\r\ndata: 1}\r\n\r\n'
        b"data: plain\n\n"
        b"event:ping\ndata:{}\n\n"
        b"data: unterminated"
    )
    events = await events_of(body)
    assert events == [
        SseEvent("message_start", '{"a":\n1}'),
        SseEvent(None, "plain"),
        SseEvent("ping", "{}"),
    ]


async def test_sse_reads_gzip_bodies() -> None:
    """A gzip-encoded event stream is decoded by httpx before parsing."""
    body = gzip.compress(b"data: one\n\ndata: two\n\n")
    events = await events_of(body, {"content-encoding": "gzip"})
    assert [e.data for e in events] == ["one", "two"]


def sse(*payloads: str) -> bytes:
    return "".join(f"data: {p}\n\n" for p in payloads).encode()


async def decode_numbers(events: AsyncIterator[SseEvent]) -> AsyncIterator[LlmStreamChunk]:
    """A toy vendor decoder: text chunks per event, 'fail' raises a retryable error, 'end' finishes."""
    async for event in events:
        if event.data == "fail":
            raise ProviderError("overloaded mid-stream", code="provider_overloaded", retryable=True)
        if event.data == "end":
            yield LlmStreamChunk(kind="done")
            return
        yield LlmStreamChunk(kind="text", text=event.data)


async def run_stream(
    responses: list[httpx.Response | Exception], **kw: float
) -> tuple[list[LlmStreamChunk], list[httpx.Request], Sleeps]:
    client, seen = scripted(responses)
    sleeps = Sleeps()
    chunks = [
        c
        async for c in stream_json(
            client,
            URL,
            headers={},
            body={},
            provider="vendor",
            parse_error=parse_error,
            decode=decode_numbers,
            policy=policy(sleeps, **kw),
        )
    ]
    return chunks, seen, sleeps


def kinds(chunks: list[LlmStreamChunk]) -> list[str]:
    return [c.text or c.kind for c in chunks]


async def test_stream_failure_after_output_yields_reset_then_restarts() -> None:
    """A retryable error after partial output yields a reset chunk and the retried attempt's chunks."""
    chunks, seen, _ = await run_stream(
        [
            httpx.Response(200, content=sse("a", "fail")),
            httpx.Response(200, content=sse("a", "b", "end")),
        ]
    )
    assert kinds(chunks) == ["a", "reset", "a", "b", "done"]
    assert len(seen) == 2


async def test_stream_error_status_before_output_retries_without_reset() -> None:
    """A 429 before any byte is retried silently (nothing to reset)."""
    chunks, _seen, sleeps = await run_stream(
        [err(429, headers={"retry-after": "1"}), httpx.Response(200, content=sse("x", "end"))]
    )
    assert kinds(chunks) == ["x", "done"]
    assert sleeps.delays == [1.0]


async def test_stream_400_is_raised_with_vendor_details() -> None:
    """A 400 on a streamed call is raised at once, parsed from the error body."""
    with pytest.raises(ProviderError) as info:
        await run_stream([err(400, "invalid_request_error")])
    assert info.value.status == 400
    assert info.value.error_type == "invalid_request_error"


async def test_stream_that_stops_early_is_incomplete() -> None:
    """A stream that ends without its final event is retried, then reported as stream_incomplete."""
    with pytest.raises(ProviderError) as info:
        await run_stream([httpx.Response(200, content=sse("a"))] * 2, max_retries=1)
    assert info.value.code == "stream_incomplete"


async def test_stream_network_error_is_retried() -> None:
    """A connection failure on a streamed call is retried like any transport error."""
    chunks, seen, _ = await run_stream(
        [httpx.ConnectError("down"), httpx.Response(200, content=sse("end"))]
    )
    assert kinds(chunks) == ["done"]
    assert len(seen) == 2
