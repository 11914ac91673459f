"""The transcript views a displayed chat keeps up to date, the per-turn stats they show, and
the chat's header and repr (``ChatDisplay``).

``display(chat)`` (or ``chat`` last in a cell) shows the transcript as a TranscriptView that stays
attached: the chat keeps its views in a ``WeakSet`` (a chat never keeps a closed view alive) and
updates every one of them as a turn lands, a run parks or resumes (the view's own Approve /
Decline included), a turn is undone, and, while a reply streams, with its text so far; the
header's turns, tokens and cost follow. Once no reply is in flight, a view displayed with a
display id (the notebook layer's display of a chat) also republishes its output's static
``text/html`` (what a saved notebook shows without a kernel), so the saved output is the
transcript as it last stood, not as it was first shown. Without ipywidgets the display is that
static HTML alone, and there is no view to keep.

The views are duck-typed (``_follow``, ``on_decision``, ``on_stop``, ``live_text``, ``comm``):
the notebook layer makes them, this layer only updates them.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from loom_nb.chat._cost import format_cost
from loom_nb.chat._money import tokens_text
from loom_nb.chat._records import ChatTurn
from loom_nb.render._source import Transcript, money_stats

if TYPE_CHECKING:
    from decimal import Decimal

    from loom_nb.agent import ToolDefinition, Toolset
    from loom_nb.content import Message, Usage
    from loom_nb.store import ContentStore, Principal
    from loom_nb.taint import Untrusted

__all__ = ["ChatDisplay", "LiveViews", "TurnStats", "tool_names"]

_log = logging.getLogger("loom_nb.chat._chat")  # the chat's own logger: its warnings name it


class LiveViews:
    """The displayed views of one chat, held weakly; a closed or failing view is dropped."""

    def __init__(self) -> None:
        self._views: weakref.WeakSet[Any] = weakref.WeakSet()

    def __len__(self) -> int:
        return len(self._views)

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._views))

    def add(self, view: Any) -> None:
        """Keep ``view`` (weakly) to update it as turns land."""
        self._views.add(view)

    def live(self) -> list[Any]:
        """The views still open (a closed view is dropped, never updated again)."""
        views = []
        for view in list(self._views):
            if getattr(view, "comm", None) is None:
                self._views.discard(view)
            else:
                views.append(view)
        return views

    def follow(
        self,
        views: Sequence[Any],
        transcript: Transcript,
        header: str,
        *,
        on_decision: Callable[[str, bool], Any] | None,
        on_stop: Callable[[], bool] | None,
        live_text: str,
        settled: bool = True,
    ) -> None:
        """Show ``transcript`` under ``header`` in each of ``views``, with the chat's hooks.

        ``settled`` (no reply in flight): each view also republishes its output's static HTML
        (``_publish_static``, when it has one), so a saved notebook records what the view shows.
        """
        for view in views:
            try:
                view._follow(transcript, header)
                view.on_decision = on_decision
                view.on_stop = on_stop
                view.live_text = live_text
                publish = getattr(view, "_publish_static", None) if settled else None
                if callable(publish):
                    publish()
            except Exception:  # a view that cannot draw must not fail the turn, which is journaled
                self.drop(view, "a displayed view could not be updated")

    def stream(self, live_text: str) -> None:
        """Show the text streamed so far in every open view."""
        for view in self.live():
            try:
                view.live_text = live_text
            except Exception:  # as in follow: the stream goes on without the view
                self.drop(view, "a displayed view could not show the streamed text")

    def drop(self, view: Any, what: str) -> None:
        """Stop updating a view that failed (a closed comm, a broken widget), with a warning."""
        self._views.discard(view)
        _log.warning(
            "Chat: %s, so it is no longer updated (display the chat again for a live view); "
            "the turn goes on.",
            what,
            exc_info=True,
        )


class TurnStats:
    """Tokens per assistant turn of a plain chat turn (message index -> counts, cached tokens and
    who answered included; a stopped turn says so), as the views show them.

    Read-only: the same dict is returned until the turns change, and a chat that only grew adds
    the new turns' entries to a copy of the last one (a long chat's every update reads them).
    """

    def __init__(self) -> None:
        self._memo: tuple[tuple[ChatTurn, ...], int, dict[int, Any], bool] | None = None

    def of(self, turns: Sequence[ChatTurn], length: int) -> dict[int, dict[str, Any]]:
        """The stats of ``turns`` over a history of ``length`` messages."""
        turns = tuple(turns)
        memo = self._memo
        if memo is not None and memo[0] == turns and memo[1] == length:
            return memo[2]
        begin, out = 0, {}
        if (
            memo is not None
            and memo[3]  # every entry of the last one was drawn: none waits on the history
            and len(memo[0]) <= len(turns)
            and turns[: len(memo[0])] == memo[0]
            and length >= memo[1]
        ):
            begin, out = len(memo[0]), dict(memo[2])
        whole = True
        for number in range(begin, len(turns)):
            turn, usage = turns[number], turns[number].usage
            stopped = turn.status == "stopped"
            if turn.kind == "chat" and (usage.input_tokens or usage.output_tokens or stopped):
                index = turn.start + 1
                if number + 1 < len(turns) and index >= turns[number + 1].start:
                    continue  # stopped before any text: the message there is the next turn's
                if index < length:
                    out[index] = {
                        "input_tokens": usage.input_tokens,
                        "output_tokens": usage.output_tokens,
                        "latency_s": None,
                        **money_stats(turn.response),
                    }
                    if stopped:
                        out[index]["status"] = "stopped"
                else:
                    whole = False
        self._memo = (turns, length, out, whole)
        return out


class ChatDisplay:
    """The header, repr and live views of a ``Chat`` (``class Chat(ChatDisplay, ...)``)."""

    if TYPE_CHECKING:  # the Chat state this part reads (defined in _chat.py)
        id: str
        _system: str | Untrusted | None
        _tools: list[ToolDefinition]
        _toolsets: list[Toolset]
        _store: ContentStore | None
        _principal: Principal
        _history: list[Message]
        _turns: list[ChatTurn]
        _halted: Any
        _stats: TurnStats
        _views: LiveViews | None
        _caller: Any
        _stoppable: bool
        _held: bool
        live_text: str

        @property
        def usage(self) -> Usage: ...
        @property
        def cost(self) -> Decimal | None: ...
        @property
        def busy(self) -> bool: ...
        @property
        def pending_approvals(self) -> list[dict[str, Any]]: ...
        def approvals(self) -> dict[str, dict[str, Any]]: ...
        def stop(self) -> bool: ...
        async def _on_view_decision(self, call_id: str, approved: bool) -> None: ...

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
        waiting = ", ".join(d["id"] for d in self.pending_approvals)  # none while a run is live
        if waiting:
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
            "on_decision": self._on_view_decision if self.pending_approvals else None,
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
        try:  # the state comes partly from the journal: a failure to read it must not fail a turn
            transcript = Transcript(
                list(self._history if messages is None else messages),
                self._system,
                tool_names(self._tools, self._toolsets),
                approvals=self.approvals(),
                stats=self._stats.of(self._turns, len(self._history)),
            )
            replying = " · replying" if self.busy else ""
            if self.busy and self._held:  # a cell waits on chat.sync: its kernel hears no Stop
                replying += " (interrupt the kernel to stop)"
            header = self.header() + replying
        except Exception:
            _log.exception("Chat: the displayed views could not be updated")
            return
        assert self._views is not None
        self._views.follow(
            views,
            transcript,
            header,
            on_decision=self._on_view_decision if self.pending_approvals else None,
            on_stop=self.stop
            if self._stoppable and self._caller is not None and not self._held
            else None,
            live_text=self.live_text,
            settled=not self.busy,
        )


def tool_names(tools: Iterable[Any], toolsets: Iterable[Any]) -> list[str]:
    """The tools the views list: function tools, then each toolset as ``<server> (MCP)``."""
    names = [t.name for t in tools]
    names.extend(f"{getattr(t, 'name', type(t).__name__)} (MCP)" for t in toolsets)
    return names
