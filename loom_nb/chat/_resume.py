"""Conversations that outlive the kernel: ``Chat.resume`` and ``Chat(..., restart=True)`` (issue 27).

Re-running a notebook replays a chat turn by turn, which needs every earlier cell run again in
order and the same code. ``Chat.resume(id, provider)`` instead rebuilds the chat from its log
(``_log.walk``): the history, turns, usage and cost of the plain turns come from the journaled
requests and responses, priced by the provider each turn recorded; each run's agent loop is
replayed from its own log (no model is called: the provider is one that refuses, and a run
whose log ends before its model answered left no turn) to get its result and pending
approvals. The chat's execution is then taken as replayed up to its end (``Execution.seek``),
so the next message runs live after the last recorded turn, on any provider: a replay checks
each step's input against the provider's capabilities, a resume has nothing to check. A fork
of the resumed chat is live too: it takes the first ``<id>/fork-<n>`` no execution holds.

``restart=True`` starts an id over. The journal is append-only, so the old turns cannot be
removed: they are copied to ``<id>~archived-<UTC time>`` (a fork of the whole log, listed by
``chats()`` and resumable like any chat), and a ``restart`` step at position 0 supersedes the
id's log from there (the journal's timeline keeps only what follows it). A later ``run`` picks
a run id the archived turns do not use.
"""

from __future__ import annotations

import difflib
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from loom_nb.chat._catalog import chat_ids
from loom_nb.chat._cost import identity_of
from loom_nb.chat._log import MARKS, ChatLog, Mark, Target, fold, started_identity, walk
from loom_nb.chat._records import DEFAULT_HOME, Parked, Unreachable, settled
from loom_nb.chat._sync import run_blocking
from loom_nb.content import LlmRequest
from loom_nb.errors import ConfigurationError, JournalError, LoomError
from loom_nb.journal import Execution, Journal

if TYPE_CHECKING:
    from loom_nb.chat._chat import Chat

__all__ = ["existing_journal", "restart_chat", "resume_chat", "unknown_chat"]


def resume_chat(chat: Chat, *, system_given: bool, settings_given: bool = False) -> Chat:
    """Fill the fresh ``chat`` (same id) with its journaled state; the next turn runs live."""
    log = fold(chat.journal, chat.id)
    if not log.start:
        raise unknown_chat(chat.journal, chat.id)
    if not log.is_chat:
        raise _not_a_chat(chat.id)
    principal = log.start.get("principal")
    recorded = principal.get("tenant") if isinstance(principal, dict) else None
    if isinstance(recorded, str) and recorded != chat._principal.tenant:
        raise ConfigurationError(
            f"chat {chat.id!r} was recorded for tenant {recorded!r}, not "
            f"{chat._principal.tenant!r}: resume it with tenant={recorded!r} (its media is "
            "read as that tenant).",
            code="principal_mismatch",
            chat_id=chat.id,
        )
    execution = chat._open()
    execution.seek(len(log.steps))
    identity = started_identity(chat.journal, log.start) or identity_of(chat.provider)
    last_call, last_turn = _recorded_requests(log)
    if not system_given and last_call is not None:
        chat._system = last_call.system
    if not settings_given and last_turn is not None:
        # The journaled settings: the provider's construction ``settings`` merged under the
        # chat's (a resume on a provider built with other settings still sends these; pass
        # ``settings=`` to choose).
        chat._settings = last_turn.settings

    async def replay_run(target: Target, parked: Parked) -> None:
        assert target is chat
        chat._recorded_runs.add(parked.run_id)
        try:
            await chat._drive(None, provider=Unreachable(chat.provider))
        except LoomError as exc:
            raise ConfigurationError(
                f"resume chat {chat.id!r}: its run {parked.run_id!r} (turn {parked.turn}) could "
                f"not be replayed from the journal: {exc} Resume with the tools the run used "
                "(tools=[...]); the journal is unchanged.",
                code="resume_failed",
            ) from exc

    rebuild = walk(chat, log, identity, replay_run)
    if any(step.kind == "run" for step in log.steps):
        run_blocking(rebuild)  # runs replay their agent loops (which may wait on tasks)
    else:
        settled(rebuild, f"Chat.resume({chat.id!r})")
    # A run resumed later (a halted one, once its limit is raised) replays its log leniently too.
    chat._recorded_runs.update(t.run_id for t in chat._turns if t.run_id is not None)
    # A fork goes on live: under an id no earlier fork of the chat holds (reopening one, as a
    # re-run does, would journal this fork's turns into that fork's log).
    while chat.journal.start_of(f"{chat.id}/fork-{chat._forks}") is not None:
        chat._forks += 1
    return chat


def _recorded_requests(log: ChatLog) -> tuple[LlmRequest | None, LlmRequest | None]:
    """The requests of the chat's last model call (a plain turn's or a run's: what its system
    prompt is read from) and of its last plain turn (its settings: a run's calls carry none),
    each read from the journal once."""
    last_call: LlmRequest | None = None
    for step in reversed(log.steps):
        if step.kind == "model" and isinstance(step.input, dict):
            last_turn = LlmRequest.model_validate(step.input)
            return last_call or last_turn, last_turn
        run_id = step.output.get("run_id") if isinstance(step.output, dict) else None
        if last_call is None and step.kind == "run" and isinstance(run_id, str):
            for call in reversed(fold(log.journal, run_id).steps):
                if call.step_id.endswith(":model") and isinstance(call.input, dict):
                    last_call = LlmRequest.model_validate(call.input)
                    break
    return last_call, None


def restart_chat(chat: Chat) -> None:
    """Start ``chat.id`` over: archive its current turns, journal a ``restart`` step at position 0."""
    journal = chat.journal
    log = fold(journal, chat.id)
    if not log.start:
        return  # a new id: there is nothing to start over
    if not log.is_chat:
        raise _not_a_chat(chat.id)
    execution = chat._open()
    archived = None
    if any(step.kind not in MARKS for step in log.steps):
        archived = _archive(execution, chat.id, len(log.steps))
    execution.seek(0, supersede=True)
    step_id = "#chat:0:restart"
    output = settled(
        execution.execute(step_id, lambda _i: {"archived": archived}, {}),
        "Chat(..., restart=True)",
    )
    chat._positions.append(Mark(step_id, "restart", output))


def _archive(execution: Execution, chat_id: str, length: int) -> str:
    """Copy the chat's whole log to ``<id>~archived-<UTC time>`` (``-2``, ``-3`` ... when taken)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    for attempt in range(1, 1000):
        archived = f"{chat_id}~archived-{stamp}" + (f"-{attempt}" if attempt > 1 else "")
        try:
            execution.fork(length, archived)
        except JournalError as exc:
            if exc.code != "execution_exists":
                raise
            continue
        return archived
    raise JournalError(  # pragma: no cover - a thousand restarts of one id in one second
        f"chat {chat_id!r} could not be archived: every archive id of this second is taken.",
        code="execution_exists",
    )


def unknown_chat(journal: Journal, chat_id: str) -> ConfigurationError:
    """No chat ``chat_id`` in ``journal``: the error names the nearest ids it has."""
    known = chat_ids(journal)
    nearest = difflib.get_close_matches(chat_id, known, n=5, cutoff=0.5) or known[:5]
    listed = ", ".join(repr(n) for n in nearest) if nearest else "none (the journal has no chats)"
    return ConfigurationError(
        f"no chat {chat_id!r} in {journal!r}; the nearest ids: {listed}. `loom_nb.chats(journal)` "
        "(or `loom-nb chat ls`) lists them all; a chat is found in the journal it was recorded in.",
        code="unknown_chat",
        chat_id=chat_id,
        nearest=nearest,
    )


def _not_a_chat(execution_id: str) -> ConfigurationError:
    return ConfigurationError(
        f"execution {execution_id!r} is not a chat (its steps are not a Chat's: an agent run, a "
        "chat's run or another program's). `loom_nb.chats(journal)` lists the chats; "
        "`loom-nb journal show ID` shows any execution.",
        code="not_a_chat",
        chat_id=execution_id,
    )


def existing_journal(journal: Journal | str | None, chat_id: str) -> Journal | str | None:
    """The journal a resume reads: as given, or the default one, which must exist already."""
    if journal is not None:
        return journal
    path = Path.cwd() / DEFAULT_HOME / "journal.sqlite"
    if not path.is_file():
        raise ConfigurationError(
            f"no chat {chat_id!r} to resume: there is no journal at {path} (the default). Pass "
            "journal= the journal the chat was recorded in.",
            code="unknown_chat",
        )
    return None
