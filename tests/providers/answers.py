"""Vendor answer bodies for tests that serve a model's reply over ``httpx.MockTransport``.

An Anthropic Messages answer and an OpenAI Chat Completions answer, each holding one text, with
the model and the usage a test prices or counts (the defaults: 1,000 tokens in; 100 out on
Anthropic, 10 on OpenAI).
"""

from __future__ import annotations

from typing import Any


def anthropic_answer(
    text: str = "from anthropic", *, tokens_in: int = 1000, tokens_out: int = 100, **usage: int
) -> dict[str, Any]:
    """A ``claude-sonnet-4-5`` text answer; ``usage`` adds fields (``cache_read_input_tokens``)."""
    return {
        "id": "msg",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out, **usage},
    }


def openai_answer(
    text: str = "from openai",
    *,
    model: str = "gpt-4.1-2025-04-14",
    tokens_in: int = 1000,
    tokens_out: int = 10,
) -> dict[str, Any]:
    """A Chat Completions text answer of ``model``."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {
            "prompt_tokens": tokens_in,
            "completion_tokens": tokens_out,
            "total_tokens": tokens_in + tokens_out,
        },
    }
