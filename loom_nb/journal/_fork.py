"""What ``execution.fork(at_step, new_id)`` copies: an execution's timeline before a position.

A fork is a new execution whose log starts with its own ``execution_started`` (naming where it
came from, ``forked_from``, and keeping the principal) followed by the events that fold into the
source's timeline entries before ``at_step``, re-numbered as its own. It replays that prefix and
runs live from ``at_step`` on ("edit turn N and go on"). Only the rows are built here; the
journal writes them in one transaction, refusing an id in use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loom_nb.errors import JournalError
from loom_nb.journal._codec import dumps, is_storable_id
from loom_nb.journal._principal import principal_to_json
from loom_nb.journal._sql import now_iso
from loom_nb.journal._timeline import Entry

if TYPE_CHECKING:
    from loom_nb.journal._writer import NewRow
    from loom_nb.store import Principal

__all__ = ["fork_rows"]


def fork_rows(
    entries: list[Entry],
    source_id: str,
    principal: Principal | None,
    at_step: object,
    new_id: object,
) -> list[NewRow]:
    """The rows of a new execution ``new_id`` holding ``entries`` before ``at_step`` (see ``Execution.fork``)."""
    if not is_storable_id(new_id):
        raise JournalError(
            f"fork: the new execution id is a non-empty string of valid Unicode, not {new_id!r}.",
            code="invalid_execution_id",
        )
    assert isinstance(new_id, str)
    position = _fork_position(entries, source_id, at_step)
    rows: list[NewRow] = []
    created = now_iso()
    started = {
        "forked_from": {"execution_id": source_id, "position": position},
        "principal": principal_to_json(principal),
    }
    rows.append((new_id, "execution_started", None, None, dumps(started), created))
    for index, entry in enumerate(entries[:position]):
        for kind, payload in _events_of(entry):
            rows.append((new_id, kind, entry.step_id, index, payload, created))
    return rows


def _fork_position(entries: list[Entry], source_id: str, at_step: object) -> int:
    if isinstance(at_step, int) and not isinstance(at_step, bool):
        if 0 <= at_step <= len(entries):
            return at_step
        raise JournalError(
            f"fork: position {at_step} is outside execution {source_id!r}'s timeline "
            f"(0 to {len(entries)}).",
            code="unknown_step",
            execution_id=source_id,
        )
    if isinstance(at_step, str):
        for index, entry in enumerate(entries):
            if entry.kind == "step" and entry.step_id == at_step:
                return index
        known = ", ".join(repr(e.step_id) for e in entries[:5] if e.kind == "step")
        raise JournalError(
            f"fork: execution {source_id!r} has no step {at_step!r} on its timeline (its "
            f"first steps: {known or 'none'}). Pass a recorded step id or a position.",
            code="unknown_step",
            execution_id=source_id,
        )
    raise JournalError(
        f"fork: at_step is a step id (str) or a position (int), not {type(at_step).__name__}.",
        code="invalid_argument",
    )


def _events_of(entry: Entry) -> list[tuple[str, str]]:
    """The events (kind, raw payload) that fold into ``entry`` (what a fork copies)."""
    if entry.kind == "step":
        events = [("step_started", "{}")]
        if entry.state in ("completed", "failed"):
            kind = "step_completed" if entry.state == "completed" else "step_failed"
            events.append((kind, entry.payload or "{}"))
        return events
    if entry.kind == "park":
        events = [("parked", entry.payload or "{}")]
        if entry.state == "resumed":
            events.append(("resumed", entry.resume_payload or "{}"))
        return events
    return [("completed", entry.payload or "{}")]
