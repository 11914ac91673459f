"""The conversation layer: ``Chat`` (journaled turns, agent runs, forks, resume, usage and cost, export, maps)."""

from loom_nb.chat._catalog import ChatSummary, chats
from loom_nb.chat._chat import Chat, ChatTurn
from loom_nb.chat._map_progress import MapProgress
from loom_nb.chat._map_result import MapResult
from loom_nb.chat._sync import NotAwaitedWarning

__all__ = [
    "Chat",
    "ChatSummary",
    "ChatTurn",
    "MapProgress",
    "MapResult",
    "NotAwaitedWarning",
    "chats",
]
