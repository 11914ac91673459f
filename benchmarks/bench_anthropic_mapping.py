"""Benchmark: mapping a transcript to the Anthropic Messages wire, against pydantic-ai and LiteLLM.

The same conversation and the same report as ``bench_openai_mapping.py`` (its module docstring
says what is printed and what ``--check`` asserts), for the Anthropic Messages API:

- loom_nb: ``anthropic_request_body`` on a guarded ``LlmRequest`` (the mapper), and
  ``AnthropicProvider.wire_body`` on the raw request dicts (validation + capability check +
  guard + map);
- pydantic-ai: what ``AnthropicModel.request()`` runs before the HTTP call: ``prepare_request``
  and ``_map_message`` on ``ModelRequest`` / ``ModelResponse`` history. It needs an ``anthropic``
  SDK its release was built against; with another one the run says why it was left out;
- LiteLLM: ``AnthropicConfig().transform_request`` on OpenAI-format message dicts (LiteLLM's
  canonical format) with its tool menu.

Run: ``.venv-bench/bin/python benchmarks/bench_anthropic_mapping.py`` (see bench_openai_mapping
for the ``bench`` venv).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

from _report import emit
from bench_openai_mapping import (
    PYDANTIC_AI,
    TOOL,
    litellm_messages,
    litellm_tools,
    loom_contenders,
    main,
    pydantic_ai_history,
    version,
)

from loom_nb.capabilities import Capabilities
from loom_nb.providers.anthropic import AnthropicProvider
from loom_nb.providers.anthropic_wire import anthropic_request_body

MODEL = "claude-sonnet-4-5"
MAX_TOKENS = 1024


def contenders(raw: dict[str, Any]) -> tuple[dict[str, Callable[[], object]], list[str]]:
    """The timed functions for one transcript, and notes on the peers left out."""
    provider = AnthropicProvider(
        MODEL, api_key="k", max_tokens=MAX_TOKENS, capabilities=Capabilities(image=["image/*"])
    )
    fns = loom_contenders(
        raw, lambda r: anthropic_request_body(r, model=MODEL, max_tokens=MAX_TOKENS), provider
    )
    notes: list[str] = []
    try:
        from anthropic import AsyncAnthropic
        from pydantic_ai.models import ModelRequestParameters
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider as PydanticAnthropic
        from pydantic_ai.tools import ToolDefinition
    except ImportError as exc:
        notes.append(f"pydantic-ai's Anthropic model not importable: {exc}")
    else:
        client = AsyncAnthropic(api_key="k")
        model = AnthropicModel(MODEL, provider=PydanticAnthropic(anthropic_client=client))
        history = pydantic_ai_history(raw)
        tool = ToolDefinition(
            name="lookup",
            description=TOOL["description"],
            parameters_json_schema=TOOL["input_schema"],
        )
        params = ModelRequestParameters(function_tools=[tool])
        loop = asyncio.new_event_loop()

        def pydantic_ai() -> object:
            settings, prepared = model.prepare_request(None, params)
            return loop.run_until_complete(model._map_message(history, prepared, settings or {}))

        try:
            pydantic_ai()
        except Exception as exc:  # a release built against another anthropic SDK
            notes.append(
                f"pydantic-ai {version('pydantic-ai-slim')} left out: its Anthropic mapping "
                f"fails with anthropic {version('anthropic')} ({type(exc).__name__}: {exc})"
            )
        else:
            fns[PYDANTIC_AI] = pydantic_ai
    try:
        from litellm.llms.anthropic.chat.transformation import AnthropicConfig
    except ImportError:
        notes.append("LiteLLM not installed (pip install -e '.[bench]')")
    else:
        config = AnthropicConfig()
        messages = litellm_messages(raw)
        tools = litellm_tools()
        fns["litellm"] = lambda: config.transform_request(
            model=MODEL,
            messages=messages,
            optional_params={"tools": tools, "max_tokens": MAX_TOKENS},
            litellm_params={},
            headers={},
        )
    return fns, notes


if __name__ == "__main__":
    emit(
        main(
            "Anthropic",
            contenders,
            f"pydantic-ai-slim {version('pydantic-ai-slim')} (anthropic {version('anthropic')}), "
            f"litellm {version('litellm')}",
            check_only="--check" in sys.argv[1:],
        )
    )
