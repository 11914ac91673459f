"""``Chat``: a conversation with a model from a notebook cell, every turn a journaled step.

``reply = await chat("describe this", "photo.png")`` builds the user turn (attachments sniffed
into parts, media over the inline cap stored and sent by ref), then makes ONE journaled model
call through ``create_llm_effect``: guard → capabilities → resolve refs → provider (ADR 0120
decisions 4-8, 10). There is no second pipeline: the PromptPad is a face over this class and
``chat.run`` is ``agent_loop`` on the same provider, tools, store and journal.

Durability. A chat is an execution of the journal (default: ``.loom/journal.sqlite``, created
on first use). Turn ``k`` of ``chat(...)`` is the step ``#chat:<k>:model`` at position ``k``;
re-running a notebook with the same ``Chat(..., id=...)`` serves every recorded turn from the log
(no model, no key) and goes on live after the last one. ``chat.run`` drives the agent loop in
its own execution ``<id>/run-<n>``, parks for approvals and resumes (``_runs``). ``chat.fork(turn)`` is ``execution.fork(position, "<id>/fork-<n>")``: a new execution
holding the chat's log before that turn, whose copied turns the child replays from that log.

Undo. ``chat.undo()`` drops the last turn from the history and is journaled itself: the step
``#chat:<k>:undo`` at the chat's next position, whose input names the turn dropped. The log
keeps the undone turn (it is append-only) and says it was undone, so re-running the same code
serves the undo from the log like any turn, while code that no longer undoes there, or undoes
another turn, diverges (``ReplayDivergenceError``) instead of rebuilding another conversation;
a fork's copied log carries the undo too. (A fork that has not replayed its shared log yet
journals an undo with its first step.)

Display. ``display(chat)`` shows a live transcript view (made by the notebook layer) that the
chat keeps, weakly, and updates as turns land (``_views``).

Stopping. ``chat.stop()`` cancels the reply in flight (the calling task, e.g. the PromptPad's
send): the step is journaled as failed, never completed; the partial text streamed so far is
kept in the history as the assistant's turn and the turn is marked ``stopped``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from loom_nb.agent import ToolDefinition
from loom_nb.agent._decorator import tool as make_tool
from loom_nb.agent._tools import Toolset, menu_of
from loom_nb.chat._attach import user_message
from loom_nb.chat._cost import Totals, price_of
from loom_nb.chat._display import ChatDisplay
from loom_nb.chat._export import ChatExport
from loom_nb.chat._money import check_limits, make_budget
from loom_nb.chat._records import (
    DEFAULT_HOME,
    ChatTurn,
    Position,
    Recorded,
    Skipped,
    TurnStatus,
    UndoMark,
    check_arguments,
    print_delta,
    settings_of,
    settled,
    shared_journal,
    shared_store,
    undo_divergence,
    undo_entry,
    undone,
)
from loom_nb.chat._views import LiveViews, TurnStats
from loom_nb.content import (
    LlmRequest,
    LlmResponse,
    Message,
    ToolSpec,
    Usage,
    assistant_message_of,
)
from loom_nb.errors import ConfigurationError, JournalError, ReplayDivergenceError
from loom_nb.journal import Execution, Journal, create_llm_effect
from loom_nb.providers._base import ResetCallback, TextCallback, ToolDeltaCallback
from loom_nb.settings import ModelSettings
from loom_nb.spending import Limits
from loom_nb.store import ContentStore, Principal, StoreResolver
from loom_nb.taint import Untrusted

if TYPE_CHECKING:
    from loom_nb.providers import LlmProvider

__all__ = ["Chat", "ChatTurn"]

_log = logging.getLogger(__name__)


class Chat(ChatExport, ChatDisplay):
    """A conversation over ``provider``: ``reply = await chat(text, *attachments)``.

    ``system`` is the system prompt, ``tools`` the ``ToolDefinition``s (or plain typed functions,
    made tools with ``@tool``, or toolsets such as ``MCPToolset``) that ``chat.run`` lets the
    model call. ``store`` holds media over the inline cap (default: ``.loom/store``, opened only
    when needed); ``journal`` records every turn (default: ``.loom/journal.sqlite``). ``id``
    names the chat's execution: re-running the same code with the same id replays the recorded
    turns. ``settings`` are the model settings sent with every request. ``stream=True`` streams
    each reply (``on_text`` sees the deltas; with no callback they are printed, so a cell shows
    them live). ``limits`` (a ``Limits``) bounds what the whole chat may spend: a model call that
    would start with a limit reached is refused with ``BudgetExceededError`` before any I/O
    (journaled); raise ``chat.limits`` and call again. Prompt caching is ``"auto"`` unless
    ``settings.cache`` says otherwise (Anthropic breakpoints, OpenAI's cache key set to the
    chat's id).
    """

    def __init__(
        self,
        provider: LlmProvider,
        *,
        system: str | Untrusted | None = None,
        tools: Sequence[ToolDefinition | Toolset | Callable[..., Any]] = (),
        store: ContentStore | None = None,
        journal: Journal | str | None = None,
        settings: ModelSettings | Mapping[str, Any] | None = None,
        id: str | None = None,
        tenant: str = "notebook",
        stream: bool = False,
        on_text: TextCallback | None = None,
        limits: Limits | None = None,
    ) -> None:
        check_arguments(provider, system, tools, store, journal, id, tenant, on_text)
        self._limits = check_limits(limits, "Chat()")
        self._provider = provider
        self._system = system
        # Toolsets (MCP servers) are listed by each run, as a journaled step; plain turns, which
        # run no tools, do not start them and show the model only the function tools.
        self._toolsets: list[Toolset] = [t for t in tools if isinstance(t, Toolset)]
        self._tools = [
            t if isinstance(t, ToolDefinition) else make_tool(t)
            for t in tools
            if not isinstance(t, Toolset)
        ]
        self._menu: list[ToolSpec] = menu_of(self._tools)[0]
        self._store = store
        self._journal_arg = journal
        self._journal: Journal | None = journal if isinstance(journal, Journal) else None
        self._settings = settings_of(settings)
        self._home = Path.cwd() / DEFAULT_HOME
        self.id: str = id if id is not None else f"chat-{uuid.uuid4().hex[:12]}"
        """The chat's execution id in the journal (pass it again to replay)."""
        self._principal = Principal(tenant=tenant)
        self._stream = bool(stream)
        self._on_text = on_text
        self._history: list[Message] = []
        self._turns: list[ChatTurn] = []
        self._positions: list[Position | UndoMark] = []
        self._replay_prefix: list[Position | UndoMark] = []
        self._execution: Execution | None = None
        self._runs = 0
        self._forks = 0
        self._parked: tuple[str, list[Message], int, int] | None = None
        self._halted: tuple[str, list[Message], int, int] | None = None  # a run a limit stopped
        self._run_limits: Limits | None = None
        self._decisions: dict[str, dict[str, Any]] = {}
        self._deciders: dict[str, str] = {}
        self._caller: asyncio.Task[Any] | None = None
        self._stopping = False
        self._stoppable = False
        self._totals = Totals()
        self._stats = TurnStats()
        self._views: LiveViews | None = None  # displayed views, updated as turns land
        self._decided: dict[str, dict[str, Any]] = {}  # finished run id -> its journaled decisions
        self.live_text = ""
        """The text streamed so far by the reply in flight ("" when idle)."""

    # -- configuration ---------------------------------------------------------------------------

    @property
    def provider(self) -> LlmProvider:
        """The provider every turn goes to."""
        return self._provider

    @property
    def system(self) -> str | Untrusted | None:
        """The system prompt."""
        return self._system

    @property
    def tools(self) -> list[ToolDefinition]:
        """The function tools ``chat.run`` lets the model call (toolsets: ``chat.toolsets``)."""
        return list(self._tools)

    @property
    def toolsets(self) -> list[Toolset]:
        """The toolsets (MCP servers) whose tools ``chat.run`` lists and lets the model call."""
        return list(self._toolsets)

    @property
    def settings(self) -> ModelSettings | None:
        """The model settings sent with every request (None: the provider's defaults)."""
        return self._settings

    @property
    def limits(self) -> Limits | None:
        """The spending limits of the whole chat (None: none); assign a new ``Limits`` to raise them."""
        return self._limits

    @limits.setter
    def limits(self, value: Limits | None) -> None:
        self._limits = check_limits(value, "chat.limits")

    @property
    def journal(self) -> Journal:
        """The journal the turns are recorded in (``.loom/journal.sqlite`` unless given)."""
        if self._journal is None:
            if self._journal_arg is None:
                self._journal = shared_journal(self._home / "journal.sqlite", self.store)
            else:
                self._journal = Journal(str(self._journal_arg), store=self._store)
        return self._journal

    @property
    def store(self) -> ContentStore:
        """The content store media over the inline cap goes to (``.loom/store`` unless given)."""
        if self._store is None:
            self._store = shared_store(self._home / "store")
        return self._store

    # -- the conversation ------------------------------------------------------------------------

    @property
    def history(self) -> list[Message]:
        """The conversation so far: user and assistant messages (tool results included), oldest first."""
        return list(self._history)

    @property
    def turns(self) -> list[ChatTurn]:
        """Every turn: its kind, status, response, tokens and cost."""
        return list(self._turns)

    @property
    def usage(self) -> Usage:
        """Input and output tokens of every turn, summed (per turn: ``chat.turns[i].usage``)."""
        return self._totals.of(self._turns)[0]

    @property
    def cost(self) -> Decimal | None:
        """USD cost of every turn from genai-prices; None when any turn's price is unknown."""
        return self._totals.of(self._turns)[1]

    @property
    def busy(self) -> bool:
        """True while a reply is in flight."""
        return self._caller is not None

    async def __call__(
        self,
        text: str | Untrusted = "",
        *attachments: Any,
        stream: bool | None = None,
        on_text: TextCallback | None = None,
        output_type: type[BaseModel] | None = None,
        on_tool_delta: ToolDeltaCallback | None = None,
        on_tool_reset: ResetCallback | None = None,
        on_reasoning: TextCallback | None = None,
    ) -> LlmResponse:
        """Send ``text`` with ``attachments`` (paths, bytes, PIL images, parts); return the reply.

        The turn is the journaled step ``#chat:<k>:model``. A refusal (``GuardError``,
        ``UnsupportedModalityError`` ...) or a provider error leaves the history unchanged. With
        ``output_type=Model`` the model answers in the vendor's JSON-schema mode and
        ``reply.output`` is the validated ``Model`` (``StructuredOutputError`` otherwise).
        ``on_tool_delta`` / ``on_tool_reset`` see streamed tool-call fragments (the PromptPad's live
        area) and ``on_reasoning`` the streamed reasoning (the model's visible thinking); like
        ``on_text`` they are never journaled.
        """
        self._check_idle()
        message = user_message(text, attachments, self._history, lambda: self.store, self._tenant)
        request = self._request([*self._history, message])
        execution = await self._ready()
        position = len(self._positions)
        step_id = f"#chat:{position}:model"
        streaming = self._stream if stream is None else bool(stream)
        sink = on_text or self._on_text or (print_delta if streaming else None)
        self._halted = None  # a plain turn leaves a run a limit stopped behind
        effect = create_llm_effect(
            self._provider,
            resolve_content=StoreResolver(self._store) if self._store is not None else None,
            on_text=self._delta(sink) if streaming else None,
            on_tool_delta=on_tool_delta if streaming else None,
            on_tool_reset=self._reset_with(on_tool_reset) if streaming else None,
            on_reasoning=on_reasoning if streaming else None,
            stream=streaming,
            output_type=output_type,
            budget=make_budget(self._provider, self._limits, self._turns, self.journal),
            cache="auto",
            cache_key=self.id,
        )
        status: TurnStatus = "completed"
        self._enter(stoppable=True)
        self._refresh_views([*self._history, message])
        landed = False
        try:
            response = await effect(execution, step_id, request)
        except asyncio.CancelledError:
            self._positions.append(Position(step_id, request, None, output_type))
            if not self._stopping:
                raise
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            response = LlmResponse(content=self.live_text, stop_reason="other", model=None)
            status = "stopped"
            landed = True
        except ReplayDivergenceError as exc:
            self._positions.append(Position(step_id, request, None, output_type))
            raise undo_divergence(exc) from exc
        except BaseException:
            self._positions.append(Position(step_id, request, None, output_type))
            raise
        else:
            self._positions.append(Position(step_id, request, response, output_type))
            landed = True
        finally:
            if sink is print_delta and self.live_text:
                print(flush=True)  # end the streamed line
            self._leave()
            if not landed:
                self._refresh_views()  # the refused or failed turn leaves the views as they were
        start = len(self._history)
        if status == "completed" or response.content:
            self._history.extend([message, assistant_message_of(response)])
        cost = price_of(self._provider, response) if status == "completed" else None
        self._turns.append(
            ChatTurn(
                index=len(self._turns),
                kind="chat",
                start=start,
                status=status,
                response=response,
                usage=response.usage,
                cost=cost,
                position=position,
            )
        )
        self._refresh_views()
        return response

    def stop(self) -> bool:
        """Cancel the reply in flight; True if one was. Its partial text is kept, marked stopped."""
        if self._caller is None or self._caller.done():
            return False
        self._stopping = True
        self._caller.cancel()
        return True

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
            if self._execution is None:
                self._execution = self.journal.execution(self.id, principal=self._principal)
            settled(self._undo_step(self._execution, mark), "chat.undo()")
            self._positions.append(mark)
        self._turns.pop()
        removed = self._history[turn.start :]
        del self._history[turn.start :]
        if self._parked is not None and self._parked[3] == turn.index:
            self._parked = None
        if self._halted is not None and self._halted[3] == turn.index:
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
        forked = self._fork_execution(position, new_id)
        child = Chat(
            self._provider,
            system=self._system,
            tools=[*self._tools, *self._toolsets],
            store=self._store,
            journal=self.journal,
            settings=self._settings,
            id=new_id,
            tenant=self._principal.tenant,
            stream=self._stream,
            on_text=self._on_text,
            limits=self._limits,
        )
        self._forks += 1
        child._history = self._history[:start]
        child._turns = [replace(t) for t in self._turns[:turn]]
        child._execution = forked
        child._replay_prefix = positions[:position]
        child._runs = self._runs
        return child

    def _fork_execution(self, position: int, new_id: str) -> Execution | None:
        """``execution.fork(position, new_id)``: the new execution holds the log before the turn.

        Re-running a notebook forks again: the fork made last time is reopened and replayed.
        With nothing journaled yet there is nothing to share (None: the child opens its own).
        """
        if self._execution is None or position == 0:
            return None
        try:
            return self._execution.fork(position, new_id)
        except JournalError as exc:
            if exc.code != "execution_exists":
                raise
            return self.journal.execution(new_id, principal=self._principal)

    # -- internals -------------------------------------------------------------------------------

    @property
    def _tenant(self) -> str:
        return self._principal.tenant

    def _request(self, messages: list[Message]) -> LlmRequest:
        return LlmRequest(
            messages=messages, tools=self._menu, system=self._system, settings=self._settings
        )

    def _check_idle(self, *, allow_parked: bool = False) -> None:
        if self._caller is not None:
            raise ConfigurationError(
                "a reply is still in flight; wait for it (or chat.stop()).", code="chat_busy"
            )
        if self._parked is not None and not allow_parked:
            raise ConfigurationError(
                "a run is parked waiting for approvals; decide them with `await "
                "chat.approve(...)` / `chat.decline(...)`, or `chat.undo()` to drop the run.",
                code="chat_parked",
            )

    def _enter(self, *, stoppable: bool = False) -> None:
        self._caller = asyncio.current_task()
        self._stopping = False
        self._stoppable = stoppable  # a plain turn: the views' Stop button keeps its partial text
        self.live_text = ""

    def _leave(self) -> None:
        self._caller = None
        self._stopping = False
        self._stoppable = False
        self.live_text = ""

    def _delta(self, sink: TextCallback | None) -> TextCallback:
        async def on_delta(delta: str) -> None:
            self.live_text += delta
            if self._views:
                self._views.stream(self.live_text)
            if sink is not None:
                result = sink(delta)
                if result is not None:
                    await result

        return on_delta

    def _reset_with(self, callback: ResetCallback | None) -> ResetCallback:
        async def reset() -> None:
            self.live_text = ""
            if self._views:
                self._views.stream(self.live_text)
            if callback is not None:
                result = callback()
                if result is not None:
                    await result

        return reset

    async def _ready(self) -> Execution:
        """The chat's execution, opened on first use; a fork first replays its shared prefix."""
        if self._execution is None:
            self._execution = self.journal.execution(self.id, principal=self._principal)
        if self._replay_prefix:
            prefix, self._replay_prefix = self._replay_prefix, []
            for item in prefix:
                await self._replay(self._execution, item)
        return self._execution

    async def _undo_step(self, execution: Execution, mark: UndoMark) -> None:
        """Journal (or, replayed, serve) the undo step; its function is synchronous."""
        await execution.execute(mark.step_id, undone, mark.entry)

    async def _replay(self, execution: Execution, item: Position | UndoMark) -> None:
        """Take one shared position: served from the forked log (or copied, for a chat that had
        journaled nothing when it was forked).

        The step goes through the same effect as the original turn (so its journaled input is
        exactly the original's), on a provider that answers with the recorded response.
        """
        if isinstance(item, UndoMark):
            await self._undo_step(execution, item)
            self._positions.append(item)
            return
        effect = create_llm_effect(
            Recorded(self._provider, item.response),
            resolve_content=StoreResolver(self._store) if self._store is not None else None,
            output_type=item.output_type,
        )
        with contextlib.suppress(Skipped):
            await effect(execution, item.step_id, item.request)
        self._positions.append(item)
