"""The S3 store's PostgreSQL index finds a journal's pool by duck typing, never by importing the journal."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from loom_nb.errors import ConfigurationError
from loom_nb.journal import Journal
from loom_nb.store._pg_index import PostgresIndex
from tests import services


@pytest.fixture
def pg_url(postgres_service: str | None) -> Iterator[str]:
    """A URL of a fresh schema on the test server (dropped afterwards)."""
    if postgres_service is None:
        url = services.postgres_url()
        services.unavailable(services.postgres_reachable(url) or f"PostgreSQL at {url}")
    assert postgres_service is not None
    url, schema = services.fresh_schema_url(postgres_service)
    yield url
    services.drop_schema(postgres_service, schema)


def test_a_postgresql_journal_lends_its_pool(pg_url: str) -> None:
    """Given a PostgreSQL journal, the index runs on the journal's own pool and leaves it open."""
    journal = Journal(pg_url)
    index = PostgresIndex(journal, "s3://b/p")
    assert index._db is journal._pg_pool  # type: ignore[attr-defined]
    assert index.markers("ab" * 32) == []
    index.close()
    assert journal.executions() == []  # closing the index did not close the journal's pool
    journal.close()


@pytest.mark.parametrize("target", ["sqlite", "not a pool", "http://db"])
def test_anything_else_is_invalid_store_index(target: str) -> None:
    """A SQLite journal, an object whose _pg_pool is not a pool, or another URL is refused."""
    subject: Any
    if target == "sqlite":
        subject = Journal()
    elif target == "not a pool":
        subject = type("Fake", (), {"_pg_pool": "pool"})()
    else:
        subject = target
    with pytest.raises(ConfigurationError) as info:
        PostgresIndex(subject, "s3://b/p")
    assert info.value.code == "invalid_store_index"
