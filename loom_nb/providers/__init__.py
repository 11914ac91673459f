"""Model providers: Anthropic, OpenAI (Chat Completions and Responses, and compatible servers), Gemini, Scripted, Fallback; streaming; conformance kit."""

from loom_nb.providers._base import LlmProvider, LlmStreamChunk, ToolDelta, collect_stream
from loom_nb.providers.anthropic import AnthropicProvider
from loom_nb.providers.conformance import ProviderUnderTest, run_llm_provider_conformance
from loom_nb.providers.fallback import FallbackProvider
from loom_nb.providers.gemini import GeminiProvider
from loom_nb.providers.openai import OpenAIProvider
from loom_nb.providers.openai_responses import OpenAIResponsesProvider
from loom_nb.providers.scripted import ScriptedProvider

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
