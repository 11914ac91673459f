"""The agent layer: tools, MCP toolsets, the agent loop, approvals and pair-aware compaction (ADR 0120 decision 9)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from loom_nb._lazy import exports

# name -> module that defines it, imported when the name is first read (loom_nb._lazy);
# a turn without MCP tools never imports the MCP client.
_EXPORTS: dict[str, str] = {
    "Compaction": "loom_nb.agent._compaction",
    "tool": "loom_nb.agent._decorator",
    "AgentResult": "loom_nb.agent._loop",
    "ToolCallRecord": "loom_nb.agent._loop",
    "agent_loop": "loom_nb.agent._loop",
    "MCPToolset": "loom_nb.agent._mcp",
    "MCPTool": "loom_nb.agent._mcp_results",
    "MediaResult": "loom_nb.agent._tools",
    "ToolDefinition": "loom_nb.agent._tools",
    "Toolset": "loom_nb.agent._tools",
    "media_result": "loom_nb.agent._tools",
}

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

__getattr__, __dir__ = exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # type checkers and IDEs see the real definitions
    from loom_nb.agent._compaction import Compaction
    from loom_nb.agent._decorator import tool
    from loom_nb.agent._loop import AgentResult, ToolCallRecord, agent_loop
    from loom_nb.agent._mcp import MCPToolset
    from loom_nb.agent._mcp_results import MCPTool
    from loom_nb.agent._tools import MediaResult, ToolDefinition, Toolset, media_result
