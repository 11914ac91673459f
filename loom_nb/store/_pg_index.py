"""The S3 content store's per-tenant index in PostgreSQL (issue 16): ``S3ContentStore(url, index=...)``.

With a team's journal on PostgreSQL, who stored which blob is one row per store, blob and tenant
in ``loom_store_tenants`` (created by the migration ``pg002_store_tenants`` of the database the
store and the journal share, ``loom_nb._pg``) instead of an empty marker object per put: a put records itself with one upsert instead of a PUT, and
listing a store is one query instead of a LIST of every marker. The blobs stay in the bucket.

The protocol is the object index's: a put records itself first and then makes sure the blob is
there; an erase moves the blob aside, reads the rows again and puts the blob back if one changed
(every put writes a new ``nonce``). ``created`` is carried over from the blob's other rows
when a tenant first records it, and kept by its later puts, so a blob's first put time survives
its first tenant's delete.

Given a journal, the index shares its connection pool. The journal is recognised by what it has
(a ``_pg_pool`` that is a ``loom_nb._pg.Pool``), not by its class: the store does not import the
journal, which sits above it (DESIGN.md, "Layers").
"""

from __future__ import annotations

import builtins
import uuid
from typing import TYPE_CHECKING, Any

from loom_nb.errors import ConfigurationError, JournalError, StoreError
from loom_nb.store._s3_index import Marker, tenant_of

if TYPE_CHECKING:
    from loom_nb.journal import Journal

__all__ = ["PostgresIndex"]

_RECORD = (
    "INSERT INTO loom_store_tenants (store, digest, tenant, size, created, put, nonce) "
    "VALUES (?, ?, ?, ?, COALESCE((SELECT MIN(created) FROM loom_store_tenants "
    "WHERE store = ? AND digest = ?), ?), ?, ?) "
    "ON CONFLICT (store, digest, tenant) DO UPDATE "
    "SET size = EXCLUDED.size, put = EXCLUDED.put, nonce = EXCLUDED.nonce"
)
_MARKERS = (
    "SELECT digest, tenant, size, created, put, nonce FROM loom_store_tenants "
    "WHERE store = ? AND digest = ?"
)
_EVERYTHING = (
    "SELECT digest, tenant, size, created, put, nonce FROM loom_store_tenants WHERE store = ?"
)
_REMOVE = "DELETE FROM loom_store_tenants WHERE store = ? AND digest = ? AND nonce = ANY(?)"


_IDENTITY = "SELECT system_identifier::text FROM pg_control_system()"
_PLACE = "SELECT current_database(), current_schema()"


class PostgresIndex:
    """Tenant rows for one S3 store, in the database of a PostgreSQL journal (or at a URL)."""

    kind = "postgresql"

    def __init__(self, target: str | Journal, store_url: str) -> None:
        from loom_nb._pg import Pool, is_postgres_url, open_pool

        self._store = store_url
        self._own = False
        shared = getattr(target, "_pg_pool", None)
        if isinstance(shared, Pool):  # a PostgreSQL journal: its pool, shared
            self._db: Any = shared
            self._where = shared.location
        elif is_postgres_url(target):
            assert isinstance(target, str)
            try:
                self._db = open_pool(target, synchronous="NORMAL", timeout=30.0, size=4)
            except JournalError as exc:
                raise _store_error(store_url, "open", exc) from exc
            self._own = True
            self._where = self._db.location
        else:
            raise ConfigurationError(
                f"index= is a PostgreSQL Journal or a postgresql:// URL, not {target!r}; without "
                "one the S3 store keeps its index as marker objects in the bucket.",
                code="invalid_store_index",
            )

    def layout(self) -> dict[str, str]:
        """What the store's ``loom-store.json`` records about this index: the database it is in.

        ``database`` names the database itself, not a way to reach it: the cluster's system
        identifier, the database and the schema (two URLs, ``localhost`` and a service name, may
        reach the same one). ``where`` is the host, port and database as this client reaches
        it, for messages; neither holds a user name or password. A server that does not let
        this user read the cluster's identifier records ``where`` alone.
        """
        import psycopg

        def place() -> tuple[str, str]:
            row = self._db.execute(_PLACE).fetchone()
            return str(row[0]), str(row[1])

        database, schema = self._run("read", place)
        recorded = {"index": self.kind, "where": f"{self._where}/{database} (schema {schema})"}
        try:
            system = self._db.execute(_IDENTITY).fetchone()[0]
        except (psycopg.Error, JournalError):  # no privilege to read the cluster's identity
            return recorded
        return {**recorded, "database": f"{system}/{database}/{schema}"}

    def record(self, digest: str, encoded: str, size: int, now: int) -> str:
        nonce = uuid.uuid4().hex
        self._run(
            "put",
            lambda: self._db.execute(
                _RECORD,
                (self._store, digest, encoded, size, self._store, digest, now, now, nonce),
            ),
        )
        return nonce

    def settle(self, marker: str, now: int, encoded: str, digest: str, size: int) -> None:
        """Nothing to do: the upsert kept the tenant's one row and the blob's first put time."""

    def markers(self, digest: str) -> builtins.list[Marker]:
        rows = self._run("read", lambda: self._db.execute(_MARKERS, (self._store, digest)))
        return [_marker(row) for row in rows.fetchall()]

    def remove(self, digest: str, markers: builtins.list[Marker], *, what: str) -> None:
        nonces = [m.key for m in markers]
        self._run(what, lambda: self._db.execute(_REMOVE, (self._store, digest, nonces)))

    def everything(self) -> dict[str, builtins.list[Marker]]:
        rows = self._run("list", lambda: self._db.execute(_EVERYTHING, (self._store,)))
        grouped: dict[str, builtins.list[Marker]] = {}
        for row in rows.fetchall():
            grouped.setdefault(row[0], []).append(_marker(row))
        return grouped

    def close(self) -> None:
        if self._own:
            self._db.close()

    def _run(self, what: str, statement: Any) -> Any:
        import psycopg

        from loom_nb._pg import connection_error

        try:
            return statement()
        except (psycopg.Error, JournalError) as exc:
            if isinstance(exc, JournalError):
                raise _store_error(self._store, what, exc) from exc
            doing = "read" if what in ("read", "list") else "write"
            failure = connection_error(exc, where=self._where, connecting=False, doing=doing)
            raise _store_error(self._store, what, failure) from exc


_STORE_CODES = {
    "journal_too_many_connections": "store_too_many_connections",
    "journal_pooler_error": "store_pooler_error",
    "journal_connection_lost": "store_connection_lost",
}
"""The store's code for each connection failure the shared PostgreSQL module names."""


def _store_error(store: str, what: str, failure: JournalError) -> StoreError:
    """A failed index statement as the store's error: the connection's kind keeps its remedy."""
    code = _STORE_CODES.get(failure.code)
    if code is not None:
        return StoreError(
            f"the S3 store {store} could not {what} its PostgreSQL index: {failure.message}",
            code=code,
        )
    return StoreError(
        f"the S3 store {store} could not {what} its PostgreSQL index: {failure.message} Check "
        "that the database is reachable, then retry.",
        code="store_unavailable",
    )


def _marker(row: tuple[Any, ...]) -> Marker:
    _digest, encoded, size, created, put, nonce = row
    return Marker(nonce, tenant_of(encoded), int(put), int(size), int(created), encoded)
