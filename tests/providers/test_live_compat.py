"""Compatible servers over a real loopback socket (issue 30 item 8): what gateways really answer.

Found against real third-party servers: a gateway answers a streamed request with one whole
``application/json`` message (LiteLLM's ``/v1/messages`` for a mocked model), and some send an
error body in SSE form (``data: {"error": ...}``). The server here (``live_server.py``) does the
same on 127.0.0.1 and counts the requests it received: a JSON answer is the response, sent once.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from loom_nb.content import LlmRequest, Message
from loom_nb.errors import ProviderError
from loom_nb.providers import (
    AnthropicProvider,
    GeminiProvider,
    OpenAIProvider,
    OpenAIResponsesProvider,
    collect_stream,
)
from loom_nb.providers._http import RetryPolicy
from tests.providers.conftest import RecordingSleep
from tests.providers.live_server import Answer, LiveServer, json_answer

HELLO = LlmRequest(messages=[Message(role="user", content="hello")])
TEXT = "This is a mock request"

WHOLE: dict[str, tuple[str, dict[str, Any]]] = {
    "anthropic": (
        "/v1/messages",
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-mock",
            "content": [
                {"type": "text", "text": TEXT},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 3, "output_tokens": 5},
        },
    ),
    "openai": (
        "/v1/chat/completions",
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-mock",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": TEXT,
                        "tool_calls": [
                            {
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                            }
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8},
        },
    ),
    "openai-responses": (
        "/v1/responses",
        {
            "id": "resp_1",
            "object": "response",
            "status": "completed",
            "model": "gpt-mock",
            "output": [
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": TEXT, "annotations": []}],
                },
                {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "call_1",
                    "name": "get_weather",
                    "arguments": '{"city":"Paris"}',
                    "status": "completed",
                },
            ],
            "usage": {"input_tokens": 3, "output_tokens": 5, "total_tokens": 8},
        },
    ),
    "gemini": (
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
        {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [
                            {"text": TEXT},
                            {"functionCall": {"id": "call_1", "name": "get_weather", "args": {"city": "Paris"}}},
                        ],
                    },
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 5, "totalTokenCount": 8},
            "modelVersion": "gemini-2.5-flash",
        },
    ),
}  # fmt: skip


def make(vendor: str, server: LiveServer, sleeps: RecordingSleep | None = None) -> Any:
    """A provider of ``vendor`` pointed at the live server, three retries that never wait."""
    policy = RetryPolicy(max_retries=3, sleep=sleeps or RecordingSleep(), jitter=lambda: 0.0)
    base = {
        "anthropic": server.url,
        "openai": server.url + "/v1",
        "openai-responses": server.url + "/v1",
        "gemini": server.url + "/v1beta",
    }[vendor]
    cls, model = {
        "anthropic": (AnthropicProvider, "claude-mock"),
        "openai": (OpenAIProvider, "gpt-mock"),
        "openai-responses": (OpenAIResponsesProvider, "gpt-mock"),
        "gemini": (GeminiProvider, "gemini-2.5-flash"),
    }[vendor]
    return cls(model, api_key="sk-test-live", base_url=base, retry_policy=policy)


@pytest.mark.parametrize("vendor", sorted(WHOLE))
async def test_a_json_answer_to_a_streamed_request_is_the_response_sent_once(
    vendor: str, live_server: LiveServer
) -> None:
    """A 2xx application/json answer to stream() is parsed as a whole response and yielded; one request, no retry."""
    path, body = WHOLE[vendor]
    live_server.route(path, lambda _: json_answer(body))
    texts: list[str] = []
    deltas: list[Any] = []
    async with make(vendor, live_server) as provider:
        response = await collect_stream(
            provider.stream(HELLO), on_text=texts.append, on_tool_delta=deltas.append
        )
    assert live_server.count(path) == 1
    assert live_server.received[0].body.get("stream") is True or vendor == "gemini"
    assert response.content == TEXT
    assert "".join(texts) == TEXT
    assert [(c.id, c.name, c.input) for c in response.tool_calls] == [
        ("call_1" if vendor != "anthropic" else "toolu_1", "get_weather", {"city": "Paris"})
    ]
    assert deltas[0].name == "get_weather"
    assert "".join(d.input_json for d in deltas) == '{"city":"Paris"}'


async def test_a_malformed_json_answer_to_a_stream_is_refused_and_not_retried(
    live_server: LiveServer,
) -> None:
    """A JSON answer that does not parse is malformed_response at once: it was a (paid) answer, never resent."""
    live_server.route(
        "/v1/messages", lambda _: (200, {"content-type": "application/json"}, b'{"type": "mess')
    )
    async with make("anthropic", live_server) as provider:
        with pytest.raises(ProviderError) as info:
            await collect_stream(provider.stream(HELLO))
    assert info.value.code == "malformed_response"
    assert not info.value.retryable
    assert live_server.count("/v1/messages") == 1


async def call(provider: Any, *, streamed: bool) -> Any:
    """``provider.stream`` collected, or ``provider.complete``."""
    if streamed:
        return await collect_stream(provider.stream(HELLO))
    return await provider.complete(HELLO)


def sse_error(status: int, data: str, event: str | None = None) -> Answer:
    head = f"event: {event}\n" if event else ""
    return status, {"content-type": "text/event-stream"}, f"{head}data: {data}\n\n".encode()


OPENAI_SSE_ERROR = (
    '{"error": {"message": "Invalid model name passed in model=gpt-nope", '
    '"type": "invalid_request_error", "param": "model", "code": "400"}}'
)
ANTHROPIC_SSE_ERROR = (
    '{"type": "error", "error": {"type": "invalid_request_error", '
    '"message": "Invalid model name passed in model=gpt-nope"}}'
)


@pytest.mark.parametrize("streamed", [False, True], ids=["complete", "stream"])
@pytest.mark.parametrize(
    ("vendor", "path", "answer"),
    [
        ("openai", "/v1/chat/completions", sse_error(400, OPENAI_SSE_ERROR)),
        ("openai-responses", "/v1/responses", sse_error(400, OPENAI_SSE_ERROR)),
        ("anthropic", "/v1/messages", sse_error(400, ANTHROPIC_SSE_ERROR, event="error")),
    ],
)
async def test_an_error_body_in_sse_form_keeps_the_servers_message(
    vendor: str, path: str, answer: Answer, streamed: bool, live_server: LiveServer
) -> None:
    """A 400 whose body is one SSE event carrying the error JSON: its first event is read as the error."""
    live_server.route(path, lambda _: answer)
    async with make(vendor, live_server) as provider:
        with pytest.raises(ProviderError) as info:
            await call(provider, streamed=streamed)
    error = info.value
    assert "Invalid model name passed in model=gpt-nope" in error.message
    assert error.error_type == "invalid_request_error"
    assert error.code == "invalid_request"
    assert live_server.count(path) == 1


async def test_a_retryable_error_in_sse_form_is_still_retried(live_server: LiveServer) -> None:
    """Reading the SSE form changes the message, not the status rules: a 503 is retried."""
    live_server.route(
        "/v1/chat/completions",
        lambda _: sse_error(503, '{"error": {"message": "upstream busy", "type": "server_error"}}'),
    )
    sleeps = RecordingSleep()
    async with make("openai", live_server, sleeps) as provider:
        with pytest.raises(ProviderError) as info:
            await provider.complete(HELLO)
    assert "upstream busy" in info.value.message
    assert live_server.count("/v1/chat/completions") == 4
    assert len(sleeps.delays) == 3


@pytest.mark.parametrize("vendor", ["openai", "openai-responses", "anthropic", "gemini"])
async def test_errors_from_a_compatible_server_name_its_host(
    vendor: str, live_server: LiveServer
) -> None:
    """An error answered off the vendor's own endpoint names the host that answered, not the vendor."""
    path = WHOLE[vendor][0].replace(":streamGenerateContent", ":generateContent")
    live_server.route(path, lambda _: json_answer({"error": {"message": "bad key"}}, 401))
    async with make(vendor, live_server) as provider:
        with pytest.raises(ProviderError) as info:
            await provider.complete(HELLO)
    host = live_server.url.removeprefix("http://")
    assert host in info.value.message
    assert not info.value.message.startswith(("OpenAI answered", "Anthropic answered"))
    assert info.value.details["host"] == host
    assert info.value.provider is not None


async def test_errors_from_the_vendors_own_endpoint_still_name_the_vendor() -> None:
    """On OpenAI's own endpoint the message still says OpenAI answered."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": {"message": "bad key", "type": "auth"}})

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    provider = OpenAIProvider(
        "gpt-4o", api_key="sk-test", http_client=client, retry_policy=RetryPolicy(max_retries=0)
    )
    with pytest.raises(ProviderError) as info:
        await provider.complete(HELLO)
    assert info.value.message.startswith("OpenAI answered HTTP 401")
