"""Benchmark: mapping a 1,000-message multimodal transcript to each vendor's wire format.

The transcript has 1,000 messages: 250 tool call / result pairs (a fifth of the results carry an
image or a PDF, some of them untrusted, so the media moves with its fences on OpenAI and Gemini),
user turns with inline images and PDFs, and plain text turns. No audio: the Anthropic Messages
API has no audio block, and one transcript keeps the three mappers comparable.

Printed per vendor: messages per second for the pure mapper on an already-guarded request, and
for the provider's ``wire_body`` (capability check + guard + mapping) on the raw request, with
each as a ratio against the baseline measured in the same run: ``canonical_json`` of the same
request, i.e. serialising the canonical shape once (a mapper visits every part once too, so a
ratio near 1x means the mapping costs about one serialisation pass). Best of 15 interleaved runs.

Run: ``python benchmarks/bench_providers.py`` (a few seconds).
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from typing import Any

from _report import Row, emit

from loom_nb.capabilities import Capabilities
from loom_nb.content import LlmRequest, canonical_json
from loom_nb.guard import guard_request
from loom_nb.limits import MAX_RESOLVED_BYTES
from loom_nb.providers.anthropic import AnthropicProvider
from loom_nb.providers.anthropic_wire import anthropic_request_body
from loom_nb.providers.gemini import GeminiProvider
from loom_nb.providers.gemini_wire import gemini_request_body
from loom_nb.providers.openai import OpenAIProvider
from loom_nb.providers.openai_wire import openai_request_body

MESSAGES = 1_000
TOOL_PAIRS = 250
REPEATS = 15
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
PDF = base64.b64encode(b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n").decode()
ALL_MEDIA = Capabilities(image=["image/*"], file=["application/pdf"])


def _image(origin: str | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {
        "type": "image",
        "media_type": "image/png",
        "source": {"kind": "data", "data": PNG},
    }
    if origin:
        part["origin"] = origin
    return part


def _pdf(name: str | None = "report.pdf") -> dict[str, Any]:
    part: dict[str, Any] = {
        "type": "file",
        "media_type": "application/pdf",
        "source": {"kind": "data", "data": PDF},
    }
    if name:
        part["name"] = name
    return part


def build_transcript() -> dict[str, Any]:
    """The transcript as plain dicts (the shape a journal row or a notebook holds)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Let's start."}]
    for i in range(TOOL_PAIRS):
        call_id = f"call_{i:04d}"
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Looking up item {i}."},
                    {
                        "type": "tool_use",
                        "id": call_id,
                        "name": "lookup",
                        "input": {"item": i, "tags": ["a", "b"]},
                    },
                ],
            }
        )
        content: Any = f"item {i}: " + "result text " * 8
        if i % 5 == 0:
            content = [{"type": "text", "text": f"item {i} attached"}, _image(), _pdf()]
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": content}
        if i % 25 == 0:
            result["origin"] = "tool:browser"
        if i % 10 == 3:
            result["is_error"] = True
        messages.append(
            {"role": "user", "content": [result, {"type": "text", "text": "Continue."}]}
        )
    i = 0
    while len(messages) < MESSAGES:
        messages.append({"role": "assistant", "content": f"Answer {i}: " + "reply " * 30})
        if len(messages) == MESSAGES:
            break
        if i % 4 == 0:
            origin = "upload:bob" if i % 40 == 0 else None
            user: Any = [{"type": "text", "text": f"Look at picture {i}."}, _image(origin)]
        elif i % 4 == 2:
            user = [_pdf(None), {"type": "text", "text": "Summarise this."}]
        else:
            user = f"Question {i}: " + "words " * 20
        messages.append({"role": "user", "content": user})
        i += 1
    assert len(messages) == MESSAGES
    return {"system": "You are a careful assistant.", "messages": messages, "tools": [
        {"name": "lookup", "description": "Look an item up.", "input_schema": {
            "type": "object", "properties": {"item": {"type": "integer"}}, "required": ["item"]}}
    ]}  # fmt: skip


def best_times(fns: dict[str, Callable[[], object]]) -> dict[str, float]:
    """The fastest of ``REPEATS`` runs of each function, in seconds.

    Runs are interleaved (every function once per round), so a burst of load on a shared machine
    slows the baseline and the mappers alike instead of skewing one ratio.
    """
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(REPEATS):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def main() -> None:
    """Build the transcript, time the baseline and each mapper, print the table."""
    raw = build_transcript()
    request = LlmRequest.model_validate(raw)
    guarded = guard_request(
        request, max_inline_bytes=MAX_RESOLVED_BYTES, max_inline_total_bytes=MAX_RESOLVED_BYTES
    )
    anthropic = AnthropicProvider("claude-sonnet-4-5", api_key="k", capabilities=ALL_MEDIA)
    openai = OpenAIProvider("gpt-4o", api_key="k", capabilities=ALL_MEDIA)
    gemini = GeminiProvider("gemini-2.5-flash", api_key="k", capabilities=ALL_MEDIA)
    fns: dict[str, Callable[[], object]] = {
        "baseline": lambda: canonical_json(request),
        "anthropic mapper": lambda: anthropic_request_body(
            guarded, model="claude-sonnet-4-5", max_tokens=1024
        ),
        "anthropic wire_body": lambda: anthropic.wire_body(raw),
        "openai mapper": lambda: openai_request_body(guarded, model="gpt-4o"),
        "openai wire_body": lambda: openai.wire_body(raw),
        "gemini mapper": lambda: gemini_request_body(guarded),
        "gemini wire_body": lambda: gemini.wire_body(raw),
    }
    best = best_times(fns)
    baseline = best["baseline"]
    print(f"transcript: {MESSAGES} messages, {TOOL_PAIRS} tool pairs, best of {REPEATS}")
    print(f"baseline canonical_json: {MESSAGES / baseline:12,.0f} msg/s")
    print(
        f"{'vendor':<10} {'mapper msg/s':>14} {'vs baseline':>12} {'wire_body msg/s':>16} {'vs baseline':>12}"
    )
    for name in ("anthropic", "openai", "gemini"):
        mapped, full = best[f"{name} mapper"], best[f"{name} wire_body"]
        print(
            f"{name:<10} {MESSAGES / mapped:14,.0f} {baseline / mapped:11.2f}x "
            f"{MESSAGES / full:16,.0f} {baseline / full:11.2f}x"
        )
    emit([Row(f"{name} mapper speed / canonical_json", baseline / best[f"{name} mapper"])
          for name in ("anthropic", "openai", "gemini")])  # fmt: skip
    emit([Row(f"{name} wire_body speed / canonical_json", baseline / best[f"{name} wire_body"])
          for name in ("anthropic", "openai", "gemini")])  # fmt: skip


if __name__ == "__main__":
    main()
