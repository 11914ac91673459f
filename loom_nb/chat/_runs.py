"""``chat.run``: the agent loop in a chat, its parking for approvals, and the decisions.

``chat.run`` drives ``agent_loop`` in its own execution ``<id>/run-<n>`` (the loop owns an
execution from position 0) on the chat's provider, tools, store and journal; the chat's own log
holds a ``run`` step naming that execution (``_marks``), so the run keeps its place among the
turns for a fork, a replay and ``Chat.resume``. A call to a tool that
``requires_approval`` with no decision parks the run; ``chat.approve`` / ``chat.decide`` (or the
view's Approve / Decline) give decisions, checked here, and resume it, in this kernel or, after a
restart, by re-running the cells. What was decided is read back from the journal
(``run_decisions``), so a re-run notebook shows the same states; the chat remembers only who
decided each call.

Spending limits (issue 29). Each run's model calls are checked against a ``Budget`` with the
chat's limits (what the chat's earlier turns spent) and the run's own (``chat.run(limits=)``, from
zero). A run a limit stops is kept as a ``halted`` turn with what it spent; ``chat.run()`` with no
text resumes it once the limit is raised, its earlier steps served from the journal.

``ChatRuns`` is a part of ``Chat`` (``class Chat(ChatRuns)``), kept apart because it is its own
concern; the state it shares with the rest of the chat is declared below for the type checker.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from loom_nb.agent import AgentResult, ToolDefinition, Toolset, agent_loop
from loom_nb.chat._attach import user_message
from loom_nb.chat._cost import answered, identity_of, responses_usage, run_responses
from loom_nb.chat._log import halt_run
from loom_nb.chat._money import check_limits, make_budget
from loom_nb.chat._records import ChatTurn, Parked, chat_divergence, print_delta
from loom_nb.chat._sync import Pending
from loom_nb.content import Message
from loom_nb.errors import BudgetExceededError, ConfigurationError, ReplayDivergenceError
from loom_nb.journal import Execution, Journal
from loom_nb.providers._base import TextCallback
from loom_nb.settings import ModelSettings
from loom_nb.spending import Limits
from loom_nb.store import ContentStore, Principal, StoreResolver
from loom_nb.taint import Untrusted

if TYPE_CHECKING:
    from loom_nb.chat._log import Mark
    from loom_nb.chat._records import Position, UndoMark
    from loom_nb.providers import LlmProvider

__all__ = ["ChatRuns", "check_decision", "decision_table", "run_decisions", "state_of"]

_log = logging.getLogger("loom_nb.chat._chat")  # the chat's own logger


class ChatRuns:
    """``chat.run``, ``approve``, ``decide``, ``decline`` and the approval states of a ``Chat``."""

    if TYPE_CHECKING:  # the Chat state and steps this part uses (defined in _chat.py)
        id: str
        _provider: LlmProvider
        _system: str | Untrusted | None
        _tools: list[ToolDefinition]
        _toolsets: list[Toolset]
        _store: ContentStore | None
        _principal: Principal
        _stream: bool
        _on_text: TextCallback | None
        _history: list[Message]
        _turns: list[ChatTurn]
        _positions: list[Position | UndoMark | Mark]
        _runs: int
        _parked: Parked | None
        _halted: Parked | None
        _limits: Limits | None
        _settings: ModelSettings | None
        _run_limits: Limits | None
        _identity: dict[str, Any] | None
        _recorded_runs: set[str]
        _decisions: dict[str, dict[str, Any]]
        _deciders: dict[str, str]
        _decided: dict[str, dict[str, Any]]

        @property
        def journal(self) -> Journal: ...
        @property
        def store(self) -> ContentStore: ...
        @property
        def _tenant(self) -> str: ...
        def _check_idle(self, *, allow_parked: bool = False) -> None: ...
        async def _ready(self) -> Execution: ...
        async def _provider_step(self, execution: Execution) -> dict[str, Any]: ...
        async def _run_step(
            self, execution: Execution, message: Message, max_turns: int
        ) -> tuple[str, int]: ...
        def _enter(self, *, stoppable: bool = False) -> None: ...
        def _leave(self) -> None: ...
        def _delta(self, sink: TextCallback | None) -> TextCallback: ...
        def _refresh_views(self, messages: list[Message] | None = None) -> None: ...
        def _blocking(self, call: Pending[AgentResult]) -> AgentResult: ...
        @property
        def busy(self) -> bool: ...

    @property
    def pending_approvals(self) -> list[dict[str, Any]]:
        """The tool calls a parked run waits on (``[]`` when nothing is parked, or while the run
        is live again: a resumed run waits on nothing)."""
        if self._parked is None or self.busy or not self._turns or self._turns[-1].result is None:
            return []
        return list(self._turns[-1].result.pending_approvals)

    def run(
        self,
        text: str | Untrusted | None = None,
        *attachments: Any,
        max_turns: int = 10,
        approve: Any = None,
        stream: bool | None = None,
        on_text: TextCallback | None = None,
        limits: Limits | None = None,
    ) -> Pending[AgentResult]:
        """Run the agent loop on ``text``: the model calls the chat's tools until it answers.

        Calls to tools with ``requires_approval`` are decided by ``approve`` (a callable of the
        call digest or a mapping of call id → decision, as for ``agent_loop``); with no decision
        the run parks (``result.status == "parked"``, ``chat.pending_approvals``) and is
        resumed by ``await chat.approve(...)`` / ``chat.decline(...)`` or ``chat.run(approve=...)``
        with no text. The new messages join ``chat.history`` when the run ends. Plain code uses
        ``chat.run_sync(...)``.

        ``limits`` bounds what this run may spend (the chat's own ``limits`` still apply). A model
        call that would start with a limit reached raises ``BudgetExceededError`` before any I/O;
        the run's turn is marked ``halted`` and ``chat.run(limits=...)`` with no text resumes it
        where it stopped (earlier steps served from the journal) once the limit is raised.
        """
        run = self._run(text, attachments, max_turns, approve, stream, on_text, limits)
        return Pending(run, "chat.run(...)", "chat.run_sync(...)")

    async def _run(
        self,
        text: str | Untrusted | None,
        attachments: tuple[Any, ...],
        max_turns: int,
        approve: Any,
        stream: bool | None,
        on_text: TextCallback | None,
        limits: Limits | None,
    ) -> AgentResult:
        run_limits = check_limits(limits, "chat.run()")
        if self._halted is not None and text is None and not attachments:
            self._check_idle()
            self._parked, self._halted = self._halted, None
            if limits is not None:
                self._run_limits = run_limits
            return await self._drive(approve, stream=stream, on_text=on_text)
        if self._parked is not None:
            if text is not None or attachments:
                raise ConfigurationError(
                    "a run is parked waiting for approvals; decide them with "
                    "`await chat.approve(...)` / `chat.decline(...)`, or `chat.undo()` to drop it.",
                    code="chat_parked",
                )
            return await self._drive(approve, stream=stream, on_text=on_text)
        self._check_idle()
        if text is None:
            raise ConfigurationError(
                "chat.run needs a message (nothing is parked to resume).", code="empty_prompt"
            )
        message = user_message(text, attachments, self._history, lambda: self.store, self._tenant)
        try:
            execution = await self._ready()
            identity = await self._provider_step(execution)
            run_id, position = await self._run_step(execution, message, max_turns)
        except ReplayDivergenceError as exc:
            raise chat_divergence(exc, self.id) from exc
        index = len(self._turns)
        messages = [*self._history, message]
        self._halted, self._run_limits = None, run_limits
        self._parked = Parked(run_id, messages, max_turns, index, position, identity)
        try:
            return await self._drive(approve, stream=stream, on_text=on_text)
        except BaseException:
            if self._parked is not None and len(self._turns) == index:
                self._parked = None  # nothing ran far enough to park: the run is just failed
            raise

    def approve(
        self, decisions: bool | Mapping[str, Any] = True, *, reason: str | None = None
    ) -> Pending[AgentResult]:
        """Decide the parked run's calls and resume it: ``True`` / ``False`` for all, or a mapping.

        A mapping is call id → ``True`` / ``False`` / ``{"approved": bool, "reason": str}``; calls
        it leaves out stay pending (the run parks again). Re-running a notebook whose run was
        already resumed in the log returns that run's result (the log decided it).
        """
        return Pending(
            self._approve(decisions, reason), "chat.approve(...)", "chat.approve_sync(...)"
        )

    def approve_sync(
        self, decisions: bool | Mapping[str, Any] = True, *, reason: str | None = None
    ) -> AgentResult:
        """``chat.approve(...)`` from synchronous code (as ``chat.sync``: an interrupt stops the
        run, which settles before the interrupt is raised)."""
        return self._blocking(self.approve(decisions, reason=reason))

    async def _approve(
        self, decisions: bool | Mapping[str, Any], reason: str | None
    ) -> AgentResult:
        if self._parked is None:
            last = self._turns[-1] if self._turns else None
            if last is not None and last.kind == "run" and last.result is not None:
                run = self.journal.execution(last.run_id or "", principal=self._principal)
                if run.resumed_payload is not None:
                    return last.result
            raise ConfigurationError(
                "no run is waiting for approval; `await chat.run(...)` parks one when a tool "
                "needs approval.",
                code="nothing_parked",
            )
        pending = [str(d["id"]) for d in self.pending_approvals]
        table = decision_table(decisions, reason, pending)
        for call_id in table:
            self._deciders.setdefault(str(call_id), "chat.approve")
        return await self._drive(table)

    async def decide(
        self, call_id: str, approved: bool, *, reason: str | None = None, by: str = "chat.decide"
    ) -> AgentResult | None:
        """Decide one pending call (what the view's Approve / Decline buttons call).

        Decisions are collected until every call the parked run waits on has one; then the run
        resumes with all of them and its result is returned (None until then).
        """
        pending = {d["id"] for d in self.pending_approvals}
        check_decision(call_id, approved, reason, pending)
        self._decisions[call_id] = {"approved": approved, "reason": reason}
        self._deciders[call_id] = by
        if not pending <= set(self._decisions):
            return None
        decisions, self._decisions = dict(self._decisions), {}
        return await self._drive(decisions)

    def decline(self, reason: str | None = None) -> Pending[AgentResult]:
        """Decline every call the parked run waits on (the model is told, with ``reason``)."""
        return Pending(
            self._approve(False, reason), "chat.decline(...)", "chat.approve_sync(False)"
        )

    async def _drive(
        self,
        approve: Any,
        *,
        stream: bool | None = None,
        on_text: TextCallback | None = None,
        provider: LlmProvider | None = None,
    ) -> AgentResult:
        """Run (or resume) the parked-or-new run of ``self._parked`` and record its turn.

        A run ``Chat.resume`` found is replayed leniently (its recorded inputs may name another
        provider's capabilities); ``provider`` is the one a resume replays with.
        """
        parked = self._parked
        assert parked is not None
        run_id, messages, max_turns, index, position, started = parked
        streaming = self._stream if stream is None else bool(stream)
        sink = on_text or self._on_text or (print_delta if streaming else None)
        lenient = run_id in self._recorded_runs
        execution = self.journal.execution(
            run_id,
            principal=self._principal,
            divergence="ignore_inputs" if lenient else "fail",
        )
        await self._ready()
        identity = self._identity or started or {}  # who answered what the log holds
        # A run resumed on another provider (``Chat.resume`` on another vendor, then approved)
        # replays its recorded answers first: they are priced by the provider that gave them,
        # the calls made now by the chat's provider.
        live = identity_of(self._provider)
        served = (identity, len(run_responses(self.journal, run_id))) if identity != live else None
        self._enter()
        # A new run shows its prompt; a resumed one its parked turn, now replying (no buttons).
        self._refresh_views(messages if len(self._turns) == index else None)
        landed = False
        budget = make_budget(
            self._provider,
            self._limits,
            self._turns[:index],
            self.journal,
            self._run_limits,
            served=served,
        )
        keeps_media = self._store is not None or bool(self._toolsets)  # MCP media is stored
        try:
            result = await agent_loop(
                execution,
                provider or self._provider,
                [*self._tools, *self._toolsets],
                messages,
                system=self._system,
                max_turns=max_turns,
                approve=approve,
                resolver=StoreResolver(self.store) if keeps_media else None,
                on_text=self._delta(sink) if streaming else None,
                stream=streaming,
                budget=budget,
                cache="auto",
                cache_key=self.id,
                settings=self._settings,
            )
            landed = True
        except BudgetExceededError:
            self._halt(parked)
            raise
        finally:
            self._leave()
            if not landed:
                self._refresh_views()
        responses = run_responses(self.journal, run_id)
        if served is not None and len(responses) > served[1]:
            identity = live  # the run answered live after its replayed part
        pricing = live if served is not None else identity
        usage, cost = responses_usage(responses, pricing, served)
        response = result.response
        turn = ChatTurn(
            index=index,
            kind="run",
            start=len(messages) - 1,
            status=result.status,
            response=response,
            usage=usage,
            cost=cost,
            position=position,
            run_id=run_id,
            result=result,
            **answered(identity, response),
        )
        del self._turns[index:]
        self._turns.append(turn)
        self._history = list(result.messages)
        self._parked = self._parked if result.status == "parked" else None
        self._refresh_views()
        return result

    def _halt(self, parked: Parked) -> None:
        """A spending limit stopped the run: record what it spent as a ``halted`` turn, resumable."""
        halt_run(self, parked, self.journal)

    def approvals(self) -> dict[str, dict[str, Any]]:
        """Every call that needed a decision: ``{call id: {"state", "by", "reason"}}``.

        ``state`` is ``awaiting`` (the parked run waits on it), ``approved``, ``declined`` or
        ``undecidable``; ``by`` says who decided (the view's buttons, ``chat.approve``, the
        ``approve=`` given to ``chat.run``), so the transcript can say who decided what.
        """
        states: dict[str, dict[str, Any]] = {}
        for turn in self._turns:
            if turn.kind != "run" or turn.run_id is None:
                continue
            decided = self._decided.get(turn.run_id)
            if decided is None:
                decided = run_decisions(self.journal, turn.run_id)
                if turn.status != "parked":  # a finished run journals nothing more: read it once
                    self._decided[turn.run_id] = decided
            for call_id, decision in decided.items():
                states[call_id] = state_of(decision, self._deciders.get(call_id, "the approver"))
        for digest in self.pending_approvals:
            states[str(digest["id"])] = {"state": "awaiting", "by": None, "reason": None}
        return states

    async def _on_view_decision(self, call_id: str, approved: bool) -> None:
        """The transcript view's Approve / Decline: decide the call, resume once all are decided."""
        try:
            await self.decide(call_id, approved, by="the notebook view")
        except Exception:  # shown by the view as still awaiting; the kernel log has the cause
            _log.exception("Chat: a decision from the view could not be applied")


def decision_table(
    decisions: bool | Mapping[str, Any], reason: str | None, pending: Iterable[str]
) -> dict[str, Any]:
    """``chat.approve``'s decisions as call id -> decision: one for every pending call, or a mapping."""
    if isinstance(decisions, bool):
        if reason is not None and not isinstance(reason, str):
            raise ConfigurationError("reason is a string.", code="invalid_argument")
        return {call_id: {"approved": decisions, "reason": reason} for call_id in pending}
    if isinstance(decisions, Mapping):
        return dict(decisions)
    raise ConfigurationError(
        f"decisions is True, False or a mapping of call id to decision, not "
        f"{type(decisions).__name__}.",
        code="invalid_argument",
    )


def check_decision(call_id: Any, approved: Any, reason: Any, pending: set[str]) -> None:
    """Refuse a ``chat.decide`` that names no pending call or is not True/False with a reason."""
    if not isinstance(call_id, str):
        raise ConfigurationError(
            f"call_id is the id of a pending call (a string; see chat.pending_approvals), "
            f"not {type(call_id).__name__}.",
            code="invalid_argument",
        )
    if call_id not in pending:
        raise ConfigurationError(
            f"no parked call {call_id!r} awaits a decision (pending: "
            f"{', '.join(sorted(pending)) or 'none'}).",
            code="nothing_parked",
        )
    if not isinstance(approved, bool) or (reason is not None and not isinstance(reason, str)):
        raise ConfigurationError(
            "a decision is approved=True/False with an optional reason string.",
            code="invalid_argument",
        )


def run_decisions(journal: Journal, run_id: str) -> dict[str, Any]:
    """The approval decisions an agent run journaled: call id -> the normalized decision.

    An approval step holds the approver's decision (or ``{"pending": true}``); a resume holds
    the decisions given for the calls that were pending, and wins over the pending mark.
    """
    found: dict[str, Any] = {}
    for event in journal.events(run_id):
        payload = event.payload if isinstance(event.payload, dict) else {}
        step_id = event.step_id or ""
        if event.kind == "step_completed" and ":approval:" in step_id:
            found[step_id.split(":approval:", 1)[1]] = payload.get("output")
        elif event.kind == "resumed":
            given = payload.get("payload", payload)
            decisions = given.get("decisions") if isinstance(given, dict) else None
            for call_id, decision in (decisions if isinstance(decisions, dict) else {}).items():
                found[str(call_id)] = decision
    return found


def state_of(decision: Any, by: str) -> dict[str, Any]:
    """A journaled decision as the views show it."""
    if isinstance(decision, dict) and decision.get("pending") is True:
        return {"state": "awaiting", "by": None, "reason": None}
    if isinstance(decision, dict) and isinstance(decision.get("approved"), bool):
        reason = decision.get("reason")
        return {
            "state": "approved" if decision["approved"] else "declined",
            "by": by,
            "reason": reason if isinstance(reason, str) else None,
        }
    return {"state": "undecidable", "by": by, "reason": "the decision was not True/False"}
