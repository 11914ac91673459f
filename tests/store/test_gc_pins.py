"""The sweep and steps in flight: pins are kept, and a blob is asked about again before it goes.

``purge(keep=...)`` makes the blob unreadable, asks ``keep`` and puts it back when told to (or
when ``keep`` fails); a read landing in between waits for the answer instead of finding the blob
absent. ``sweep_unpinned_content`` keeps what a log's ``pinned_content`` names, and asks again,
per blob, just before erasing it: a step that pinned a blob after the sweep looked keeps it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from loom_nb.errors import ContentNotFoundError
from loom_nb.store import ContentStore, sweep_unpinned_content
from tests.conftest import StoreBackend

T0 = datetime(2026, 10, 8, 12, 0, tzinfo=UTC)
LATER = T0 + timedelta(days=10)


class PinningLog:
    """A log citing nothing, whose steps in flight pin ``pinned`` (``late``: only when asked again)."""

    def __init__(self, pinned: set[str], *, late: set[str] | None = None) -> None:
        self.pinned = pinned
        self.late = late or set()
        self.asked: list[tuple[datetime, datetime | None, str | None]] = []

    def iter_payloads(self) -> Iterator[Any]:
        return iter(())

    def pinned_content(
        self, *, used_since: datetime, now: datetime | None = None, address: str | None = None
    ) -> set[str]:
        self.asked.append((used_since, now, address))
        if address is None:
            return set(self.pinned)
        return {address} & (self.pinned | self.late)


@pytest.fixture
def store(store_backend: StoreBackend) -> ContentStore:
    """The store under test, on every backend, with its clock at T0."""
    return store_backend.open(clock=lambda: T0)


def test_a_blob_pinned_by_a_step_in_flight_is_kept_and_reported_pinned(store: ContentStore) -> None:
    """Old and cited by nothing but a step in flight's pin: kept; the log is asked with the cutoff."""
    used = store.put(b"in use", "alice")
    orphan = store.put(b"orphan", "alice")
    log = PinningLog({used.address})
    report = sweep_unpinned_content(
        store, [log], ttl=timedelta(days=7), reclaim_orphans=True, now=LATER
    )
    assert report.pinned == (used.address,)
    assert report.reclaimed == (orphan.address,)
    assert store.get(used.address) == b"in use"
    assert log.asked[0] == (LATER - timedelta(days=7), LATER, None)


def test_a_step_pinning_after_the_sweep_looked_keeps_its_blob(store: ContentStore) -> None:
    """The pin appears only when the store asks again (the step started mid-sweep): the blob stays."""
    late = store.put(b"pinned mid-sweep", "alice")
    orphan = store.put(b"orphan", "alice")
    log = PinningLog(set(), late={late.address})
    report = sweep_unpinned_content(
        store, [log], ttl=timedelta(days=7), reclaim_orphans=True, now=LATER
    )
    assert report.reclaimed == (orphan.address,)
    assert late.address in report.kept
    assert store.get(late.address) == b"pinned mid-sweep"
    assert not store.has(orphan.address)
    asked_again = [address for _, _, address in log.asked if address is not None]
    assert sorted(asked_again) == sorted([late.address, orphan.address])


def test_purge_with_keep_puts_the_blob_back_or_erases_it(store: ContentStore) -> None:
    """keep True: nothing erased, blob readable; keep False: erased; keep raising: back, and raised."""
    ref = store.put(b"decided by keep", "alice")
    seen: list[str] = []

    def yes(address: str) -> bool:
        seen.append(address)
        return True

    assert store.purge(ref.address, keep=yes) is False
    assert seen == [ref.address]
    assert store.get(ref.address) == b"decided by keep"
    assert store.tenants(ref.address) == {"alice"}

    def broken(address: str) -> bool:
        raise RuntimeError("the journal is unreachable")

    with pytest.raises(RuntimeError):
        store.purge(ref.address, keep=broken)
    assert store.get(ref.address) == b"decided by keep"

    assert store.purge(ref.address, keep=lambda address: False) is True
    assert not store.has(ref.address)
    with pytest.raises(ContentNotFoundError):
        store.get(ref.address)


def test_a_read_while_keep_decides_waits_for_the_answer(store_backend: StoreBackend) -> None:
    """A get from another thread (another store object) while the blob is aside returns the bytes
    once keep says keep, rather than reporting the blob absent."""
    store = store_backend.open()
    reader = store_backend.open()
    ref = store.put(b"read during the decision", "alice")
    got: list[Any] = []

    def read() -> None:
        try:
            got.append(reader.get(ref.address))
        except Exception as exc:
            got.append(exc)

    def keep(address: str) -> bool:
        thread = threading.Thread(target=read)
        thread.start()
        time.sleep(0.3)  # the read lands while the blob is aside
        assert got == []  # and is still waiting
        keep.thread = thread  # type: ignore[attr-defined]
        return True

    assert store.purge(ref.address, keep=keep) is False
    keep.thread.join(10)  # type: ignore[attr-defined]
    assert got == [b"read during the decision"]


def test_a_read_that_misses_a_blob_an_erase_just_put_back_finds_it(
    store_backend: StoreBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The erase puts the blob back (and clears ``trash/``) between a read's GET and its look at
    ``trash/``: the read tries the GET once more instead of reporting the blob absent (a CI run
    got ``content_not_found`` for a blob ``keep`` had kept)."""
    store = store_backend.open()
    ref = store.put(b"put back", "alice")
    if store_backend.name != "local":  # the local store erases under a lock: never seen aside
        objects = store._objects  # type: ignore[attr-defined]
        real_get = objects.get
        misses = [1]

        def get(what: str, where: str, key: str) -> Any:
            if misses:  # the first GET lands while the blob is still aside
                misses.pop()
                raise ContentNotFoundError("gone for a moment", code="content_not_found")
            return real_get(what, where, key)

        monkeypatch.setattr(objects, "get", get)
    assert store.get(ref.address) == b"put back"
    store.purge(ref.address, keep=lambda address: False)
    with pytest.raises(ContentNotFoundError):
        store.get(ref.address)
