"""``loom-nb chat``: the saved conversations of a journal, listed and shown.

``ls`` prints one line per chat, newest first (``loom_nb.chats()``): id, turns, model, cost,
last activity and the first user message; ``show ID`` prints one chat: that line, then its
messages (media and tool calls summarized) and its turns. ``--json`` prints the same as JSON.
The journal is ``--journal`` (a SQLite file or a ``postgresql://`` URL), else ``$LOOM_JOURNAL``,
else ``./.loom/journal.sqlite``; ``--store`` as for ``loom-nb journal``. Go on with a chat in
Python with ``Chat.resume(ID, provider, journal=...)``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from loom_nb.chat import ChatSummary, chats
from loom_nb.chat._catalog import outline
from loom_nb.chat._cost import format_cost
from loom_nb.chat._log import fold
from loom_nb.chat._resume import unknown_chat
from loom_nb.cli._backends import (
    add_journal_option,
    add_store_option,
    journal_target,
    open_journal,
    open_store_target,
    store_target,
)
from loom_nb.content import (
    AudioPart,
    FilePart,
    ImagePart,
    Message,
    ReasoningPart,
    ToolResultPart,
    ToolUsePart,
    text_of,
    to_parts,
)
from loom_nb.journal import Journal
from loom_nb.taint import Untrusted

__all__ = ["register"]

_PREVIEW = 60


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``loom-nb chat`` and its ``ls`` / ``show`` subcommands."""
    common = argparse.ArgumentParser(add_help=False)
    add_journal_option(common)
    add_store_option(common, what="content store for claim-checked payloads")
    chat = subparsers.add_parser("chat", help="saved conversations: list, show")
    commands = chat.add_subparsers(dest="chat_command", metavar="COMMAND", required=True)

    ls = commands.add_parser(
        "ls", aliases=["list"], parents=[common], help="list the chats, newest first"
    )
    ls.add_argument("--json", action="store_true", help="one JSON object per chat")
    ls.set_defaults(handler=_ls)

    show = commands.add_parser("show", parents=[common], help="print a chat's messages and turns")
    show.add_argument("chat_id", metavar="ID")
    show.add_argument("--json", action="store_true", help="the chat as one JSON object")
    show.set_defaults(handler=_show)


def _open(args: argparse.Namespace) -> Journal:
    target, _ = journal_target(args)
    store_at, named = store_target(args)
    store = open_store_target(store_at, create=True) if named or Path(store_at).is_dir() else None
    return open_journal(target, store=store)


def _ls(args: argparse.Namespace) -> int:
    with _open(args) as journal:
        found = chats(journal)
    for summary in found:
        if args.json:
            print(json.dumps(_as_json(summary), sort_keys=True, ensure_ascii=False))
        else:
            print(_line(summary))
    if not found and not args.json:
        print("(no chats)")
    return 0


def _show(args: argparse.Namespace) -> int:
    with _open(args) as journal:
        summary = next((c for c in chats(journal) if c.id == args.chat_id), None)
        if summary is None:
            raise unknown_chat(journal, args.chat_id)
        chat = outline(journal, fold(journal, args.chat_id))
    if args.json:
        shown = _as_json(summary)
        shown["messages"] = [m.model_dump(mode="json") for m in chat._history]
        shown["turn_list"] = [
            {
                "cost": None if t.cost is None else str(t.cost),
                "index": t.index,
                "input_tokens": t.usage.input_tokens,
                "kind": t.kind,
                "model": t.model,
                "output_tokens": t.usage.output_tokens,
                "provider": t.provider,
                "run_id": t.run_id,
                "status": t.status,
            }
            for t in chat._turns
        ]
        print(json.dumps(shown, sort_keys=True, ensure_ascii=False))
        return 0
    print(_line(summary))
    print()
    for index, message in enumerate(chat._history):
        print(f"[{index}] {message.role}: {_message_text(message)}")
    print()
    for turn in chat._turns:
        tokens = f"{turn.usage.input_tokens:,} in · {turn.usage.output_tokens:,} out"
        what = f"run {turn.run_id}" if turn.kind == "run" else "chat"
        print(
            f"turn {turn.index}: {what} · {turn.status} · {turn.model or 'model unknown'} · "
            f"{tokens} · {format_cost(turn.cost)}"
        )
    if summary.awaiting_approval:
        print("awaiting approval: decide it after Chat.resume(...) with chat.approve(...)")
    return 0


def _line(summary: ChatSummary) -> str:
    turns = f"{summary.turns} turn{'s' if summary.turns != 1 else ''}"
    when = summary.last_activity.strftime("%Y-%m-%d %H:%M:%S")
    first = summary.first_user_text or "-"
    first = " ".join(first.split())
    if len(first) > _PREVIEW:
        first = first[: _PREVIEW - 1] + "…"
    waiting = "\tawaiting approval" if summary.awaiting_approval else ""
    return (
        f"{summary.id}\t{turns}\t{summary.model or '-'}\t{format_cost(summary.cost)}\t{when}"
        f"\t{first}{waiting}"
    )


def _as_json(summary: ChatSummary) -> dict[str, Any]:
    return {
        "awaiting_approval": summary.awaiting_approval,
        "cost": None if summary.cost is None else str(summary.cost),
        "first_user_text": summary.first_user_text,
        "id": summary.id,
        "input_tokens": summary.usage.input_tokens,
        "last_activity": summary.last_activity.isoformat(),
        "model": summary.model,
        "output_tokens": summary.usage.output_tokens,
        "turns": summary.turns,
    }


def _message_text(message: Message) -> str:
    """One line per message: its text, with media, tool calls and results named in brackets."""
    if isinstance(message.content, str):
        return " ".join(message.content.split())
    pieces = []
    for part in to_parts(message.content):
        if isinstance(part, ImagePart | AudioPart | FilePart):
            pieces.append(f"[{part.media_type}]")
        elif isinstance(part, ToolUsePart):
            pieces.append(f"[call {_plain(part.name)} {_plain(part.id)}]")
        elif isinstance(part, ToolResultPart):
            result = text_of(part.content)
            error = " error" if part.is_error else ""
            pieces.append(f"[result {_plain(part.tool_use_id)}{error}] {result}")
        elif isinstance(part, ReasoningPart):
            pieces.append("[reasoning]")
        else:
            pieces.append(_plain(part.text))
    return " ".join(" ".join(pieces).split())


def _plain(value: Any) -> str:
    """A call's id or name as text (an untrusted one shows its value)."""
    return str(value.value) if isinstance(value, Untrusted) else str(value)
