"""Resolve every ref in a request into inline data, under a running byte budget (ADR 0120 decisions 4, 5).

Media travels by address; the bytes are fetched at the last moment, just before the provider call.
``resolve_request_content`` finds every ``RefSource`` in a request (media parts of a message and
media inside tool_result content), fetches each distinct address once with at most four fetches
in flight, and returns the request with those sources replaced by base64 ``DataSource``\\ s.

The byte budget is a RUNNING one: each fetch is told the budget left (``max_bytes`` in its own
copy of the context, with its own ``cancel`` event), and the first fetch whose bytes take the total
over the cap stops the rest: their cancel events fire, in-flight tasks are cancelled and no queued
fetch starts. The overshoot is bounded, not zero: at most four blobs are held when the budget is
spent. A ref declaring a size over the cap is refused before anything is fetched; a blob whose
length differs from its ref's declared size is refused.

Failure semantics (decision 4): a ref inside a tool_result becomes a ``content_unavailable`` text
part naming the address and reason, and that result becomes ``is_error`` (feedback the model can
act on); a ref the application put in a message raises ``UnresolvedContentError`` (the app asked
for that content; continuing without it answers a different question). A ref is never dropped:
with no resolver, or with no ``execution_id`` to attribute the read to, the call is refused. A
media part marked untrusted (its own ``origin`` or its tool_result's) may not name a ref
(decision 7), so it fails without the resolver being asked; media an MCP toolset stored from a
server's bytes is the exception (``taint.is_minted_media_origin``).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from loom_nb._args import check_type
from loom_nb.content import (
    ContentRef,
    DataSource,
    LlmRequest,
    Message,
    Part,
    RefSource,
    TextPart,
    ToolResultPart,
    parse_request,
)
from loom_nb.errors import ConfigurationError, LoomError, UnresolvedContentError
from loom_nb.guard import iter_media
from loom_nb.store._resolve import ContentResolver, ResolveContext
from loom_nb.taint import is_minted_media_origin

__all__ = ["MAX_CONCURRENT_FETCHES", "resolve_request_content"]

MAX_CONCURRENT_FETCHES = 4
"""At most this many fetches are in flight for one request (decision 4)."""


@dataclass(frozen=True)
class _Site:
    """One place a ref occurs: message, part, and index inside a tool_result (None outside one)."""

    message: int
    part: int
    inner: int | None
    ref: ContentRef
    untrusted: bool


@dataclass(frozen=True)
class _Failure:
    """Why a ref could not be resolved: a stable reason code, a sentence, and the cause if any."""

    reason: str
    detail: str
    cause: BaseException | None = None


def _sites(request: LlmRequest) -> Iterator[_Site]:
    """Every media part whose source is a ref, found by the walk the guard uses (``iter_media``)."""
    for found in iter_media(request):
        source = found.part.source
        if isinstance(source, RefSource):
            origin = found.untrusted_origin
            # MCP media names a ref loom_nb minted from the server's bytes (taint.py): resolvable.
            untrusted = origin is not None and not (
                found.item_index is not None and is_minted_media_origin(origin)
            )
            yield _Site(
                found.message_index, found.part_index, found.item_index, source.ref, untrusted
            )


async def resolve_request_content(
    request: LlmRequest, resolver: ContentResolver | None, context: ResolveContext
) -> LlmRequest:
    """The request with every ref replaced by inline data (or by a tool error, per decision 4).

    Raises ``UnresolvedContentError`` when a ref the application put in a message cannot be
    resolved, when refs are present but ``resolver`` is None, or when ``context.execution_id`` is
    missing. A request without refs is returned as it is.
    """
    request = parse_request(request)  # the same object for an LlmRequest; a dict is validated
    if resolver is not None and not callable(getattr(resolver, "resolve", None)):
        raise ConfigurationError(
            f"resolve_request_content(): resolver must have an async resolve(ref, context) "
            f"(StoreResolver(store)), not {type(resolver).__name__}.",
            code="invalid_argument",
            argument="resolver",
        )
    check_type(
        context,
        ResolveContext,
        name="context",
        where="resolve_request_content()",
        error=ConfigurationError,
    )
    sites = list(_sites(request))
    if not sites:
        return request
    first = sites[0].ref.address
    if resolver is None:
        raise UnresolvedContentError(
            f"the request names {len(sites)} stored ref(s) (first {first}) but no resolver is "
            "configured; pass resolver=StoreResolver(store) with a ResolveContext. Refs are "
            "refused, never dropped.",
            address=first,
            reason="no_resolver",
        )
    if not context.execution_id:
        raise UnresolvedContentError(
            f"cannot resolve {first}: the ResolveContext has no execution_id, so the read cannot "
            "be attributed; pass the execution (and principal) the model call belongs to.",
            address=first,
            reason="unattributed",
        )
    cap = context.max_bytes
    wanted: dict[str, ContentRef] = {}
    origins: dict[str, str] = {}
    for site in sites:
        failure = _precheck(site, cap)
        if failure is not None:
            if site.inner is None:
                raise _unresolved(site, failure)
            continue
        address = site.ref.address
        wanted.setdefault(address, site.ref)
        if site.inner is None or address not in origins:
            origins[address] = "app" if site.inner is None else "tool"
    stops_on = {a for a, o in origins.items() if o == "app"}
    declared = {(s.ref.address, s.ref.size) for s in sites if s.inner is None and not s.untrusted}
    results, failures = await _fetch_all(wanted, origins, stops_on, declared, resolver, context)
    return _rebuild(request, sites, cap, results, failures)


def _precheck(site: _Site, cap: int) -> _Failure | None:
    """Failures known before any fetch: an untrusted ref, a declared size over the cap."""
    if site.untrusted:
        return _Failure(
            "untrusted_ref",
            "an untrusted part may not name a stored ref (ADR 0120 decision 7); the tool must "
            "return inline data or be declared trusted",
        )
    if site.ref.size is not None and site.ref.size > cap:
        return _Failure(
            "declared_over_budget",
            f"the ref declares {site.ref.size} bytes, over the request's cap of {cap} bytes",
        )
    return None


async def _fetch_all(
    wanted: dict[str, ContentRef],
    origins: dict[str, str],
    stops_on: set[str],
    declared: set[tuple[str, int | None]],
    resolver: ContentResolver,
    context: ResolveContext,
) -> tuple[dict[str, bytes], dict[str, _Failure]]:
    """Fetch each address once, four at a time, until done or the budget / an app ref fails."""
    cap = context.max_bytes
    queue = deque(wanted)
    inflight: dict[asyncio.Future[bytes], tuple[str, asyncio.Event]] = {}
    results: dict[str, bytes] = {}
    failures: dict[str, _Failure] = {}
    used = 0
    stop: _Failure | None = None
    outer = asyncio.ensure_future(context.cancel.wait()) if context.cancel is not None else None
    try:
        while stop is None:
            while queue and len(inflight) < MAX_CONCURRENT_FETCHES:
                address = queue.popleft()
                event = asyncio.Event()
                sub = dataclasses.replace(
                    context,
                    origin="app" if origins[address] == "app" else "tool",
                    max_bytes=max(cap - used, 0),
                    cancel=event,
                )
                fetch = asyncio.ensure_future(resolver.resolve(wanted[address], sub))
                inflight[fetch] = (address, event)
            if not inflight:
                break
            waiting: set[asyncio.Future[Any]] = set(inflight)
            if outer is not None:
                waiting.add(outer)
            done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if outer is not None and outer in done:
                stop = _Failure("cancelled", "the caller cancelled content resolution")
            for finished in [t for t in inflight if t in done]:
                address, _ = inflight.pop(finished)
                outcome = _outcome(finished)
                if isinstance(outcome, bytes):
                    used += len(outcome)
                    if used > cap:
                        outcome = _Failure(
                            "over_budget",
                            f"its {len(outcome)} bytes took the request's resolved total to "
                            f"{used}, over the cap of {cap} bytes",
                        )
                        stop = stop or _Failure(
                            "over_budget", f"the request's budget of {cap} bytes was spent"
                        )
                    else:
                        results[address] = outcome
                        if any(a == address and s not in (None, len(outcome)) for a, s in declared):
                            stop = stop or _Failure("cancelled", "an application ref failed")
                if isinstance(outcome, _Failure):
                    failures[address] = outcome
                    if address in stops_on:
                        stop = stop or _Failure("cancelled", "an application ref failed")
    finally:
        if outer is not None:
            outer.cancel()
        for pending, (_, event) in inflight.items():
            event.set()
            pending.cancel()
        if inflight:
            await asyncio.gather(*inflight, return_exceptions=True)
    leftover = _Failure("cancelled", "resolution stopped") if stop is None else stop
    for address, _ in inflight.values():
        failures.setdefault(address, leftover)
    for address in queue:
        failures.setdefault(address, leftover)
    return results, failures


def _outcome(task: asyncio.Future[bytes]) -> bytes | _Failure:
    if task.cancelled():
        return _Failure("cancelled", "the fetch was cancelled")
    exc = task.exception()
    if exc is None:
        data: object = task.result()
        if isinstance(data, bytes | bytearray | memoryview):
            return bytes(data)
        return _Failure("resolver_error", f"the resolver returned {type(data).__name__}, not bytes")
    if isinstance(exc, LoomError):
        return _Failure(exc.code, exc.message, exc)
    if isinstance(exc, Exception):
        return _Failure("resolver_error", f"{type(exc).__name__}: {exc}", exc)
    raise exc


def _rebuild(
    request: LlmRequest,
    sites: list[_Site],
    cap: int,
    results: dict[str, bytes],
    failures: dict[str, _Failure],
) -> LlmRequest:
    """Swap each ref for data; turn a tool ref's failure into content_unavailable, raise on an app ref's."""
    encoded: dict[str, str] = {}
    by_part: dict[tuple[int, int], list[tuple[_Site, DataSource | _Failure]]] = {}
    for site in sites:
        address = site.ref.address
        outcome: DataSource | _Failure
        data = results.get(address)
        failure = _precheck(site, cap) or failures.get(address)
        if failure is None and data is not None and site.ref.size not in (None, len(data)):
            failure = _Failure(
                "size_mismatch",
                f"the ref declares {site.ref.size} bytes but the blob has {len(data)}",
            )
        if failure is None and data is not None:
            if address not in encoded:
                encoded[address] = base64.b64encode(data).decode("ascii")
            outcome = DataSource(data=encoded[address])
        else:
            outcome = failure or _Failure("cancelled", "resolution stopped")
            if site.inner is None:
                raise _unresolved(site, outcome)
        by_part.setdefault((site.message, site.part), []).append((site, outcome))
    messages = list(request.messages)
    for (i, j), outcomes in by_part.items():
        message = messages[i]
        assert not isinstance(message.content, str)  # a site only exists inside a parts list
        parts: list[Part] = list(message.content)
        parts[j] = _replace_part(parts[j], outcomes)
        messages[i] = Message(role=message.role, content=parts)
    return request.model_copy(update={"messages": messages})


def _replace_part(part: Part, outcomes: list[tuple[_Site, DataSource | _Failure]]) -> Part:
    if not isinstance(part, ToolResultPart):
        ((_, source),) = outcomes
        return part.model_copy(update={"source": source})
    assert isinstance(part.content, list)
    content = list(part.content)
    is_error = part.is_error
    for site, outcome in outcomes:
        assert site.inner is not None
        if isinstance(outcome, DataSource):
            content[site.inner] = content[site.inner].model_copy(update={"source": outcome})
        else:
            content[site.inner] = TextPart(text=_unavailable_text(site.ref.address, outcome))
            is_error = True
    return part.model_copy(update={"content": content, "is_error": is_error})


def _unavailable_text(address: str, failure: _Failure) -> str:
    return (
        f"content_unavailable: {address} could not be resolved ({failure.reason}: {failure.detail})"
    )


def _unresolved(site: _Site, failure: _Failure) -> UnresolvedContentError:
    error = UnresolvedContentError(
        f"could not resolve {site.ref.address} (message {site.message}, part {site.part}): "
        f"{failure.reason}: {failure.detail}. Store the bytes for this principal's tenant, "
        "fix the declared size, or send fewer/smaller media.",
        address=site.ref.address,
        reason=failure.reason,
        message_index=site.message,
        part_index=site.part,
    )
    error.__cause__ = failure.cause
    return error
