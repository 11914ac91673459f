"""S3ContentStore's own behaviour: conditional create, multipart, the erase race, URLs (moto on 127.0.0.1).

The behaviour every store shares runs on S3 through ``store_backend`` in the other store tests;
these pin what only an object store has to get right.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import obstore
import psycopg
import pytest

from loom_nb.errors import ConfigurationError, ContentNotFoundError, StoreError
from loom_nb.store import LocalContentStore, S3ContentStore, open_store, sweep_unpinned_content
from tests.conftest import StoreBackend, address_of, open_store_backend

MiB = 1 << 20


@pytest.fixture
def s3(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreBackend]:
    """S3 with its index as marker objects (what the marker tests look at)."""
    backend = open_store_backend(request, "s3", tmp_path)
    yield backend
    backend.close()


@pytest.fixture(params=["s3", "s3+postgres", "s3+pgbouncer"])
def s3_any(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreBackend]:
    """S3 with either index: marker objects, or rows in PostgreSQL (directly or through PgBouncer)."""
    backend = open_store_backend(request, request.param, tmp_path)
    yield backend
    backend.close()


def test_concurrent_puts_of_the_same_bytes_make_one_sound_blob(s3_any: StoreBackend) -> None:
    """Eight threads storing the same bytes for different tenants: one blob, every tenant recorded."""
    store = s3_any.open()
    data = b"same bytes" * 1000
    errors: list[BaseException] = []

    def put(tenant: str) -> None:
        try:
            store.put(data, tenant)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=put, args=(f"t{i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert store.tenants(address_of(data)) == {f"t{i}" for i in range(8)}
    assert store.get(address_of(data)) == data
    assert s3_any.blob_count(store) == 1


def test_a_put_landing_while_the_last_delete_erases_keeps_its_blob(s3_any: StoreBackend) -> None:
    """The erase re-lists markers after moving the blob aside and restores it for a racing put."""
    store = s3_any.open()
    racer = s3_any.open()
    ref = store.put(b"contested", "alice")
    original = store._markers
    calls = {"n": 0}

    def markers_with_a_put_in_between(digest: str) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:  # inside the erase: the blob was just moved aside
            racer.put(b"contested", "bob")
        return original(digest)

    store._markers = markers_with_a_put_in_between  # type: ignore[method-assign]
    assert store.delete(ref.address, "alice") is True
    assert calls["n"] == 2
    assert store.tenants(ref.address) == {"bob"}
    assert store.get(ref.address) == b"contested"


def test_purge_racing_a_put_keeps_the_blob_and_the_new_tenant(s3_any: StoreBackend) -> None:
    """A sweep's purge that meets a put mid-erase gives up (False) and leaves blob and tenant."""
    old = datetime(2026, 1, 1, tzinfo=UTC)
    store = s3_any.open(clock=lambda: old)
    racer = s3_any.open()  # puts now, long after the cutoff
    ref = store.put(b"old but wanted again", "alice")
    original = store._markers
    calls = {"n": 0}

    def markers_with_a_put_in_between(digest: str) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            racer.put(b"old but wanted again", "bob")
        return original(digest)

    store._markers = markers_with_a_put_in_between  # type: ignore[method-assign]
    assert store.purge(ref.address, older_than=old + timedelta(days=1)) is False
    assert store.tenants(ref.address) == {"alice", "bob"}
    assert store.get(ref.address) == b"old but wanted again"


def test_a_large_file_goes_up_as_a_multipart_upload(s3: StoreBackend, tmp_path: Path) -> None:
    """put_file over the part size streams in parts (progress per part) and reads back exactly."""
    source = tmp_path / "big.bin"
    data = bytes(range(256)) * (11 * MiB // 256 + 3)
    source.write_bytes(data)
    target, options = s3.spec()
    store = open_store(target, chunk_size=5 * MiB, **options)
    seen: list[int] = []
    ref = store.put_file(source, "alice", progress=lambda done, total: seen.append(done))
    assert ref.address == address_of(data)
    assert ref.size == len(data)
    assert seen == [5 * MiB, 10 * MiB, len(data)]
    meta = obstore.head(store._s3, f"blobs/{ref.address[7:]}")
    assert "-" in (meta["e_tag"] or "")  # S3 marks multipart objects' ETags with the part count
    assert store.get(ref.address) == data
    assert store.put_file(source, "bob") == ref  # present: deduped, not uploaded again
    assert store.tenants(ref.address) == {"alice", "bob"}


def test_a_file_changing_during_put_file_is_refused_and_nothing_wrong_is_stored(
    s3: StoreBackend, tmp_path: Path
) -> None:
    """A file rewritten between hashing and upload: StoreError file_changed, no blob at the address."""
    source = tmp_path / "moving.bin"
    data = b"a" * (12 * MiB)
    source.write_bytes(data)
    target, options = s3.spec()
    store = open_store(target, chunk_size=5 * MiB, **options)

    def rewrite(done: int, total: int | None) -> None:
        if done == 5 * MiB:
            source.write_bytes(b"b" * (12 * MiB))

    with pytest.raises(StoreError) as info:
        store.put_file(source, "alice", progress=rewrite)
    assert info.value.code == "file_changed"
    with pytest.raises(ContentNotFoundError):
        store.get(address_of(data))


def test_odd_tenants_round_trip_and_unencodable_ones_are_refused(s3_any: StoreBackend) -> None:
    """Tenants with slashes, dashes and non-ASCII text are kept exactly; a lone surrogate is refused."""
    store = s3_any.open()
    tenants = {"team/a-b", "ünïcode", "x" * 200, "-", "a=b"}
    for tenant in tenants:
        ref = store.put(b"t", tenant)
    assert store.tenants(ref.address) == tenants
    for bad in ["\ud800", "y" * 300]:
        with pytest.raises(StoreError) as info:
            store.put(b"t", bad)
        assert info.value.code == "invalid_tenant"


def test_a_blob_no_marker_names_is_listed_and_reclaimed(s3: StoreBackend) -> None:
    """An orphan object (a crash between erasing markers and blob) is visible to GC and swept."""
    store = s3.open()
    obstore.put(store._s3, f"blobs/{address_of(b'orphan')[7:]}", b"orphan")
    (entry,) = store.list()
    assert entry.address == address_of(b"orphan")
    assert entry.tenants == frozenset()
    report = sweep_unpinned_content(
        store,
        [[]],
        ttl=timedelta(0),
        reclaim_orphans=True,
        now=datetime.now(UTC) + timedelta(hours=1),
    )
    assert report.reclaimed == (address_of(b"orphan"),)
    assert store.list() == []


def test_bad_urls_and_options_are_configuration_errors(tmp_path: Path) -> None:
    """open_store names what is wrong with a URL or an option, with a stable code."""
    for url, code in [
        ("s3://", "invalid_store_url"),
        ("s3://bucket/a//b", "invalid_store_url"),
        ("s3://user@bucket/p", "invalid_store_url"),
        ("ftp://host/x", "unsupported_store_url"),
        ("", "invalid_store_url"),
        ("file://host/x", "invalid_store_url"),
    ]:
        with pytest.raises(ConfigurationError) as info:
            open_store(url)
        assert info.value.code == code, url
    with pytest.raises(ConfigurationError) as info:
        open_store(tmp_path / "s", endpoint="http://127.0.0.1:1")
    assert info.value.code == "invalid_store_option"
    with pytest.raises(ConfigurationError) as info:
        open_store("s3://bucket", chunk_size=1024)
    assert info.value.code == "invalid_chunk_size"


def test_local_paths_and_file_urls_open_the_local_store(tmp_path: Path) -> None:
    """A path, a PathLike and a file:// URL all open a LocalContentStore at that directory."""
    for target in (str(tmp_path / "a"), tmp_path / "b", (tmp_path / "c").as_uri()):
        with open_store(target) as store:
            assert isinstance(store, LocalContentStore)
            assert store.get(store.put(b"x", "t").address) == b"x"
    assert {p.name for p in tmp_path.iterdir()} == {"a", "b", "c"}


def test_an_unreachable_server_is_store_unavailable() -> None:
    """Nothing listening at the endpoint: StoreError store_unavailable, not a client exception."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = S3ContentStore(
        "s3://bucket/p",
        endpoint=f"http://127.0.0.1:{port}",
        access_key_id="k",
        secret_access_key="s",
        max_retries=0,
    )
    with pytest.raises(StoreError) as info:
        store.put(b"x", "alice")
    assert info.value.code == "store_unavailable"
    assert "127.0.0.1" in info.value.message or "s3://bucket/p" in info.value.message


def _tenant_markers(store: Any, address: str) -> list[str]:
    return sorted(
        meta["path"]
        for batch in obstore.list(store._s3, f"tenants/{address[7:]}/")
        for meta in batch
    )


def test_a_new_blob_costs_one_marker_and_one_create(s3: StoreBackend) -> None:
    """A put of new bytes writes its marker and the blob, and looks at nothing first (no LIST, no HEAD)."""
    store = s3.open()
    looked: list[str] = []
    store._markers = lambda digest: looked.append("list") or []  # type: ignore[method-assign,func-returns-value]
    store._blob_meta = lambda digest: looked.append("head")  # type: ignore[method-assign,func-returns-value]
    ref = store.put(b"brand new", "alice")
    assert looked == []
    assert len(_tenant_markers(store, ref.address)) == 1
    assert s3.open().get(ref.address) == b"brand new"


def test_dedupe_keeps_the_first_put_time_and_one_marker_per_tenant(s3: StoreBackend) -> None:
    """Re-puts by the same and other tenants (other store objects too): first put time kept, one marker each."""
    times = iter(datetime(2026, 1, d, tzinfo=UTC) for d in range(1, 10))
    clock = lambda: next(times)  # noqa: E731
    first = s3.open(clock=clock)
    ref = first.put(b"shared", "alice")
    first.put(b"shared", "alice")  # this store saw it: looks, then settles
    s3.open(clock=clock).put(b"shared", "bob")  # another store: the create finds it
    s3.open(clock=clock).put(b"shared", "alice")
    markers = _tenant_markers(first, ref.address)
    assert len(markers) == 2
    assert first.delete(ref.address, "alice") is True
    entry = first.stat(ref.address)
    assert entry.tenants == {"bob"}
    assert entry.created == datetime(2026, 1, 1, tzinfo=UTC)
    assert entry.last_put == datetime(2026, 1, 3, tzinfo=UTC)
    assert first.get(ref.address) == b"shared"


def test_a_store_that_saw_a_blob_looks_before_sending_its_bytes_again(s3: StoreBackend) -> None:
    """A second put of bytes this store holds does not upload them (HEAD finds them sound)."""
    store = s3.open()
    ref = store.put(b"x" * 100_000, "alice")
    original = obstore.put
    sent: list[int] = []

    def counting(target: Any, key: str, data: Any, **kw: Any) -> Any:
        sent.append(len(data))
        return original(target, key, data, **kw)

    obstore_put = pytest.MonkeyPatch()
    obstore_put.setattr(obstore, "put", counting)
    try:
        assert store.put(b"x" * 100_000, "bob") == ref
    finally:
        obstore_put.undo()
    assert max(sent) == 0  # markers only
    assert store.tenants(ref.address) == {"alice", "bob"}


# -- the per-tenant index in PostgreSQL ----------------------------------------------------------


@pytest.fixture
def s3_pg(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreBackend]:
    backend = open_store_backend(request, "s3+postgres", tmp_path)
    yield backend
    backend.close()


def test_with_the_journal_the_index_is_rows_in_its_database(s3_pg: StoreBackend) -> None:
    """index=a PostgreSQL Journal: tenants are rows beside the journal (its pool), no marker objects."""
    from loom_nb.journal import Journal

    target, options = s3_pg.spec()
    journal = Journal(options["index"])
    try:
        store = open_store(target, **{**options, "index": journal})
        ref = store.put(b"indexed", "alice")
        store.put(b"indexed", "bob")
        assert _tenant_markers(store, ref.address) == []  # nothing under tenants/ in the bucket
        with psycopg.connect(options["index"]) as conn:
            rows = conn.execute(
                "SELECT store, digest FROM loom_store_tenants ORDER BY tenant"
            ).fetchall()
        assert rows == [(store.url, ref.address[7:])] * 2
        assert store.tenants(ref.address) == {"alice", "bob"}
        # The same index reached by URL sees the same rows; another prefix sees none of them.
        assert s3_pg.open().tenants(ref.address) == {"alice", "bob"}
        assert s3_pg.open("other").list() == []
        store.close()  # the journal's pool is the journal's: still open
        assert journal.executions() == []
    finally:
        journal.close()


def test_an_index_that_is_not_postgresql_is_refused(s3_pg: StoreBackend, tmp_path: Path) -> None:
    """index= a SQLite journal, a path or anything else: ConfigurationError invalid_store_index."""
    from loom_nb.journal import Journal

    target, options = s3_pg.spec()
    sqlite = Journal(str(tmp_path / "j.sqlite"))
    for bad in (sqlite, str(tmp_path / "x.sqlite"), 5):
        with pytest.raises(ConfigurationError) as info:
            open_store(target, **{**options, "index": bad})
        assert info.value.code == "invalid_store_index"
    sqlite.close()


def test_a_store_opened_with_the_other_index_is_refused(s3_pg: StoreBackend) -> None:
    """A store first used with its index in PostgreSQL refuses marker objects, and the other way round."""
    target, options = s3_pg.spec()
    open_store(target, **options).put(b"x", "alice")
    plain = {k: v for k, v in options.items() if k != "index"}
    with pytest.raises(ConfigurationError) as info:
        open_store(target, **plain).list()
    assert info.value.code == "store_index_mismatch"
    other, _ = s3_pg.spec("markers")
    open_store(other, **plain).put(b"x", "alice")
    with pytest.raises(ConfigurationError) as info:
        open_store(other, **options).put(b"y", "bob")
    assert info.value.code == "store_index_mismatch"


def _layout(store: Any) -> dict[str, Any]:
    import json

    return dict(json.loads(bytes(obstore.get(store._s3, "loom-store.json").bytes())))


def test_a_store_given_to_a_postgresql_journal_keeps_its_index_there(s3_pg: StoreBackend) -> None:
    """Journal(postgresql, store=a new S3 store opened without index=): tenants are rows in the journal's database."""
    from loom_nb.journal import Journal

    target, options = s3_pg.spec("paired")
    url = options.pop("index")
    journal = Journal(url, store=open_store(target, **options))
    try:
        store = journal.store
        assert store is not None
        ref = store.put(b"paired", "alice")
        assert _tenant_markers(store, ref.address) == []
        with psycopg.connect(url) as conn:
            (rows,) = conn.execute("SELECT COUNT(*) FROM loom_store_tenants").fetchone()
        assert rows == 1
        layout = _layout(store)
        assert layout["index"] == "postgresql"
        assert layout["database"].count("/") == 2  # cluster id / database / schema
        assert "postgres@" not in json_text(layout)  # no user, no password
        # A second client paired with the same database sees the same tenants.
        again = Journal(url, store=open_store(target, **options))
        assert again.store is not None
        assert again.store.tenants(ref.address) == {"alice"}
        again.close()
        # Standalone, the store refuses marker objects and says where its index is.
        with pytest.raises(ConfigurationError) as info:
            open_store(target, **options).list()
        assert info.value.code == "store_index_mismatch"
        assert "Journal(" in info.value.message
        assert "(schema loom_test_" in info.value.message
    finally:
        journal.close()


def json_text(value: Any) -> str:
    import json

    return json.dumps(value)


def test_a_bucket_that_records_marker_objects_keeps_them_when_paired(s3_pg: StoreBackend) -> None:
    """A store first used standalone (marker objects) stays on them under a PostgreSQL journal: no split index."""
    from loom_nb.journal import Journal

    target, options = s3_pg.spec("markers-first")
    url = options.pop("index")
    first = open_store(target, **options).put(b"first", "alice")
    journal = Journal(url, store=open_store(target, **options))
    try:
        assert journal.store is not None
        second = journal.store.put(b"second", "bob")
        assert len(_tenant_markers(journal.store, first.address)) == 1
        assert len(_tenant_markers(journal.store, second.address)) == 1
        assert _layout(journal.store)["index"] == "objects"
    finally:
        journal.close()


def test_an_index_in_another_database_is_refused(s3_pg: StoreBackend) -> None:
    """A bucket indexed in one database (here: schema) refuses a client indexing it in another."""
    from tests import services

    target, options = s3_pg.spec("one-database")
    open_store(target, **options).put(b"x", "alice")
    other, schema = services.fresh_schema_url(services.postgres_url())
    try:
        with pytest.raises(ConfigurationError) as info:
            open_store(target, **{**options, "index": other}).put(b"y", "bob")
        assert info.value.code == "store_index_mismatch"
        assert "another database" in info.value.message
        assert open_store(target, **options).tenants(address_of(b"x")) == {"alice"}
    finally:
        services.drop_schema(services.postgres_url(), schema)
