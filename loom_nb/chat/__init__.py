"""The conversation layer: ``Chat`` (journaled turns, agent runs, forks, usage and cost, export)."""

from loom_nb.chat._chat import Chat, ChatTurn

__all__ = ["Chat", "ChatTurn"]
