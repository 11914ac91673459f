"""Resolution: tenant-set authorization, four fetches at a time, a running budget, decision 4 failures."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from pathlib import Path
from typing import Any

import pytest

from loom_nb.content import (
    ContentRef,
    DataSource,
    FilePart,
    ImagePart,
    LlmRequest,
    Message,
    RefSource,
    TextPart,
    ToolResultPart,
    ToolUsePart,
)
from loom_nb.errors import (
    ContentAccessDeniedError,
    ContentIntegrityError,
    StoreError,
    UnresolvedContentError,
)
from loom_nb.limits import MAX_RESOLVED_BYTES
from loom_nb.store import (
    ContentStore,
    LocalContentStore,
    Principal,
    ResolveContext,
    StoreResolver,
    resolve_request_content,
)
from tests.conftest import StoreBackend


def _ref(data: bytes, *, size: int | None = None) -> ContentRef:
    return ContentRef(address="sha256:" + hashlib.sha256(data).hexdigest(), size=size)


def _image(ref: ContentRef, origin: str | None = None) -> ImagePart:
    return ImagePart(media_type="image/png", source=RefSource(ref=ref), origin=origin)


def _app_request(*refs: ContentRef) -> LlmRequest:
    parts: list[Any] = [TextPart(text="look")] + [_image(r) for r in refs]
    return LlmRequest(messages=[Message(role="user", content=parts)])


def _tool_request(*refs: ContentRef, origin: str | None = None) -> LlmRequest:
    call = ToolUsePart(id="t1", name="snap", input={})
    result = ToolResultPart(tool_use_id="t1", content=[_image(r) for r in refs], origin=origin)
    return LlmRequest(
        messages=[
            Message(role="user", content="take a picture"),
            Message(role="assistant", content=[call]),
            Message(role="user", content=[result]),
        ]
    )


def _context(tenant: str = "alice", **overrides: Any) -> ResolveContext:
    values: dict[str, Any] = {
        "execution_id": "exec-1",
        "step_id": "step-1",
        "principal": Principal(tenant),
    }
    values.update(overrides)
    return ResolveContext(**values)


@pytest.fixture
def store(store_backend: StoreBackend) -> ContentStore:
    """The store under test, on every backend (the tenancy rules are the same on each)."""
    return store_backend.open()


class FakeResolver:
    """An instrumented resolver: serves blobs from a dict, records calls and the peak in flight."""

    def __init__(
        self, blobs: dict[str, bytes], *, delay: float = 0.01, hold: set[str] | None = None
    ) -> None:
        self.blobs = blobs
        self.delay = delay
        self.hold = hold or set()
        self.calls: list[tuple[str, ResolveContext]] = []
        self.in_flight = 0
        self.peak = 0
        self.cancelled: list[str] = []
        self.finished: list[str] = []

    async def resolve(self, ref: ContentRef, context: ResolveContext) -> bytes:
        self.calls.append((ref.address, context))
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            if ref.address in self.hold:
                await asyncio.sleep(3600)  # only a cancellation ends this fetch
            await asyncio.sleep(self.delay)
            self.finished.append(ref.address)
            return self.blobs[ref.address]
        except asyncio.CancelledError:
            self.cancelled.append(ref.address)
            raise
        finally:
            self.in_flight -= 1


# -- StoreResolver -------------------------------------------------------------------------------


async def test_store_resolver_reads_a_blob_the_tenant_stored(store: ContentStore) -> None:
    """The principal's tenant is in the address's set, so the bytes come back."""
    ref = store.put(b"mine", "alice")
    assert await StoreResolver(store).resolve(ref, _context("alice")) == b"mine"


async def test_store_resolver_never_passes_on_damaged_bytes(store_backend: StoreBackend) -> None:
    """The resolver reads through the store's open: a blob damaged behind the store's back (at
    the same size, so no size check sees it) raises content_corrupted instead of reaching a provider."""
    store = store_backend.open()
    ref = store.put(b"the real bytes", "alice")
    store_backend.damage(store, ref.address, b"the fake bytes")
    with pytest.raises(ContentIntegrityError) as info:
        await StoreResolver(store).resolve(ref, _context("alice"))
    assert info.value.code == "content_corrupted"


async def test_a_store_without_open_is_read_whole_under_the_same_rules(tmp_path: Path) -> None:
    """A store of another make (stat/get/tenants, no open) still resolves, with the tenancy and
    the size checks of the streamed path."""

    class WholeOnly:
        def __init__(self, inner: LocalContentStore) -> None:
            self.stat, self.get, self.tenants = inner.stat, inner.get, inner.tenants

    inner = LocalContentStore(tmp_path / "store")
    ref = inner.put(b"whole bytes", "alice")
    resolver = StoreResolver(WholeOnly(inner))  # type: ignore[arg-type]
    assert await resolver.resolve(ref, _context("alice")) == b"whole bytes"
    with pytest.raises(ContentAccessDeniedError):
        await resolver.resolve(ref, _context("bob"))
    with pytest.raises(StoreError) as wrong:
        await resolver.resolve(_ref(b"whole bytes", size=3), _context("alice"))
    assert wrong.value.code == "size_mismatch"


async def test_cross_tenant_read_is_denied(store: ContentStore) -> None:
    """A tenant that never stored the bytes is denied, even though the address is known."""
    ref = store.put(b"alice's secret", "alice")
    with pytest.raises(ContentAccessDeniedError) as info:
        await StoreResolver(store).resolve(ref, _context("mallory"))
    assert info.value.code == "content_access_denied"


async def test_absent_and_foreign_blobs_are_denied_alike(store: ContentStore) -> None:
    """An absent address is denied like a foreign one, so a tenant cannot probe others' blobs."""
    store.put(b"foreign", "alice")
    resolver = StoreResolver(store)
    with pytest.raises(ContentAccessDeniedError) as foreign:
        await resolver.resolve(_ref(b"foreign"), _context("bob"))
    with pytest.raises(ContentAccessDeniedError) as absent:
        await resolver.resolve(_ref(b"absent"), _context("bob"))
    assert foreign.value.code == absent.value.code


async def test_deduped_blob_is_readable_by_each_tenant_until_it_deletes(
    store: ContentStore,
) -> None:
    """Under dedupe both tenants may read; after bob deletes, bob is denied and alice still reads."""
    ref = store.put(b"same", "alice")
    store.put(b"same", "bob")
    resolver = StoreResolver(store)
    assert await resolver.resolve(ref, _context("bob")) == b"same"
    store.delete(ref.address, "bob")
    with pytest.raises(ContentAccessDeniedError):
        await resolver.resolve(ref, _context("bob"))
    assert await resolver.resolve(ref, _context("alice")) == b"same"


@pytest.mark.parametrize("missing", ["execution_id", "principal"])
async def test_unattributable_read_is_denied(store: ContentStore, missing: str) -> None:
    """Without an execution_id or a principal the resolver cannot attribute the read and denies it."""
    ref = store.put(b"x", "alice")
    with pytest.raises(ContentAccessDeniedError) as info:
        await StoreResolver(store).resolve(ref, _context(**{missing: None}))
    assert missing in info.value.message


async def test_store_resolver_refuses_a_blob_over_the_budget_left(store: ContentStore) -> None:
    """A blob larger than context.max_bytes is refused before it is read."""
    ref = store.put(b"0123456789", "alice")
    with pytest.raises(StoreError) as info:
        await StoreResolver(store).resolve(ref, _context(max_bytes=9))
    assert info.value.code == "over_budget"
    assert await StoreResolver(store).resolve(ref, _context(max_bytes=10)) == b"0123456789"


async def test_store_resolver_refuses_a_ref_whose_declared_size_is_not_the_blobs(
    store: ContentStore,
) -> None:
    """Called directly, the resolver checks the ref's declared size: 77 bytes behind a ref
    declaring 78 (or 76) are refused with code size_mismatch; the right size and no size read."""
    data = bytes(range(77))
    stored = store.put(data, "alice")
    resolver = StoreResolver(store)
    for declared in (78, 76, 0):
        with pytest.raises(StoreError) as info:
            await resolver.resolve(_ref(data, size=declared), _context("alice"))
        assert info.value.code == "size_mismatch"
        assert f"declares {declared} bytes" in info.value.message
        assert "77" in info.value.message
    assert await resolver.resolve(stored, _context("alice")) == data
    assert await resolver.resolve(_ref(data), _context("alice")) == data


async def test_store_resolver_honours_a_set_cancel_event(store: ContentStore) -> None:
    """A fetch whose cancel event is already set is refused with code cancelled."""
    ref = store.put(b"x", "alice")
    event = asyncio.Event()
    event.set()
    with pytest.raises(StoreError) as info:
        await StoreResolver(store).resolve(ref, _context(cancel=event))
    assert info.value.code == "cancelled"


def test_resolve_context_defaults_and_validation() -> None:
    """The context defaults to origin app and the 32 MiB budget; a negative budget is refused."""
    context = ResolveContext("e", "s", Principal("t"))
    assert (context.origin, context.max_bytes, context.cancel) == ("app", MAX_RESOLVED_BYTES, None)
    with pytest.raises(Exception) as info:
        ResolveContext("e", "s", None, max_bytes=-1)
    assert getattr(info.value, "code", None) == "invalid_resolve_context"


# -- resolve_request_content ---------------------------------------------------------------------


async def test_refs_become_base64_data_and_each_address_is_fetched_once(
    store: ContentStore,
) -> None:
    """Every ref turns into inline data; an address cited twice is fetched once."""
    a, b = store.put(b"image-a", "alice"), store.put(b"image-b", "alice")
    request = _app_request(a, b, a)
    resolver = FakeResolver({a.address: b"image-a", b.address: b"image-b"})
    out = await resolve_request_content(request, resolver, _context())
    assert sorted(addr for addr, _ in resolver.calls) == sorted([a.address, b.address])
    parts = out.messages[0].content
    assert isinstance(parts, list)
    sources = [p.source for p in parts[1:] if isinstance(p, ImagePart)]
    assert sources == [
        DataSource(data=base64.b64encode(b"image-a").decode()),
        DataSource(data=base64.b64encode(b"image-b").decode()),
        DataSource(data=base64.b64encode(b"image-a").decode()),
    ]
    assert parts[0] == TextPart(text="look")
    assert request.messages[0].content[1].source.kind == "ref"  # type: ignore[union-attr]


async def test_end_to_end_with_the_store_resolver(store: ContentStore) -> None:
    """StoreResolver plugged into resolve_request_content serves the tenant's own blobs."""
    ref = store.put(b"%PDF-1.7 tiny", "alice")
    request = LlmRequest(
        messages=[
            Message(
                role="user",
                content=[FilePart(media_type="application/pdf", source=RefSource(ref=ref))],
            )
        ]
    )
    out = await resolve_request_content(request, StoreResolver(store), _context("alice"))
    part = out.messages[0].content[0]  # type: ignore[index]
    assert part.source == DataSource(data=base64.b64encode(b"%PDF-1.7 tiny").decode())  # type: ignore[union-attr]


async def test_cross_tenant_app_ref_raises_unresolved_content(store: ContentStore) -> None:
    """A foreign ref the application sent fails the call with UnresolvedContentError, chained."""
    ref = store.put(b"alice only", "alice")
    with pytest.raises(UnresolvedContentError) as info:
        await resolve_request_content(_app_request(ref), StoreResolver(store), _context("mallory"))
    assert isinstance(info.value.__cause__, ContentAccessDeniedError)
    assert info.value.details["address"] == ref.address
    assert info.value.details["reason"] == "content_access_denied"


async def test_at_most_four_fetches_are_in_flight() -> None:
    """Ten distinct refs are fetched with never more than four resolver calls running at once."""
    blobs = {_ref(bytes([i])).address: bytes([i]) for i in range(10)}
    resolver = FakeResolver(blobs, delay=0.02)
    out = await resolve_request_content(
        _app_request(*(_ref(b) for b in blobs.values())), resolver, _context()
    )
    assert resolver.peak == 4
    assert len(resolver.calls) == 10
    assert all(isinstance(p.source, DataSource) for p in out.messages[0].content[1:])  # type: ignore[union-attr]


async def test_each_fetch_is_told_the_budget_left_with_its_own_cancel_event() -> None:
    """Later fetches see max_bytes shrink by what earlier ones returned; each gets a fresh event."""
    blobs = {_ref(bytes([i]) * 100).address: bytes([i]) * 100 for i in range(6)}
    resolver = FakeResolver(blobs, delay=0.0)
    await resolve_request_content(
        _tool_request(*(_ref(b) for b in blobs.values())), resolver, _context(max_bytes=1000)
    )
    budgets = [context.max_bytes for _, context in resolver.calls]
    assert budgets[:4] == [1000, 1000, 1000, 1000]
    assert min(budgets[4:]) <= 700  # started after at least three 100-byte blobs landed
    events = [context.cancel for _, context in resolver.calls]
    assert all(isinstance(e, asyncio.Event) for e in events)
    assert len({id(e) for e in events}) == 6
    assert {context.origin for _, context in resolver.calls} == {"tool"}
    assert {context.execution_id for _, context in resolver.calls} == {"exec-1"}


async def test_first_fetch_to_overshoot_cancels_the_rest() -> None:
    """When one blob takes the total over the cap, in-flight fetches are cancelled and queued ones never start."""
    big = b"B" * 600
    small = [bytes([i]) * 10 for i in range(8)]
    slow = {_ref(s).address for s in small[:3]}
    blobs = {_ref(big).address: big, **{_ref(s).address: s for s in small}}
    resolver = FakeResolver(blobs, delay=0.0, hold=slow)
    request = _tool_request(_ref(big), *(_ref(s) for s in small))
    out = await asyncio.wait_for(
        resolve_request_content(request, resolver, _context(max_bytes=500)), timeout=5
    )
    started = [addr for addr, _ in resolver.calls]
    assert len(started) == 4  # the big blob and three held ones; nothing queued started after
    assert sorted(resolver.cancelled) == sorted(slow)
    assert all(
        context.cancel is not None and context.cancel.is_set()
        for addr, context in resolver.calls
        if addr in slow
    )
    result = out.messages[2].content[0]  # type: ignore[index]
    assert isinstance(result, ToolResultPart)
    assert result.is_error
    texts = [p.text for p in result.content if isinstance(p, TextPart)]  # type: ignore[union-attr]
    assert len(texts) == 9
    assert all(str(t).startswith("content_unavailable: sha256:") for t in texts)
    assert "over_budget" in str(texts[0])


async def test_overshoot_on_an_app_ref_raises() -> None:
    """An application ref over the running budget fails the call instead of being dropped."""
    blob = b"x" * 100
    resolver = FakeResolver({_ref(blob).address: blob}, delay=0.0)
    with pytest.raises(UnresolvedContentError) as info:
        await resolve_request_content(_app_request(_ref(blob)), resolver, _context(max_bytes=99))
    assert info.value.details["reason"] == "over_budget"


@pytest.mark.parametrize("where", ["app", "tool"])
async def test_declared_size_over_the_cap_is_refused_without_calling_the_resolver(
    where: str,
) -> None:
    """A ref declaring more bytes than the cap never reaches the resolver (raise or tool error)."""
    ref = _ref(b"tiny", size=MAX_RESOLVED_BYTES + 1)
    resolver = FakeResolver({ref.address: b"tiny"})
    if where == "app":
        with pytest.raises(UnresolvedContentError) as info:
            await resolve_request_content(_app_request(ref), resolver, _context())
        assert info.value.details["reason"] == "declared_over_budget"
    else:
        out = await resolve_request_content(_tool_request(ref), resolver, _context())
        result = out.messages[2].content[0]  # type: ignore[index]
        assert result.is_error  # type: ignore[union-attr]
        assert "declared_over_budget" in str(result.content[0].text)  # type: ignore[union-attr]
    assert resolver.calls == []


async def test_blob_whose_size_differs_from_the_declared_size_is_refused() -> None:
    """A blob of 4 bytes behind a ref declaring 5 is refused (app: raise; tool: content_unavailable)."""
    resolver = FakeResolver({_ref(b"four").address: b"four"})
    with pytest.raises(UnresolvedContentError) as info:
        await resolve_request_content(_app_request(_ref(b"four", size=5)), resolver, _context())
    assert info.value.details["reason"] == "size_mismatch"
    out = await resolve_request_content(_tool_request(_ref(b"four", size=5)), resolver, _context())
    assert "size_mismatch" in str(out.messages[2].content[0].content[0].text)  # type: ignore[union-attr,index]
    ok = await resolve_request_content(_app_request(_ref(b"four", size=4)), resolver, _context())
    assert ok.messages[0].content[1].source.kind == "data"  # type: ignore[union-attr,index]


async def test_tool_result_failure_becomes_content_unavailable_and_is_error(
    store: ContentStore,
) -> None:
    """A tool's missing media is feedback: a text part naming the address and reason, is_error set, others kept."""
    good = store.put(b"good", "alice")
    missing = _ref(b"missing")
    out = await resolve_request_content(
        _tool_request(good, missing), StoreResolver(store), _context()
    )
    result = out.messages[2].content[0]  # type: ignore[index]
    assert isinstance(result, ToolResultPart)
    assert result.is_error is True
    assert isinstance(result.content, list)
    assert result.content[0].source == DataSource(data=base64.b64encode(b"good").decode())  # type: ignore[union-attr]
    text = result.content[1]
    assert isinstance(text, TextPart)
    assert str(text.text).startswith(f"content_unavailable: {missing.address}")
    assert "content_access_denied" in str(text.text)


async def test_a_throwing_resolver_fails_an_app_ref_with_the_cause_chained() -> None:
    """Any exception from the resolver becomes UnresolvedContentError whose __cause__ is that exception."""

    class Broken:
        async def resolve(self, ref: ContentRef, context: ResolveContext) -> bytes:
            raise RuntimeError("disk on fire")

    with pytest.raises(UnresolvedContentError) as info:
        await resolve_request_content(_app_request(_ref(b"x")), Broken(), _context())
    assert isinstance(info.value.__cause__, RuntimeError)
    assert info.value.details["reason"] == "resolver_error"


async def test_no_resolver_refuses_any_ref() -> None:
    """With no resolver a ref is refused (never dropped), even inside a tool result."""
    for request in (_app_request(_ref(b"x")), _tool_request(_ref(b"x"))):
        with pytest.raises(UnresolvedContentError) as info:
            await resolve_request_content(request, None, _context())
        assert info.value.details["reason"] == "no_resolver"


async def test_request_without_refs_passes_through_untouched() -> None:
    """A request with no refs is returned as is, and needs no resolver."""
    request = LlmRequest(messages=[Message(role="user", content="hello")])
    assert await resolve_request_content(request, None, _context()) is request


async def test_missing_execution_id_is_refused_before_any_fetch() -> None:
    """resolve_request_content refuses to resolve when the context names no execution."""
    resolver = FakeResolver({_ref(b"x").address: b"x"})
    with pytest.raises(UnresolvedContentError) as info:
        await resolve_request_content(
            _app_request(_ref(b"x")), resolver, _context(execution_id=None)
        )
    assert info.value.details["reason"] == "unattributed"
    assert resolver.calls == []


async def test_untrusted_part_naming_a_ref_never_reaches_the_resolver() -> None:
    """A ref in an untrusted tool result is not fetched (decision 7); the result becomes an error."""
    resolver = FakeResolver({_ref(b"x").address: b"x"})
    out = await resolve_request_content(
        _tool_request(_ref(b"x"), origin="tool:web"), resolver, _context()
    )
    assert resolver.calls == []
    assert "untrusted_ref" in str(out.messages[2].content[0].content[0].text)  # type: ignore[union-attr,index]


async def test_an_app_failure_cancels_fetches_still_in_flight() -> None:
    """Once an application ref fails, the other fetches are cancelled rather than left running."""
    held = _ref(b"held")

    class Mixed(FakeResolver):
        async def resolve(self, ref: ContentRef, context: ResolveContext) -> bytes:
            if ref.address == _ref(b"bad").address:
                self.calls.append((ref.address, context))
                raise StoreError("nope", code="content_not_found")
            return await super().resolve(ref, context)

    resolver = Mixed({held.address: b"held"}, hold={held.address})
    with pytest.raises(UnresolvedContentError):
        await asyncio.wait_for(
            resolve_request_content(_app_request(held, _ref(b"bad")), resolver, _context()),
            timeout=5,
        )
    assert resolver.cancelled == [held.address]


async def test_caller_cancel_event_stops_resolution() -> None:
    """Setting the caller's cancel event stops in-flight fetches and fails the call."""
    held = _ref(b"held")
    resolver = FakeResolver({held.address: b"held"}, hold={held.address})
    event = asyncio.Event()
    task = asyncio.ensure_future(
        resolve_request_content(_app_request(held), resolver, _context(cancel=event))
    )
    await asyncio.sleep(0.01)
    event.set()
    with pytest.raises(UnresolvedContentError) as info:
        await asyncio.wait_for(task, timeout=5)
    assert info.value.details["reason"] == "cancelled"
    assert resolver.cancelled == [held.address]
