"""OpenAI Chat Completions answers (``openai_answer``): error envelopes, retryability, stream ends.

The recorded round trips, which read answers and map requests together, are in ``test_openai_wire``.
"""

from __future__ import annotations

import pytest

from loom_nb.errors import ProviderError
from loom_nb.providers.openai_answer import (
    OpenAIStreamAssembler,
    openai_error_fields,
    openai_error_retryable,
)
from tests.providers.recordings import load_recording


def test_recorded_400_error_envelope_is_read() -> None:
    """The recorded 400 gives its type, message, param and vendor code, and is not retryable."""
    rec = load_recording("openai/error-400-audio-unsupported-by-model.yaml")
    response = rec.interactions[1].response
    assert response.status == 400
    error_type, message, details = openai_error_fields(response.json())
    assert error_type == "invalid_request_error"
    assert message.startswith("Invalid 'messages[3]'. Content blocks are expected")
    assert details == {"vendor_code": "invalid_value", "param": "messages[3]"}
    assert openai_error_retryable(400, response.json()) is False


def test_insufficient_quota_is_not_retryable_but_rate_limits_are() -> None:
    """A 429 for an exhausted quota is final; a 429 rate limit and a 5xx are worth retrying."""
    quota = {"error": {"type": "insufficient_quota", "code": "insufficient_quota", "message": "x"}}
    limited = {"error": {"type": "requests", "code": "rate_limit_exceeded", "message": "slow"}}
    assert openai_error_retryable(429, quota) is False
    assert openai_error_retryable(429, limited) is True
    assert openai_error_retryable(503, {}) is True


def test_error_event_inside_a_stream_raises_provider_error() -> None:
    """An ``{"error": ...}`` event inside a 200 stream becomes a ProviderError with its type."""
    assembler = OpenAIStreamAssembler()
    with pytest.raises(ProviderError) as info:
        assembler.feed({"error": {"message": "boom", "type": "server_error"}})
    assert info.value.error_type == "server_error"
    assert info.value.retryable is True


def test_stream_cut_before_its_end_is_refused() -> None:
    """A stream with a tool fragment but no finish_reason or [DONE] raises stream_incomplete."""
    assembler = OpenAIStreamAssembler()
    assembler.feed(
        {
            "id": "c1",
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_1",
                                "function": {"name": "f", "arguments": "{"},
                            }
                        ]
                    },
                }
            ],
        }
    )
    with pytest.raises(ProviderError) as info:
        assembler.response()
    assert info.value.code == "stream_incomplete"
