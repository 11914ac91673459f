"""Content GC: keep every blob a log still cites, reclaim old uncited ones (ADR 0120 decision 10).

Mark: walk every payload of every scanned log (iteratively, so a deep payload cannot exhaust the
stack) and collect each address cited either as the store's claim-check marker
``{"__loomContent": address}`` or as a media source ``{"kind": "ref", "ref": {"address": ...}}``.
The media shape is deliberately not the marker (decision 4), so a sweep that only knew the
marker would reclaim media a transcript still cites. A claim-checked blob is itself JSON (a large
step payload the journal moved into the store), so the sweep reads each one it finds and marks
what it cites too: a media ref inside a claim-checked transcript stays pinned. Sweep: a cited blob is pinned; an uncited
blob last stored less than ``ttl`` ago is kept; an older one is reclaimed only when
``reclaim_orphans`` is set, otherwise the report says what would go (a dry run).

Steps in flight. A step's input is journaled with its outcome, so while a slow model call runs
the log does not yet cite what it reads. A log that can say what its steps in flight read
(``pinned_content``, as a ``Journal`` does: each step pins the content its input cites before it
reads the store) has those pins kept too, whatever the blobs' age; a pin of a step whose process
died lapses after the TTL (issue 30).

Marking finishes before anything is deleted, so a log that fails to read aborts the sweep with
nothing reclaimed. A put racing the sweep wins: the store re-checks the blob's age under its
write lock before erasing it. A step starting while the sweep runs is honoured the same way:
the store makes each blob unreadable before erasing it and asks the logs about it once more
(``purge(keep=...)``), so the step either pinned it by then (the blob is put back) or finds it
gone and fails before calling the model, never after it fetched bytes that are then erased.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from loom_nb.errors import ConfigurationError, LoomError, StoreError
from loom_nb.store._protocol import ContentStore

__all__ = [
    "CONTENT_MARKER",
    "SweepReport",
    "cited_addresses",
    "cited_in",
    "sweep_unpinned_content",
]

CONTENT_MARKER = "__loomContent"
"""Key of the store's claim-check marker object ``{"__loomContent": address}``."""


@dataclass(frozen=True)
class SweepReport:
    """What a sweep kept and reclaimed (or, in a dry run, would reclaim)."""

    dry_run: bool
    """True when nothing was deleted (``reclaim_orphans`` was not set)."""
    pinned: tuple[str, ...]
    """Stored addresses cited by the scanned logs or pinned by their steps in flight (kept
    whatever their age)."""
    kept: tuple[str, ...]
    """Every address kept: pinned, younger than the TTL, or re-stored during the sweep."""
    reclaimed: tuple[str, ...]
    """Addresses erased (in a dry run: that would be erased)."""
    kept_bytes: int
    """Total size of the kept blobs."""
    reclaimed_bytes: int
    """Total size of the reclaimed blobs (in a dry run: that would be reclaimed)."""


def sweep_unpinned_content(
    store: ContentStore,
    logs: Iterable[Any],
    *,
    ttl: timedelta,
    reclaim_orphans: bool = False,
    now: datetime | None = None,
) -> SweepReport:
    """Mark the addresses the logs cite, then reclaim uncited blobs older than ``ttl``.

    ``logs`` holds objects with ``iter_payloads()`` (a journal) or plain iterables of JSON
    payloads; a payload given as JSON text is parsed. A log with ``pinned_content(used_since=,
    now=, address=None)`` (a journal) also keeps what its steps in flight read. Without
    ``reclaim_orphans`` nothing is deleted and the report lists what would be.
    """
    if not isinstance(ttl, timedelta) or ttl < timedelta(0):
        raise ConfigurationError(
            f"ttl must be a non-negative datetime.timedelta, not {ttl!r}.", code="invalid_ttl"
        )
    moment = datetime.now(UTC) if now is None else now
    if moment.tzinfo is None:
        raise ConfigurationError(
            "now must be timezone-aware (for example datetime.now(UTC)); a naive time is ambiguous.",
            code="naive_datetime",
        )
    logs = _listed(logs)
    cited = cited_addresses(logs, store=store)
    cutoff = moment - ttl
    pinning = [log for log in logs if callable(getattr(log, "pinned_content", None))]
    for log in pinning:
        cited |= set(log.pinned_content(used_since=cutoff, now=moment))

    def keep(address: str) -> bool:
        """Asked by the store once the blob is unreadable: did a step pin it since we looked?"""
        return any(
            address in log.pinned_content(used_since=cutoff, now=moment, address=address)
            for log in pinning
        )

    pinned: list[str] = []
    kept: list[str] = []
    reclaimed: list[str] = []
    kept_bytes = reclaimed_bytes = 0
    for entry in store.list():
        if entry.address in cited:
            pinned.append(entry.address)
        elif entry.last_put < cutoff and (
            not reclaim_orphans
            or store.purge(entry.address, older_than=cutoff, keep=keep if pinning else None)
        ):
            reclaimed.append(entry.address)
            reclaimed_bytes += entry.size
            continue
        kept.append(entry.address)
        kept_bytes += entry.size
    return SweepReport(
        dry_run=not reclaim_orphans,
        pinned=tuple(pinned),
        kept=tuple(kept),
        reclaimed=tuple(reclaimed),
        kept_bytes=kept_bytes,
        reclaimed_bytes=reclaimed_bytes,
    )


def cited_addresses(logs: Iterable[Any], *, store: ContentStore | None = None) -> set[str]:
    """Every address the logs cite as a claim-check marker or a media ref, at any depth.

    With ``store``, each claim-checked blob is read and what it cites is marked as well.
    """
    logs = _listed(logs)
    cited: set[str] = set()
    claims: list[str] = []
    for log in logs:
        for payload in _payloads(log):
            _mark(payload, cited, claims)
    followed: set[str] = set()
    while store is not None and claims:
        address = claims.pop()
        if address in followed:
            continue
        followed.add(address)
        payload = _claimed_payload(store, address)
        if payload is not None:
            _mark(payload, cited, claims)
    return cited


def cited_in(value: Any) -> set[str]:
    """The addresses one JSON value cites (claim-check markers and media refs, at any depth)."""
    cited: set[str] = set()
    _mark(value, cited, [])
    return cited


def _listed(logs: Any) -> list[Any]:
    """The logs as a list (a sweep reads them more than once), or ``invalid_logs``."""
    if isinstance(logs, str | bytes) or not isinstance(logs, Iterable):
        raise ConfigurationError(
            f"logs must be an iterable of journals or of payload iterables, not {type(logs).__name__}.",
            code="invalid_logs",
        )
    return list(logs)


def _claimed_payload(store: ContentStore, address: str) -> Any:
    """The JSON a claim-checked blob holds, or None when it is absent, unreadable or not JSON."""
    try:
        if not store.has(address):
            return None
        return json.loads(store.get(address))
    except RecursionError as exc:
        raise _too_deep(f"the claim-checked blob {address}") from exc
    except (LoomError, ValueError):
        return None  # the blob stays pinned by its marker; there is nothing more to mark


def _payloads(log: Any) -> Iterator[Any]:
    iter_payloads = getattr(log, "iter_payloads", None)
    if callable(iter_payloads):
        source: Iterable[Any] = iter_payloads()
    elif isinstance(log, Iterable) and not isinstance(log, str | bytes | dict):
        source = log
    else:
        raise ConfigurationError(
            f"a log must have iter_payloads() or be an iterable of JSON payloads, not "
            f"{type(log).__name__}; wrap a single payload in a list.",
            code="invalid_logs",
        )
    for payload in source:
        if isinstance(payload, str | bytes | bytearray):
            try:
                yield json.loads(payload)
            except RecursionError as exc:
                raise _too_deep("a log payload") from exc
            except ValueError:
                continue  # text that is not JSON cites nothing
        else:
            yield payload


def _too_deep(what: str) -> StoreError:
    """Fail closed: a payload that cannot be parsed may cite blobs, so nothing may be reclaimed."""
    return StoreError(
        f"{what} is JSON nested too deep to parse, so the blobs it cites cannot be known; the "
        "sweep stopped and nothing was reclaimed. Remove or repair that payload and sweep again.",
        code="payload_too_deep",
    )


def _mark(payload: Any, cited: set[str], claims: list[str]) -> None:
    stack = [payload]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            marker = value.get(CONTENT_MARKER)
            if isinstance(marker, str):
                cited.add(marker)
                claims.append(marker)
            ref = value.get("ref")
            if value.get("kind") == "ref" and isinstance(ref, dict):
                address = ref.get("address")
                if isinstance(address, str):
                    cited.add(address)
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            stack.extend(value)
