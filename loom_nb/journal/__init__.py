"""Durable runs: the event log (SQLite, or PostgreSQL by URL), executions, journaled steps, replay and recordings."""

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
