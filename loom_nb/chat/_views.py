"""The transcript views a displayed chat keeps up to date, and the per-turn stats they show.

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
from typing import Any

from loom_nb.chat._records import ChatTurn
from loom_nb.render._source import Transcript, money_stats

__all__ = ["LiveViews", "TurnStats", "tool_names"]

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
        for turn in turns[begin:]:
            usage = turn.usage
            stopped = turn.status == "stopped"
            if turn.kind == "chat" and (usage.input_tokens or usage.output_tokens or stopped):
                index = turn.start + 1
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


def tool_names(tools: Iterable[Any], toolsets: Iterable[Any]) -> list[str]:
    """The tools the views list: function tools, then each toolset as ``<server> (MCP)``."""
    names = [t.name for t in tools]
    names.extend(f"{getattr(t, 'name', type(t).__name__)} (MCP)" for t in toolsets)
    return names
