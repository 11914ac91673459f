"""The conversation layer: ``Chat`` (journaled turns, agent runs, forks, resume, usage and cost, export, maps, comparisons)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from loom_nb._lazy import exports

# name -> module that defines it, imported when the name is first read (loom_nb._lazy);
# a Chat turn imports neither comparisons nor the grid they render.
_EXPORTS: dict[str, str] = {
    "ChatSummary": "loom_nb.chat._catalog",
    "chats": "loom_nb.chat._catalog",
    "Chat": "loom_nb.chat._chat",
    "ChatTurn": "loom_nb.chat._chat",
    "compare": "loom_nb.chat._compare",
    "compare_sync": "loom_nb.chat._compare",
    "Comparison": "loom_nb.chat._comparison",
    "MapProgress": "loom_nb.chat._map_progress",
    "MapResult": "loom_nb.chat._map_result",
    "NotAwaitedWarning": "loom_nb.chat._sync",
}

__all__ = [
    "Chat",
    "ChatSummary",
    "ChatTurn",
    "Comparison",
    "MapProgress",
    "MapResult",
    "NotAwaitedWarning",
    "chats",
    "compare",
    "compare_sync",
]

__getattr__, __dir__ = exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # type checkers and IDEs see the real definitions
    from loom_nb.chat._catalog import ChatSummary, chats
    from loom_nb.chat._chat import Chat, ChatTurn
    from loom_nb.chat._compare import compare, compare_sync
    from loom_nb.chat._comparison import Comparison
    from loom_nb.chat._map_progress import MapProgress
    from loom_nb.chat._map_result import MapResult
    from loom_nb.chat._sync import NotAwaitedWarning
