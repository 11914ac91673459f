"""The S3 store against a failing server: uploads cut off mid-way, servers that hang (issue 30).

A put writes its tenant's index entry first and then the blob; an upload that fails must take
its entry back, or ``list()``/``stat()`` would show a blob that ``has()``/``get()`` say is absent.
A server that accepts and never answers must end in a ``StoreError`` (``store_timeout``) within
the store's ``timeout``, not a hang. The faults come from a loopback proxy in front of the test
server (``tests/store/s3_faults.py``), on both tenant indexes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loom_nb.errors import ConfigurationError, ContentNotFoundError, StoreError
from loom_nb.store import S3ContentStore, open_store
from tests.conftest import StoreBackend, address_of, open_store_backend
from tests.store.s3_faults import FaultyEndpoint, HangingServer, Rule

MiB = 1 << 20


@pytest.fixture(params=["s3", "s3+postgres"])
def s3_any(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreBackend]:
    """S3 with either index: marker objects, or rows in PostgreSQL."""
    backend = open_store_backend(request, request.param, tmp_path)
    yield backend
    backend.close()


def _through(backend: StoreBackend, endpoint: FaultyEndpoint, **options: Any) -> Any:
    """The backend's store, reached through the faulty endpoint."""
    target, spec = backend.spec()
    store = open_store(target, **{**spec, "endpoint": endpoint.url, "max_retries": 1, **options})
    backend._opened.append(store)
    return store


def _blob_puts(fault: str) -> Rule:
    return lambda method, path: fault if method == "PUT" and "/blobs/" in path else None  # type: ignore[return-value]


def _assert_absent_everywhere(store: Any, address: str) -> None:
    assert address not in {entry.address for entry in store.list()}
    with pytest.raises(ContentNotFoundError):
        store.stat(address)
    assert store.tenants(address) == set()
    assert not store.has(address)


def test_a_put_cut_off_mid_upload_leaves_no_index_entry(s3_any: StoreBackend) -> None:
    """The blob upload is reset half-way: the put raises store_unavailable, and list(), stat(),
    tenants() and has() all agree the blob is absent; the same put then succeeds."""
    data = bytes(range(256)) * 4096  # 1 MiB
    address = address_of(data)
    upstream = s3_any._endpoint
    assert upstream is not None
    with FaultyEndpoint(upstream, _blob_puts("cut")) as endpoint:
        store = _through(s3_any, endpoint)
        with pytest.raises(StoreError) as info:
            store.put(data, "alice")
        assert info.value.code == "store_unavailable"
        assert [fault for fault, _, _ in endpoint.faults][:1] == ["cut"]
    direct = s3_any.open()
    _assert_absent_everywhere(direct, address)
    assert direct.put(data, "alice").address == address
    assert direct.stat(address).tenants == {"alice"}
    assert direct.get(address) == data


def test_a_multipart_upload_cut_off_leaves_no_index_entry(
    s3_any: StoreBackend, tmp_path: Path
) -> None:
    """put_file of a file larger than a part: a part upload is reset, and no entry is left."""
    source = tmp_path / "big.bin"
    source.write_bytes(bytes(range(251)) * (11 * MiB // 251))
    address = address_of(source.read_bytes())
    upstream = s3_any._endpoint
    assert upstream is not None
    with FaultyEndpoint(upstream, _blob_puts("cut")) as endpoint:
        store = _through(s3_any, endpoint, chunk_size=5 * MiB)
        with pytest.raises(StoreError):
            store.put_file(source, "alice")
        assert any("partNumber" in path for _, _, path in endpoint.faults)
    _assert_absent_everywhere(s3_any.open(), address)


def test_a_dedupe_put_that_fails_keeps_the_blob_and_its_other_tenants(
    s3_any: StoreBackend,
) -> None:
    """A put whose upload fails while the blob IS there (another tenant stored it) leaves the
    blob and that tenant's entry; only the failed put's own entry goes, if any."""
    data = b"already here" * 1000
    address = address_of(data)
    direct = s3_any.open()
    direct.put(data, "bob")
    s3_any.damage(direct, address, data[:-1] + b"?")  # same size, damaged: the put rewrites it
    upstream = s3_any._endpoint
    assert upstream is not None
    with FaultyEndpoint(upstream, _blob_puts("cut")) as endpoint:
        store = _through(s3_any, endpoint)
        with pytest.raises(StoreError):
            store.put(data, "alice")
    assert "bob" in direct.tenants(address)
    assert direct.has(address)


# -- servers that hang ---------------------------------------------------------------------------


def _hanging_store(url: str, **options: Any) -> S3ContentStore:
    return S3ContentStore(
        "s3://bucket/p",
        endpoint=url,
        access_key_id="k",
        secret_access_key="s",
        **{"timeout": 1.0, "max_retries": 0, **options},
    )


@pytest.mark.parametrize("operation", ["put", "get", "has", "list"])
def test_a_server_that_accepts_and_never_answers_times_out(operation: str) -> None:
    """Every operation against a server that accepts and never answers ends within the timeout in
    StoreError store_timeout, naming the store and the remedy."""
    with HangingServer() as server:
        store = _hanging_store(server.url)
        calls = {
            "put": lambda: store.put(b"x", "alice"),
            "get": lambda: store.get(address_of(b"x")),
            "has": lambda: store.has(address_of(b"x")),
            "list": store.list,
        }
        started = time.monotonic()
        with pytest.raises(StoreError) as info:
            calls[operation]()
        elapsed = time.monotonic() - started
        assert server.accepted >= 1
    assert info.value.code == "store_timeout"
    assert "s3://bucket/p" in info.value.message
    assert "timeout=" in info.value.message
    assert elapsed < 15


def test_a_blob_upload_that_hangs_times_out_and_takes_its_entry_back(
    s3_any: StoreBackend,
) -> None:
    """The marker goes up, then the blob upload hangs: store_timeout, and no entry is left."""
    data = b"stalled upload" * 100
    upstream = s3_any._endpoint
    assert upstream is not None
    with FaultyEndpoint(upstream, _blob_puts("hang")) as endpoint:
        store = _through(s3_any, endpoint, timeout=1.0, max_retries=0)
        with pytest.raises(StoreError) as info:
            store.put(data, "alice")
        assert info.value.code == "store_timeout"
    _assert_absent_everywhere(s3_any.open(), address_of(data))


def test_a_blob_download_that_hangs_times_out(s3_any: StoreBackend) -> None:
    """The blob is there but the server stalls on its GET: get() ends in store_timeout."""
    ref = s3_any.open().put(b"stored fine", "alice")
    upstream = s3_any._endpoint
    assert upstream is not None
    rule: Rule = lambda method, path: "hang" if method == "GET" and "/blobs/" in path else None  # noqa: E731
    with FaultyEndpoint(upstream, rule) as endpoint:
        store = _through(s3_any, endpoint, timeout=1.0, max_retries=0)
        started = time.monotonic()
        with pytest.raises(StoreError) as info:
            store.get(ref.address)
        assert info.value.code == "store_timeout"
        assert time.monotonic() - started < 15
        assert store.has(ref.address)  # HEAD and LIST still answer


@pytest.mark.parametrize("read", ["get", "open"])
def test_a_blob_download_cut_off_mid_body_is_a_store_error_and_the_blob_stays(
    s3_any: StoreBackend, read: str
) -> None:
    """The server sends the headers and half of the blob, then resets the connection: the read
    ends in StoreError store_unavailable naming the store (never short bytes, never a client
    exception), and the sound blob is not mistaken for a corrupted one (not moved aside)."""
    data = bytes(range(256)) * 4096  # 1 MiB
    ref = s3_any.open().put(data, "alice")
    upstream = s3_any._endpoint
    assert upstream is not None
    rule: Rule = lambda method, path: "truncate" if method == "GET" and "/blobs/" in path else None  # noqa: E731
    with FaultyEndpoint(upstream, rule) as endpoint:
        store = _through(s3_any, endpoint, timeout=5.0, max_retries=0)
        reads = {
            "get": lambda: store.get(ref.address),
            "open": lambda: store.open(ref.address, tenant="alice").read(),
        }
        with pytest.raises(StoreError) as info:
            reads[read]()
        assert endpoint.faults, "the fault was applied"
    assert info.value.code == "store_unavailable"
    assert store.url in info.value.message
    assert s3_any.open().get(ref.address) == data  # still in place, still sound


def test_timeout_is_validated() -> None:
    """timeout is a positive number of seconds; anything else is a ConfigurationError."""
    for bad in (0, -1, True, "10", float("nan"), float("inf")):
        with pytest.raises(ConfigurationError) as info:
            _hanging_store("http://127.0.0.1:9", timeout=bad)
        assert info.value.code == "invalid_timeout"
    assert _hanging_store("http://127.0.0.1:9", timeout=2.5).timeout == 2.5
    assert S3ContentStore("s3://bucket", endpoint="http://127.0.0.1:9").timeout == 120.0
