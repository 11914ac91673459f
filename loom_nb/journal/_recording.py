"""Recordings: an execution as JSON Lines text, committed next to a notebook and replayed anywhere.

One event per line, each a canonical JSON object (sorted keys, compact, UTF-8 kept) with the
event's ``kind``, ``step_id``, ``position``, ``payload``, ``created`` and ``execution_id``, and
``seq`` renumbered 1, 2, 3 ... within the recording, so two recordings of the same run differ
only where the run did. The text diffs and reviews like code.

A recording is self-contained: model steps keep their messages as deltas of earlier steps of
the same execution (``_requests``), so a recording grows with the run, not with its square,
and claim-checked payloads are inlined on export (the content store
is not needed to replay it, nor shipped with it). Media refs stay addresses, because a replay
never resolves them: the recorded model responses are served from the log. On import the
payloads go through the importing journal's claim-check again, so a large recorded step lands
in that journal's store when it has one.
"""

from __future__ import annotations

import json
import os
from contextlib import ExitStack
from typing import IO, TYPE_CHECKING, Any

from loom_nb.errors import JournalError
from loom_nb.journal._claims import payload_text
from loom_nb.journal._codec import dumps
from loom_nb.journal._timeline import EVENT_KINDS, Timeline

if TYPE_CHECKING:
    from loom_nb.journal._journal import Journal

__all__ = ["export_jsonl", "import_jsonl", "recording_lines"]


def recording_lines(journal: Journal, execution_id: str) -> list[str]:
    """The recording of an execution, one canonical JSON line per event (no newlines)."""
    events = journal.events(execution_id, resolve_claims=True, expand_inputs=False)
    if not events:
        raise JournalError(
            f"no execution {execution_id!r} in {journal!r}; `loom-nb journal ls` lists them.",
            code="execution_not_found",
            execution_id=execution_id,
        )
    return [
        dumps(
            {
                "created": event.created.isoformat(timespec="microseconds"),
                "execution_id": event.execution_id,
                "kind": event.kind,
                "payload": event.payload,
                "position": event.position,
                "seq": index,
                "step_id": event.step_id,
            }
        )
        for index, event in enumerate(events, start=1)
    ]


def export_jsonl(
    journal: Journal, execution_id: str, path_or_file: str | os.PathLike[str] | IO[str]
) -> int:
    """Write the recording to a path or an open text file; return the number of lines."""
    lines = recording_lines(journal, execution_id)
    with ExitStack() as stack:
        out = _open(stack, path_or_file, "w")
        try:
            for line in lines:
                out.write(line + "\n")
        except (OSError, ValueError, TypeError) as exc:  # a full disk, a binary file
            raise JournalError(
                f"cannot write the recording: {exc}. Give a path or a file open for text.",
                code="recording_unavailable",
            ) from exc
    return len(lines)


def import_jsonl(
    journal: Journal,
    path_or_file: str | os.PathLike[str] | IO[str],
    *,
    execution_id: str | None = None,
) -> str:
    """Load a recording as a new execution in one transaction; return its id.

    Every line is checked (JSON, fields, kinds, and that the events fold into a valid
    timeline) before anything is written; a bad line is a ``JournalError`` naming its number.
    """
    with ExitStack() as stack:
        text = _text_of(_open(stack, path_or_file, "r"))
    numbered = _numbered(text)
    records = [_parse_line(line, number) for number, line in numbered]
    if not records:
        raise JournalError("the recording is empty: it holds no events.", code="recording_invalid")
    recorded_id = records[0]["execution_id"]
    target = execution_id or recorded_id
    if records[0]["kind"] != "execution_started":
        raise JournalError(
            "the first line of the recording is not an execution_started event; is it a loom-nb "
            "recording?",
            code="recording_invalid",
        )
    timeline = Timeline(target)
    tenant: str | None = None
    rows = []
    for (number, _), record in zip(numbered, records, strict=True):
        if record["execution_id"] != recorded_id:
            raise JournalError(
                f"line {number} of the recording belongs to execution "
                f"{record['execution_id']!r}, not {recorded_id!r}; a recording holds one "
                "execution.",
                code="recording_invalid",
            )
        payload = record["payload"]
        if record["kind"] == "execution_started":
            principal = payload.get("principal")
            tenant = principal.get("tenant") if isinstance(principal, dict) else None
        text_payload = _payload_text(journal, payload, tenant)
        timeline.apply(record["kind"], record["step_id"], record["position"], text_payload)
        rows.append(
            (
                target,
                record["kind"],
                record["step_id"],
                record["position"],
                text_payload,
                record["created"],
            )
        )
    if journal.events(target, resolve_claims=False):
        raise JournalError(
            f"execution {target!r} already exists in {journal!r}. Import under another id "
            "(import_jsonl(path, execution_id='...'), or `--as` on the command line).",
            code="execution_exists",
            execution_id=target,
        )
    journal._append_rows(rows)
    return target


def _payload_text(journal: Journal, payload: dict[str, Any], tenant: str | None) -> str:
    """The payload as journaled: step inputs and outputs claim-checked by this journal's rules."""
    return payload_text(
        {k: dumps(v) for k, v in payload.items()},
        store=journal.store,
        tenant=tenant,
        threshold=journal.claim_threshold,
    )


_FIELDS: dict[str, tuple[type, ...]] = {
    "execution_id": (str,),
    "kind": (str,),
    "step_id": (str, type(None)),
    "position": (int, type(None)),
    "payload": (dict,),
    "created": (str,),
}


def _parse_line(line: str, number: int) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except (RecursionError, ValueError) as exc:
        raise JournalError(
            f"line {number} of the recording is not JSON ({exc}).", code="recording_invalid"
        ) from exc
    if not isinstance(record, dict):
        raise JournalError(
            f"line {number} of the recording is not a JSON object.", code="recording_invalid"
        )
    for name, types in _FIELDS.items():
        value = record.get(name)
        if not isinstance(value, types) or isinstance(value, bool):
            raise JournalError(
                f"line {number} of the recording: field {name!r} is missing or has the wrong "
                f"type ({value!r}).",
                code="recording_invalid",
            )
    if record["kind"] not in EVENT_KINDS:
        raise JournalError(
            f"line {number} of the recording: unknown event kind {record['kind']!r}.",
            code="recording_invalid",
        )
    if "claimed" in record["payload"]:
        raise JournalError(
            f"line {number} of the recording holds an unresolved claim-check; recordings inline "
            "their payloads. Export it again with `loom-nb journal export`.",
            code="recording_invalid",
        )
    try:
        from datetime import datetime

        datetime.fromisoformat(record["created"])
    except ValueError as exc:
        raise JournalError(
            f"line {number} of the recording: 'created' is not an ISO 8601 time.",
            code="recording_invalid",
        ) from exc
    return record


def _numbered(text: str) -> list[tuple[int, str]]:
    # Split on "\n" only: str.splitlines would also split inside a JSON string holding U+2028.
    return [(n, line) for n, line in enumerate(text.split("\n"), start=1) if line.strip()]


def _open(stack: ExitStack, path_or_file: str | os.PathLike[str] | IO[str], mode: str) -> IO[str]:
    if isinstance(path_or_file, str | os.PathLike):
        try:
            return stack.enter_context(open(path_or_file, mode, encoding="utf-8", newline="\n"))
        except (OSError, ValueError, TypeError) as exc:  # also a NUL in the name, a bad fspath
            raise JournalError(
                f"cannot open the recording {path_or_file!r}: {exc}.",
                code="recording_unavailable",
            ) from exc
    method = "read" if mode == "r" else "write"
    if not callable(getattr(path_or_file, method, None)):
        raise JournalError(
            f"a recording is a path or an open text file (with {method}()), not "
            f"{type(path_or_file).__name__}.",
            code="invalid_argument",
        )
    return path_or_file


def _text_of(source: IO[str]) -> str:
    """The whole text of an open recording (a binary or undecodable one is refused)."""
    try:
        text = source.read()
    except (OSError, ValueError) as exc:
        raise JournalError(
            f"cannot read the recording: {exc}. A recording is UTF-8 text (JSON Lines).",
            code="recording_unavailable",
        ) from exc
    if not isinstance(text, str):
        raise JournalError(
            f"the recording file gave {type(text).__name__}, not text; open it in text mode "
            "(open(path, encoding='utf-8')).",
            code="invalid_argument",
        )
    return text
