"""``loom_nb.chats()``: the saved conversations of a journal, newest first.

A chat is an execution whose steps are all chat steps (``_log``); its runs (``<id>/run-<n>``)
are not chats of their own. Each is outlined from its log (``_log.walk``) without replaying its
runs: a run's messages come from its journaled transcript, its tokens and cost from its model
steps. The last activity is the last event of the chat or of any of its runs. ``loom-nb chat
ls`` and ``chat show`` print the same (``loom_nb.cli.chat``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from loom_nb.chat._cost import answered, run_usage
from loom_nb.chat._log import ChatLog, Outline, RunHandler, Target, fold, started_identity, walk
from loom_nb.chat._records import DEFAULT_HOME, ChatTurn, Parked, TurnStatus, settled, shared_store
from loom_nb.content import Message, Usage, text_of
from loom_nb.errors import ConfigurationError
from loom_nb.journal import ExecutionSummary, Journal
from loom_nb.render._source import transcript_of
from loom_nb.store import ContentStore

__all__ = ["ChatSummary", "chat_ids", "chats", "outline"]

_RUN = re.compile(r".+/run-\d+")


@dataclass(frozen=True)
class ChatSummary:
    """One saved conversation, as ``chats()`` lists it."""

    id: str
    """The chat's id: ``Chat.resume(id, provider)`` goes on from it."""
    turns: int
    """Its turns now (an undone turn is not counted)."""
    first_user_text: str | None
    """The text of its first user message (None when it has none yet)."""
    model: str | None
    """The model of its last turn (else the one it started on), when known."""
    last_activity: datetime
    """When the chat, or one of its runs, last journaled something (UTC)."""
    cost: Decimal | None
    """USD cost of its turns; None when any turn's price is unknown (or it has no turns)."""
    usage: Usage
    """Tokens of its turns, summed."""
    awaiting_approval: bool
    """Whether its last turn is a run parked for approvals."""


def chats(
    journal: Journal | str | os.PathLike[str] | None = None, *, store: ContentStore | None = None
) -> list[ChatSummary]:
    """The saved conversations of ``journal`` (default ``.loom/journal.sqlite``), newest first.

    A journal given by path or URL is opened with ``store`` (default: ``.loom/store`` with the
    default journal), where a chat's long turns were claim-checked.
    """
    opened = _journal(journal, store)
    if opened is None:
        return []
    try:
        summaries = {s.execution_id: s for s in opened.executions()}
        found = []
        for chat_id in _candidates(summaries):
            log = fold(opened, chat_id)
            if log.is_chat:
                found.append(_summary(opened, log, summaries))
    finally:
        if opened is not journal:
            opened.close()
    return sorted(found, key=lambda c: (c.last_activity, c.id), reverse=True)


def chat_ids(journal: Journal) -> list[str]:
    """The ids of the chats in ``journal``, most recently active first."""
    summaries = {s.execution_id: s for s in journal.executions()}
    ids = [i for i in _candidates(summaries) if fold(journal, i).is_chat]
    return sorted(ids, key=lambda i: summaries[i].updated, reverse=True)


def outline(journal: Journal, log: ChatLog) -> Outline:
    """The chat of ``log`` rebuilt without replaying its runs (what ``chat show`` prints)."""
    target = Outline()
    identity = started_identity(journal, log.start) or {}
    settled(
        walk(target, log, identity, _runs_read_from(journal)), f"outline of {log.execution_id!r}"
    )
    return target


def _journal(
    journal: Journal | str | os.PathLike[str] | None, store: ContentStore | None
) -> Journal | None:
    if isinstance(journal, Journal):
        return journal
    if journal is None:
        home = Path.cwd() / DEFAULT_HOME
        if not (home / "journal.sqlite").is_file():
            return None
        if store is None and (home / "store").is_dir():
            store = shared_store(home / "store")
        return Journal(home / "journal.sqlite", store=store)
    if not isinstance(journal, str | os.PathLike):
        raise ConfigurationError(
            f"journal is a Journal, a path or a postgresql:// URL, not {type(journal).__name__}.",
            code="invalid_argument",
        )
    return Journal(journal, store=store)


def _candidates(summaries: dict[str, ExecutionSummary]) -> list[str]:
    """Executions that may be chats: not a chat's run (``<id>/run-<n>`` of a known id)."""
    return [
        i for i in summaries if not (_RUN.fullmatch(i) and i.rsplit("/run-", 1)[0] in summaries)
    ]


def _runs_read_from(journal: Journal) -> RunHandler:
    """A walk's run handler that reads each run's turn from its log (no replay)."""

    async def read(target: Target, parked: Parked) -> None:
        _read_run(journal, target, parked)

    return read


def _read_run(journal: Journal, target: Target, parked: Parked) -> None:
    """A run's turn from its log: its transcript, tokens and cost."""
    usage, cost = run_usage(journal, parked.run_id, parked.identity)
    run = journal.execution(parked.run_id)
    transcript = transcript_of(run)
    status: TurnStatus = "completed"
    if run.status == "parked":
        status = "parked"
    elif isinstance(run.output, dict) and run.output.get("status") == "max_turns":
        status = "max_turns"
    target._turns.append(
        ChatTurn(
            index=parked.turn,
            kind="run",
            start=len(parked.messages) - 1,
            status=status,
            response=None,
            usage=usage,
            cost=cost,
            position=parked.position,
            run_id=parked.run_id,
            **answered(parked.identity, None),
        )
    )
    target._history[:] = transcript.messages or parked.messages
    target._parked = parked if status == "parked" else None


def _summary(journal: Journal, log: ChatLog, summaries: dict[str, ExecutionSummary]) -> ChatSummary:
    target = outline(journal, log)
    turns = target._turns
    last = max(
        [log.updated or datetime.min]
        + [summaries[t.run_id].updated for t in turns if t.run_id in summaries]
    )
    costs = [t.cost for t in turns]
    identity: dict[str, Any] = target._identity or {}
    return ChatSummary(
        id=log.execution_id,
        turns=len(turns),
        first_user_text=_first_user_text(target._history),
        model=turns[-1].model if turns else identity.get("model"),
        last_activity=last,
        cost=None
        if not costs or any(c is None for c in costs)
        else sum((c for c in costs if c is not None), Decimal(0)),
        usage=Usage(
            input_tokens=sum(t.usage.input_tokens for t in turns),
            output_tokens=sum(t.usage.output_tokens for t in turns),
        ),
        awaiting_approval=target._parked is not None,
    )


def _first_user_text(history: list[Message]) -> str | None:
    for message in history:
        if message.role == "user":
            text = text_of(message.content).strip()
            if text:
                return text
    return None
