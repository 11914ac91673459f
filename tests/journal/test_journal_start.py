"""``Execution.start``: what an execution was started with, kept from opening it.

A chat's first turn reads the provider it started on from there, so opening a new execution and
answering its first turn reads nothing back that the journal has just written.
"""

from __future__ import annotations

import asyncio

from loom_nb import Chat, Journal, ScriptedProvider
from loom_nb.store import Principal


def test_start_is_what_start_of_reads_for_new_reopened_and_forked_executions() -> None:
    journal = Journal()
    principal = Principal(tenant="acme")
    new = journal.execution("r", principal=principal, meta={"chat": {"model": "m"}})
    assert new.start == journal.start_of("r")
    assert new.start["meta"] == {"chat": {"model": "m"}}

    async def steps() -> None:
        await new.execute("a", lambda x: x, 1)

    asyncio.run(steps())
    assert journal.execution("r").start == journal.start_of("r")
    forked = new.fork(1, "r2")
    assert forked.start == journal.start_of("r2")
    assert forked.start["forked_from"]["execution_id"] == "r"
    new.start["meta"]["chat"] = "changed"  # a copy: the execution's own is not changed
    assert new.start["meta"] == {"chat": {"model": "m"}}
    listed = journal.execution("l", meta={"chat": {"tags": ["a", {"b": [1]}]}})
    listed.start["meta"]["chat"]["tags"][1]["b"].append(2)  # a copy all the way down
    listed.start["meta"]["chat"]["tags"].append("c")
    assert (
        listed.start["meta"]
        == {"chat": {"tags": ["a", {"b": [1]}]}}
        == journal.start_of("l")["meta"]
    )
    journal.close()


def test_a_chats_first_turn_reads_back_nothing_it_wrote() -> None:
    journal = Journal()
    statements: list[str] = []
    journal._conn.set_trace_callback(statements.append)
    chat = Chat(ScriptedProvider([{"text": "hello"}]), journal=journal, id="c")
    asyncio.run(chat("hi"))
    journal._conn.set_trace_callback(None)
    reads = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert not [s for s in reads if "execution_started" in s], reads
    assert sum(1 for s in reads if s.startswith("SELECT seq")) == 1, reads  # the open's one look
    assert chat.turns[0].status == "completed"
    journal.close()
