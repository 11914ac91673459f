"""Model providers: Anthropic, OpenAI (and compatible servers), Gemini, Scripted; streaming; conformance kit."""

from loom_nb.providers._base import LlmProvider, LlmStreamChunk, ToolDelta, collect_stream

__all__ = ["LlmProvider", "LlmStreamChunk", "ToolDelta", "collect_stream"]
