"""The steps a chat journals besides its model turns and undos: seed, provider, run, stop, restart.

What each step holds is ``_log``'s (the layout); this is the chat's side: when it journals one
and how a replay serves it. A mark the chat journals of its own accord (``provider``,
``restart``) is served whenever the log holds one at the chat's next position, so re-running a
notebook replays it without the code asking for it, and a log written before marks existed
replays unchanged. Live, a ``provider`` mark is journaled before a turn whose provider is not
the one in force (the chat's start records the first; later marks each change), so a chat
resumed or re-run on another provider or model records which answered each turn.

``ChatMarks`` is a part of ``Chat`` (``class Chat(..., ChatMarks, ...)``); the state it shares is
declared below for the type checker.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from loom_nb.chat._cost import identity_of
from loom_nb.chat._log import Mark, started_identity
from loom_nb.content import Message
from loom_nb.errors import LoomError
from loom_nb.journal import Execution, Journal

if TYPE_CHECKING:
    from loom_nb.chat._records import Position, UndoMark
    from loom_nb.providers import LlmProvider
    from loom_nb.store import Principal

__all__ = ["ChatMarks"]

_log = logging.getLogger("loom_nb.chat._chat")  # the chat's own logger


def _same(value: Any) -> Any:
    return value


class ChatMarks:
    """Opening the chat's execution, and the seed, provider, run, stop and restart steps."""

    if TYPE_CHECKING:  # the Chat state this part uses (defined in _chat.py)
        id: str
        _provider: LlmProvider
        _principal: Principal
        _positions: list[Position | UndoMark | Mark]
        _execution: Execution | None
        _identity: dict[str, Any] | None
        _agreed: tuple[object, dict[str, Any], tuple[object, object]] | None
        _seed: list[Message] | None
        _runs: int

        @property
        def journal(self) -> Journal: ...

    def _open(self) -> Execution:
        """The chat's execution, opened on first use; a new one records the provider it starts on."""
        if self._execution is None:
            self._execution = self.journal.execution(
                self.id, principal=self._principal, meta={"chat": identity_of(self._provider)}
            )
        return self._execution

    def _in_force(self) -> dict[str, Any]:
        """The provider the chat's log answers with now: its start's, or its last mark's."""
        if self._identity is None:
            opened = self._execution
            start = opened.start if opened is not None else self.journal.start_of(self.id) or {}
            self._identity = started_identity(self.journal, start) or identity_of(self._provider)
        return self._identity

    async def _serve_restart(self, execution: Execution) -> None:
        """A chat started over (``restart=True``) opens with its restart mark: served here."""
        step_id = "#chat:0:restart"
        if not self._positions and execution.next_recorded == step_id:
            output = await execution.execute(step_id, _same, {})
            self._positions.append(Mark(step_id, "restart", output))

    async def _seed_step(self, execution: Execution) -> None:
        """Journal (or serve) the messages the chat was seeded with, as its first step."""
        seed, self._seed = self._seed, None
        if seed is None:
            return
        step_id = f"#chat:{len(self._positions)}:seed"
        await execution.execute(step_id, lambda _m: {"messages": len(seed)}, {"messages": seed})
        self._positions.append(Mark(step_id, "seed"))

    async def _provider_step(self, execution: Execution) -> dict[str, Any]:
        """Before a turn: serve the log's provider mark here, or journal one if the provider
        changed; return the provider identity the turn is answered with."""
        recorded = execution.next_recorded
        if recorded is not None:  # replaying: the log says which provider answered
            step_id = f"#chat:{len(self._positions)}:provider"
            if recorded == step_id:
                self._identity = await execution.execute(step_id, _same, {})
                self._positions.append(Mark(step_id, "provider", self._identity))
            return self._in_force()
        provider = self._provider
        # The identity in force was found equal to this provider's on an earlier turn, and
        # neither changed since (the same provider object, model and URL, the same identity in
        # force): nothing to compare again. A fallback's members are compared every turn.
        seen = (getattr(provider, "model", None), getattr(provider, "base_url", None))
        agreed = self._agreed
        if (
            agreed is not None
            and agreed[0] is provider
            and agreed[1] is self._identity
            and agreed[2] == seen
        ):
            return agreed[1]
        current = identity_of(provider)
        if self._in_force() != current:
            step_id = f"#chat:{len(self._positions)}:provider"
            self._identity = await execution.execute(step_id, lambda _i: current, {})
            self._positions.append(Mark(step_id, "provider", self._identity))
        identity = self._in_force()
        if "members" not in current:
            self._agreed = (provider, identity, seen)
        return identity

    async def _run_step(
        self, execution: Execution, message: Message, max_turns: int
    ) -> tuple[str, int]:
        """A ``chat.run``'s step: the run's execution id (new live, recorded on replay) and position.

        A log written before runs took a chat position has another step here: the run goes on
        there under its id as it was then (``<id>/run-<n>``, counted), journaling nothing.
        """
        position = len(self._positions)
        step_id = f"#chat:{position}:run"
        number = self._runs
        recorded = execution.next_recorded
        if recorded is not None and recorded != step_id:
            self._runs += 1
            return f"{self.id}/run-{number}", position
        while recorded is None and self.journal.start_of(f"{self.id}/run-{number}") is not None:
            number += 1  # live: a chat started over keeps its old runs under their ids
        chosen = f"{self.id}/run-{number}"
        self._runs = number + 1
        output = await execution.execute(
            step_id, lambda _m: {"max_turns": max_turns, "run_id": chosen}, {"message": message}
        )
        run_id = output.get("run_id") if isinstance(output, dict) else None
        run_id = run_id if isinstance(run_id, str) else chosen
        self._positions.append(Mark(step_id, "run", run_id))
        return run_id, position

    async def _stop_step(self, execution: Execution, text: str) -> None:
        """After a stopped turn (journaled as failed), journal its partial text for a resume.

        The stop itself has landed: a journal that refuses the step (another writer took the
        chat meanwhile) costs the resume that text, never the turn, and is logged.
        """
        step_id = f"#chat:{len(self._positions)}:stop"
        try:
            await execution.execute(step_id, _same, {"text": text})
        except LoomError:
            _log.warning("Chat: a stopped turn's text could not be journaled", exc_info=True)
            return
        self._positions.append(Mark(step_id, "stop"))
