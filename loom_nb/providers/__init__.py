"""Model providers: Anthropic, OpenAI (Chat Completions and Responses, and compatible servers), Gemini, Scripted, Fallback; streaming; conformance kit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from loom_nb._lazy import exports

# name -> module that defines it, imported when the name is first read (loom_nb._lazy);
# a turn imports its own provider's modules only.
_EXPORTS: dict[str, str] = {
    "LlmProvider": "loom_nb.providers._base",
    "LlmStreamChunk": "loom_nb.providers._base",
    "ToolDelta": "loom_nb.providers._base",
    "collect_stream": "loom_nb.providers._base",
    "AnthropicProvider": "loom_nb.providers.anthropic",
    "ProviderUnderTest": "loom_nb.providers.conformance",
    "run_llm_provider_conformance": "loom_nb.providers.conformance",
    "FallbackProvider": "loom_nb.providers.fallback",
    "GeminiProvider": "loom_nb.providers.gemini",
    "OpenAIProvider": "loom_nb.providers.openai",
    "OpenAIResponsesProvider": "loom_nb.providers.openai_responses",
    "ScriptedProvider": "loom_nb.providers.scripted",
}

__all__ = [
    "AnthropicProvider",
    "FallbackProvider",
    "GeminiProvider",
    "LlmProvider",
    "LlmStreamChunk",
    "OpenAIProvider",
    "OpenAIResponsesProvider",
    "ProviderUnderTest",
    "ScriptedProvider",
    "ToolDelta",
    "collect_stream",
    "run_llm_provider_conformance",
]

__getattr__, __dir__ = exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # type checkers and IDEs see the real definitions
    from loom_nb.providers._base import LlmProvider, LlmStreamChunk, ToolDelta, collect_stream
    from loom_nb.providers.anthropic import AnthropicProvider
    from loom_nb.providers.conformance import ProviderUnderTest, run_llm_provider_conformance
    from loom_nb.providers.fallback import FallbackProvider
    from loom_nb.providers.gemini import GeminiProvider
    from loom_nb.providers.openai import OpenAIProvider
    from loom_nb.providers.openai_responses import OpenAIResponsesProvider
    from loom_nb.providers.scripted import ScriptedProvider
