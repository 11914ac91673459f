"""Claim-checks: large step payloads in the content store, resolved on read; media refs left alone."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from loom_nb.errors import JournalError
from loom_nb.journal import CLAIM_MARKER, Journal
from loom_nb.journal._codec import text_hash
from loom_nb.store import LocalContentStore, Principal, sweep_unpinned_content


def never(_: Any) -> Any:
    raise AssertionError("a replayed step must not call its fn")


@pytest.fixture
def store(tmp_path: Path) -> LocalContentStore:
    return LocalContentStore(tmp_path / "store")


async def test_large_output_is_claim_checked_and_resolved_on_replay(
    store: LocalContentStore, open_journal: Callable[..., Journal]
) -> None:
    """An output over the threshold is journaled as a marker, stored under the principal's tenant, and replays whole."""
    journal = open_journal(store=store, claim_threshold=1024)
    big = {"text": "x" * 5000}
    live = await journal.execution("r", principal=Principal("acme")).execute(
        "s", lambda _: big, "small"
    )
    raw = journal.events("r", resolve_claims=False)[-1].payload
    assert raw["claimed"] == ["output"]
    assert raw["input"] == "small"
    address = raw["output"][CLAIM_MARKER]
    assert store.tenants(address) == {"acme"}
    assert journal.events("r")[-1].payload == {
        "input": "small",
        "input_hash": text_hash('"small"'),
        "output": big,
    }
    assert await journal.execution("r").execute("s", never, "small") == live == big


async def test_claim_tenant_defaults_to_journal(
    store: LocalContentStore, open_journal: Callable[..., Journal]
) -> None:
    """Without a principal, claim-checked payloads are stored under the tenant 'journal'."""
    journal = open_journal(store=store, claim_threshold=10)
    await journal.execution("r").execute("s", lambda x: x, "y" * 100)
    raw = journal.events("r", resolve_claims=False)[-1].payload
    assert sorted(raw["claimed"]) == ["input", "output"]
    assert store.tenants(raw["input"][CLAIM_MARKER]) == {"journal"}


async def test_marker_shaped_output_is_not_resolved(
    store: LocalContentStore, open_journal: Callable[..., Journal]
) -> None:
    """A small step output shaped like the marker comes back as it was, never as the blob it names."""
    secret = store.put(b'"secret"', "other")
    journal = open_journal(store=store)
    forged = {CLAIM_MARKER: secret.address}
    assert await journal.execution("r").execute("s", lambda _: forged) == forged
    assert await journal.execution("r").execute("s", never) == forged


async def test_media_refs_are_never_resolved(
    store: LocalContentStore, open_journal: Callable[..., Journal]
) -> None:
    """A media ref in a step payload stays a ref on read, even after its blob is gone."""
    ref = store.put(b"\x89PNG fake", "acme")
    part = {
        "type": "image",
        "media_type": "image/png",
        "source": {"kind": "ref", "ref": {"address": ref.address}},
    }
    journal = open_journal(store=store, claim_threshold=10)
    await journal.execution("r").execute("s", lambda _: part)
    store.delete(ref.address, "acme")
    assert await journal.execution("r").execute("s", never) == part


async def test_claim_without_store_is_a_clear_error(
    tmp_path: Path, store: LocalContentStore
) -> None:
    """Reading a claim-checked payload through a journal opened without a store raises JournalError('claim_store_missing')."""
    path = tmp_path / "j.sqlite"
    await (
        Journal(path, store=store, claim_threshold=10)
        .execution("r")
        .execute("s", lambda _: "z" * 50)
    )
    with pytest.raises(JournalError) as info:
        await Journal(path).execution("r").execute("s", never)
    assert info.value.code == "claim_store_missing"


async def test_missing_claim_blob_is_a_clear_error(
    tmp_path: Path, store: LocalContentStore
) -> None:
    """A claim-checked payload whose blob was erased raises JournalError('claim_unreadable') on replay."""
    journal = Journal(tmp_path / "j.sqlite", store=store, claim_threshold=10)
    await journal.execution("r").execute("s", lambda _: "z" * 50)
    address = journal.events("r", resolve_claims=False)[-1].payload["output"][CLAIM_MARKER]
    store.purge(address)
    with pytest.raises(JournalError) as info:
        await journal.execution("r").execute("s", never)
    assert info.value.code == "claim_unreadable"


def test_iter_payloads_yields_raw_payloads(
    store: LocalContentStore, open_journal: Callable[..., Journal]
) -> None:
    """iter_payloads yields every event's payload as stored, markers unresolved."""
    import asyncio

    journal = open_journal(store=store, claim_threshold=10)
    asyncio.run(journal.execution("r").execute("s", lambda _: "q" * 40))
    payloads = list(journal.iter_payloads())
    assert len(payloads) == 3
    assert CLAIM_MARKER in payloads[-1]["output"]


async def test_gc_keeps_blobs_the_journal_cites(
    store: LocalContentStore, open_journal: Callable[..., Journal]
) -> None:
    """sweep_unpinned_content over the journal keeps claim-checked and media-ref blobs and reclaims the rest."""
    image = store.put(b"image bytes", "acme")
    orphan = store.put(b"nobody cites me", "acme")
    journal = open_journal(store=store, claim_threshold=100)
    part = {
        "type": "image",
        "media_type": "image/png",
        "source": {"kind": "ref", "ref": {"address": image.address}},
    }
    execution = journal.execution("r", principal=Principal("acme"))
    await execution.execute("see", lambda _: {"parts": [part]})
    await execution.execute("big", lambda _: "b" * 1000)
    claimed = journal.events("r", resolve_claims=False)[-1].payload["output"][CLAIM_MARKER]
    later = datetime.now(UTC) + timedelta(days=10)
    sweep_unpinned_content(store, [journal], ttl=timedelta(days=1), reclaim_orphans=True, now=later)
    assert store.has(image.address)
    assert store.has(claimed)
    assert not store.has(orphan.address)


async def test_replay_reads_only_the_claimed_output_it_serves(
    tmp_path: Path, store: LocalContentStore
) -> None:
    """Replay serves a step's inline output without reading its claim-checked input (no store needed)."""
    path = tmp_path / "j.sqlite"
    recorder = Journal(path, store=store, claim_threshold=1024)
    live = await recorder.execution("r").execute("s", lambda _: "small", "x" * 5000)
    recorder.close()
    assert await Journal(path).execution("r").execute("s", never, "x" * 5000) == live
