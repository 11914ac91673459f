"""The content store protocol: bytes in, an address out; tenancy as a set per address (ADR 0120 decision 4).

A store is content-addressed: the address of a blob is ``sha256:<hex>`` of its bytes, so identical
bytes stored by several tenants are ONE blob. Authorization therefore cannot rest on a single owner
("Authorizing under dedupe"): every put records its tenant against the address, a read is allowed
when the asking tenant is in that set, and a tenant's delete only removes the tenant; the blob is
erased when the set empties.

``open(address, tenant=...)`` streams a blob instead of reading it whole: a ``BlobReader``
(``loom_nb.store._reader``) that verifies the hash as it reads. The protocol speaks of bytes and
addresses, never of file paths, so an object store (S3 and
compatible) can implement it with the same addressing and tenancy. Methods are synchronous: the
local store is disk I/O, and the async resolver runs them in a worker thread.
"""

from __future__ import annotations

import builtins
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from loom_nb.content import ContentRef
from loom_nb.errors import StoreError

if TYPE_CHECKING:
    from loom_nb.store._reader import BlobReader

__all__ = ["ContentStore", "Progress", "StoreEntry", "check_address", "check_tenant"]

_ADDRESS = re.compile(r"sha256:[0-9a-f]{64}")

_TENANT_MAX = 256

Progress = Callable[[int, int | None], None]
"""A progress callback: ``(bytes_done, bytes_total_or_None)``, called as a long put advances."""


@dataclass(frozen=True)
class StoreEntry:
    """What the store knows about one blob: its size, when it was stored, and by whom."""

    address: str
    """``sha256:<64 lowercase hex>`` of the bytes."""
    size: int
    """Length of the blob in bytes."""
    created: datetime
    """When the first tenant stored it (UTC)."""
    last_put: datetime
    """When any tenant last stored it (UTC); the garbage collector measures age from here."""
    tenants: frozenset[str]
    """Every tenant that stored these bytes and has not deleted them."""


@runtime_checkable
class ContentStore(Protocol):
    """A content-addressed blob store with a tenant set per address."""

    def put(self, data: bytes, tenant: str) -> ContentRef:
        """Store ``data`` for ``tenant`` and return its ref (address and size)."""
        ...

    def get(self, address: str) -> bytes:
        """The bytes at ``address``, verified against it (never wrong bytes)."""
        ...

    def open(self, address: str, *, tenant: str) -> BlobReader:
        """The blob as a binary stream for ``tenant`` (who must have stored it), hashed as it is
        read: reading its last byte raises ``content_corrupted`` when the whole does not match."""
        ...

    def has(self, address: str) -> bool:
        """Whether a blob is stored at ``address``."""
        ...

    def delete(self, address: str, tenant: str) -> bool:
        """Drop ``tenant`` from the address's set (erasing the blob when it empties); False if absent."""
        ...

    def tenants(self, address: str) -> set[str]:
        """The tenants that stored ``address`` (empty when nobody did)."""
        ...

    def stat(self, address: str) -> StoreEntry:
        """Size, times and tenants of the blob at ``address``."""
        ...

    def list(self) -> builtins.list[StoreEntry]:
        """Every stored blob, ordered by address."""
        ...

    def purge(
        self,
        address: str,
        *,
        older_than: datetime | None = None,
        keep: Callable[[str], bool] | None = None,
    ) -> bool:
        """Erase the blob and all its tenants (for garbage collection); False when nothing was erased.

        With ``older_than``, nothing happens if any tenant stored the blob at or after that time
        (a put racing the sweep wins). With ``keep``, the store first makes the blob unreadable,
        then calls ``keep(address)``: True puts it back untouched and nothing is erased (a step
        started using it meanwhile); an exception puts it back too, and propagates. A read that
        lands in between waits for the decision rather than reporting the blob absent.
        """
        ...


def check_address(address: object) -> str:
    """Return ``address`` if it is a well-formed content address, else raise ``StoreError``."""
    if isinstance(address, str) and _ADDRESS.fullmatch(address):
        return address
    raise StoreError(
        f"invalid content address {address!r}: an address is 'sha256:' followed by 64 lowercase "
        "hex digits, as returned by put().",
        code="invalid_address",
        address=repr(address),
    )


def check_tenant(tenant: object) -> str:
    """Return ``tenant`` if it is a usable tenant name, else raise ``StoreError`` (code ``invalid_tenant``).

    A tenant is a non-empty string of at most 256 characters that encodes as UTF-8 (no lone
    surrogates) and holds no control characters: it is written to an index and shown in audit
    trails, so a name that cannot be stored or printed faithfully is refused up front.
    """
    if isinstance(tenant, str) and tenant.strip() and len(tenant) <= _TENANT_MAX:
        try:
            tenant.encode("utf-8")
        except UnicodeEncodeError:
            problem = "it cannot be encoded as UTF-8 (it holds a lone surrogate)"
        else:
            if not any(unicodedata.category(c) == "Cc" for c in tenant):
                return tenant
            problem = "it holds a control character"
    elif isinstance(tenant, str) and len(tenant) > _TENANT_MAX:
        problem = f"it is longer than {_TENANT_MAX} characters"
    else:
        problem = "a tenant is a non-empty string"
    raise StoreError(
        f"invalid tenant {tenant!r}: {problem}. A tenant names who stores the bytes (for "
        "example a user or workspace id); use printable text.",
        code="invalid_tenant",
    )
