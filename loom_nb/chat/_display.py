"""How a ``Chat`` shows itself: its one-line header, its repr, and the live views it keeps current.

``ChatDisplay`` is a part of ``Chat`` (``class Chat(ChatDisplay)``, itself on ``ChatRuns``), kept apart because
it is its own concern: what the notebook layer is handed to draw (``_display_arguments``, read by
``loom_nb.widgets._display``) and how every displayed view follows the turns that land after it
was shown. It draws nothing itself: the views are the notebook layer's, kept weakly.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from loom_nb.chat._cost import format_cost
from loom_nb.chat._money import tokens_text
from loom_nb.chat._runs import ChatRuns
from loom_nb.chat._views import LiveViews, tool_names
from loom_nb.content import Message

if TYPE_CHECKING:
    from decimal import Decimal

    from loom_nb.chat._views import TurnStats
    from loom_nb.content import Usage

__all__ = ["ChatDisplay"]

_log = logging.getLogger("loom_nb.chat")


class ChatDisplay(ChatRuns):
    """The header, repr and live views of a ``Chat`` (its base: ``class Chat(ChatDisplay)``)."""

    if TYPE_CHECKING:  # the Chat state this part reads (defined in _chat.py)
        _stats: TurnStats
        _views: LiveViews | None
        _stoppable: bool
        _caller: Any
        live_text: str

        @property
        def usage(self) -> Usage: ...
        @property
        def cost(self) -> Decimal | None: ...
        @property
        def busy(self) -> bool: ...
        def stop(self) -> bool: ...

    def header(self) -> str:
        """The one-line summary the views show: id, turns, tokens and cost."""
        count = len(self._turns)
        usage = self.usage
        parts = [
            f"chat {self.id}",
            f"{count} turn{'s' if count != 1 else ''}",
            tokens_text(usage),
            format_cost(self.cost),
        ]
        if self._halted is not None:
            parts.append("halted by a spending limit: raise it and chat.run() to resume")
        stopped = [t.index for t in self._turns if t.status == "stopped"]
        if stopped:
            parts.append("stopped: turn " + ", ".join(str(i) for i in stopped))
        if self._parked is not None:
            waiting = ", ".join(d["id"] for d in self.pending_approvals)
            parts.append(f"awaiting approval: {waiting}")
        return " · ".join(parts)

    def __repr__(self) -> str:
        return f"Chat({self.header()})"

    def _display_arguments(self) -> dict[str, Any]:
        """What the notebook layer shows for this chat (``transcript_bundle``'s arguments).

        ``on_view`` hands the chat each live view made, which it keeps (weakly) and updates.
        """
        return {
            "messages": self._history,
            "header": self.header(),
            "store": self._store,
            "principal": self._principal,
            "plain": repr(self),
            "system": self._system,
            "tools": tool_names(self._tools, self._toolsets),
            "approvals": self.approvals(),
            "stats": self._stats.of(self._turns, len(self._history)),
            "on_decision": self._on_view_decision if self._parked is not None else None,
            "on_view": self._attach_view,
        }

    def _attach_view(self, view: Any) -> None:
        """Keep a displayed view (weakly) so the chat updates it as turns land."""
        if self._views is None:
            self._views = LiveViews()
        self._views.add(view)

    def _refresh_views(self, messages: list[Message] | None = None) -> None:
        """Show the chat's state now in every displayed view (``messages``: the turn in flight)."""
        views = self._views.live() if self._views else []
        if not views:
            return
        from loom_nb.render._source import Transcript

        try:  # the state comes partly from the journal: a failure to read it must not fail a turn
            transcript = Transcript(
                list(self._history if messages is None else messages),
                self._system,
                tool_names(self._tools, self._toolsets),
                approvals=self.approvals(),
                stats=self._stats.of(self._turns, len(self._history)),
            )
            header = self.header() + (" · replying" if self.busy else "")
        except Exception:
            _log.exception("Chat: the displayed views could not be updated")
            return
        assert self._views is not None
        self._views.follow(
            views,
            transcript,
            header,
            on_decision=self._on_view_decision if self._parked is not None else None,
            on_stop=self.stop if self._stoppable and self._caller is not None else None,
            live_text=self.live_text,
            settled=not self.busy,
        )
