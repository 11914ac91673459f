"""The agent layer: tools, MCP toolsets, the agent loop, approvals and pair-aware compaction (ADR 0120 decision 9)."""

from loom_nb.agent._compaction import Compaction
from loom_nb.agent._decorator import tool
from loom_nb.agent._loop import AgentResult, ToolCallRecord, agent_loop
from loom_nb.agent._mcp import MCPToolset
from loom_nb.agent._mcp_results import MCPTool
from loom_nb.agent._tools import MediaResult, ToolDefinition, Toolset, media_result

__all__ = [
    "AgentResult",
    "Compaction",
    "MCPTool",
    "MCPToolset",
    "MediaResult",
    "ToolCallRecord",
    "ToolDefinition",
    "Toolset",
    "agent_loop",
    "media_result",
    "tool",
]
