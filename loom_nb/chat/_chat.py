"""``Chat``: a conversation with a model from a notebook cell, every turn a journaled step.

``reply = await chat("describe this", "photo.png")`` builds the user turn (attachments sniffed
into parts, media over the inline cap stored and sent by ref), then makes ONE journaled model
call through ``create_llm_effect``: guard → capabilities → resolve refs → provider (ADR 0120
decisions 4-8, 10). There is no second pipeline: the PromptPad is a face over this class and
``chat.run`` is ``agent_loop`` on the same provider, tools, store and journal.

Durability. A chat is an execution of the journal (default: ``.loom/journal.sqlite``, created
on first use). Turn ``k`` of ``chat(...)`` is the step ``#chat:<k>:model`` at position ``k``;
re-running a notebook with the same ``Chat(..., id=...)`` serves every recorded turn from the log
(no model, no key) and goes on live after the last one. ``chat.run`` takes a position too (its
``run`` step) and drives the agent loop in its own execution ``<id>/run-<n>``, parks for
approvals and resumes (``_runs``). What else the chat journals (a seed, the provider answering,
a stopped turn's text, a start over) is ``_log``'s layout and ``_marks``'s steps.
``chat.fork(turn)`` is ``execution.fork(position, "<id>/fork-<n>")``: a new execution holding the
chat's log before that turn.

Outliving the kernel (issue 27). ``Chat.resume(id, provider)`` rebuilds a chat from its log
without re-running the cells (``_resume``): history, turns, usage, cost and a parked run's
approvals come back, and the next message runs live after the last recorded turn, on this
provider or another. ``Chat(..., history=[...])`` starts from given messages, journaled as the
chat's first step; ``Chat(..., restart=True)`` starts an id over, archiving its old turns.

Undo and fork (``_edits``). ``chat.undo()`` drops the last turn and is journaled itself
(``#chat:<k>:undo``), so a replay undoes the same turn at the same point.

Display and sync use. ``display(chat)`` shows a live transcript view (made by the notebook
layer) that the chat keeps, weakly, and updates as turns land (``_views``). ``chat.sync(...)``
and ``chat.run_sync(...)`` work from plain code and from a cell alike (``_sync``).

Stopping. ``chat.stop()`` cancels the reply in flight (the calling task, e.g. the PromptPad's
send), from any thread: the step is journaled as failed, never completed; the partial text
streamed so far is kept in the history as the assistant's turn (and journaled after it, for a
resume) and the turn is marked ``stopped``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from loom_nb.agent import AgentResult, ToolDefinition
from loom_nb.agent._decorator import tool as make_tool
from loom_nb.agent._tools import Toolset, menu_of
from loom_nb.chat._attach import user_message
from loom_nb.chat._cost import Priced, Totals, answered
from loom_nb.chat._edits import ChatEdits
from loom_nb.chat._export import ChatExport
from loom_nb.chat._log import Mark
from loom_nb.chat._map import ChatMaps
from loom_nb.chat._marks import ChatMarks
from loom_nb.chat._money import check_limits, make_budget
from loom_nb.chat._records import (
    DEFAULT_HOME,
    ChatTurn,
    Parked,
    Position,
    TurnStatus,
    UndoMark,
    chat_divergence,
    check_arguments,
    print_delta,
    seed_messages,
    settings_of,
    shared_journal,
    shared_store,
)
from loom_nb.chat._runs import ChatRuns
from loom_nb.chat._sync import Pending, run_blocking
from loom_nb.chat._views import ChatDisplay, LiveViews, TurnStats
from loom_nb.content import (
    LlmRequest,
    LlmResponse,
    Message,
    ToolSpec,
    Usage,
    assistant_message_of,
)
from loom_nb.content._messages import Requests
from loom_nb.errors import ConfigurationError, ReplayDivergenceError
from loom_nb.journal import Execution, Journal, create_llm_effect
from loom_nb.providers._base import ResetCallback, TextCallback, ToolDeltaCallback
from loom_nb.settings import ModelSettings
from loom_nb.spending import Limits
from loom_nb.store import ContentStore, Principal, StoreResolver
from loom_nb.taint import Untrusted

if TYPE_CHECKING:
    from loom_nb.providers import LlmProvider

__all__ = ["Chat", "ChatTurn"]

T = TypeVar("T")


class Chat(ChatExport, ChatDisplay, ChatEdits, ChatMarks, ChatRuns, ChatMaps):
    """A conversation over ``provider``: ``reply = await chat(text, *attachments)``.

    ``system`` is the system prompt, ``tools`` the ``ToolDefinition``s (or plain typed functions,
    made tools with ``@tool``, or toolsets such as ``MCPToolset``) that ``chat.run`` lets the
    model call. ``store`` holds media over
    the inline cap (default: ``.loom/store``, opened only when needed); ``journal`` records
    every turn (default: ``.loom/journal.sqlite``). ``id`` names the chat's execution: re-running
    the same code with the same id replays the recorded turns. ``settings`` are the model
    settings sent with every request. ``stream=True`` streams each reply (``on_text`` sees the
    deltas; with no callback they are printed, so a cell shows them live). ``limits`` (a
    ``Limits``) bounds what the whole chat may spend: a model call that would start with a limit
    reached is refused with ``BudgetExceededError`` before any I/O (journaled); raise
    ``chat.limits`` and call again. Prompt caching is ``"auto"`` unless ``settings.cache`` says
    otherwise (Anthropic breakpoints, OpenAI's cache key set to the chat's id).

    ``history`` seeds the conversation with earlier messages (``Message``s or ``{"role",
    "content"}`` dicts), journaled as the chat's first step. ``restart=True`` starts the id over:
    its recorded turns move to an archived id (``<id>~archived-<time>``, listed by ``chats()``)
    and the chat begins empty. ``Chat.resume(id, provider)`` goes on from a recorded chat.
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
        history: Sequence[Message | Mapping[str, Any]] | None = None,
        restart: bool = False,
    ) -> None:
        check_arguments(provider, system, tools, store, journal, id, tenant, on_text)
        self._limits = check_limits(limits, "Chat()")
        seed = seed_messages(history) if history is not None else None
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
        self._requests = Requests()
        self._home = Path.cwd() / DEFAULT_HOME
        self.id: str = id if id is not None else f"chat-{uuid.uuid4().hex[:12]}"
        """The chat's execution id in the journal (pass it again to replay)."""
        self._principal = Principal(tenant=tenant)
        self._stream = bool(stream)
        self._on_text = on_text
        self._history: list[Message] = list(seed or [])
        self._seed = seed  # journaled with the first step, then None
        self._turns: list[ChatTurn] = []
        self._positions: list[Position | UndoMark | Mark] = []
        self._replay_prefix: list[Position | UndoMark | Mark] = []
        self._shared = 0  # how much of a fork's replay prefix its copied log holds
        self._execution: Execution | None = None
        self._identity: dict[str, Any] | None = None  # the provider the log answers with now
        self._agreed: tuple[object, dict[str, Any], tuple[object, object]] | None = None
        self._recorded_runs: set[str] = set()  # runs a resume found: replayed leniently
        self._runs = 0
        self._forks = 0
        self._parked: Parked | None = None
        self._halted: Parked | None = None  # a run a spending limit stopped
        self._run_limits: Limits | None = None
        self._decisions: dict[str, dict[str, Any]] = {}
        self._deciders: dict[str, str] = {}
        self._caller: asyncio.Task[Any] | None = None
        self._held = False  # a synchronous call holds the caller's event loop (a notebook cell)
        self._stopping = False
        self._stoppable = False
        self._totals = Totals()
        self._stats = TurnStats()
        self._views: LiveViews | None = None  # displayed views, updated as turns land
        self._decided: dict[str, dict[str, Any]] = {}  # finished run id -> its journaled decisions
        self.live_text = ""
        """The text streamed so far by the reply in flight ("" when idle)."""
        if restart:
            from loom_nb.chat._resume import restart_chat

            restart_chat(self)

    @classmethod
    def resume(
        cls,
        id: str,
        provider: LlmProvider,
        *,
        journal: Journal | str | None = None,
        store: ContentStore | None = None,
        tools: Sequence[ToolDefinition | Toolset | Callable[..., Any]] = (),
        settings: ModelSettings | Mapping[str, Any] | None = None,
        system: str | Untrusted | None = None,
        tenant: str = "notebook",
        stream: bool = False,
        on_text: TextCallback | None = None,
        limits: Limits | None = None,
    ) -> Chat:
        """The chat ``id`` as its journal recorded it, ready to go on, with no model called.

        ``history``, ``turns``, ``usage``, ``cost`` and a parked run's ``pending_approvals`` are
        the journaled ones; the next ``await chat(...)`` or ``chat.run(...)`` runs live after the
        last recorded turn, on ``provider`` (another provider or model is fine: each turn records
        which answered it), and a parked run can be decided. The keyword arguments are
        ``Chat``'s; ``system`` and ``settings`` default to the ones the chat's last model turn was
        sent with, and
        ``tools`` must be the tools its runs used (they are replayed from the log, never run).
        An unknown id is a ``ConfigurationError`` (code ``unknown_chat``) naming the nearest ids.
        """
        from loom_nb.chat._resume import existing_journal, resume_chat

        return resume_chat(
            cls(
                provider,
                system=system,
                tools=tools,
                store=store,
                journal=existing_journal(journal, id),
                settings=settings,
                id=id,
                tenant=tenant,
                stream=stream,
                on_text=on_text,
                limits=limits,
            ),
            system_given=system is not None,
            settings_given=settings is not None,
        )

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

    def __call__(
        self,
        text: str | Untrusted = "",
        *attachments: Any,
        stream: bool | None = None,
        on_text: TextCallback | None = None,
        output_type: type[BaseModel] | None = None,
        on_tool_delta: ToolDeltaCallback | None = None,
        on_tool_reset: ResetCallback | None = None,
        on_reasoning: TextCallback | None = None,
    ) -> Pending[LlmResponse]:
        """Send ``text`` with ``attachments`` (paths, bytes, PIL images, parts); await the reply.

        The turn is the journaled step ``#chat:<k>:model``. A refusal (``GuardError``,
        ``UnsupportedModalityError`` ...) or a provider error leaves the history unchanged. With
        ``output_type=Model`` the model answers in the vendor's JSON-schema mode and
        ``reply.output`` is the validated ``Model`` (``StructuredOutputError`` otherwise).
        ``on_tool_delta`` / ``on_tool_reset`` see streamed tool-call fragments (the PromptPad's live
        area) and ``on_reasoning`` the streamed reasoning (the model's visible thinking); like
        ``on_text`` they are never journaled. Not awaited, nothing is sent (and the returned
        value says so when shown, or warns when dropped); plain code uses ``chat.sync(...)``.
        """
        turn = self._ask(
            text,
            attachments,
            stream=stream,
            on_text=on_text,
            output_type=output_type,
            on_tool_delta=on_tool_delta,
            on_tool_reset=on_tool_reset,
            on_reasoning=on_reasoning,
        )
        return Pending(turn, "chat(...)", "chat.sync(...)")

    def sync(self, text: str | Untrusted = "", *attachments: Any, **options: Any) -> LlmResponse:
        """``chat(text, *attachments, **options)`` from synchronous code: send and wait for the reply.

        Works in a plain script and in a notebook cell alike (the call runs on a private event
        loop in a worker thread); streaming, the displayed views and ``chat.stop()`` (from any
        thread) work as with ``await``, and an interrupt (Ctrl-C, the kernel's interrupt button)
        stops the reply, keeping its partial text, before it is raised. A cell that waits holds
        its kernel, which then hears no widget message: the views offer no Stop button and say
        to interrupt the kernel instead.
        """
        return self._blocking(self(text, *attachments, **options))

    def run_sync(
        self, text: str | Untrusted | None = None, *attachments: Any, **options: Any
    ) -> AgentResult:
        """``chat.run(text, *attachments, **options)`` from synchronous code (as ``chat.sync``)."""
        return self._blocking(self.run(text, *attachments, **options))

    def _blocking(self, call: Pending[T]) -> T:
        """Wait for ``call`` on the private loop; a caller with a loop of its own (a notebook
        cell) holds that loop meanwhile, so its views cannot hear a Stop button."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            held = False
        else:
            held = True
        self._held = held
        try:
            return run_blocking(call, on_interrupt=self.stop)
        finally:
            self._held = False

    async def _ask(
        self,
        text: str | Untrusted,
        attachments: tuple[Any, ...],
        *,
        stream: bool | None,
        on_text: TextCallback | None,
        output_type: type[BaseModel] | None,
        on_tool_delta: ToolDeltaCallback | None,
        on_tool_reset: ResetCallback | None,
        on_reasoning: TextCallback | None,
    ) -> LlmResponse:
        self._check_idle()
        message = user_message(text, attachments, self._history, lambda: self.store, self._tenant)
        request = self._request([*self._history, message])
        try:
            execution = await self._ready()
            identity = await self._provider_step(execution)
        except ReplayDivergenceError as exc:
            raise chat_divergence(exc, self.id) from exc
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
        if self._views:  # the turn in flight, shown as sent
            self._refresh_views([*self._history, message])
        landed = False
        try:
            response = await effect(execution, step_id, request)
        except asyncio.CancelledError:
            if not self._stopping:
                raise
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            response = LlmResponse(content=self.live_text, stop_reason="other", model=None)
            status = "stopped"
            landed = True
        except ReplayDivergenceError as exc:
            raise chat_divergence(exc, self.id) from exc
        else:
            landed = True
        finally:
            self._positions.append(Position(step_id))  # taken, whatever the step's end
            if sink is print_delta and self.live_text:
                print(flush=True)  # end the streamed line
            self._leave()
            if not landed:
                self._refresh_views()  # the refused or failed turn leaves the views as they were
        if status == "stopped":
            partial = response.content  # raw-content: LlmResponse.content is str
            await self._stop_step(execution, partial)
        start = len(self._history)
        if status == "completed" or response.content:
            self._history.extend([message, assistant_message_of(response)])
        cost = Priced(identity, response) if status == "completed" else None
        self._turns.append(
            ChatTurn._answered(
                index=len(self._turns),
                kind="chat",
                start=start,
                status=status,
                response=response,
                usage=response.usage,
                cost=cost,
                position=position,
                **answered(identity, response),
            )
        )
        self._refresh_views()
        return response

    def stop(self) -> bool:
        """Cancel the reply in flight; True if one was. Its partial text is kept, marked stopped."""
        caller = self._caller
        if caller is None or caller.done():
            return False
        self._stopping = True
        loop = caller.get_loop()
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if here is loop:
            caller.cancel()
        else:  # a synchronous call's reply runs on the private loop's thread
            loop.call_soon_threadsafe(caller.cancel)
        return True

    # -- internals -------------------------------------------------------------------------------

    def _like(self, id: str) -> Chat:
        """A new chat with this one's provider, tools, settings, store and journal (a fork)."""
        return Chat(
            self._provider,
            system=self._system,
            tools=[*self._tools, *self._toolsets],
            store=self._store,
            journal=self.journal,
            settings=self._settings,
            id=id,
            tenant=self._principal.tenant,
            stream=self._stream,
            on_text=self._on_text,
            limits=self._limits,
        )

    @property
    def _tenant(self) -> str:
        return self._principal.tenant

    def _request(self, messages: list[Message]) -> LlmRequest:
        return self._requests(messages, self._menu, self._system, self._settings)

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
        """The chat's execution, opened on first use: a fork takes its copied log as replayed (and
        journals an undo made before), a chat started over serves its restart mark, a seed is
        journaled (or served)."""
        execution = self._open()
        if self._replay_prefix:
            prefix, self._replay_prefix = self._replay_prefix, []
            shared, self._shared = self._shared, 0
            execution.seek(shared)
            self._positions.extend(prefix[:shared])
            for item in prefix[shared:]:
                await self._replay(execution, item)
        await self._serve_restart(execution)
        await self._seed_step(execution)
        return execution
