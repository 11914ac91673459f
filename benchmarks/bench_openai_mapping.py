"""Benchmark: mapping a transcript to the OpenAI Chat Completions wire, against pydantic-ai and LiteLLM.

Each library maps the same conversation from its own message model to the body it would POST:

- loom_nb: ``openai_request_body`` on a guarded ``LlmRequest`` (the mapper), and
  ``OpenAIProvider.wire_body`` on the raw request dicts (validation + capability check + guard +
  map);
- pydantic-ai: what ``OpenAIChatModel.request()`` runs before the HTTP call on ``ModelRequest`` /
  ``ModelResponse`` history: ``prepare_request``, the tool menu and ``_map_messages``;
- LiteLLM: ``OpenAIGPTConfig().transform_request`` on OpenAI-format message dicts (its canonical
  format is already the OpenAI one, so this is its cheapest path).

The conversation repeats a 10-message pattern (user text, assistant text + tool call, tool result,
assistant text, user image + text, ...) up to 100, 1,000 and 10,000 messages (quick settings: not 10,000). Printed, best of
15 interleaved runs (5 at 10,000), the objects the imports made frozen out of the garbage
collector's walks (``gc.freeze``) so a full collection does not land in one contender's run,
with the versions compared and the load average:

- the mapper's speed-up over the fastest peer (target >= 2x at every size) and the ratio to that
  target, beside the mapper's time over ``json.dumps`` of its own output;
- ``wire_body`` from dicts against pydantic-ai's prepare + map (target >= 1x) and the ratio to
  it, beside the bound: validation + mapper alone, with no capability check and no guard.

``--check`` runs 100 and 10,000 messages and asserts growth only: per message, the mapper and
``wire_body`` at 10,000 cost at most 3x what they cost at 100. ``bench_anthropic_mapping.py`` does
the same for the Anthropic Messages wire.

Run: ``python3 -m venv .venv-bench && .venv-bench/bin/pip install -q -e '.[bench]' &&
.venv-bench/bin/python benchmarks/bench_openai_mapping.py`` (the ``bench`` extra holds
pydantic-ai-slim and LiteLLM; they are never runtime dependencies).
"""

from __future__ import annotations

import asyncio
import base64
import gc
import importlib.metadata
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from _report import Row, emit, quick

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


MAPPER, WIRE_BODY, DUMPS = "loom_nb mapper", "loom_nb wire_body", "json.dumps"
FLOOR = "validate + mapper"
PYDANTIC_AI = "pydantic-ai"
MAPPER_TARGET = 2.0  # the mapper against the fastest peer, at every size
WIRE_BODY_TARGET = 1.0  # wire_body from dicts against pydantic-ai's prepare + map
REPEATS = 15  # interleaved runs of every contender at each size; the best is kept
CHECK_GROWTH = 3.0  # --check: per-message time at 10,000 messages over that at 100 (a
# transcript 100x longer misses the CPU caches more, and more so under load; quadratic work is 100x)


def best_times(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """The fastest of ``repeats`` interleaved runs of each function, in seconds."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def version(distribution: str) -> str:
    """The installed version of ``distribution`` ("not installed" when it is not)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def loom_contenders(
    raw: dict[str, Any], mapper: Callable[[LlmRequest], dict[str, Any]], provider: Any
) -> dict[str, Callable[[], object]]:
    """loom_nb's timed functions: the mapper on the guarded request, ``json.dumps`` of what it
    returns, ``wire_body`` on the raw dicts, and the floor of a wire_body (validation + mapper,
    no capability check and no guard)."""
    request = LlmRequest.model_validate(raw)
    guarded = guard_request(
        request, max_inline_bytes=MAX_RESOLVED_BYTES, max_inline_total_bytes=MAX_RESOLVED_BYTES
    )
    body = mapper(guarded)
    return {
        MAPPER: lambda: mapper(guarded),
        DUMPS: lambda: json.dumps(body),
        WIRE_BODY: lambda: provider.wire_body(raw),
        FLOOR: lambda: mapper(LlmRequest.model_validate(raw)),
    }


def contenders(raw: dict[str, Any]) -> tuple[dict[str, Callable[[], object]], list[str]]:
    """The timed functions for one transcript, and notes on the peers left out (not installed)."""
    provider = OpenAIProvider("gpt-4o", api_key="k", capabilities=Capabilities(image=["image/*"]))
    fns = loom_contenders(raw, lambda r: openai_request_body(r, model="gpt-4o"), provider)
    notes: list[str] = []
    try:
        from pydantic_ai.models import ModelRequestParameters
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider as PydanticOpenAI
        from pydantic_ai.tools import ToolDefinition
    except ImportError:
        notes.append("pydantic-ai not installed (pip install -e '.[bench]')")
    else:
        model = OpenAIChatModel("gpt-4o", provider=PydanticOpenAI(api_key="k"))
        history = pydantic_ai_history(raw)
        tool = ToolDefinition(
            name="lookup",
            description=TOOL["description"],
            parameters_json_schema=TOOL["input_schema"],
        )
        params = ModelRequestParameters(function_tools=[tool])
        loop = asyncio.new_event_loop()

        def pydantic_ai() -> object:
            # What its request() runs before the HTTP call: prepare, the tool menu, the messages.
            settings, prepared = model.prepare_request(None, params)
            tools = model._get_tool_choice(settings or {}, prepared)
            return tools, loop.run_until_complete(model._map_messages(history, prepared))

        fns[PYDANTIC_AI] = pydantic_ai
    try:
        from litellm.llms.openai.chat.gpt_transformation import OpenAIGPTConfig
    except ImportError:
        notes.append("LiteLLM not installed (pip install -e '.[bench]')")
    else:
        config = OpenAIGPTConfig()
        messages = litellm_messages(raw)
        tools = litellm_tools()
        fns["litellm"] = lambda: config.transform_request(
            model="gpt-4o",
            messages=messages,
            optional_params={"tools": tools},
            litellm_params={},
            headers={},
        )
    return fns, notes


def litellm_tools() -> list[dict[str, Any]]:
    """The tool menu in LiteLLM's (OpenAI) format."""
    return [
        {
            "type": "function",
            "function": {
                "name": "lookup",
                "description": TOOL["description"],
                "parameters": TOOL["input_schema"],
            },
        }
    ]


def measure(
    build: Callable[[dict[str, Any]], tuple[dict[str, Callable[[], object]], list[str]]],
    sizes: tuple[int, ...],
    repeats: int,
) -> tuple[dict[int, dict[str, float]], list[str]]:
    """Best-of-``repeats`` seconds of every contender at each size, and the notes on peers left out."""
    results: dict[int, dict[str, float]] = {}
    notes: list[str] = []
    for n in sizes:
        fns, notes = build(loom_transcript(n))
        # The peers' imports leave some 400,000 objects a full collection walks (about 0.2 s):
        # frozen, a collection landing in one contender's run walks only what the runs made.
        gc.collect()
        gc.freeze()
        try:
            results[n] = best_times(fns, repeats if n <= 1_000 else max(3, repeats // 3))
        finally:
            gc.unfreeze()
    return results, notes


def report(
    vendor: str, results: dict[int, dict[str, float]], notes: list[str]
) -> tuple[float, list[Row]]:
    """Print every size's ratios against the targets; return the worst ratio to a target and
    the rows for ``run_all.py``."""
    worst = float("inf")
    rows: list[Row] = []
    for n, best in results.items():
        mapper, full, floor = best[MAPPER], best[WIRE_BODY], best[FLOOR]
        peers = {k: v for k, v in best.items() if k not in (MAPPER, WIRE_BODY, DUMPS, FLOOR)}
        line = f"{n:>7,} msgs  {vendor} mapper {n / mapper:,.0f} msg/s, {mapper / best[DUMPS]:.2f}x the time of json.dumps of its output"
        if peers:
            fastest = min(peers, key=lambda k: peers[k])
            up = peers[fastest] / mapper
            worst = min(worst, up / MAPPER_TARGET)
            line += (
                f"; fastest peer {fastest} {n / peers[fastest]:,.0f} msg/s -> {up:.2f}x "
                f"(target >= {MAPPER_TARGET:g}x: {up / MAPPER_TARGET:.2f} of it)"
            )
            rows.append(Row(f"mapper / fastest peer, {n:,} messages", up, MAPPER_TARGET, ">="))
        rows.append(Row(f"mapper / json.dumps of its output, {n:,} messages", mapper / best[DUMPS]))
        print(line)
        if PYDANTIC_AI in best:
            peer = best[PYDANTIC_AI]
            ratio, bound = peer / full, peer / floor
            worst = min(worst, ratio / WIRE_BODY_TARGET)
            print(
                f"{n:>7,} msgs  wire_body from dicts {n / full:,.0f} msg/s vs pydantic-ai prepare "
                f"+ map {n / peer:,.0f} msg/s -> {ratio:.2f}x (target >= {WIRE_BODY_TARGET:g}x: "
                f"{ratio / WIRE_BODY_TARGET:.2f} of it); bound: validation + mapper alone (no "
                f"capability check, no guard) {bound:.2f}x, so {ratio / bound:.2f} of the bound"
            )
            at = f"{n:,} messages"
            rows.append(Row(f"wire_body / pydantic-ai, {at}", ratio, WIRE_BODY_TARGET, ">="))
            rows.append(
                Row(f"wire_body / pydantic-ai vs its bound, {at}", ratio, bound, "", "bound")
            )
        else:
            print(
                f"{n:>7,} msgs  wire_body from dicts {n / full:,.0f} msg/s, {full / floor:.2f}x "
                "the time of validation + mapper alone (no pydantic-ai to compare with)"
            )
            rows.append(Row(f"wire_body / validation + mapper, {n:,} messages", full / floor))
    for note in notes:
        print(f"          ({note})")
    return worst, rows


def check(vendor: str, results: dict[int, dict[str, float]]) -> bool:
    """Growth only: per message, the mapper and wire_body at the largest size cost at most
    ``CHECK_GROWTH`` times what they cost at the smallest."""
    small, large = min(results), max(results)
    ok = True
    for name in (MAPPER, WIRE_BODY):
        growth = (results[large][name] / large) / (results[small][name] / small)
        passed = growth <= CHECK_GROWTH
        ok = ok and passed
        print(
            f"check {vendor} {name}: per message {large:,} vs {small:,} messages {growth:.2f}x "
            f"(at most {CHECK_GROWTH:g}x) {'ok' if passed else 'FAILED'}"
        )
    return ok


def header(peers: str) -> None:
    """The versions compared and the machine's load."""
    print(
        f"loom_nb {version('loom_nb')}, pydantic {version('pydantic')}; peers: {peers}; "
        f"Python {sys.version.split()[0]}; {os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.1f}; best of interleaved runs"
    )


def main(
    vendor: str = "OpenAI",
    build: Callable[[dict[str, Any]], tuple[dict[str, Callable[[], object]], list[str]]] = (
        contenders
    ),
    peers: str = "",
    *,
    check_only: bool = False,
) -> list[Row]:
    """Time every contender at each size and print the ratios; return the rows for
    ``run_all.py``. ``check_only`` (``--check``): growth only, and exit with its verdict."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch at import
    peers = peers or (
        f"pydantic-ai-slim {version('pydantic-ai-slim')}, litellm {version('litellm')}"
    )
    header(peers)
    if check_only:
        results, _ = measure(build, (SIZES[0], SIZES[-1]), 6)
        sys.exit(0 if check(vendor, results) else 1)
    # Quick settings leave out the largest size only: a run at 1,000 messages takes milliseconds,
    # and best of 5 let one short disturbance decide the row (1.72x in a run_all table where
    # four runs alone gave 3.13-3.20x).
    results, notes = measure(build, SIZES[:2] if quick() else SIZES, REPEATS)
    worst, rows = report(vendor, results, notes)
    print(f"worst ratio to a target: {worst:.2f} ({'met' if worst >= 1 else 'NOT met'})")
    return rows


if __name__ == "__main__":
    emit(main(check_only="--check" in sys.argv[1:]))
