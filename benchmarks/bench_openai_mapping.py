"""Benchmark: mapping a transcript to the OpenAI Chat Completions wire, against pydantic-ai and LiteLLM.

Each library maps the same conversation from its own message model to the body it would POST:

- loom_nb: ``openai_request_body`` on a guarded ``LlmRequest`` (the mapper), and
  ``OpenAIProvider.wire_body`` on the raw request dict (parse + capability check + guard + map);
- pydantic-ai: ``OpenAIChatModel._map_messages`` on ``ModelRequest`` / ``ModelResponse`` history
  (what ``request()`` runs before the HTTP call);
- LiteLLM: ``OpenAIGPTConfig().transform_request`` on OpenAI-format message dicts (its canonical
  format is already the OpenAI one, so this is its cheapest path).

The conversation repeats a 10-message pattern (user text, assistant text + tool call, tool result,
assistant text, user image + text, ...) up to 100, 1,000 and 10,000 messages. Printed: messages
per second and loom_nb's speed-up over each library, best of several interleaved runs. Target:
>= 2x at every size.

Run: ``python3 -m venv .venv-bench && .venv-bench/bin/pip install -q -e '.[bench]' &&
.venv-bench/bin/python benchmarks/bench_openai_mapping.py`` (the ``bench`` extra holds
pydantic-ai-slim and LiteLLM; they are never runtime dependencies).
"""

from __future__ import annotations

import asyncio
import base64
import os
import time
from collections.abc import Callable
from typing import Any

from _report import Row, emit

from loom_nb.capabilities import Capabilities
from loom_nb.content import LlmRequest
from loom_nb.guard import guard_request
from loom_nb.limits import MAX_RESOLVED_BYTES
from loom_nb.providers.openai import OpenAIProvider
from loom_nb.providers.openai_wire import openai_request_body

SIZES = (100, 1_000, 10_000)
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
TOOL = {
    "name": "lookup",
    "description": "Look an item up.",
    "input_schema": {"type": "object", "properties": {"item": {"type": "integer"}}},
}


def loom_transcript(n: int) -> dict[str, Any]:
    """The conversation as loom_nb request dicts."""
    messages: list[dict[str, Any]] = []
    i = 0
    while len(messages) < n:
        call = f"call_{i}"
        block: list[dict[str, Any]] = [
            {"role": "user", "content": f"Question {i}: " + "words " * 12},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Looking up {i}."},
                    {"type": "tool_use", "id": call, "name": "lookup", "input": {"item": i}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": call, "content": f"item {i} ok"}
                ],
            },
            {"role": "assistant", "content": f"Answer {i}: " + "reply " * 20},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "And this picture?"},
                    {
                        "type": "image",
                        "media_type": "image/png",
                        "source": {"kind": "data", "data": PNG},
                    },
                ],
            },
            {"role": "assistant", "content": "A single pixel."},
            {"role": "user", "content": "Thanks. " * 5},
            {"role": "assistant", "content": "You are welcome."},
            {"role": "user", "content": "One more question " * 3},
            {"role": "assistant", "content": "Sure " * 10},
        ]
        messages.extend(block)
        i += 1
    return {"messages": messages[:n], "tools": [TOOL]}


def pydantic_ai_history(raw: dict[str, Any]) -> list[Any]:
    """The same conversation as pydantic-ai ModelMessages."""
    from pydantic_ai.messages import (
        BinaryContent,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    png = base64.b64decode(PNG)
    history: list[Any] = []
    for message in raw["messages"]:
        content = message["content"]
        if message["role"] == "assistant":
            if isinstance(content, str):
                history.append(ModelResponse(parts=[TextPart(content)]))
            else:
                parts: list[Any] = []
                for part in content:
                    if part["type"] == "text":
                        parts.append(TextPart(part["text"]))
                    else:
                        parts.append(ToolCallPart(part["name"], part["input"], part["id"]))
                history.append(ModelResponse(parts=parts))
        elif isinstance(content, str):
            history.append(ModelRequest(parts=[UserPromptPart(content)]))
        elif content[0]["type"] == "tool_result":
            result = content[0]
            history.append(
                ModelRequest(
                    parts=[ToolReturnPart("lookup", result["content"], result["tool_use_id"])]
                )
            )
        else:
            history.append(
                ModelRequest(
                    parts=[
                        UserPromptPart(
                            [content[0]["text"], BinaryContent(png, media_type="image/png")]
                        )
                    ]
                )
            )
    return history


def litellm_messages(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """The same conversation in LiteLLM's (OpenAI) message format."""
    out: list[dict[str, Any]] = []
    for message in raw["messages"]:
        content = message["content"]
        if isinstance(content, str):
            out.append({"role": message["role"], "content": content})
        elif message["role"] == "assistant":
            out.append(
                {
                    "role": "assistant",
                    "content": content[0]["text"],
                    "tool_calls": [
                        {
                            "id": content[1]["id"],
                            "type": "function",
                            "function": {
                                "name": "lookup",
                                "arguments": f'{{"item":{content[1]["input"]["item"]}}}',
                            },
                        }
                    ],
                }
            )
        elif content[0]["type"] == "tool_result":
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": content[0]["tool_use_id"],
                    "content": content[0]["content"],
                }
            )
        else:
            out.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": content[0]["text"]},
                        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                    ],
                }
            )
    return out


def best_times(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """The fastest of ``repeats`` interleaved runs of each function, in seconds."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def contenders(raw: dict[str, Any]) -> dict[str, Callable[[], object]]:
    """The timed functions for one transcript (libraries that are not installed are left out)."""
    request = LlmRequest.model_validate(raw)
    guarded = guard_request(
        request, max_inline_bytes=MAX_RESOLVED_BYTES, max_inline_total_bytes=MAX_RESOLVED_BYTES
    )
    provider = OpenAIProvider("gpt-4o", api_key="k", capabilities=Capabilities(image=["image/*"]))
    fns: dict[str, Callable[[], object]] = {
        "loom_nb mapper": lambda: openai_request_body(guarded, model="gpt-4o"),
        "loom_nb wire_body": lambda: provider.wire_body(raw),
    }
    try:
        from pydantic_ai.models import ModelRequestParameters
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider as PydanticOpenAI
    except ImportError:
        pass
    else:
        model = OpenAIChatModel("gpt-4o", provider=PydanticOpenAI(api_key="k"))
        history = pydantic_ai_history(raw)
        params = ModelRequestParameters()
        loop = asyncio.new_event_loop()
        fns["pydantic-ai"] = lambda: loop.run_until_complete(model._map_messages(history, params))
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch at import
    try:
        from litellm.llms.openai.chat.gpt_transformation import OpenAIGPTConfig
    except ImportError:
        pass
    else:
        config = OpenAIGPTConfig()
        messages = litellm_messages(raw)
        tools = [
            {
                "type": "function",
                "function": {
                    "name": "lookup",
                    "description": TOOL["description"],
                    "parameters": TOOL["input_schema"],
                },
            }
        ]
        fns["litellm"] = lambda: config.transform_request(
            model="gpt-4o",
            messages=messages,
            optional_params={"tools": tools},
            litellm_params={},
            headers={},
        )
    return fns


def main() -> None:
    """Time every contender at each size and print messages per second and loom_nb's speed-up."""
    print(
        f"{'messages':>9} {'contender':<18} {'msg/s':>12} {'mapper speed-up':>16} {'wire_body speed-up':>19}"
    )
    for n in SIZES:
        raw = loom_transcript(n)
        repeats = 15 if n <= 1_000 else 5
        best = best_times(contenders(raw), repeats)
        mapper, full = best["loom_nb mapper"], best["loom_nb wire_body"]
        for name, seconds in best.items():
            ups = (
                ""
                if name.startswith("loom_nb")
                else f"{seconds / mapper:15.2f}x {seconds / full:18.2f}x"
            )
            print(f"{n:>9,} {name:<18} {n / seconds:12,.0f} {ups}")
        peers = {k: v for k, v in best.items() if not k.startswith("loom_nb")}
        fastest = min(peers.values()) / mapper if peers else None  # None: no peer installed
        emit([Row(f"mapper / fastest peer, {n:,} messages", fastest, 2.0, ">=")])
        missing = {"pydantic-ai", "litellm"} - set(best)
        if missing:
            print(
                f"          (not installed: {', '.join(sorted(missing))}; pip install -e '.[bench]')"
            )


if __name__ == "__main__":
    main()
