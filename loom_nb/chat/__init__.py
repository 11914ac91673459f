"""The conversation layer: ``Chat`` (journaled turns, agent runs, forks, usage and cost)."""

from loom_nb.chat._chat import Chat, ChatTurn

__all__ = ["Chat", "ChatTurn"]
