"""Claim-checks: large step payloads live in the content store, the journal keeps their address.

A step's input or output whose canonical JSON is over the journal's threshold (16 KiB by
default) is put in the content store, under the execution's principal tenant (``"journal"``
when the execution has none), and journaled as ``{"__loomContent": "sha256:..."}``. The event
names the claim-checked fields in its ``claimed`` list, and only those are resolved on read: a
step that happens to return a dict shaped like the marker gets it back as it was, never the blob
it names.

Media refs (``{"kind": "ref", "ref": {"address": ...}}``) are a different shape on purpose. They
belong to the request, are resolved by the model-call effect only when a call runs live, and the
journal never resolves them; content GC pins both shapes (ADR 0120 decision 10).

Without a store, nothing is claim-checked: every payload stays inline.
"""

from __future__ import annotations

import json
from typing import Any

from loom_nb.errors import JournalError, LoomError
from loom_nb.journal._codec import decode
from loom_nb.store._protocol import ContentStore

__all__ = [
    "CLAIM_MARKER",
    "DEFAULT_CLAIM_THRESHOLD",
    "claim",
    "payload_text",
    "unclaim",
]

CLAIM_MARKER = "__loomContent"
"""Key of the object a claim-checked payload is journaled as."""

DEFAULT_CLAIM_THRESHOLD = 16 * 1024
"""Payloads whose canonical JSON is longer than this many bytes go to the content store."""

_JOURNAL_TENANT = "journal"


def claim(
    text: str, *, store: ContentStore | None, tenant: str | None, threshold: int
) -> str | None:
    """Store ``text`` and return the marker's JSON, or None when it stays inline."""
    if store is None or 4 * len(text) <= threshold:  # a code point is at most 4 UTF-8 bytes
        return None
    data = text.encode("utf-8")
    if len(data) <= threshold:
        return None
    ref = store.put(data, tenant or _JOURNAL_TENANT)
    return json.dumps({CLAIM_MARKER: ref.address}, separators=(",", ":"))


def payload_text(
    fields: dict[str, str], *, store: ContentStore | None, tenant: str | None, threshold: int
) -> str:
    """A step event's payload from its fields' canonical JSON, claim-checking large ones.

    The fields are canonical JSON already; joining them in sorted key order keeps the payload
    canonical without encoding the (possibly large) values a second time.
    """
    claimed: list[str] = []
    for name in ("input", "output"):
        if name in fields:
            marker = claim(fields[name], store=store, tenant=tenant, threshold=threshold)
            if marker is not None:
                fields = {**fields, name: marker}
                claimed.append(name)
    if claimed:
        fields = {**fields, "claimed": json.dumps(claimed, separators=(",", ":"))}
    elif fields.keys() == _COMPLETED:  # a completed step's fields, the common case: in order
        return (
            '{"input":' + fields["input"] + ',"input_hash":' + fields["input_hash"]
            + ',"output":' + fields["output"] + "}"
        )  # fmt: skip
    return "{" + ",".join(f"{json.dumps(k)}:{fields[k]}" for k in sorted(fields)) + "}"


_COMPLETED = frozenset({"input", "input_hash", "output"})


def unclaim(marker: Any, *, store: ContentStore | None, where: str) -> Any:
    """The value a claim-check marker stands for, read from the store."""
    if not (isinstance(marker, dict) and isinstance(marker.get(CLAIM_MARKER), str)):
        raise JournalError(
            f"{where}: a field listed as claim-checked holds no {CLAIM_MARKER} marker; the "
            "journal is damaged.",
            code="journal_corrupt",
        )
    address: str = marker[CLAIM_MARKER]
    if store is None:
        raise JournalError(
            f"{where}: the payload was claim-checked into the content store ({address}) but this "
            "journal was opened without one. Open it with Journal(path, store=<the store>) "
            "(on the command line: --store DIR).",
            code="claim_store_missing",
            address=address,
        )
    try:
        data = store.get(address)
    except LoomError as exc:
        raise JournalError(
            f"{where}: the claim-checked payload {address} could not be read from the content "
            f"store ({exc}). Restore the blob, or replay from a recording (recordings inline "
            "claim-checked payloads).",
            code="claim_unreadable",
            address=address,
        ) from exc
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, RecursionError, ValueError) as exc:
        raise JournalError(
            f"{where}: the claim-checked payload {address} is not JSON; the store holds other "
            "bytes at that address.",
            code="journal_corrupt",
            address=address,
        ) from exc


def recorded_fields(payload: str | None, where: str) -> dict[str, Any]:
    """The fields of a recorded step payload (``{}`` for none); a malformed one raises with ``where``."""
    try:
        value = json.loads(payload or "{}")
    except (RecursionError, ValueError):
        value = decode(payload or "{}", where=where)  # raises with context
    return value if isinstance(value, dict) else {}


def claimed_field(
    fields: dict[str, Any], name: str, *, store: ContentStore | None, where: str
) -> Any:
    """One field of a recorded payload, its claim-check resolved from ``store`` when it has one.

    Only the field asked for is read back: serving a step's output never reads its claim-checked
    input (a whole transcript, for a model call) from the store.
    """
    claimed = fields.get("claimed")
    if isinstance(claimed, list) and name in claimed:
        return unclaim(fields.get(name), store=store, where=f"{where}.{name}")
    return fields.get(name)
