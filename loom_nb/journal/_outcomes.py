"""The outcome of the first step of many executions, read in a few queries (a map's items).

``chat.map`` runs each item in its own execution (``<map>/<index>``) whose one step sits at
position 0. Opening a thousand executions to learn which finished would be a thousand reads;
``step_outcomes`` asks for all of them at once (``IN`` lists of ``CHUNK`` ids, which both
backends serve from the ``(execution_id, ordinal)`` index) and keeps, per execution, the last
outcome journaled at position 0: ``completed`` with the step's output, ``failed`` with its error,
or ``started`` when the step began and nothing followed (its process died in flight). A step
run again after a failure supersedes the failure, as on the execution's own timeline.

``give_back`` drops this journal handle's writer lease on such an execution after its step
failed, so another process may run the item again at once rather than after the lease's ttl.

``step_durations`` reads the same steps' times alone: how long each took (a map's latencies).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from loom_nb.journal._claims import claimed_field, recorded_fields

if TYPE_CHECKING:
    from loom_nb.journal._journal import Journal

__all__ = ["CHUNK", "StepOutcome", "give_back", "step_durations", "step_outcomes"]

CHUNK = 500
"""Execution ids per query (well under SQLite's and PostgreSQL's parameter limits)."""

_KINDS = {"step_started": "started", "step_completed": "completed", "step_failed": "failed"}


@dataclass(frozen=True)
class StepOutcome:
    """What an execution's step at position 0 came to, as journaled last."""

    state: Literal["started", "completed", "failed"]
    """``completed`` (``output`` holds its output), ``failed`` (``error``) or ``started`` (in flight, or its process died)."""
    output: Any = None
    """The step's output (claim-check resolved) when completed."""
    error: dict[str, Any] | None = None
    """The journaled error (``code``, ``message``, ``type``) when failed."""
    completed: bool = False
    """Whether the execution itself was completed after the step."""


def _select(count: int) -> str:
    """The query for ``count`` execution ids (placeholders only: the ids are parameters)."""
    marks = ", ".join("?" * count)
    return (
        "SELECT seq, execution_id, kind, payload FROM events "  # noqa: S608 - only "?" marks
        f"WHERE execution_id IN ({marks}) AND (position = 0 OR kind = 'completed') "
        "ORDER BY seq"
    )


def step_outcomes(journal: Journal, execution_ids: Sequence[str]) -> dict[str, StepOutcome]:
    """The outcome of position 0 of each of ``execution_ids`` that has one (absent: never ran)."""
    found: dict[str, StepOutcome] = {}
    backend = journal._backend
    for start in range(0, len(execution_ids), CHUNK):
        chunk = list(execution_ids[start : start + CHUNK])
        sql = _select(len(chunk))

        def query(sql: str = sql, chunk: list[str] = chunk) -> list[tuple[Any, ...]]:
            rows: list[tuple[Any, ...]] = journal._conn.execute(sql, chunk).fetchall()
            return rows

        with backend.reading():
            rows = backend.read(query)
        for seq, execution_id, kind, payload in rows:
            if kind == "completed":
                last = found.get(execution_id)
                if last is not None:
                    found[execution_id] = StepOutcome(
                        last.state, last.output, last.error, completed=True
                    )
                continue
            state = _KINDS.get(kind)
            if state is None:
                continue
            where = f"execution {execution_id!r}, event {seq} ({kind})"
            if state == "completed":
                fields = recorded_fields(payload, where)
                output = claimed_field(fields, "output", store=journal.store, where=where)
                found[execution_id] = StepOutcome("completed", output=output)
            elif state == "failed":
                fields = recorded_fields(payload, where)
                error = fields.get("error")
                found[execution_id] = StepOutcome(
                    "failed", error=error if isinstance(error, dict) else {}
                )
            else:
                found[execution_id] = StepOutcome("started")
    return found


def give_back(journal: Journal, execution_id: str) -> bool:
    """Give back this handle's lease on ``execution_id`` (no step of it in flight); True if held."""
    return journal._writer.give_back(execution_id)


def step_durations(journal: Journal, execution_ids: Sequence[str]) -> dict[str, float]:
    """Seconds from the start of each execution's step at position 0 to its end (completed or
    failed), by the journal's clock (the wall clock kept steady within a process, so a clock
    stepped by under a second while the step ran does not change it: ``_sql.stamp_ns``); a step
    started again is timed from its latest start.

    Reads only the events' kinds and times (no payloads), in the same chunks as
    ``step_outcomes``: a map's latencies cost a few small queries, and only when asked for.
    """
    durations: dict[str, float] = {}
    backend = journal._backend
    for start in range(0, len(execution_ids), CHUNK):
        chunk = list(execution_ids[start : start + CHUNK])
        marks = ", ".join("?" * len(chunk))
        sql = (
            "SELECT execution_id, kind, created FROM events "  # noqa: S608 - only "?" marks
            f"WHERE execution_id IN ({marks}) AND position = 0 "
            "AND kind IN ('step_started', 'step_completed', 'step_failed') ORDER BY seq"
        )

        def query(sql: str = sql, chunk: list[str] = chunk) -> list[tuple[Any, ...]]:
            rows: list[tuple[Any, ...]] = journal._conn.execute(sql, chunk).fetchall()
            return rows

        with backend.reading():
            rows = backend.read(query)
        began: dict[str, datetime] = {}
        for execution_id, kind, created in rows:
            when = datetime.fromisoformat(created)
            if kind == "step_started":
                began[execution_id] = when
            elif execution_id in began:
                seconds = (when - began[execution_id]).total_seconds()
                durations[execution_id] = max(0.0, seconds)
    return durations
