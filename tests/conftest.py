"""Suite-wide test settings, and the backend fixtures every store and journal test runs on."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests import services

# Property tests check invariants, not speed: a slow CI machine must not turn a first example's
# warm-up (pydantic schema building, imports) into a DeadlineExceeded failure. Timing targets live
# in benchmarks/.
settings.register_profile(
    "loom", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("loom")


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects by the mark added here
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Browser tests are ``slow`` too, so ``-m "not slow"`` leaves them out (notebooks/conftest.py
    does the same for the notebooks' cells)."""
    for item in items:
        if item.get_closest_marker("browser") is not None:
            item.add_marker(pytest.mark.slow)


# -- pytest-xdist: what must share one worker ------------------------------------------------------

SHARED_WORKER = (
    "notebooks/",  # a notebook's cells run in order in one kernel (nbval)
    "tests/agent/test_mcp",  # module-scoped MCP servers and the leak check after the module
    "tests/render/test_markdown.py",  # module-scoped fixtures, built once per module
    "tests/render/test_hostile.py",
)
"""Files whose tests run on one worker, in order; every other test is handed out on its own."""

BROWSER = "tests/browser/"
"""The browser tests all run on one worker: one JupyterLab (session scope) and one Chromium at a
time, instead of one of each per worker competing for two cores."""


LONG_FIRST = (
    "tests/test_kernel_parent.py",
    "tests/agent/test_jsonschema_import.py",
    "tests/guard/test_lookalikes.py",
    "tests/guard/test_properties.py",
    "tests/journal/test_journal_class.py",
    "tests/journal/test_work_processes.py",
    "tests/chat/test_map_workers.py",
    "tests/demo/",
)
"""Files whose tests take seconds each (kernels, processes, generated tables): handed out right
after the shared units, so none of them starts last and leaves the other workers idle meanwhile
(the order changes how long the run takes, never what it checks)."""


def xdist_scope(nodeid: str) -> str:
    """The unit of work of a test under ``--dist loadscope``: the browser folder, its file when
    it is in ``SHARED_WORKER``, else the test alone (so the slow tests spread over the workers)."""
    path = nodeid.split("::", 1)[0]
    if path.startswith(BROWSER):
        return BROWSER
    return path if path.startswith(SHARED_WORKER) else nodeid


def long_first(workqueue: OrderedDict[str, Any]) -> None:
    """Move the units of ``LONG_FIRST`` files to the front of ``workqueue`` (the units not yet
    handed out), in their order."""
    for scope in reversed([s for s in workqueue if s.startswith(LONG_FIRST)]):
        workqueue.move_to_end(scope, last=False)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist loadscope`` (the test command's): ``xdist_scope``'s units, the largest first,
    then the tests of ``LONG_FIRST``, then the rest in collection order.

    (``xdist_group`` marks with ``--dist loadgroup`` would say the same, but pytest-xdist 3.8 loses
    them on pytest 9.2's structured node ids: pytest-xdist issue 1386.)
    """
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedWorkerScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid)

        def schedule(self) -> None:
            first = self.collection is None
            super().schedule()  # the largest units first, two per worker handed out
            if first:
                long_first(self.workqueue)

    return SharedWorkerScheduling(config, log)


@pytest.fixture(autouse=True)
def _no_ambient_store_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """The backends below choose each S3 store's index, and each journal where its watches
    listen; a LOOM_STORE_INDEX or LOOM_JOURNAL_LISTEN_URL of the shell must not."""
    monkeypatch.delenv("LOOM_STORE_INDEX", raising=False)
    monkeypatch.delenv("LOOM_JOURNAL_LISTEN_URL", raising=False)


@pytest.fixture
def sigint_raises() -> Iterator[None]:
    """SIGINT raises ``KeyboardInterrupt`` during the test, as in a terminal or a kernel, even when
    pytest was started with SIGINT ignored (a background job of a shell without job control,
    ``nohup``): then ``_thread.interrupt_main()`` does nothing at all, and a test waiting to hear
    the interrupt would wait forever."""
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if previous is not None:  # None: a handler not set from Python, which cannot be put back
            signal.signal(signal.SIGINT, previous)


# -- backends: every store test runs on the local store, on S3, and on S3 indexed in PostgreSQL --


@pytest.fixture(scope="session")
def s3_service() -> Iterator[str | None]:
    """The S3-compatible server's endpoint for the whole run (None when none could start)."""
    with services.s3_endpoint() as endpoint:
        yield endpoint


class StoreBackend:
    """Opens content stores of one backend for a test, and damages blobs behind the store's back."""

    def __init__(
        self,
        name: str,
        tmp_path: Path,
        endpoint: str | None = None,
        postgres: str | None = None,
        pooler: Pooler | None = None,
    ) -> None:
        self.name = name
        self._tmp = tmp_path
        self._endpoint = endpoint
        self._postgres = postgres
        self._pooler = pooler
        self._index: tuple[str, str] | None = None
        self._run = uuid.uuid4().hex[:12]
        self._opened: list[Any] = []

    def spec(self, name: str = "store") -> tuple[str, dict[str, Any]]:
        """What ``open_store`` takes to open the store called ``name`` (picklable, for subprocesses)."""
        if self.name == "local":
            return str(self._tmp / name), {}
        options: dict[str, Any] = {
            "endpoint": self._endpoint,
            "access_key_id": "test",
            "secret_access_key": "test",
        }
        if self.name == "s3+postgres":
            assert self._postgres is not None
            if self._index is None:  # one schema per test: its stores share the index table
                self._index = services.fresh_schema_url(self._postgres)
            options["index"] = self._index[0]
        elif self.name == "s3+pgbouncer":
            assert self._pooler is not None
            if self._index is None:  # one database per test, through the pooler
                database = self._pooler.databases.take()
                self._index = (services.with_database(self._pooler.url, database), database)
            options["index"] = self._index[0]
        return f"s3://{services.S3_BUCKET}/{self._run}/{name}", options

    def open(self, name: str = "store", *, clock: Callable[[], datetime] | None = None) -> Any:
        """The store called ``name`` in this test (the same name reopens the same store)."""
        from loom_nb.store import open_store

        target, options = self.spec(name)
        if clock is not None:
            options["clock"] = clock
        store = open_store(target, **options)
        self._opened.append(store)
        return store

    def blob_count(self, store: Any) -> int:
        """How many blob objects the store holds (files on disk, objects in the bucket)."""
        if self.name == "local":
            return sum(1 for p in (store.path / "objects").rglob("*") if p.is_file())
        import obstore

        return sum(len(batch) for batch in obstore.list(store._s3, "blobs/"))

    def damage(self, store: Any, address: str, data: bytes) -> None:
        """Overwrite the stored bytes of ``address`` with ``data`` (a disk or bucket fault)."""
        digest = address.removeprefix("sha256:")
        if self.name == "local":
            (store.path / "objects" / digest[:2] / digest[2:]).write_bytes(data)
        else:
            import obstore

            obstore.put(store._s3, f"blobs/{digest}", data)

    def close(self) -> None:
        for store in self._opened:
            store.close()
        if self._index is not None and self._pooler is not None:
            self._pooler.databases.give_back(self._index[1])
        elif self._index is not None:
            assert self._postgres is not None
            services.drop_schema(self._postgres, self._index[1])


def open_store_backend(request: pytest.FixtureRequest, name: str, tmp_path: Path) -> StoreBackend:
    """A ``StoreBackend`` called ``name``, failing (CI) or skipping when its services are missing."""
    endpoint = postgres = pooler = None
    if name.startswith("s3"):
        endpoint = request.getfixturevalue("s3_service")
        if endpoint is None:
            services.unavailable(
                "no S3-compatible server: install moto[server] or set LOOM_TEST_S3_ENDPOINT"
            )
    if name == "s3+postgres":
        postgres = request.getfixturevalue("postgres_service")
        if postgres is None:
            url = services.postgres_url()
            services.unavailable(services.postgres_reachable(url) or f"PostgreSQL at {url}")
    if name == "s3+pgbouncer":
        pooler = pooler_or_unavailable(request)
    return StoreBackend(name, tmp_path, endpoint, postgres, pooler)


@pytest.fixture(params=["local", "s3", "s3+postgres", "s3+pgbouncer"])
def store_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreBackend]:
    """A content-store backend: the local store, S3 (moto on 127.0.0.1), and S3 with its tenant
    index in PostgreSQL, directly and through PgBouncer."""
    backend = open_store_backend(request, request.param, tmp_path)
    yield backend
    backend.close()


def address_of(data: bytes) -> str:
    """The content address of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


# -- backends: every journal test runs on SQLite and on PostgreSQL --------------------------------


class JournalBackend:
    """Opens journals of one backend for a test: ``open(name)`` again reopens the same journal.

    ``"pgbouncer"`` journals go through a transaction pooler, each in a database of its own, with
    their watches listening on a direct connection (``listen_url``), the recommended setup;
    ``direct_url(name)`` reaches the same database without the pooler.
    """

    def __init__(
        self, name: str, tmp_path: Path, server: str | None = None, pooler: Pooler | None = None
    ) -> None:
        self.name = name
        self._tmp = tmp_path
        self._server = server
        self._pooler = pooler
        self._urls: dict[str, str] = {}
        self._direct: dict[str, str] = {}
        self._schemas: list[str] = []
        self._databases: list[str] = []
        self._opened: list[Any] = []

    def url(self, name: str = "journal") -> str:
        """The path or URL of the journal called ``name`` in this test (created on first use)."""
        if name not in self._urls:
            if self.name == "sqlite":
                self._urls[name] = str(self._tmp / f"{name}.sqlite")
            elif self.name == "pgbouncer":
                assert self._pooler is not None
                database = self._pooler.databases.take()
                self._databases.append(database)
                self._urls[name] = services.with_database(self._pooler.url, database)
                self._direct[name] = services.with_database(self._pooler.server, database)
            else:
                assert self._server is not None
                url, schema = services.fresh_schema_url(self._server)
                self._schemas.append(schema)
                self._urls[name] = url
        return self._urls[name]

    def direct_url(self, name: str = "journal") -> str:
        """The URL of the journal called ``name`` without any pooler (for LISTEN, session locks)."""
        url = self.url(name)
        return self._direct.get(name, url)

    def open(self, name: str | None = None, **options: Any) -> Any:
        """``Journal(url, **options)``: a new journal each call, or the one called ``name`` again."""
        from loom_nb.journal import Journal

        if name is None:
            name = f"journal-{len(self._opened)}"
        if self.name == "pgbouncer":
            options.setdefault("listen_url", self.direct_url(name))
        journal = Journal(self.url(name), **options)
        self._opened.append(journal)
        return journal

    def close(self) -> None:
        for journal in self._opened:
            with contextlib.suppress(Exception):  # a test may have closed it already
                journal.close()
        for schema in self._schemas:
            assert self._server is not None
            services.drop_schema(self._server, schema)
        for database in self._databases:
            assert self._pooler is not None
            self._pooler.databases.give_back(database)


@pytest.fixture(scope="session")
def postgres_service() -> str | None:
    """The PostgreSQL server URL for the run, or None (with the reason printed) when unreachable."""
    url = services.postgres_url()
    return None if services.postgres_reachable(url) else url


@dataclass
class Pooler:
    """PgBouncer in front of the test server: its URL, the server's, and the run's databases."""

    url: str | None
    """The pooler's URL (its database is replaced per journal), or None when there is none."""
    server: str
    """The same server directly."""
    databases: services.Databases
    """Empty databases for the tests (PgBouncer passes no search_path)."""
    reason: str = ""
    """Why there is no pooler, when ``url`` is None."""


@pytest.fixture(scope="session")
def pgbouncer_service(postgres_service: str | None) -> Iterator[Pooler | None]:
    """PgBouncer for the run: ``$LOOM_TEST_PGBOUNCER`` (CI starts one), else one started here
    when the binary is installed; a Pooler with the reason and no URL when there is none."""
    server = services.postgres_url()
    if postgres_service is None:
        reason = services.postgres_reachable(server) or f"PostgreSQL at {server} is not reachable"
        yield Pooler(None, server, services.Databases(server), reason)
        return
    databases = services.Databases(postgres_service)
    given = os.environ.get(services.PGBOUNCER_ENV)
    try:
        if given:
            problem = services.postgres_reachable(given)
            reason = f"PgBouncer at ${services.PGBOUNCER_ENV} does not answer: {problem}"
            yield Pooler(None if problem else given, postgres_service, databases, reason)
            return
        try:
            running = services.pgbouncer(postgres_service)
            url = running.__enter__()
        except RuntimeError as exc:
            reason = f"no PgBouncer ({exc}); set ${services.PGBOUNCER_ENV} to one"
            yield Pooler(None, postgres_service, databases, reason)
            return
        try:
            yield Pooler(url, postgres_service, databases)
        finally:
            running.__exit__(None, None, None)
    finally:
        databases.drop_all()


def pooler_or_unavailable(request: pytest.FixtureRequest) -> Pooler:
    """The run's PgBouncer, or fail (CI) / skip (elsewhere) with the reason there is none."""
    pooler: Pooler = request.getfixturevalue("pgbouncer_service")
    if pooler.url is None:
        services.unavailable(pooler.reason)
    return pooler


@pytest.fixture(params=["sqlite", "postgres", "pgbouncer"])
def journal_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JournalBackend]:
    """A journal backend: SQLite, then the same test on PostgreSQL (a fresh schema per journal),
    then through PgBouncer in transaction mode (a fresh database per journal)."""
    server = pooler = None
    if request.param == "postgres":
        server = request.getfixturevalue("postgres_service")
        if server is None:
            url = services.postgres_url()
            services.unavailable(services.postgres_reachable(url) or f"PostgreSQL at {url}")
    if request.param == "pgbouncer":
        pooler = pooler_or_unavailable(request)
        server = pooler.server
    backend = JournalBackend(request.param, tmp_path, server, pooler)
    yield backend
    backend.close()


@pytest.fixture
def open_journal(journal_backend: JournalBackend) -> Callable[..., Any]:
    """``open_journal(**options)``: a fresh journal on the backend under test (``Journal()`` on each)."""
    return journal_backend.open
