"""Durable runs: the event log (SQLite, or PostgreSQL by URL), executions, journaled steps, replay and recordings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from loom_nb._lazy import exports

# name -> module that defines it, imported when the name is first read (loom_nb._lazy);
# a turn imports neither the work queue nor the watch.
_EXPORTS: dict[str, str] = {
    "CLAIM_MARKER": "loom_nb.journal._claims",
    "DEFAULT_CLAIM_THRESHOLD": "loom_nb.journal._claims",
    "Execution": "loom_nb.journal._execution",
    "hash_request": "loom_nb.journal._hash",
    "Journal": "loom_nb.journal._journal",
    "LlmEffect": "loom_nb.journal._llm_effect",
    "create_llm_effect": "loom_nb.journal._llm_effect",
    "Event": "loom_nb.journal._timeline",
    "EventKind": "loom_nb.journal._timeline",
    "ExecutionSummary": "loom_nb.journal._timeline",
    "JournalWatch": "loom_nb.journal._watch",
    "Claim": "loom_nb.journal._work",
    "WorkCounts": "loom_nb.journal._work",
    "WorkItem": "loom_nb.journal._work",
    "WorkQueue": "loom_nb.journal._work",
    "WorkFollow": "loom_nb.journal._work_follow",
    "WorkReport": "loom_nb.journal._work_loop",
    "work_items": "loom_nb.journal._work_loop",
    "worker_id": "loom_nb.journal._work_loop",
}

__all__ = [
    "CLAIM_MARKER",
    "DEFAULT_CLAIM_THRESHOLD",
    "Claim",
    "Event",
    "EventKind",
    "Execution",
    "ExecutionSummary",
    "Journal",
    "JournalWatch",
    "LlmEffect",
    "WorkCounts",
    "WorkFollow",
    "WorkItem",
    "WorkQueue",
    "WorkReport",
    "create_llm_effect",
    "hash_request",
    "work_items",
    "worker_id",
]

__getattr__, __dir__ = exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # type checkers and IDEs see the real definitions
    from loom_nb.journal._claims import CLAIM_MARKER, DEFAULT_CLAIM_THRESHOLD
    from loom_nb.journal._execution import Execution
    from loom_nb.journal._hash import hash_request
    from loom_nb.journal._journal import Journal
    from loom_nb.journal._llm_effect import LlmEffect, create_llm_effect
    from loom_nb.journal._timeline import Event, EventKind, ExecutionSummary
    from loom_nb.journal._watch import JournalWatch
    from loom_nb.journal._work import Claim, WorkCounts, WorkItem, WorkQueue
    from loom_nb.journal._work_follow import WorkFollow
    from loom_nb.journal._work_loop import WorkReport, work_items, worker_id
