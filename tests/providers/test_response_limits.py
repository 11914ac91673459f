"""Bounds on what a server can make a call cost (issue 30 items 4 and 5): time and memory.

A non-streamed call has a total deadline (``request_deadline``) beside the read timeout a
trickling server resets with every byte; a body, an SSE line and an SSE event are capped at
``max_response_bytes`` and refused as ``response_too_large`` without being held whole. The peak
memory of an oversized body is measured with ``tracemalloc`` while a ``MockTransport`` streams it
from a generator (fresh chunks, as a socket read gives them).
"""

from __future__ import annotations

import asyncio
import gzip
import time
import tracemalloc
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from loom_nb.content import LlmRequest, Message
from loom_nb.errors import ConfigurationError, ProviderError
from loom_nb.providers import (
    AnthropicProvider,
    GeminiProvider,
    OpenAIProvider,
    OpenAIResponsesProvider,
    collect_stream,
)
from loom_nb.providers._http import (
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_REQUEST_DEADLINE,
    RetryPolicy,
)
from tests.providers.conftest import RecordingSleep

HELLO = LlmRequest(messages=[Message(role="user", content="hello")])
VENDORS = ["anthropic", "openai", "openai-responses", "gemini"]
MiB = 1024 * 1024


def make(vendor: str, content: Any, *, headers: dict[str, str] | None = None, **kw: Any) -> Any:
    """A provider whose every call is answered 200 with ``content`` (bytes or an async iterator)."""

    def handler(request: httpx.Request) -> httpx.Response:
        body = content() if callable(content) else content
        return httpx.Response(200, content=body, headers=headers or {})

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    cls, model = {
        "anthropic": (AnthropicProvider, "claude-sonnet-4-5"),
        "openai": (OpenAIProvider, "gpt-4o"),
        "openai-responses": (OpenAIResponsesProvider, "gpt-4o"),
        "gemini": (GeminiProvider, "gemini-2.5-flash"),
    }[vendor]
    kw.setdefault("retry_policy", RetryPolicy(max_retries=0))
    return cls(model, api_key="sk-test-limits", http_client=client, **kw)


async def trickle() -> AsyncIterator[bytes]:
    """A body that never ends: one byte of JSON whitespace every 20 ms."""
    yield b"{"
    while True:
        await asyncio.sleep(0.02)
        yield b" "


# -- item 4: a total deadline for complete() ---------------------------------------------------


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_trickling_body_ends_at_the_request_deadline(vendor: str) -> None:
    """A body trickled a byte at a time never trips the read timeout; request_deadline ends the call."""
    provider = make(vendor, trickle, request_deadline=0.3)
    started = time.monotonic()
    with pytest.raises(ProviderError) as info:
        await asyncio.wait_for(provider.complete(HELLO), timeout=10)
    assert info.value.code == "request_timeout"
    assert info.value.retryable
    assert "request_deadline=" in info.value.message
    assert time.monotonic() - started < 5


async def test_the_request_deadline_holds_for_every_attempt_and_is_retried() -> None:
    """Each attempt gets the whole deadline; a timed-out attempt is retried like a timeout."""
    sleeps = RecordingSleep()
    policy = RetryPolicy(max_retries=2, sleep=sleeps, jitter=lambda: 0.0)
    provider = make("openai", trickle, request_deadline=0.1, retry_policy=policy)
    with pytest.raises(ProviderError) as info:
        await asyncio.wait_for(provider.complete(HELLO), timeout=10)
    assert info.value.code == "request_timeout"
    assert len(sleeps.delays) == 2


def test_request_deadline_and_max_response_bytes_are_checked_at_construction() -> None:
    """Zero, negative or non-numeric values are a ConfigurationError before anything is sent."""
    for name, bad in (
        ("request_deadline", 0),
        ("request_deadline", -1),
        ("request_deadline", "soon"),
        ("max_response_bytes", 0),
        ("max_response_bytes", 1.5),
        ("max_response_bytes", True),
    ):
        with pytest.raises(ConfigurationError) as info:
            OpenAIProvider("gpt-4o", api_key="sk-test", **{name: bad})
        assert info.value.code == f"bad_{name}"


def test_the_defaults_are_generous_and_documented() -> None:
    """The defaults sit well above any real call: half an hour, 64 MiB."""
    assert DEFAULT_REQUEST_DEADLINE == 1800.0
    assert DEFAULT_MAX_RESPONSE_BYTES == 64 * 1024 * 1024
    provider = OpenAIProvider("gpt-4o", api_key="sk-test")
    assert provider._request_deadline == DEFAULT_REQUEST_DEADLINE
    assert provider._max_response_bytes == DEFAULT_MAX_RESPONSE_BYTES


# -- item 5: a cap on what a response may hold -------------------------------------------------


def endless(chunk: bytes, total: int) -> Any:
    """A body of ``total`` bytes streamed as fresh copies of ``chunk`` (as a socket read gives them)."""

    async def body() -> AsyncIterator[bytes]:
        sent = 0
        while sent < total:
            yield bytes(bytearray(chunk))
            sent += len(chunk)

    return body


async def peak_of(call: Any) -> tuple[BaseException, int]:
    """The error ``call()`` raised and the peak of traced memory while it ran."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        try:
            await call()
        except BaseException as exc:  # the caller checks what it was
            raised = exc
        else:
            raise AssertionError("the call did not fail")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return raised, peak


async def test_an_oversized_body_is_refused_without_being_held_whole() -> None:
    """A 256 MiB body against the default 64 MiB cap: response_too_large, peak memory near the cap."""
    provider = make("openai", endless(b" " * MiB, 256 * MiB))
    error, peak = await peak_of(lambda: provider.complete(HELLO))
    assert isinstance(error, ProviderError), error
    assert error.code == "response_too_large"
    assert not error.retryable
    assert "max_response_bytes=" in error.message
    assert peak < DEFAULT_MAX_RESPONSE_BYTES + 16 * MiB, f"peak {peak / MiB:.0f} MiB"


async def test_a_declared_length_over_the_cap_is_refused_before_reading() -> None:
    """A content-length over the cap is refused at once; the body is never read."""
    read: list[int] = []

    async def body() -> AsyncIterator[bytes]:
        read.append(1)
        yield b"{}"

    provider = make(
        "openai", body, headers={"content-length": str(9 * MiB)}, max_response_bytes=MiB
    )
    with pytest.raises(ProviderError) as info:
        await provider.complete(HELLO)
    assert info.value.code == "response_too_large"
    assert read == []


async def test_a_gzip_bomb_is_capped_on_the_decoded_bytes() -> None:
    """A small gzip body that inflates past the cap is refused on what it inflates to."""
    bomb = gzip.compress(b" " * (8 * MiB))
    provider = make("anthropic", bomb, headers={"content-encoding": "gzip"}, max_response_bytes=MiB)
    with pytest.raises(ProviderError) as info:
        await provider.complete(HELLO)
    assert info.value.code == "response_too_large"


@pytest.mark.parametrize("vendor", VENDORS)
async def test_an_endless_sse_line_is_refused_at_the_cap(vendor: str) -> None:
    """One SSE line that never ends is refused when it passes the cap, long before any deadline."""
    provider = make(
        vendor,
        endless(b"x" * 65536, 64 * MiB),
        headers={"content-type": "text/event-stream"},
        max_response_bytes=MiB,
    )
    error, peak = await peak_of(lambda: collect_stream(provider.stream(HELLO)))
    assert isinstance(error, ProviderError), error
    assert error.code == "response_too_large"
    assert peak < 8 * MiB, f"peak {peak / MiB:.0f} MiB"


async def test_an_sse_event_of_many_lines_is_capped_as_a_whole() -> None:
    """Many short data lines of one event add up: the event is refused past the cap."""
    line = b"data: " + b"y" * 1000 + b"\n"
    provider = make(
        "openai",
        endless(line, 4 * MiB),
        headers={"content-type": "text/event-stream"},
        max_response_bytes=MiB,
    )
    with pytest.raises(ProviderError) as info:
        await collect_stream(provider.stream(HELLO))
    assert info.value.code == "response_too_large"


async def test_a_long_stream_of_small_events_is_not_capped() -> None:
    """The cap bounds one body, line or event, not a stream's total: many small events pass."""
    event = b'data: {"choices":[{"index":0,"delta":{"content":"ab"}}]}\n\n'
    count = (2 * MiB) // len(event) + 1
    done = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    provider = make(
        "openai",
        event * count + done,
        headers={"content-type": "text/event-stream"},
        max_response_bytes=MiB,
    )
    response = await collect_stream(provider.stream(HELLO))
    assert response.content == "ab" * count


async def test_an_oversized_json_answer_to_a_stream_is_capped_too() -> None:
    """A whole JSON answer to a streamed request is a body: the same cap applies."""
    provider = make(
        "anthropic",
        endless(b" " * 65536, 4 * MiB),
        headers={"content-type": "application/json"},
        max_response_bytes=MiB,
    )
    with pytest.raises(ProviderError) as info:
        await collect_stream(provider.stream(HELLO))
    assert info.value.code == "response_too_large"


async def test_an_oversized_error_body_keeps_its_status() -> None:
    """An error body past the cap is cut, not refused: the status still decides (a 503 is retried)."""
    sleeps = RecordingSleep()
    policy = RetryPolicy(max_retries=1, sleep=sleeps, jitter=lambda: 0.0)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, content=endless(b"<html>" * 10000, 4 * MiB)())

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    provider = OpenAIProvider(
        "gpt-4o", api_key="sk-test", http_client=client, retry_policy=policy, max_response_bytes=MiB
    )
    with pytest.raises(ProviderError) as info:
        await provider.complete(HELLO)
    assert info.value.status == 503
    assert info.value.code == "provider_overloaded"
    assert len(sleeps.delays) == 1
