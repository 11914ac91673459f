"""The agent layer: tools, the agent loop, approvals and pair-aware compaction (ADR 0120 decision 9)."""

from loom_nb.agent._compaction import Compaction
from loom_nb.agent._decorator import tool
from loom_nb.agent._loop import AgentResult, ToolCallRecord, agent_loop
from loom_nb.agent._tools import MediaResult, ToolDefinition, media_result

__all__ = [
    "AgentResult",
    "Compaction",
    "MediaResult",
    "ToolCallRecord",
    "ToolDefinition",
    "agent_loop",
    "media_result",
    "tool",
]
