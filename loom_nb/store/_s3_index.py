"""Who stored which blob in an S3 store: tenant markers, and the index interface both kinds fill.

A store's tenant index records, per blob, each tenant that put it, with the blob's size and its
first and last put time (``Marker``). Two kinds fill the same interface (``TenantIndex``):

- ``ObjectIndex`` (here): one empty marker object per put, ``tenants/<hex>/<tenant>/<put>-<size>-<created>-<nonce>``,
  so everything a listing needs is in the key;
- ``PostgresIndex`` (``_pg_index``): one row per store, blob and tenant in the PostgreSQL
  database a team's journal uses.

``<tenant>`` is the tenant's UTF-8 in URL-safe base64, the times are microseconds since the
epoch from the store's clock. A marker's ``key`` is unique to the put that wrote it, so an erase
can tell a put that arrived while it ran (see ``_s3``).
"""

from __future__ import annotations

import base64
import builtins
import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from loom_nb.errors import ConfigurationError, StoreError
from loom_nb.store._protocol import StoreEntry, check_tenant

if TYPE_CHECKING:
    from loom_nb.store._s3 import S3ContentStore

__all__ = [
    "Marker",
    "ObjectIndex",
    "TenantIndex",
    "entry_of",
    "micros",
    "parse_marker",
    "tenant_key",
    "tenant_of",
]

_MAX_TENANT_BYTES = 512
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Marker:
    """One tenant's record of a blob: a parsed marker key, or a row of the PostgreSQL index.

    ``key`` is unique to the put that wrote it (an erase compares keys to spot a new put);
    ``encoded`` is the tenant in URL-safe base64, as in marker keys.
    """

    __slots__ = ("created", "encoded", "key", "put", "size", "tenant")

    def __init__(
        self, key: str, tenant: str, put: int, size: int, created: int, encoded: str = ""
    ) -> None:
        self.key = key
        self.tenant = tenant
        self.put = put
        self.size = size
        self.created = created
        self.encoded = encoded


class TenantIndex(Protocol):
    """Where an S3 store keeps who stored what (``kind`` is what ``loom-store.json`` records)."""

    kind: str

    def record(self, digest: str, encoded: str, size: int, now: int) -> str:
        """Record a put of ``digest`` by the tenant ``encoded`` first; return its marker's key."""
        ...

    def settle(self, marker: str, now: int, encoded: str, digest: str, size: int) -> None:
        """After a put found the blob there: keep its first put time, drop the tenant's older records."""
        ...

    def markers(self, digest: str) -> builtins.list[Marker]:
        """Every tenant's record of ``digest``."""
        ...

    def remove(self, digest: str, markers: builtins.list[Marker], *, what: str) -> None:
        """Delete these records (``what`` names the operation in messages)."""
        ...

    def everything(self) -> dict[str, builtins.list[Marker]]:
        """Every record of the store, by digest."""
        ...

    def layout(self) -> dict[str, str]:
        """What the store's ``loom-store.json`` records about this index."""
        ...

    def close(self) -> None:
        """Release the index's connections, if it has its own."""
        ...


class ObjectIndex:
    """Who stored what, as one empty marker object per tenant and blob (``tenants/...``)."""

    kind = "objects"

    def __init__(self, store: S3ContentStore) -> None:
        self._store = store

    def record(self, digest: str, encoded: str, size: int, now: int) -> str:
        """Write this put's marker (a new, unique key); returns it."""
        marker = f"tenants/{digest}/{encoded}/{now:016d}-{size}-{now:016d}-{uuid.uuid4().hex[:12]}"
        self._store._objects.put("put", digest, marker, b"")
        return marker

    def settle(self, marker: str, now: int, encoded: str, digest: str, size: int) -> None:
        """After deduping: carry the blob's first put time into this put's marker, drop the tenant's older ones.

        The corrected marker is written before the provisional one goes, so the tenant is never
        without a marker a racing erase would see.
        """
        markers = self._store._markers(digest)
        older = [m.key for m in markers if m.key != marker and m.encoded == encoded]
        created = min((m.created for m in markers), default=now)
        if created < now:
            fixed = f"tenants/{digest}/{encoded}/{now:016d}-{size}-{created:016d}-{uuid.uuid4().hex[:12]}"
            self._store._objects.put("put", digest, fixed, b"")
            older.append(marker)
        if older:
            self._store._objects.delete_quietly(older)

    def markers(self, digest: str) -> builtins.list[Marker]:
        found = []
        for meta in self._store._objects.listing(f"tenants/{digest}/"):
            marker = parse_marker(meta["path"])
            if marker is not None:
                found.append(marker)
        return found

    def remove(self, digest: str, markers: builtins.list[Marker], *, what: str) -> None:
        keys = [m.key for m in markers]
        self._store._objects.delete(what, digest, keys)

    def everything(self) -> dict[str, builtins.list[Marker]]:
        grouped: dict[str, builtins.list[Marker]] = {}
        for meta in self._store._objects.listing("tenants/"):
            marker = parse_marker(meta["path"])
            if marker is not None:
                grouped.setdefault(meta["path"].split("/")[1], []).append(marker)
        return grouped

    def layout(self) -> dict[str, str]:
        """What the store's ``loom-store.json`` records about this index."""
        return {"index": self.kind}

    def close(self) -> None:
        """Nothing to release."""


def tenant_key(tenant: object) -> str:
    """The tenant as it appears in marker keys (URL-safe base64 of its UTF-8), or ``invalid_tenant``."""
    check_tenant(tenant)
    assert isinstance(tenant, str)
    try:
        raw = tenant.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise StoreError(
            f"invalid tenant {tenant!r}: it is not valid Unicode text (a lone surrogate).",
            code="invalid_tenant",
        ) from exc
    if len(raw) > _MAX_TENANT_BYTES:
        raise StoreError(
            f"invalid tenant: {len(raw)} bytes of UTF-8, over the {_MAX_TENANT_BYTES} an S3 "
            "store can put in an object key. Use a shorter tenant id.",
            code="invalid_tenant",
        )
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=") or "="


def tenant_of(encoded: str) -> str:
    """The tenant a marker key's (or an index row's) encoded tenant names."""
    return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode("utf-8")


def parse_marker(key: str) -> Marker | None:
    """A marker key's fields, or None for a key that is not one (ignored, never trusted)."""
    parts = key.split("/")
    if len(parts) != 4 or parts[0] != "tenants" or len(parts[1]) != 64:
        return None
    fields = parts[3].split("-")
    if len(fields) != 4:
        return None
    try:
        encoded = parts[2]
        tenant = tenant_of(encoded)
        return Marker(key, tenant, int(fields[0]), int(fields[1]), int(fields[2]), encoded)
    except ValueError:
        return None


def entry_of(digest: str, markers: builtins.list[Marker]) -> StoreEntry | None:
    """The store entry a blob's markers describe (None when no tenant recorded it)."""
    if not markers:
        return None
    return StoreEntry(
        address="sha256:" + digest,
        size=max(m.size for m in markers),
        created=_EPOCH + timedelta(microseconds=min(m.created for m in markers)),
        last_put=_EPOCH + timedelta(microseconds=max(m.put for m in markers)),
        tenants=frozenset(m.tenant for m in markers),
    )


def micros(moment: datetime) -> int:
    """Microseconds since the epoch of a timezone-aware moment (how markers record times)."""
    if moment.tzinfo is None:
        raise ConfigurationError(
            "the store's clock must return timezone-aware datetimes (for example datetime.now(UTC)).",
            code="naive_datetime",
        )
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
