"""Content GC: cited blobs (claim-check marker or media ref, any depth) are pinned; old uncited ones go."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from loom_nb.content import ContentRef, ImagePart, Message, RefSource
from loom_nb.errors import ConfigurationError, StoreError
from loom_nb.store import ContentStore, sweep_unpinned_content
from tests.conftest import StoreBackend

T0 = datetime(2026, 10, 8, 12, 0, tzinfo=UTC)


class FakeJournal:
    """A log in the Journal's shape: iter_payloads() yields every event's JSON payload."""

    def __init__(self, payloads: list[Any]) -> None:
        self.payloads = payloads

    def iter_payloads(self) -> Iterator[Any]:
        yield from self.payloads


@pytest.fixture
def store(store_backend: StoreBackend) -> ContentStore:
    """The store under test, on every backend, with its clock at T0."""
    return store_backend.open(clock=lambda: T0)


def _step_completed_citing(ref: ContentRef) -> dict[str, Any]:
    """A STEP_COMPLETED payload whose output transcript holds the ref as an image source."""
    message = Message(
        role="user", content=[ImagePart(media_type="image/png", source=RefSource(ref=ref))]
    )
    return {
        "kind": "STEP_COMPLETED",
        "step_id": "turn:1:model",
        "output": {"messages": [message.model_dump(mode="json")]},
    }


def test_media_ref_in_a_logged_step_output_survives_a_sweep_after_ten_days(
    store: ContentStore,
) -> None:
    """Put a blob, cite it as a media ref in a step output, advance 10 days, sweep: it is kept; an uncited one goes."""
    cited = store.put(b"cited image", "alice")
    orphan = store.put(b"orphan image", "alice")
    log = FakeJournal([{"kind": "STEP_STARTED"}, _step_completed_citing(cited)])
    report = sweep_unpinned_content(
        store, [log], ttl=timedelta(days=7), reclaim_orphans=True, now=T0 + timedelta(days=10)
    )
    assert store.get(cited.address) == b"cited image"
    assert not store.has(orphan.address)
    assert report.pinned == (cited.address,)
    assert report.kept == (cited.address,)  # pinned blobs are part of what is kept
    assert report.reclaimed == (orphan.address,)
    assert (report.kept_bytes, report.reclaimed_bytes) == (11, 12)
    assert report.dry_run is False


def test_claim_check_marker_pins_at_any_depth(store: ContentStore) -> None:
    """A {"__loomContent": address} marker nested deep in a payload pins its blob."""
    ref = store.put(b"claimed", "journal")
    payload: Any = {"__loomContent": ref.address}
    for _ in range(5000):  # deeper than Python's recursion limit: the walk is iterative
        payload = {"wrap": [payload]}
    report = sweep_unpinned_content(
        store, [[payload]], ttl=timedelta(days=1), reclaim_orphans=True, now=T0 + timedelta(days=30)
    )
    assert report.pinned == (ref.address,)
    assert store.has(ref.address)


def test_without_reclaim_orphans_the_sweep_is_a_dry_run(store: ContentStore) -> None:
    """Without reclaim_orphans nothing is deleted; the report lists what would be."""
    orphan = store.put(b"orphan", "alice")
    report = sweep_unpinned_content(store, [], ttl=timedelta(days=7), now=T0 + timedelta(days=8))
    assert report.dry_run is True
    assert report.reclaimed == (orphan.address,)
    assert report.reclaimed_bytes == 6
    assert store.has(orphan.address)


def test_uncited_blob_younger_than_the_ttl_is_kept(store_backend: StoreBackend) -> None:
    """Age counts from the latest put: a blob re-stored 5 days ago is kept, an old empty one goes."""
    clock = [T0]
    with store_backend.open("s", clock=lambda: clock[0]) as store:
        renewed = store.put(b"renewed", "alice")
        empty = store.put(b"", "alice")
        clock[0] = T0 + timedelta(days=5)
        store.put(b"renewed", "bob")
        report = sweep_unpinned_content(
            store, [], ttl=timedelta(days=7), reclaim_orphans=True, now=T0 + timedelta(days=10)
        )
        assert report.kept == (renewed.address,)
        assert report.reclaimed == (empty.address,)
        assert store.has(renewed.address)
        assert not store.has(empty.address)


def test_a_media_ref_inside_a_claim_checked_payload_is_pinned(store: ContentStore) -> None:
    """A claim-checked blob holding a transcript keeps the media it cites (the sweep reads through it)."""
    media = store.put(b"media bytes", "alice")
    transcript = json.dumps(_step_completed_citing(media)).encode()
    claim = store.put(transcript, "journal")
    report = sweep_unpinned_content(
        store,
        [[{"output": {"__loomContent": claim.address}}]],
        ttl=timedelta(days=1),
        reclaim_orphans=True,
        now=T0 + timedelta(days=10),
    )
    assert set(report.pinned) == {media.address, claim.address}
    assert store.has(media.address)


def test_payloads_given_as_json_text_are_parsed(store: ContentStore) -> None:
    """A log that yields JSON text (one line per event) is scanned like parsed payloads."""
    ref = store.put(b"text-cited", "alice")
    line = json.dumps({"kind": "ref", "ref": {"address": ref.address}})
    report = sweep_unpinned_content(
        store,
        [FakeJournal([line, "not json"])],
        ttl=timedelta(0),
        reclaim_orphans=True,
        now=T0 + timedelta(days=1),
    )
    assert report.pinned == (ref.address,)


def test_a_failing_log_aborts_before_anything_is_reclaimed(store: ContentStore) -> None:
    """If reading a log fails midway, no blob is reclaimed (marking finishes before sweeping)."""
    orphan = store.put(b"orphan", "alice")

    def broken() -> Iterator[Any]:
        yield {"kind": "STEP_STARTED"}
        raise OSError("journal unreadable")

    with pytest.raises(OSError):
        sweep_unpinned_content(
            store, [broken()], ttl=timedelta(0), reclaim_orphans=True, now=T0 + timedelta(days=1)
        )
    assert store.has(orphan.address)


def test_bad_arguments_are_configuration_errors(store: ContentStore) -> None:
    """A negative ttl, a naive now, or a log that is neither a journal nor an iterable is refused."""
    with pytest.raises(ConfigurationError):
        sweep_unpinned_content(store, [], ttl=timedelta(days=-1))
    with pytest.raises(ConfigurationError):
        sweep_unpinned_content(store, [], ttl=timedelta(days=1), now=datetime(2026, 1, 1))
    with pytest.raises(ConfigurationError):
        sweep_unpinned_content(store, [42], ttl=timedelta(days=1))
    with pytest.raises(ConfigurationError):
        sweep_unpinned_content(store, [{"kind": "ref"}], ttl=timedelta(days=1))


def test_a_payload_too_deep_to_parse_aborts_the_sweep_with_nothing_reclaimed(
    store: ContentStore,
) -> None:
    """A JSON text payload nested too deep to parse stops the sweep with a StoreError; no blob is reclaimed."""
    old = store.put(b"maybe cited", "alice")
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(StoreError) as info:
        sweep_unpinned_content(
            store,
            [[deep]],
            ttl=timedelta(days=7),
            reclaim_orphans=True,
            now=T0 + timedelta(days=10),
        )
    assert info.value.code == "payload_too_deep"
    assert store.has(old.address)


def test_a_claimed_blob_too_deep_to_parse_aborts_the_sweep(store: ContentStore) -> None:
    """A claim-checked blob nested too deep to parse stops the sweep: what it cites cannot be known."""
    media = store.put(b"cited only inside the claim", "alice")
    claim = store.put(("[" * 100_000 + "]" * 100_000).encode(), "journal")
    log = FakeJournal([{"output": {"__loomContent": claim.address}}])
    with pytest.raises(StoreError) as info:
        sweep_unpinned_content(
            store, [log], ttl=timedelta(days=7), reclaim_orphans=True, now=T0 + timedelta(days=10)
        )
    assert info.value.code == "payload_too_deep"
    assert store.has(media.address)
