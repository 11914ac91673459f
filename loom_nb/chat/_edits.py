"""Undo and fork: a conversation's course changed, in the log as in memory.

Undo. ``chat.undo()`` drops the last turn from the history and is journaled itself: the step
``#chat:<k>:undo`` at the chat's next position, whose input names the turn dropped. The log
keeps the undone turn (it is append-only) and says it was undone, so re-running the same code
serves the undo from the log like any turn, while code that no longer undoes there, or undoes
another turn, diverges (``ReplayDivergenceError``) instead of rebuilding another conversation;
a fork's copied log carries the undo too.

Fork. ``chat.fork(turn)`` is ``execution.fork(position, "<id>/fork-<n>")``: a new execution
holding the chat's log before that turn. The child takes that copied log as replayed (it seeks
past it) and goes on live; an undo made on it before its first step is journaled after the
copied log. Re-running a notebook forks again, reopening the fork made last time, which then
replays like any chat; a ``<id>/fork-<n>`` holding another log (forked before a restart) is
passed over for the next number.

``ChatEdits`` is a part of ``Chat`` (``class Chat(..., ChatEdits, ...)``); the state it shares is
declared below for the type checker.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from loom_nb.chat._log import LogStep, Mark, fold
from loom_nb.chat._records import ChatTurn, Parked, Position, UndoMark, settled, undo_entry, undone
from loom_nb.content import Message
from loom_nb.errors import ConfigurationError, JournalError
from loom_nb.journal import Execution, Journal

if TYPE_CHECKING:
    from loom_nb.chat._chat import Chat
    from loom_nb.spending import Limits
    from loom_nb.store import Principal

__all__ = ["ChatEdits"]


class ChatEdits:
    """``chat.undo()`` and ``chat.fork(turn)``."""

    if TYPE_CHECKING:  # the Chat state and steps this part uses (defined in _chat.py)
        id: str
        _principal: Principal
        _history: list[Message]
        _turns: list[ChatTurn]
        _positions: list[Position | UndoMark | Mark]
        _replay_prefix: list[Position | UndoMark | Mark]
        _shared: int
        _execution: Execution | None
        _identity: dict[str, Any] | None
        _seed: list[Message] | None
        _parked: Parked | None
        _halted: Parked | None
        _limits: Limits | None
        _runs: int
        _forks: int

        @property
        def journal(self) -> Journal: ...
        def _like(self, id: str) -> Chat: ...
        def _open(self) -> Execution: ...
        def _check_idle(self, *, allow_parked: bool = False) -> None: ...
        def _refresh_views(self, messages: list[Message] | None = None) -> None: ...

    def undo(self) -> list[Message]:
        """Drop the last turn from the history and return its messages.

        The undo is journaled (step ``#chat:<k>:undo``), so a replay of the chat undoes the same
        turn at the same point; the log keeps the undone turn.
        """
        self._check_idle(allow_parked=True)
        if not self._turns:
            raise ConfigurationError("there is no turn to undo.", code="nothing_to_undo")
        turn = self._turns[-1]
        position = len(self._positions) + len(self._replay_prefix)
        mark = UndoMark(f"#chat:{position}:undo", undo_entry(turn))
        if self._replay_prefix:  # a fork that has not replayed its shared log: journaled after it
            self._replay_prefix.append(mark)
        else:
            settled(self._undo_step(self._open(), mark), "chat.undo()")
            self._positions.append(mark)
        self._turns.pop()
        removed = self._history[turn.start :]
        del self._history[turn.start :]
        if self._parked is not None and self._parked.turn == turn.index:
            self._parked = None
        if self._halted is not None and self._halted.turn == turn.index:
            self._halted = None
        self._refresh_views()
        return removed

    def fork(self, turn: int, *, id: str | None = None) -> Chat:
        """A new chat sharing this one's history and log before ``turn``, to go on differently.

        ``chat.fork(3)`` holds turns 0-2; its next message is its turn 3. It is a new execution
        (``<id>/fork-<n>`` unless ``id`` is given) whose log starts with this chat's log up to
        that turn, so it replays like any chat.
        """
        count = len(self._turns)
        if isinstance(turn, bool) or not isinstance(turn, int) or not 0 <= turn <= count:
            raise ConfigurationError(
                f"turn is a turn number from 0 to {count}, not {turn!r}.", code="invalid_argument"
            )
        self._check_idle(allow_parked=True)
        cut = self._turns[turn] if turn < count else None
        positions = [*self._replay_prefix, *self._positions]
        position = cut.position if cut is not None else len(positions)
        start = cut.start if cut is not None else len(self._history)
        new_id = id if id is not None else f"{self.id}/fork-{self._forks}"
        if not isinstance(new_id, str) or not new_id.strip():
            raise ConfigurationError(
                f"id is a non-empty string, not {new_id!r}.", code="invalid_argument"
            )
        forked, new_id = self._fork_execution(position, new_id, chosen=id is not None)
        child = self._like(new_id)
        self._forks += 1
        child._history = self._history[:start]
        child._turns = [replace(t) for t in self._turns[:turn]]
        child._execution = forked
        child._replay_prefix = positions[:position]
        child._shared = position if forked is not None else 0
        marks = [p for p in child._replay_prefix if isinstance(p, Mark) and p.kind == "provider"]
        child._identity = dict(marks[-1].data) if marks else self._identity
        if forked is None and self._seed is not None:
            child._seed = self._seed  # nothing journaled yet: the child journals the seed
        child._runs = self._runs
        return child

    def _fork_execution(
        self, position: int, new_id: str, *, chosen: bool
    ) -> tuple[Execution | None, str]:
        """``execution.fork(position, new_id)``: the new execution holds the log before the turn.

        Re-running a notebook forks again: the fork made last time is reopened and replayed. A
        ``<id>/fork-<n>`` that holds another log (a fork of the turns a restart archived) is
        passed over for the next number; an id the caller ``chosen`` that holds another log is
        refused (``execution_exists``): its turns are not this chat's.
        With nothing journaled yet there is nothing to share (None: the child opens its own).
        """
        if self._execution is None or position == 0:
            return None, new_id
        while True:
            try:
                return self._execution.fork(position, new_id), new_id
            except JournalError as exc:
                if exc.code != "execution_exists":
                    raise
            if self._forked_here(new_id, position):
                return self.journal.execution(new_id, principal=self._principal), new_id
            if chosen:
                raise ConfigurationError(
                    f"the journal already holds an execution {new_id!r} that is not a fork of "
                    f"chat {self.id!r} before this turn (another chat, or a fork of this chat's "
                    "log as it was before an edit): forking into it would write this chat's "
                    "turns into that log. Pass another id, or none (`<chat id>/fork-<n>` is "
                    "chosen for you).",
                    code="execution_exists",
                )
            self._forks += 1
            new_id = f"{self.id}/fork-{self._forks}"

    def _forked_here(self, fork_id: str, position: int) -> bool:
        """Whether ``fork_id`` was forked from this chat's log as it is now, before ``position``."""
        source = (self.journal.start_of(fork_id) or {}).get("forked_from")
        where = (
            (source.get("execution_id"), source.get("position"))
            if isinstance(source, dict)
            else None
        )
        if where != (self.id, position):
            return False
        ours, theirs = fold(self.journal, self.id).steps, fold(self.journal, fork_id).steps
        return [_key(s) for s in ours[:position]] == [_key(s) for s in theirs[:position]]

    async def _undo_step(self, execution: Execution, mark: UndoMark) -> None:
        """Journal (or, replayed, serve) the undo step; its function is synchronous."""
        await execution.execute(mark.step_id, undone, mark.entry)

    async def _replay(self, execution: Execution, item: Position | UndoMark | Mark) -> None:
        """Journal an undo made on a fork before it took its copied log (it goes after that log)."""
        if not isinstance(item, UndoMark):  # the copied log holds everything else
            raise ConfigurationError(
                f"{item.step_id} is not in this fork's log; fork the chat again.",
                code="fork_out_of_log",
            )
        await self._undo_step(execution, item)
        self._positions.append(item)


def _key(step: LogStep) -> tuple[str, str, Any]:
    """What identifies a step of a log: its id, state and input's hash."""
    return step.step_id, step.state, step.payload.get("input_hash")
