"""Hardened errors (issue 14 item 6): echoed keys redacted, deep JSON refused, stream deadline, tool-args policy."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from hypothesis import given

from loom_nb.content import LlmRequest, Message
from loom_nb.errors import ProviderError
from loom_nb.journal import Journal, create_llm_effect
from loom_nb.providers import (
    AnthropicProvider,
    GeminiProvider,
    OpenAIProvider,
    OpenAIResponsesProvider,
    collect_stream,
)
from loom_nb.providers._http import RetryPolicy
from loom_nb.providers._wire_util import compact_json
from loom_nb.render import render_transcript
from loom_nb.render._turns import turns_of
from tests import strategies as s

KEY = "sk-test-Zq8Vd3LrN5pX0wE2tY7uI9oA"
HELLO = LlmRequest(messages=[Message(role="user", content="hello")])
NO_RETRY = RetryPolicy(max_retries=0)

Handler = Callable[[httpx.Request], httpx.Response]


def make(vendor: str, handler: Handler, **kw: Any) -> Any:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    cls = {
        "anthropic": AnthropicProvider,
        "openai": OpenAIProvider,
        "openai-responses": OpenAIResponsesProvider,
        "gemini": GeminiProvider,
    }[vendor]
    model = {
        "anthropic": "claude-sonnet-4-5",
        "openai": "gpt-4o",
        "openai-responses": "gpt-4o",
        "gemini": "gemini-2.5-flash",
    }[vendor]
    return cls(model, api_key=KEY, http_client=client, retry_policy=NO_RETRY, **kw)


def echo_401(request: httpx.Request) -> httpx.Response:
    """A server that quotes the credentials it was sent back in its error (seen on misconfigured proxies)."""
    sent = (
        request.headers.get("authorization")
        or request.headers.get("x-api-key")
        or request.headers.get("x-goog-api-key")
    )
    message = f"invalid credentials: Authorization: Bearer {sent} (header {sent!r})"
    body = {
        "error": {
            "message": message,
            "type": f"auth_error {sent}",
            "code": sent,
            "param": sent,
            "status": "UNAUTHENTICATED",
        },
        "type": "error",
    }
    return httpx.Response(401, json=body)


def assert_no_key(exc: BaseException) -> None:
    texts = [str(exc), repr(exc), json.dumps(getattr(exc, "details", {}), default=str)]
    texts.extend(str(a) for a in exc.args)
    if isinstance(exc, ProviderError):
        texts.append(str(exc.error_type))
    for text in texts:
        assert KEY not in text
    assert exc.__cause__ is None or KEY not in str(exc.__cause__)


@pytest.mark.parametrize("vendor", ["anthropic", "openai", "gemini"])
async def test_an_echoed_key_never_reaches_the_error(vendor: str) -> None:
    """A 401 quoting the Authorization header: message, details, repr and args hold *** instead."""
    provider = make(vendor, echo_401)
    with pytest.raises(ProviderError) as info:
        await provider.complete(HELLO)
    assert info.value.code == "authentication_failed"
    assert "***" in info.value.message
    assert_no_key(info.value)
    with pytest.raises(ProviderError) as streamed:
        await collect_stream(provider.stream(HELLO))
    assert_no_key(streamed.value)


async def test_an_echoed_key_in_a_stream_error_event_is_redacted() -> None:
    """A key quoted inside a mid-stream error event is redacted too."""
    event = {"error": {"message": f"bad key Bearer {KEY}", "type": "invalid_request_error"}}
    body = f"data: {json.dumps(event)}\n\n".encode()
    provider = make("openai", lambda r: httpx.Response(200, content=body))
    with pytest.raises(ProviderError) as info:
        await collect_stream(provider.stream(HELLO))
    assert "Bearer ***" in info.value.message
    assert_no_key(info.value)


async def test_the_journal_and_its_html_never_see_the_key() -> None:
    """The step_failed row, and the transcript HTML drawn from the journal, hold no key."""
    journal = Journal()
    effect = create_llm_effect(make("openai", echo_401))
    with pytest.raises(ProviderError):
        await effect(journal.execution("r"), "llm", HELLO)
    rows = journal.events("r")
    assert rows[-1].kind == "step_failed"
    assert KEY not in json.dumps([row.payload for row in rows], default=str)
    assert KEY not in render_transcript(journal.execution("r"))
    errors = [t.error for t in turns_of(journal, "r")]
    assert errors
    assert errors[-1] is not None
    assert "***" in json.dumps(errors)
    assert KEY not in json.dumps(errors)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("vendor", ["anthropic", "openai", "gemini"])
@pytest.mark.parametrize("depth", [100_000, 300])
async def test_deeply_nested_bodies_are_malformed_responses(vendor: str, depth: int) -> None:
    """A 200 body (or error body) nested 100,000 deep is ProviderError(malformed_response), never RecursionError."""
    text = '{"choices":' + nested(depth) + "}"
    provider = make(vendor, lambda r: httpx.Response(200, content=text.encode()))
    with pytest.raises(ProviderError) as info:
        await provider.complete(HELLO)
    assert info.value.code == "malformed_response"
    failing = make(vendor, lambda r: httpx.Response(400, content=text.encode()))
    with pytest.raises(ProviderError) as bad:
        await failing.complete(HELLO)
    assert bad.value.code == "invalid_request"


@pytest.mark.parametrize("vendor", ["anthropic", "openai", "gemini"])
async def test_a_deeply_nested_sse_line_is_a_malformed_response(vendor: str) -> None:
    """One SSE data line nested 100,000 deep ends the stream with malformed_response."""
    body = ("data: " + '{"x":' + nested(100_000) + "}\n\n").encode()
    provider = make(vendor, lambda r: httpx.Response(200, content=body))
    with pytest.raises(ProviderError) as info:
        await collect_stream(provider.stream(HELLO))
    assert info.value.code == "malformed_response"


async def trickle() -> AsyncIterator[bytes]:
    """A server that keeps the connection alive with comments and never answers."""
    while True:
        yield b": keep-alive\n\n"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("vendor", ["anthropic", "openai", "openai-responses", "gemini"])
async def test_a_stream_that_trickles_keep_alives_ends_at_its_deadline(vendor: str) -> None:
    """The read timeout never fires on a trickle; the total deadline does, as stream_timeout."""
    provider = make(
        vendor,
        lambda r: httpx.Response(
            200, content=trickle(), headers={"content-type": "text/event-stream"}
        ),
        stream_deadline=0.2,
    )
    started = time.monotonic()
    with pytest.raises(ProviderError) as info:
        await collect_stream(provider.stream(HELLO))
    assert info.value.code == "stream_timeout"
    assert info.value.retryable
    assert time.monotonic() - started < 5


def test_stream_deadline_must_be_positive() -> None:
    """A zero, negative or non-numeric deadline is a ConfigurationError at construction."""
    from loom_nb.errors import ConfigurationError

    for bad in (0, -1, "soon"):
        with pytest.raises(ConfigurationError) as info:
            OpenAIProvider("gpt-4o", api_key=KEY, stream_deadline=bad)  # type: ignore[arg-type]
        assert info.value.code == "bad_stream_deadline"


def sse(events: list[tuple[str | None, dict[str, Any]]]) -> bytes:
    out = []
    for name, data in events:
        out.append((f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}\n\n")
    return "".join(out).encode()


BROKEN_STREAMS: dict[str, bytes] = {
    "anthropic": sse(
        [
            (
                "message_start",
                {"type": "message_start", "message": {"id": "m", "model": "c", "usage": {}}},
            ),
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": '{"q": "cut'},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}}),
            ("message_stop", {"type": "message_stop"}),
        ]
    ),
    "openai": sse(
        [
            (
                None,
                {
                    "id": "c",
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [
                                    {
                                        "index": 0,
                                        "id": "t1",
                                        "type": "function",
                                        "function": {"name": "f", "arguments": '{"q": "cut'},
                                    }
                                ]
                            },
                        }
                    ],
                },
            ),
            (None, {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}),
        ]
    )
    + b"data: [DONE]\n\n",
    "gemini": sse(
        [
            (
                None,
                {
                    "candidates": [
                        {
                            "content": {
                                "role": "model",
                                "parts": [
                                    {"functionCall": {"id": "t1", "name": "f", "args": ["cut"]}}
                                ],
                            },
                            "finishReason": "MAX_TOKENS",
                        }
                    ],
                    "responseId": "r",
                },
            ),
        ]
    ),
}


@pytest.mark.parametrize("vendor", ["anthropic", "openai", "gemini"])
async def test_invalid_streamed_tool_arguments_are_refused_the_same_way_everywhere(
    vendor: str,
) -> None:
    """One policy: invalid_tool_arguments, not retryable, after exactly one request (no silent paid retry)."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, content=BROKEN_STREAMS[vendor])

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    cls = {"anthropic": AnthropicProvider, "openai": OpenAIProvider, "gemini": GeminiProvider}[
        vendor
    ]
    model = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-4o", "gemini": "gemini-2.5-flash"}[
        vendor
    ]
    provider = cls(
        model,
        api_key=KEY,
        http_client=client,
        retry_policy=RetryPolicy(max_retries=3, sleep=_no_sleep),
    )
    with pytest.raises(ProviderError) as info:
        await collect_stream(provider.stream(HELLO))
    assert info.value.code == "invalid_tool_arguments"
    assert info.value.retryable is False
    assert info.value.details["tool_use_id"] == "t1"
    assert len(seen) == 1


async def _no_sleep(seconds: float) -> None:
    return None


@given(s.json_values)
def test_compact_json_is_exactly_json_dumps_compact(value: Any) -> None:
    """The cached C encoder writes what json.dumps(separators=(',', ':'), ensure_ascii=False) writes."""
    assert compact_json(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def test_compact_json_refuses_what_json_dumps_refuses_and_stays_usable() -> None:
    """A non-JSON value or a cycle raises as json.dumps does, and the next call still works."""
    with pytest.raises(TypeError):
        compact_json({"a": object()})
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="Circular"):
        compact_json(cycle)
    assert compact_json({"b": [1, 2.5, "é"]}) == '{"b":[1,2.5,"é"]}'
