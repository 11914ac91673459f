"""``store.open``: a blob streamed in chunks and verified as it is read, on every backend; and
``put_file``'s parallel hash-and-write path (small chunk sizes stand in for large files)."""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path
from typing import Any

import pytest

from loom_nb.errors import (
    ContentAccessDeniedError,
    ContentIntegrityError,
    ContentNotFoundError,
    StoreError,
)
from loom_nb.store import BlobReader, ContentStore, LocalContentStore, _local_io
from tests.conftest import StoreBackend, address_of


@pytest.fixture
def store(store_backend: StoreBackend) -> ContentStore:
    return store_backend.open()


def test_open_streams_the_blob_in_chunks_and_verifies_it_at_the_end(store: ContentStore) -> None:
    """read(n) returns exactly n bytes until the end; the reader is verified only after the last byte."""
    data = os.urandom(3 * 65536 + 17)
    ref = store.put(data, "alice")
    with store.open(ref.address, tenant="alice") as reader:
        assert isinstance(reader, BlobReader)
        assert isinstance(reader, io.RawIOBase)
        assert (reader.address, reader.size, reader.readable()) == (ref.address, len(data), True)
        pieces = []
        while piece := reader.read(65536):
            assert reader.verified == (reader.tell() == len(data))
            pieces.append(piece)
    assert [len(p) for p in pieces] == [65536, 65536, 65536, 17]
    assert b"".join(pieces) == data
    assert reader.verified
    assert reader.closed


def test_readinto_iteration_and_readall_give_the_same_bytes(store: ContentStore) -> None:
    """readinto fills a caller's buffer; iteration yields chunk_size pieces; readall the rest."""
    data = os.urandom(100_000)
    ref = store.put(data, "alice")
    with store.open(ref.address, tenant="alice") as reader:
        buffer = bytearray(1000)
        assert reader.readinto(buffer) == 1000
        assert bytes(buffer) == data[:1000]
        assert reader.readall() == data[1000:]
        assert reader.verified
    with store.open(ref.address, tenant="alice") as reader:
        reader.chunk_size = 30_000
        chunks = list(reader)
    assert [len(c) for c in chunks] == [30_000, 30_000, 30_000, 10_000]
    assert b"".join(chunks) == data
    assert reader.verified
    empty = store.put(b"", "alice")
    with store.open(empty.address, tenant="alice") as reader:
        assert list(reader) == []
        assert reader.verified


def test_reads_across_the_bodys_chunk_boundaries_give_the_exact_bytes(store: ContentStore) -> None:
    """A blob of several 1 MiB read chunks (HTTP body pieces on S3) read in odd sizes that straddle them."""
    data = os.urandom(2 * (1 << 20) + 3)
    ref = store.put(data, "alice")
    with store.open(ref.address, tenant="alice") as reader:
        pieces = []
        while piece := reader.read(300_001):
            pieces.append(piece)
    assert [len(p) for p in pieces] == [300_001] * 6 + [len(data) - 6 * 300_001]
    assert b"".join(pieces) == data
    assert reader.verified


def test_open_is_allowed_only_to_a_tenant_that_stored_the_blob(store: ContentStore) -> None:
    """Another tenant's blob and an absent one are refused alike; bad names are refused up front."""
    ref = store.put(b"alice's bytes", "alice")
    store.put(b"bob's bytes", "bob")
    absent = address_of(b"never stored")
    refusals = []
    for address in (ref.address, absent):
        with pytest.raises(ContentAccessDeniedError) as caught:
            store.open(address, tenant="bob")
        refusals.append(caught.value.code)
    assert refusals == ["content_access_denied"] * 2
    with pytest.raises(StoreError) as bad_tenant:
        store.open(ref.address, tenant="")
    assert bad_tenant.value.code == "invalid_tenant"
    with pytest.raises(StoreError) as bad_address:
        store.open("sha256:nothex", tenant="alice")
    assert bad_address.value.code == "invalid_address"
    with store.open(ref.address, tenant="alice") as reader:
        assert reader.read() == b"alice's bytes"


@pytest.mark.parametrize("damage", ["same length", "shorter", "longer"])
def test_a_damaged_blob_raises_content_corrupted_at_the_end_never_verified(
    store_backend: StoreBackend, damage: str
) -> None:
    """Bytes before the end come out unverified; the read that would complete the blob raises
    ``content_corrupted`` instead of returning them, and the damaged copy is moved aside."""
    store = store_backend.open()
    data = os.urandom(200_000)
    ref = store.put(data, "alice")
    bad = {
        "same length": data[:-1] + bytes([data[-1] ^ 1]),
        "shorter": data[:150_000],
        "longer": data + b"tail",
    }[damage]
    store_backend.damage(store, ref.address, bad)
    with store.open(ref.address, tenant="alice") as reader:
        assert reader.size == len(bad)
        head = reader.read(len(bad) - 1)
        assert head == bad[:-1]
        assert not reader.verified
        with pytest.raises(ContentIntegrityError) as caught:
            reader.read(1)
        assert caught.value.code == "content_corrupted"
        assert not reader.verified
        with pytest.raises(ContentIntegrityError):  # and it keeps saying so
            reader.read(1)
    with pytest.raises(ContentNotFoundError):  # quarantined: the next put of the bytes repairs it
        store.get(ref.address)
    store.put(data, "alice")
    with store.open(ref.address, tenant="alice") as reader:
        assert reader.read() == data
        assert reader.verified


def test_a_reader_closed_early_releases_the_blob_unverified(store: ContentStore) -> None:
    """Closing before the end is allowed and verifies nothing; a closed reader reads nothing."""
    data = os.urandom(50_000)
    ref = store.put(data, "alice")
    reader = store.open(ref.address, tenant="alice")
    assert reader.read(10) == data[:10]
    reader.close()
    assert reader.closed
    assert not reader.verified
    with pytest.raises(ValueError):
        reader.read(10)


def test_a_local_blob_truncated_while_read_raises_at_its_end(tmp_path: Path) -> None:
    """A file cut short under an open reader is a short read: ``content_corrupted``, not left in place."""
    store = LocalContentStore(tmp_path / "store")
    data = os.urandom(100_000)
    ref = store.put(data, "alice")
    digest = ref.address.removeprefix("sha256:")
    blob = tmp_path / "store" / "objects" / digest[:2] / digest[2:]
    with store.open(ref.address, tenant="alice") as reader:
        assert reader.read(1000) == data[:1000]
        os.truncate(blob, 5000)
        with pytest.raises(ContentIntegrityError) as caught:
            reader.read()
    assert "ended after 5000 of its 100000 bytes" in caught.value.message
    assert not reader.verified


# -- put_file / put: hashed in parallel with the write ----------------------------------------------


@pytest.fixture
def small_pipeline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The parallel path from 1 KiB on, in 4 KiB chunks: many chunks through a ring of 3 buffers."""
    monkeypatch.setattr(_local_io, "PARALLEL_FROM", 1024)
    monkeypatch.setattr(_local_io, "COPY_CHUNK", 4096)
    monkeypatch.setattr(_local_io, "RING", 3)


@pytest.mark.usefixtures("small_pipeline")
def test_put_file_and_put_on_the_parallel_path_store_the_exact_bytes(tmp_path: Path) -> None:
    """Every chunk hashed and written in order: the address, the file and the progress all agree."""
    store = LocalContentStore(tmp_path / "store")
    data = os.urandom(20 * 4096 + 123)
    source = tmp_path / "source.bin"
    source.write_bytes(data)
    seen: list[tuple[int, int | None]] = []
    ref = store.put_file(source, "alice", progress=lambda done, total: seen.append((done, total)))
    assert ref.address == "sha256:" + hashlib.sha256(data).hexdigest()
    assert ref.size == len(data)
    assert [d for d, _ in seen] == sorted({d for d, _ in seen})
    assert seen[-1] == (len(data),) * 2
    assert len(seen) == 21
    assert store.get(ref.address) == data
    again = os.urandom(5000)
    assert store.put(again, "bob").address == address_of(again)
    assert store.get(address_of(again)) == again
    assert store.put(data, "bob") == ref  # the same bytes again: one blob, both tenants
    assert store.tenants(ref.address) == {"alice", "bob"}
    assert list((tmp_path / "store" / "tmp").iterdir()) == []


@pytest.mark.usefixtures("small_pipeline")
def test_a_failed_write_on_the_parallel_path_stores_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that fails mid-copy (a full disk) raises from put_file and leaves no blob, no temp file."""
    store = LocalContentStore(tmp_path / "store")
    source = tmp_path / "source.bin"
    source.write_bytes(os.urandom(10 * 4096))
    calls = 0
    real = _local_io.write_all

    def failing(out: Any, view: memoryview) -> None:
        nonlocal calls
        calls += 1
        if calls == 4:
            raise OSError(28, "No space left on device")
        real(out, view)

    monkeypatch.setattr(_local_io, "write_all", failing)
    with pytest.raises(OSError, match="No space left"):
        store.put_file(source, "alice")
    assert store.list() == []
    assert list((tmp_path / "store" / "tmp").iterdir()) == []


def test_a_failed_readinto_leaves_none_of_its_bytes_in_the_buffer(tmp_path: Path) -> None:
    """readinto of a damaged blob's last bytes raises and blanks what it had copied."""
    store = LocalContentStore(tmp_path / "store")
    data = os.urandom(10_000)
    ref = store.put(data, "alice")
    digest = ref.address.removeprefix("sha256:")
    (tmp_path / "store" / "objects" / digest[:2] / digest[2:]).write_bytes(b"X" * 10_000)
    buffer = bytearray(b"\xff" * 10_000)
    with store.open(ref.address, tenant="alice") as reader:
        with pytest.raises(ContentIntegrityError):
            reader.readinto(buffer)
        assert not reader.verified
    assert buffer == bytes(10_000)
