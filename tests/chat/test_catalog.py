"""chats() lists the saved conversations newest first; `loom-nb chat ls / show` print the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loom_nb import Chat, ChatSummary, Journal, ScriptedProvider, chats, tool
from loom_nb.cli import main
from tests.chat.priced import anthropic, price


@tool(requires_approval=True)
def send_email(to: str, body: str) -> str:
    """Send an email.

    Args:
        to: The address.
        body: The text.
    """
    return f"sent to {to}"


async def _three_chats(journal: Journal) -> None:
    """'old' (two turns, one undone, then a third), 'priced' (Anthropic), 'waiting' (parked run)."""
    old = Chat(
        ScriptedProvider([{"text": "1"}, {"text": "2"}, {"text": "3"}]), journal=journal, id="old"
    )
    await old("first question")
    await old("second")
    old.undo()
    priced, _ = anthropic({"text": "Hi.", "usage": {"input_tokens": 100, "output_tokens": 20}})
    await Chat(priced, journal=journal, id="priced")("  what   is\nthis?  ")
    waiting = Chat(
        ScriptedProvider(
            [
                {
                    "tool_calls": [
                        {"id": "c1", "name": "send_email", "input": {"to": "a", "body": "b"}}
                    ]
                }
            ]
        ),
        tools=[send_email],
        journal=journal,
        id="waiting",
    )
    await waiting.run("email a")
    await old("third")  # the oldest chat is the most recently active now


async def test_chats_are_listed_newest_first_with_their_fields(tmp_path: Path) -> None:
    """Each chat: id, turns now, first user text, model, last activity, cost; runs are not chats."""
    journal = Journal(tmp_path / "j.sqlite")
    await _three_chats(journal)
    found = chats(journal)
    assert all(isinstance(c, ChatSummary) for c in found)
    assert [c.id for c in found] == ["old", "waiting", "priced"]  # waiting/run-0 is not listed
    assert found[0].last_activity > found[1].last_activity > found[2].last_activity
    old, waiting, priced = found
    assert (old.turns, old.first_user_text, old.model) == (2, "first question", "scripted")
    assert old.cost is None  # a scripted model has no price
    assert (priced.turns, priced.model) == (1, "claude-sonnet-4-5")
    assert priced.first_user_text == "what   is\nthis?"
    assert priced.cost == price(100, 20)
    assert (priced.usage.input_tokens, priced.usage.output_tokens) == (100, 20)
    assert waiting.awaiting_approval is True
    assert old.awaiting_approval is False
    assert waiting.turns == 1
    assert waiting.first_user_text == "email a"
    # By path too, and a journal that does not exist has no chats (and is not created).
    assert [c.id for c in chats(str(tmp_path / "j.sqlite"))] == ["old", "waiting", "priced"]


def test_no_default_journal_means_no_chats(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """chats() with no journal looks at .loom/journal.sqlite, and creates nothing when it is absent."""
    monkeypatch.chdir(tmp_path)
    assert chats() == []
    assert not (tmp_path / ".loom").exists()


async def test_the_cli_lists_and_shows_chats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`loom-nb chat ls` prints a line per chat, newest first; `chat show ID` its messages and turns."""
    path = tmp_path / "j.sqlite"
    journal = Journal(path)
    await _three_chats(journal)
    journal.close()
    assert main(["chat", "ls", "--journal", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[0] for line in lines] == ["old", "waiting", "priced"]
    assert lines[0].split("\t")[1:4] == ["2 turns", "scripted", "cost unknown"]
    assert lines[0].endswith("\tfirst question")
    assert lines[1].endswith("\temail a\tawaiting approval")
    assert lines[2].split("\t")[1:3] == ["1 turn", "claude-sonnet-4-5"]
    assert lines[2].endswith("\twhat is this?")  # whitespace folded to one line
    # `list`, the word the help text uses, is the same command (it was refused as unknown).
    assert main(["chat", "list", "--journal", str(path)]) == 0
    assert capsys.readouterr().out.splitlines() == lines
    assert main(["journal", "list", "--journal", str(path)]) == 0
    executions = capsys.readouterr().out
    assert main(["journal", "ls", "--journal", str(path)]) == 0
    assert capsys.readouterr().out == executions
    assert "old" in executions

    assert main(["chat", "ls", "--journal", str(path), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[2]["cost"] == str(price(100, 20))
    assert rows[0]["turns"] == 2

    assert main(["chat", "show", "old", "--journal", str(path)]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[0] == lines[0]
    assert shown[2:6] == [
        "[0] user: first question",
        "[1] assistant: 1",
        "[2] user: third",  # the undone turn is gone, as in the chat
        "[3] assistant: 3",
    ]
    assert shown[-2].startswith("turn 0: chat · completed · scripted")
    assert main(["chat", "show", "waiting", "--journal", str(path)]) == 0
    waiting = capsys.readouterr().out
    assert "[1] assistant: [call send_email c1]" in waiting
    assert "turn 0: run waiting/run-0 · parked" in waiting
    assert "awaiting approval" in waiting

    assert main(["chat", "show", "priced", "--journal", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [m["role"] for m in data["messages"]] == ["user", "assistant"]
    assert data["turn_list"][0]["provider"] == "AnthropicProvider"

    assert main(["chat", "show", "olde", "--journal", str(path)]) == 1
    error = capsys.readouterr().err
    assert "[unknown_chat]" in error
    assert "'old'" in error


async def test_the_default_journal_lists_and_resumes_long_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no journal given, chats() and Chat.resume read .loom/, long turns claim-checked included."""
    monkeypatch.chdir(tmp_path)
    question, answer = "why? " * 4000, "because " * 4000  # over the claim threshold
    await Chat(ScriptedProvider([{"text": answer}]), id="long")(question)
    (listed,) = chats()
    assert (listed.id, listed.turns) == ("long", 1)
    assert listed.first_user_text == question.strip()
    resumed = Chat.resume("long", ScriptedProvider([]))
    assert [m.content for m in resumed.history] == [question, answer]
