"""Content stores: verified reads, a tenant set per address, repair, GC races, multi-writer safety.

The behaviour tests run on every backend (``store_backend``: the local store and S3); the
local layout tests (sharded files, temp files) are the local store's own.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from loom_nb.content import ContentRef
from loom_nb.errors import ContentIntegrityError, ContentNotFoundError, StoreError
from loom_nb.store import ContentStore, LocalContentStore, open_store
from tests.conftest import StoreBackend


def _address(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _blob_path(root: Path, address: str) -> Path:
    digest = address.removeprefix("sha256:")
    return root / "objects" / digest[:2] / digest[2:]


@pytest.fixture
def store(store_backend: StoreBackend) -> ContentStore:
    return store_backend.open()


def test_put_returns_sized_ref_and_get_round_trips(store: ContentStore) -> None:
    """put returns the sha256 address with the size, and get returns exactly those bytes."""
    ref = store.put(b"hello world", "alice")
    assert ref == ContentRef(address=_address(b"hello world"), size=11)
    assert store.get(ref.address) == b"hello world"
    assert store.has(ref.address)
    assert isinstance(store, ContentStore)


def test_blob_lives_in_a_sharded_file_and_no_temp_file_is_left(tmp_path: Path) -> None:
    """The blob is objects/<2 hex>/<62 hex> and the put leaves nothing in tmp/."""
    store = LocalContentStore(tmp_path / "store")
    ref = store.put(b"sharded", "alice")
    assert _blob_path(tmp_path / "store", ref.address).read_bytes() == b"sharded"
    assert list((tmp_path / "store" / "tmp").iterdir()) == []


def test_empty_blob_is_a_valid_blob(store: ContentStore) -> None:
    """Zero bytes store and read back like any other blob."""
    ref = store.put(b"", "alice")
    assert ref.size == 0
    assert store.get(ref.address) == b""


def test_identical_bytes_from_two_tenants_are_one_blob(store_backend: StoreBackend) -> None:
    """Dedupe: two tenants storing the same bytes share one blob, and both are in the tenant set."""
    store = store_backend.open()
    a = store.put(b"shared", "alice")
    b = store.put(b"shared", "bob")
    assert a == b
    assert store.tenants(a.address) == {"alice", "bob"}
    assert store_backend.blob_count(store) == 1
    assert [e.address for e in store.list()] == [a.address]


@pytest.mark.parametrize("order", [("alice", "bob"), ("bob", "alice")])
def test_deletes_in_either_order_erase_the_blob_only_when_the_set_empties(
    store_backend: StoreBackend, order: tuple[str, str]
) -> None:
    """A tenant's delete removes only that tenant; the blob goes when the last tenant deletes."""
    store = store_backend.open()
    ref = store.put(b"shared", "alice")
    store.put(b"shared", "bob")
    first, second = order
    assert store.delete(ref.address, first) is True
    assert store.tenants(ref.address) == {second}
    assert store.get(ref.address) == b"shared"
    assert store.delete(ref.address, first) is False  # already gone for that tenant
    assert store.delete(ref.address, second) is True
    assert store.tenants(ref.address) == set()
    assert not store.has(ref.address)
    assert store_backend.blob_count(store) == 0
    with pytest.raises(ContentNotFoundError):
        store.get(ref.address)


def test_corrupted_blob_raises_instead_of_returning_wrong_bytes(
    store_backend: StoreBackend,
) -> None:
    """A blob altered in storage fails its hash check on read: ContentIntegrityError, never the bytes."""
    store = store_backend.open()
    ref = store.put(b"precious bytes", "alice")
    store_backend.damage(store, ref.address, b"precious bytez")
    with pytest.raises(ContentIntegrityError) as info:
        store.get(ref.address)
    assert info.value.code == "content_corrupted"
    assert ref.address in info.value.message
    assert not store.has(ref.address)  # moved aside to corrupt/
    assert store.put(b"precious bytes", "alice") == ref  # storing the original again repairs it
    assert store.get(ref.address) == b"precious bytes"


def test_put_file_repairs_a_blob_damaged_without_changing_size(
    store_backend: StoreBackend, tmp_path: Path
) -> None:
    """put_file lays down a fresh copy over a damaged same-size blob: it is repaired."""
    store = store_backend.open()
    ref = store.put(b"original", "alice")
    store_backend.damage(store, ref.address, b"0riginal")
    source = tmp_path / "original.bin"
    source.write_bytes(b"original")
    assert store.put_file(source, "bob") == ref
    assert store.get(ref.address) == b"original"
    assert store.tenants(ref.address) == {"alice", "bob"}


def test_put_repairs_a_blob_damaged_without_changing_size(store_backend: StoreBackend) -> None:
    """put of bytes whose stored copy was damaged in place (same size) repairs it, not dedupes onto it."""
    store = store_backend.open()
    ref = store.put(b"original", "alice")
    store_backend.damage(store, ref.address, b"0riginal")
    assert store.put(b"original", "bob") == ref
    assert store.get(ref.address) == b"original"
    assert store.tenants(ref.address) == {"alice", "bob"}


def test_put_of_a_sound_duplicate_keeps_the_existing_file(tmp_path: Path) -> None:
    """A put of bytes already stored intact writes no second copy (the file keeps its inode)."""
    store = LocalContentStore(tmp_path / "store")
    ref = store.put(b"same bytes", "alice")
    blob = _blob_path(tmp_path / "store", ref.address)
    inode = blob.stat().st_ino
    assert store.put(b"same bytes", "bob") == ref
    assert blob.stat().st_ino == inode


def test_stale_temp_files_are_removed_on_open(tmp_path: Path) -> None:
    """A temp file a crashed put left a day ago is deleted when the store is next opened; a fresh one stays."""
    LocalContentStore(tmp_path / "s").close()
    old = tmp_path / "s" / "tmp" / "put-crashed"
    fresh = tmp_path / "s" / "tmp" / "put-running"
    old.write_bytes(b"partial")
    fresh.write_bytes(b"partial")
    day_ago = time.time() - 2 * 24 * 3600
    os.utime(old, (day_ago, day_ago))
    LocalContentStore(tmp_path / "s").close()
    assert not old.exists()
    assert fresh.exists()


def test_missing_and_malformed_addresses_are_clear_errors(store: ContentStore) -> None:
    """An absent blob is ContentNotFoundError; a malformed address is StoreError invalid_address."""
    with pytest.raises(ContentNotFoundError):
        store.get(_address(b"never stored"))
    with pytest.raises(ContentNotFoundError):
        store.stat(_address(b"never stored"))
    good = _address(b"x")
    for bad in ["sha256:XYZ", "md5:" + "0" * 32, "../../etc/passwd", 42, good + "\n", " " + good]:
        with pytest.raises(StoreError) as info:
            store.get(bad)  # type: ignore[arg-type]
        assert info.value.code == "invalid_address"


def test_bad_tenant_and_bad_data_are_refused(store: ContentStore) -> None:
    """An empty tenant or a non-bytes payload is refused with a stable code."""
    with pytest.raises(StoreError) as info:
        store.put(b"x", "  ")
    assert info.value.code == "invalid_tenant"
    with pytest.raises(StoreError) as info:
        store.put("text", "alice")  # type: ignore[arg-type]
    assert info.value.code == "invalid_data"


@pytest.mark.parametrize("tenant", ["\ud800", "a\x00b", "line\nbreak", "x" * 257, None, 7])
def test_unencodable_or_unprintable_tenants_are_refused_with_a_code(
    store: ContentStore, tenant: object
) -> None:
    """A tenant with a lone surrogate, a control character, too many characters or no text is StoreError invalid_tenant."""
    for call in (
        lambda: store.put(b"x", tenant),  # type: ignore[arg-type]
        lambda: store.delete(_address(b"x"), tenant),  # type: ignore[arg-type]
    ):
        with pytest.raises(StoreError) as info:
            call()
        assert info.value.code == "invalid_tenant"


def test_put_file_streams_in_chunks_and_matches_put(store: Any, tmp_path: Path) -> None:
    """put_file hashes while copying in chunks (progress advances several times) and equals put."""
    data = bytes(range(256)) * (3 * 4096 + 17)  # a little over 3 MiB
    source = tmp_path / "clip.bin"
    source.write_bytes(data)
    calls: list[tuple[int, int | None]] = []
    ref = store.put_file(source, "alice", progress=lambda done, total: calls.append((done, total)))
    assert ref == ContentRef(address=_address(data), size=len(data))
    assert len(calls) >= 4
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)
    assert calls[-1] == (len(data), len(data))
    assert store.get(ref.address) == data


def test_put_file_of_a_missing_file_is_a_store_error(store: Any, tmp_path: Path) -> None:
    """A path that cannot be read is StoreError unreadable_file, not a bare OSError."""
    with pytest.raises(StoreError) as info:
        store.put_file(tmp_path / "nope.bin", "alice")
    assert info.value.code == "unreadable_file"


def test_stat_reports_size_times_and_tenants(store_backend: StoreBackend) -> None:
    """stat gives the size, the first put time, the last put time and every tenant."""
    times = iter([datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 5, tzinfo=UTC)])
    with store_backend.open("s", clock=lambda: next(times)) as store:
        ref = store.put(b"abc", "alice")
        store.put(b"abc", "bob")
        entry = store.stat(ref.address)
    assert entry.size == 3
    assert entry.created == datetime(2026, 1, 1, tzinfo=UTC)
    assert entry.last_put == datetime(2026, 1, 5, tzinfo=UTC)
    assert entry.tenants == {"alice", "bob"}


def test_index_survives_reopening(store_backend: StoreBackend) -> None:
    """A store reopened at the same place sees the blobs and tenants stored before."""
    with store_backend.open("s") as store:
        ref = store.put(b"persist", "alice")
    with store_backend.open("s") as store:
        assert store.tenants(ref.address) == {"alice"}
        assert store.get(ref.address) == b"persist"


def test_purge_respects_a_newer_put(store_backend: StoreBackend) -> None:
    """purge(older_than=...) leaves a blob re-stored after the cutoff, and erases an older one."""
    now = datetime(2026, 3, 1, tzinfo=UTC)
    with store_backend.open("s", clock=lambda: now) as store:
        ref = store.put(b"racy", "alice")
        assert store.purge(ref.address, older_than=now) is False
        assert store.has(ref.address)
        assert store.purge(ref.address, older_than=now + timedelta(seconds=1)) is True
        assert not store.has(ref.address)
        assert store.tenants(ref.address) == set()
        assert store.purge(ref.address) is False


def _writer(target: str, options: dict[str, Any], worker: int, count: int) -> None:
    with open_store(target, **options) as store:
        for i in range(count):
            store.put(f"shared-{i}".encode(), f"tenant-{worker}")
            store.put(f"own-{worker}-{i}".encode(), f"tenant-{worker}")


def test_two_processes_writing_at_once_lose_nothing(store_backend: StoreBackend) -> None:
    """Concurrent writers in separate processes: every blob and every tenant survives."""
    target, options = store_backend.spec("shared")
    open_store(target, **options).close()
    # obstore's runtime threads do not survive fork(): the S3 writers are spawned.
    fork = store_backend.name == "local" and "fork" in multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if fork else "spawn")
    count = 40 if store_backend.name == "local" else 15
    workers = [context.Process(target=_writer, args=(target, options, w, count)) for w in range(2)]
    for process in workers:
        process.start()
    try:
        for process in workers:
            process.join(120)
            assert process.exitcode == 0
    finally:
        for process in workers:
            process.kill()
    with open_store(target, **options) as store:
        entries = {e.address: e for e in store.list()}
        assert len(entries) == count + 2 * count
        for i in range(count):
            shared = _address(f"shared-{i}".encode())
            assert entries[shared].tenants == {"tenant-0", "tenant-1"}
            assert store.get(shared) == f"shared-{i}".encode()
            for w in range(2):
                own = _address(f"own-{w}-{i}".encode())
                assert store.get(own) == f"own-{w}-{i}".encode()
    if store_backend.name == "local":
        assert list((Path(target) / "tmp").iterdir()) == []
