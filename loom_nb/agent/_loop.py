"""The agent loop: model turns and tool calls threaded as parts, inside a durable execution (ADR 0120 decision 9).

Each turn is a journaled model step (``#turn:<t>:model``, through ``create_llm_effect``: guard →
capabilities → content resolution → provider). Its tool calls are screened (decision 7), the
assistant turn ``assistant_message_of(response)`` is pushed, approvals are gathered
(``#turn:<t>:approval:<call id>``), each admitted call runs as its own journaled step
(``#turn:<t>:tool:<call id>``), and ONE user message holding one ``tool_result`` per call, in call
order, is pushed. Before a turn, ``Compaction`` may fold the transcript (``#turn:<t>:compact``).

Everything the loop decides is a pure function of the journaled step outputs and of the tools'
and provider's declarations, so calling ``agent_loop`` again on the same journal and execution id
(in this process or another one) with the same tools and a provider declaring the same
capabilities serves every completed step from the log and continues where the run stopped: after
a park for an approval, after a crash, or to replay a finished run exactly (``divergence="fail"``).
The declarations matter because a tool's media result becomes an error result when the provider
does not take that media; that verdict is recomputed, not journaled, so replaying on a provider
with other capabilities can rebuild a different transcript without a divergence being raised.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence, Set
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from loom_nb._interrupt import wake_on_signals
from loom_nb._strict import StrictModel
from loom_nb.agent._approval import Approver, ask, digest_of, normalize_decision, refusal_of
from loom_nb.agent._compaction import Compaction, is_tainted, summary_message
from loom_nb.agent._loop_args import check_arguments, messages_of
from loom_nb.agent._results import (
    build_result,
    error_result,
    failure_outcome,
    inline_bytes_of,
    jsonable_outcome,
)
from loom_nb.agent._screen import screen_response, screened_result
from loom_nb.agent._tools import ToolDefinition, Toolset, lend_tools, menu_of
from loom_nb.content import (
    LlmResponse,
    Message,
    Part,
    ToolCall,
    ToolResultPart,
    ToolSpec,
    ToolUsePart,
    assistant_message_of,
)
from loom_nb.content._messages import Requests
from loom_nb.errors import AgentError
from loom_nb.guard import PrefixFold
from loom_nb.journal import Execution, LlmEffect, create_llm_effect
from loom_nb.providers import LlmProvider
from loom_nb.providers._base import ResetCallback, TextCallback, ToolDeltaCallback
from loom_nb.settings import CacheSetting, ModelSettings
from loom_nb.spending import Budget
from loom_nb.store import ContentResolver, ResolveContext
from loom_nb.taint import Untrusted

__all__ = ["AgentResult", "ToolCallRecord", "agent_loop"]

AgentStatus = Literal["completed", "parked", "max_turns"]
CallStatus = Literal["ok", "error", "unknown_tool", "invalid_input", "screened", "declined"]


class ToolCallRecord(BaseModel):
    """One tool call as the loop handled it (the tool-call log)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    turn: int
    """The turn whose model call made it."""
    id: str
    """The call's id."""
    name: str
    """The tool named."""
    input: dict[str, Any]
    """The call's input as dispatched (the placeholder for a screened call)."""
    status: CallStatus
    """``ok``, or why the call failed or was not run."""


class AgentResult(StrictModel):
    """What ``agent_loop`` returns: the transcript, why it stopped, and what happened on the way."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    messages: list[Message]
    """The transcript (compacted if compaction ran); on a park, up to the assistant turn."""
    status: AgentStatus
    """``completed`` (a turn without tool calls), ``parked`` (waiting for approvals) or ``max_turns``."""
    turns: int
    """Model turns taken, counting the current one on a park."""
    response: LlmResponse | None = None
    """The last model response (screened)."""
    pending_approvals: list[dict[str, Any]] = Field(default_factory=list)
    """The digests of the calls waiting for a decision (when parked)."""
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    """Every tool call handled, in order."""
    compactions: list[int] = Field(default_factory=list)
    """The turns before which the transcript was compacted."""

    @property
    def text(self) -> str:
        """The last response's text ("" when there is none)."""
        if self.response is None:
            return ""
        return self.response.content  # raw-content: LlmResponse.content is str

    def header(self) -> str:
        """The one-line summary the views show: status, turns, tool calls, pending approvals."""
        calls = len(self.tool_calls)
        parts = [
            f"agent run · {self.status}",
            f"{self.turns} turn{'s' if self.turns != 1 else ''}",
            f"{calls} tool call{'s' if calls != 1 else ''}",
        ]
        if self.pending_approvals:
            waiting = ", ".join(f"{d.get('name')} ({d.get('id')})" for d in self.pending_approvals)
            parts.append(f"awaiting approval: {waiting}")
        return " · ".join(parts)


class _Plan:
    """One call of a turn: either a result decided before any tool runs, or a tool to run."""

    __slots__ = ("call", "result", "status", "tool", "value")

    def __init__(self, call: ToolCall) -> None:
        self.call = call
        self.tool: ToolDefinition | None = None
        self.value: Any = None
        self.result: ToolResultPart | None = None
        self.status: CallStatus = "ok"

    def refuse(self, result: ToolResultPart, status: CallStatus) -> None:
        self.result = result
        self.status = status


async def agent_loop(
    execution: Execution,
    provider: LlmProvider,
    tools: Sequence[ToolDefinition | Toolset],
    messages: Sequence[Message | dict[str, Any]],
    *,
    system: str | Untrusted | None = None,
    max_turns: int = 10,
    approve: Approver = None,
    compaction: Compaction | None = None,
    resolver: ContentResolver | None = None,
    context: ResolveContext | None = None,
    on_text: TextCallback | None = None,
    on_tool_delta: ToolDeltaCallback | None = None,
    on_tool_reset: ResetCallback | None = None,
    stream: bool = False,
    complete_execution: bool = True,
    on_reasoning: TextCallback | None = None,
    budget: Budget | None = None,
    cache: CacheSetting | None = None,
    cache_key: str | None = None,
    settings: ModelSettings | None = None,
) -> AgentResult:
    r"""Run the model with tools until it answers without calling any, parks, or hits ``max_turns``.

    The loop owns ``execution`` from its first position: every step it journals is named
    ``#turn:<t>:model`` / ``:compact`` / ``:approval:<id>`` / ``:tool:<id>``, and a recorded
    execution is replayed from the top (completed steps served from the log, nothing re-run).

    ``tools`` are ``ToolDefinition``\ s and toolsets (``MCPToolset``): a toolset is listed as a
    journaled step before the first turn (``#mcp:<server>:tools``), so a replay never starts it.
    ``approve`` decides calls to tools with ``requires_approval``: a callable of the call digest
    (sync or async) or a mapping of call id → decision (``True`` / ``False`` /
    ``{"approved": bool, "reason": str}``). With no decision the execution parks before the
    turn's results message and the status is ``"parked"`` (``pending_approvals`` lists the
    digests). To continue, call ``agent_loop`` again with the same arguments and a decision for
    every pending call, on ``journal.execution(id)`` (in this process or a new one) or on the same
    object. ``resolver`` and ``context`` fetch media refs just before each live model call;
    ``stream`` with ``on_text`` / ``on_reasoning`` / ``on_tool_delta`` / ``on_tool_reset`` shows
    deltas as they come.
    On ``completed`` / ``max_turns`` the execution is completed with ``{"status", "turns"}``
    unless ``complete_execution=False`` (to journal more steps after the loop).
    ``budget`` (spending limits) is checked before every model call, compaction included: a
    reached limit raises ``BudgetExceededError`` before any I/O, journaled as that step's failure,
    and calling ``agent_loop`` again (limit raised) resumes there. ``cache`` / ``cache_key`` are
    the prompt caching used when a request sets none (see ``create_llm_effect``). ``settings``
    (temperature, max_tokens...) go with every model call of the run, compaction's excepted.
    """
    if not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 1:
        raise AgentError(
            f"max_turns must be an int >= 1, got {max_turns!r}.", code="invalid_argument"
        )
    check_arguments(execution, tools, messages, compaction, system, settings)
    wake_on_signals()  # a kernel's interrupt ends a hung tool or model call at once
    menu, table = menu_of([t for t in tools if not isinstance(t, Toolset)])
    transcript = messages_of(messages)
    effect = create_llm_effect(
        provider,
        resolve_content=resolver,
        context=context,
        on_text=on_text,
        on_tool_delta=on_tool_delta,
        on_tool_reset=on_tool_reset,
        stream=stream,
        on_reasoning=on_reasoning,
        budget=budget,
        cache=cache,
        cache_key=cache_key,
    )
    # The loop owns the execution from position 0: a second call on the same object (a retry
    # after a failed turn, or a replay) starts again from the top, served from the log.
    execution.rewind()
    await _resume_if_decided(execution, approve)
    if any(isinstance(t, Toolset) for t in tools):
        # Toolsets (MCP servers) are listed as journaled steps before the first turn: a replay
        # gets the same menu from the log without starting them.
        menu, table = menu_of(await lend_tools(execution, tools, resolver))
    log: list[ToolCallRecord] = []
    compacted: list[int] = []
    requests = Requests()  # the menu, system prompt and settings validated once, not each turn
    response: LlmResponse | None = None
    for turn in range(max_turns):
        if compaction is not None and compaction.due(transcript):
            transcript = await _compact(execution, effect, compaction, turn, transcript, menu)
            compacted.append(turn)
        # A copy of the transcript: the request keeps its list, and the loop appends to its own.
        request = requests(list(transcript), menu, system, settings)
        response = await effect(execution, f"#turn:{turn}:model", request)
        response, screened = screen_response(response)
        # One check of the transcript a turn serves both: the ids it used and its inline bytes.
        # Approvals and input validation run before the tools, as the tools run before the last
        # result is built: inline placement is best effort, the guard enforces the caps.
        facts = _FACTS(transcript)
        shown, renamed = _fresh_ids(response, facts.ids)
        answer = assistant_message_of(shown)
        transcript.append(answer)
        inline_total = facts.inline + inline_bytes_of([answer])
        if not response.tool_calls:
            return await _finish(
                execution,
                "completed",
                transcript,
                turn + 1,
                response,
                log,
                compacted,
                complete_execution,
            )
        plans = [
            _plan(call, table, screened, seen) for seen, call in _with_seen(response.tool_calls)
        ]
        pending = await _gather_approvals(execution, approve, turn, plans)
        if pending is not None:
            return AgentResult(
                messages=transcript,
                status="parked",
                turns=turn + 1,
                response=response,
                pending_approvals=pending,
                tool_calls=log,
                compactions=compacted,
            )
        results = await _run_calls(execution, turn, plans, inline_total, provider)
        log.extend(
            ToolCallRecord(turn=turn, id=p.call.id, name=p.call.name, input=p.call.input, status=s)
            for p, s in zip(plans, [r[1] for r in results], strict=True)
        )
        answers: list[Part] = [
            r[0].model_copy(update={"tool_use_id": renamed[i]}) if i in renamed else r[0]
            for i, r in enumerate(results)
        ]
        transcript.append(Message(role="user", content=answers))
    return await _finish(
        execution, "max_turns", transcript, max_turns, response, log, compacted, complete_execution
    )


def _fresh_ids(response: LlmResponse, used: Set[str]) -> tuple[LlmResponse, dict[int, str]]:
    """The response as the transcript shows it: a call id ``used`` before gets a fresh suffix.

    Results are paired with calls by id, so the guard refuses a request holding one id twice
    (every vendor does). A model that repeats an id, in one turn or across turns, has the
    repeat shown as ``<id>_<n>`` and answered under that id; step ids and the tool-call log keep
    the id the model gave. ``used`` (the transcript's fold state) is read, never changed.
    Returns the response to show and {call index: shown id}.
    """
    taken: set[str] = set()  # the ids this response's calls are shown under
    renamed: dict[int, str] = {}
    for index, call in enumerate(response.tool_calls):
        call_id, n = call.id, 1
        while call_id in used or call_id in taken:
            n += 1
            call_id = f"{call.id}_{n}"
        taken.add(call_id)
        if call_id != call.id:
            renamed[index] = call_id
    if not renamed:
        return response, renamed
    calls = [
        call.model_copy(update={"id": renamed[i]}) if i in renamed else call
        for i, call in enumerate(response.tool_calls)
    ]
    return response.model_copy(update={"tool_calls": calls}), renamed


class _Facts:
    """What the loop reads of its transcript each turn: the call ids it used (results pair with
    calls by id) and its inline media bytes (capped over the transcript)."""

    __slots__ = ("ids", "inline")

    def __init__(self) -> None:
        self.ids: set[str] = set()
        self.inline = 0


def _add_facts(facts: _Facts, message: Message) -> None:
    if isinstance(message.content, list):
        facts.ids.update(
            part.id
            for part in message.content
            if isinstance(part, ToolUsePart) and isinstance(part.id, str)
        )
    facts.inline += inline_bytes_of([message])


_FACTS: PrefixFold[_Facts] = PrefixFold(_Facts, _add_facts)
"""A transcript's ``_Facts``, walking only the messages added since the last turn (one prefix
check a turn for both)."""


def _with_seen(calls: Sequence[ToolCall]) -> list[tuple[bool, ToolCall]]:
    """Each call with whether an earlier call of the same turn had the same id."""
    seen: set[str] = set()
    out: list[tuple[bool, ToolCall]] = []
    for call in calls:
        out.append((call.id in seen, call))
        seen.add(call.id)
    return out


def _plan(
    call: ToolCall, table: dict[str, ToolDefinition], screened: frozenset[str], duplicate: bool
) -> _Plan:
    plan = _Plan(call)
    if duplicate:
        plan.refuse(
            error_result(
                call.id,
                call.name,
                "duplicate_call_id",
                "another call of this turn has the same id; this one was not run.",
            ),
            "error",
        )
        return plan
    if call.id in screened:
        plan.refuse(screened_result(call.id, call.name), "screened")
        return plan
    tool = table.get(call.name)
    if tool is None:
        menu = ", ".join(sorted(table)) or "(none)"
        plan.refuse(
            error_result(
                call.id,
                call.name,
                "unknown_tool",
                f"there is no tool named {call.name!r} on the menu; the tools are: {menu}.",
            ),
            "unknown_tool",
        )
        return plan
    value, problem = tool.validate_input(call.input)
    if problem is not None:
        plan.refuse(
            error_result(
                call.id,
                call.name,
                "invalid_input",
                f"the input does not match the tool's schema: {problem}. Fix the input and call "
                "again.",
            ),
            "invalid_input",
        )
        return plan
    plan.tool = tool
    plan.value = value
    return plan


async def _gather_approvals(
    execution: Execution, approve: Approver, turn: int, plans: list[_Plan]
) -> list[dict[str, Any]] | None:
    """Decide every call that needs approval; return the digests still pending (None: go on).

    Each such call gets a journaled step ``#turn:<t>:approval:<id>`` holding the approver's
    normalized decision, or ``{"pending": true}`` when it gave none. If any is pending the
    execution parks (before the results message exists); once resumed, the replayed park returns
    the decisions given to ``resume``. Which calls the log runs therefore depends only on
    journaled values, never on the ``approve`` passed to this particular run.
    """
    asking = [p for p in plans if p.tool is not None and p.tool.requires_approval]
    if not asking:
        return None
    decisions: dict[str, Any] = {}
    pending: list[dict[str, Any]] = []
    for plan in asking:
        digest = digest_of(turn, plan.call)
        step_id = f"#turn:{turn}:approval:{plan.call.id}"
        decision = await execution.execute(step_id, _ask_step(approve), digest)
        if isinstance(decision, dict) and decision.get("pending") is True:
            pending.append(digest)
        else:
            decisions[plan.call.id] = decision
    if pending:
        resumed = await execution.park({"turn": turn, "pending": pending})
        if resumed is None:
            return pending
        given = resumed.get("decisions") if isinstance(resumed, dict) else None
        for digest in pending:
            found = given.get(digest["id"]) if isinstance(given, dict) else None
            decisions[digest["id"]] = (
                found if isinstance(found, dict) else {"undigestible": "missing"}
            )
    for plan in asking:
        decision = decisions[plan.call.id]
        refusal = (
            refusal_of(decision)
            if isinstance(decision, dict)
            else refusal_of({"undigestible": type(decision).__name__})
        )
        if refusal is not None:
            plan.tool = None
            plan.refuse(error_result(plan.call.id, plan.call.name, *refusal), "declined")
    return None


def _ask_step(approve: Approver) -> Callable[[Any], Awaitable[dict[str, Any]]]:
    """The approval step: the approver's normalized decision, or ``{"pending": true}``."""

    async def step(digest: Any) -> dict[str, Any]:
        raw = await ask(approve, digest)
        if raw is None:
            return {"pending": True}
        return normalize_decision(raw)

    return step


async def _resume_if_decided(execution: Execution, approve: Approver) -> None:
    """On a parked execution, resume it when ``approve`` decides every pending call.

    Resuming rewinds the execution, so the loop then replays from the top and the park returns
    the decisions. Without a decision for every pending call the execution is only rewound, so
    the replay stops at the same park and reports it again.
    """
    if execution.status != "parked":
        return
    payload = execution.parked_payload
    pending = payload.get("pending") if isinstance(payload, dict) else None
    if not isinstance(pending, list) or not all(
        isinstance(d, dict) and isinstance(d.get("id"), str) for d in pending
    ):
        raise AgentError(
            f"execution {execution.execution_id!r} is parked by something other than agent_loop "
            f"(payload {payload!r}); resume it with the code that parked it.",
            code="foreign_park",
        )
    decisions: dict[str, Any] = {}
    for digest in pending:
        raw = await ask(approve, digest)
        if raw is None:
            execution.rewind()
            return
        decisions[digest["id"]] = normalize_decision(raw)
    await execution.resume({"decisions": decisions})


async def _run_calls(
    execution: Execution,
    turn: int,
    plans: list[_Plan],
    inline_total: int,
    provider: LlmProvider,
) -> list[tuple[ToolResultPart, CallStatus]]:
    out: list[tuple[ToolResultPart, CallStatus]] = []
    for plan in plans:
        if plan.tool is None:
            assert plan.result is not None
            out.append((plan.result, plan.status))
            continue
        step_input = {"id": plan.call.id, "name": plan.call.name, "input": plan.call.input}
        outcome = await execution.execute(
            f"#turn:{turn}:tool:{plan.call.id}", _tool_step(plan.tool, plan.value), step_input
        )
        part, added = build_result(
            plan.tool,
            plan.call.id,
            outcome,
            inline_total=inline_total,
            capabilities=provider.capabilities,
        )
        inline_total += added
        out.append((part, "error" if part.is_error else "ok"))
    return out


def _tool_step(tool: ToolDefinition, value: Any) -> Callable[[Any], Awaitable[dict[str, Any]]]:
    async def step(_input: Any) -> dict[str, Any]:
        try:
            output = await tool.call(value)
        except tool.refusals:  # e.g. an MCP server whose menu changed: the run is refused
            raise
        except Exception as exc:  # a tool's failure is feedback for the model, not a crash
            return failure_outcome(type(exc).__name__, str(exc))
        return jsonable_outcome(output)

    return step


async def _compact(
    execution: Execution,
    effect: LlmEffect,
    compaction: Compaction,
    turn: int,
    transcript: list[Message],
    menu: list[ToolSpec],
) -> list[Message]:
    cut = compaction.cut(transcript)
    prefix, tail = transcript[:cut], transcript[cut:]
    step_id = f"#turn:{turn}:compact"
    if compaction.summarize is None:
        response = await effect(execution, step_id, compaction.summary_request(prefix, menu))
        summary = response.content
    else:
        summarize = compaction.summarize
        step_input = {"messages": [m.model_dump(mode="json") for m in prefix]}

        async def step(_input: Any) -> str:
            text = summarize(list(prefix))
            if not isinstance(text, str):
                text = await text
            if not isinstance(text, str):
                raise AgentError(
                    f"Compaction.summarize returned {type(text).__name__}; it must return str.",
                    code="invalid_summary",
                )
            return text

        summary = await execution.execute(step_id, step, step_input)
    return [summary_message(summary, tainted=is_tainted(prefix)), *tail]


async def _finish(
    execution: Execution,
    status: AgentStatus,
    transcript: list[Message],
    turns: int,
    response: LlmResponse | None,
    log: list[ToolCallRecord],
    compacted: list[int],
    complete_execution: bool,
) -> AgentResult:
    if complete_execution:
        await execution.complete({"status": status, "turns": turns})
    return AgentResult(
        messages=transcript,
        status=status,
        turns=turns,
        response=response,
        tool_calls=log,
        compactions=compacted,
    )
