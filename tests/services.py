"""The services the backend tests run against: a local S3-compatible server and PostgreSQL.

Both are on 127.0.0.1 only. ``.ci/run`` starts them and exports their URLs
(``LOOM_TEST_S3_ENDPOINT``, ``LOOM_TEST_POSTGRES``); outside CI the S3 server is started here
(moto's threaded server) and PostgreSQL is looked for at its default local address. A missing
service fails the tests that need it when ``CI`` is set, and skips them (with the reason) otherwise.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Iterator

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
