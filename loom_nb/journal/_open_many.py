"""Open many new executions at once: one transaction per ``CHUNK`` ids instead of one per id.

``chat.map`` runs each item in its own execution (``<map>/<index>``). ``journal.execution(id)``
starts one in a transaction of its own (read its rows; journal ``execution_started`` when there
are none), so a map of a thousand items paid a thousand such commits before any step ran.
``open_new(journal, ids, principal=...)`` starts those of ``ids`` that have no events yet with one
``executemany`` per chunk, in the same kind of write transaction (the journal's write lock on
SQLite; on PostgreSQL the (execution_id, ordinal) uniqueness refuses a row another process got in
first, which rolls the chunk back: its ids are then simply left to ``journal.execution``). It
returns an ``Execution`` for each id it started, as ``journal.execution`` would have returned it
(its one event read back from what was written); ids that already had events are not in the
result and are opened (replayed) the usual way. Starting an execution takes no lease and records
no step, so nothing about a step's durability changes: an item's outcome is still journaled by
its own step, and an execution started here whose item never ran is simply an item to run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from loom_nb.errors import JournalError
from loom_nb.journal._codec import dumps, is_storable_id
from loom_nb.journal._execution import Execution
from loom_nb.journal._outcomes import CHUNK
from loom_nb.journal._principal import principal_from_json, principal_to_json
from loom_nb.journal._sql import INSERT, now_iso
from loom_nb.journal._timeline import Timeline

if TYPE_CHECKING:
    from loom_nb.journal._journal import Journal
    from loom_nb.store import Principal

__all__ = ["open_new"]


def _existing(count: int) -> str:
    """Which of ``count`` execution ids have events (placeholders only: the ids are parameters)."""
    marks = ", ".join("?" * count)
    return (
        "SELECT DISTINCT execution_id FROM events "  # noqa: S608 - only "?" marks
        f"WHERE execution_id IN ({marks}) AND ordinal = 0"
    )


def open_new(
    journal: Journal, execution_ids: Sequence[str], *, principal: Principal | None = None
) -> dict[str, Execution]:
    """Start each of ``execution_ids`` that has no events yet; an ``Execution`` for each started.

    Best effort: a chunk another process wrote into meanwhile is left out (its ids open the usual
    way, ``journal.execution``), as is everything when the journal cannot be written now.
    """
    wanted = principal_to_json(principal)
    payload = dumps({"principal": wanted})
    recorded = principal_from_json(wanted)
    backend = journal._backend
    opened: dict[str, Execution] = {}
    for start in range(0, len(execution_ids), CHUNK):
        chunk = [item for item in execution_ids[start : start + CHUNK] if is_storable_id(item)]
        sql = _existing(len(chunk))

        def body(sql: str = sql, chunk: list[str] = chunk) -> list[str]:
            conn: Any = backend.conn
            there = {row[0] for row in conn.execute(sql, chunk).fetchall()}
            new = [item for item in chunk if item not in there]
            created = now_iso()
            rows = [(item, "execution_started", None, None, payload, created, 0) for item in new]
            if rows:
                conn.executemany(INSERT, rows)
            return new

        new: list[str] = []
        with contextlib.suppress(JournalError), backend.reading():
            new = backend.transaction(body, what="open")
        for execution_id in new:
            timeline = Timeline(execution_id)
            timeline.apply("execution_started", None, None, payload)
            opened[execution_id] = Execution(journal, execution_id, recorded, timeline, ordinal=1)
    return opened
