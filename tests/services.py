"""The services the backend tests run against: a local S3-compatible server, PostgreSQL, PgBouncer.

All are on 127.0.0.1 only. ``.ci/run`` starts them and exports their URLs
(``LOOM_TEST_S3_ENDPOINT``, ``LOOM_TEST_POSTGRES``, ``LOOM_TEST_PGBOUNCER``); outside CI the S3
server is started here (moto's threaded server), PostgreSQL is looked for at its default local
address, and a PgBouncer is started here in front of it when the ``pgbouncer`` binary is
installed (as the ``postgres`` user when the tests run as root: PgBouncer refuses root). A
missing service fails the tests that need it when ``CI`` is set, and skips them (with the
reason) otherwise.

Through PgBouncer a test cannot pick its schema in the URL (PgBouncer passes no ``options``), so
each journal or index there gets a database of its own (``Databases``): created on first need,
emptied after the test and handed to the next, dropped at the end of the run.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

POSTGRES_DEFAULT = "postgresql://postgres@127.0.0.1:5432/test"
S3_BUCKET = "loom-test"


def in_ci() -> bool:
    """Whether this is a CI run, where a missing service is a failure, not a skip."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def unavailable(what: str) -> None:
    """Fail (CI) or skip (elsewhere) a test whose service is missing."""
    if in_ci():
        pytest.fail(f"{what} (CI requires every backend service)", pytrace=False)
    pytest.skip(what)


@contextlib.contextmanager
def s3_endpoint() -> Iterator[str | None]:
    """The endpoint of an S3-compatible server with the test bucket, or None when none can run."""
    endpoint = os.environ.get("LOOM_TEST_S3_ENDPOINT")
    server = None
    if not endpoint:
        try:
            from moto.server import ThreadedMotoServer
        except ImportError:
            yield None
            return
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
    try:
        response = httpx.put(f"{endpoint}/{S3_BUCKET}", timeout=10)
        if response.status_code not in (200, 409):
            response.raise_for_status()
    except httpx.HTTPError:
        if server is not None:
            server.stop()
        yield None
        return
    try:
        yield endpoint
    finally:
        if server is not None:
            server.stop()


def postgres_url() -> str:
    """The PostgreSQL server the tests use (``LOOM_TEST_POSTGRES``, else the local default)."""
    return os.environ.get("LOOM_TEST_POSTGRES") or POSTGRES_DEFAULT


def postgres_reachable(url: str) -> str | None:
    """None when PostgreSQL answers at ``url``, else why not."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed"
    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"PostgreSQL at {url} is not reachable: {str(exc).strip()}"
    return None


def fresh_schema_url(url: str) -> tuple[str, str]:
    """A new empty schema on the server and a URL whose connections use it (search_path)."""
    import psycopg

    schema = f"loom_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    separator = "&" if "?" in url else "?"
    return f"{url}{separator}options=-csearch_path%3D{schema}", schema


def drop_schema(url: str, schema: str) -> None:
    """Drop a schema made by ``fresh_schema_url`` (and everything in it)."""
    import psycopg

    if not re.fullmatch(r"loom_test_[0-9a-f]{12}", schema):
        raise ValueError(schema)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


# -- PgBouncer: the same server through a transaction pooler ---------------------------------------

PGBOUNCER_ENV = "LOOM_TEST_PGBOUNCER"


def with_database(url: str, database: str) -> str:
    """``url`` naming another database on the same server (user, host, port and query kept)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{database}"))


def pgbouncer_config(server_url: str, port: int, folder: Path) -> str:
    """A PgBouncer configuration in transaction mode on 127.0.0.1:``port`` for ``server_url``'s
    server (any database), its files in ``folder``: the recipe of the README's "Team setup"."""
    server = urlsplit(server_url)
    host = server.hostname or "127.0.0.1"
    return f"""[databases]
* = host={host} port={server.port or 5432}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {folder / "users.txt"}
pool_mode = transaction
default_pool_size = 10
max_client_conn = 1000
server_idle_timeout = 30
logfile = {folder / "pgbouncer.log"}
pidfile = {folder / "pgbouncer.pid"}
"""


def write_pgbouncer_files(server_url: str, port: int, folder: str | Path) -> str:
    """Write ``pgbouncer.ini`` and its auth file into ``folder``; return the pooler's URL.

    The auth file names the server URL's user with its password (PgBouncer logs in to the server
    with it; clients on 127.0.0.1 are trusted). ``.ci/run`` calls this too, so CI and the tests'
    own PgBouncer run one configuration.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    server = urlsplit(server_url)
    user = server.username or "postgres"
    password = server.password or ""
    (folder / "users.txt").write_text(f'"{user}" "{password}"\n', encoding="utf-8")
    (folder / "pgbouncer.ini").write_text(
        pgbouncer_config(server_url, port, folder), encoding="utf-8"
    )
    netloc = (
        f"{server.netloc.rsplit('@', 1)[0]}@127.0.0.1:{port}"
        if "@" in server.netloc
        else f"127.0.0.1:{port}"
    )
    return urlunsplit(server._replace(netloc=netloc, query=""))


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def pgbouncer(server_url: str) -> Iterator[str]:
    """Run a PgBouncer in front of ``server_url``'s server for the block; yield its URL.

    Raises ``RuntimeError`` with the reason when none can run here (no binary, root with no
    ``postgres`` user to run it as, it did not start).
    """
    # Debian installs it in /usr/sbin, which a user's PATH may leave out.
    binary = shutil.which("pgbouncer", path=os.environ.get("PATH", "") + os.pathsep + "/usr/sbin")
    if binary is None:
        raise RuntimeError("pgbouncer is not installed (Debian: apt-get install pgbouncer)")
    user = None
    if os.geteuid() == 0:  # PgBouncer refuses to run as root
        import pwd

        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            raise RuntimeError(
                "running as root and there is no postgres user to run pgbouncer as"
            ) from None
    folder = Path(tempfile.mkdtemp(prefix="loom-pgbouncer-"))
    port = free_port()
    url = write_pgbouncer_files(server_url, port, folder)
    if user is not None:
        for path in (folder, *folder.iterdir()):
            os.chown(path, user.pw_uid, user.pw_gid)
    command = [
        "sh",
        "-c",
        'ulimit -n 4096 2>/dev/null; exec "$0" "$1"',
        binary,
        str(folder / "pgbouncer.ini"),
    ]
    process = subprocess.Popen(
        command,
        user=None if user is None else user.pw_uid,
        group=None if user is None else user.pw_gid,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 15
        while postgres_reachable(url) is not None:
            if process.poll() is not None or time.monotonic() > deadline:
                log = folder / "pgbouncer.log"
                tail = log.read_text(encoding="utf-8")[-800:] if log.exists() else ""
                raise RuntimeError(f"pgbouncer did not start on 127.0.0.1:{port}: {tail}")
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(folder, ignore_errors=True)


class Databases:
    """Throwaway databases on the test server for tests through PgBouncer, reused between tests.

    ``take()`` is an empty database (new, or one a finished test gave back and that was emptied);
    ``give_back(name)`` empties it (its ``public`` schema dropped and made again); ``drop_all()``
    drops every database this run made.
    """

    def __init__(self, server_url: str) -> None:
        self._server = server_url
        self._free: list[str] = []
        self._made: list[str] = []
        self._lock = threading.Lock()

    def take(self) -> str:
        """The name of an empty database of this run's."""
        import psycopg

        with self._lock:
            if self._free:
                return self._free.pop()
        name = f"loom_pgb_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self._server, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        with self._lock:
            self._made.append(name)
        return name

    def give_back(self, name: str) -> None:
        """Empty ``name`` and keep it for the next test."""
        import psycopg

        if name not in self._made:
            raise ValueError(name)
        with psycopg.connect(with_database(self._server, name), autocommit=True) as conn:
            conn.execute("DROP SCHEMA public CASCADE")
            conn.execute("CREATE SCHEMA public")
        with self._lock:
            self._free.append(name)

    def drop_all(self) -> None:
        """Drop every database this run made (connections to them are ended)."""
        import psycopg

        with psycopg.connect(self._server, autocommit=True) as conn:
            for name in self._made:
                with contextlib.suppress(psycopg.Error):
                    conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        self._made.clear()
        self._free.clear()
