"""Who may read a blob: the resolve context, the resolver protocol, and the tenant-set resolver.

A ``ContentResolver`` is any object with ``async resolve(ref, context) -> bytes``. The context
carries enough to authorize the read (decision 4): the execution and step it is attributed to,
the principal, whether the ref came from the application or a tool, the bytes left in the
request's budget and a cancel event. ``StoreResolver`` authorizes by the address's tenant SET
("Authorizing under dedupe"), and denies what it cannot attribute.

The request-level walk and its running byte budget live in ``_request.py``.
"""

from __future__ import annotations

import asyncio
import io
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from loom_nb.content import ContentRef
from loom_nb.errors import (
    ConfigurationError,
    ContentAccessDeniedError,
    ContentNotFoundError,
    StoreError,
)
from loom_nb.limits import MAX_RESOLVED_BYTES
from loom_nb.store._protocol import ContentStore, StoreEntry, check_address, check_tenant

__all__ = [
    "ContentResolver",
    "Principal",
    "ResolveContext",
    "StoreResolver",
]


@dataclass(frozen=True)
class Principal:
    """Who is asking: the tenant whose blobs may be read, and optionally the user within it."""

    tenant: str
    """The tenant; a read is allowed when this tenant stored the blob."""
    subject: str | None = None
    """The user or service inside the tenant, for audit; not used to authorize."""

    def __post_init__(self) -> None:
        check_tenant(self.tenant)
        if self.subject is not None and not isinstance(self.subject, str):
            raise ConfigurationError(
                f"Principal.subject must be a string or None, not {type(self.subject).__name__}.",
                code="invalid_principal",
            )


@dataclass(frozen=True)
class ResolveContext:
    """What a resolver is told about a fetch: who asks, for which step, and how many bytes are left."""

    execution_id: str | None
    """The execution the read is attributed to; a resolver denies a read without one."""
    step_id: str | None
    """The step inside the execution (the model call), when known."""
    principal: Principal | None
    """Who asks; a resolver denies a read without one."""
    origin: Literal["app", "tool"] = "app"
    """Whether the ref came from the application's own message or from a tool result."""
    max_bytes: int = MAX_RESOLVED_BYTES
    """The byte budget left; a resolver should refuse a blob larger than this."""
    cancel: asyncio.Event | None = None
    """Set when the fetch is no longer wanted (another fetch spent the budget)."""

    def __post_init__(self) -> None:
        for name in ("execution_id", "step_id"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ConfigurationError(
                    f"ResolveContext.{name} must be a string or None, not {type(value).__name__}.",
                    code="invalid_resolve_context",
                )
        if self.principal is not None and not isinstance(self.principal, Principal):
            raise ConfigurationError(
                "ResolveContext.principal must be a Principal or None, not "
                f"{type(self.principal).__name__}.",
                code="invalid_resolve_context",
            )
        if self.origin not in ("app", "tool"):
            raise ConfigurationError(
                f"ResolveContext.origin must be 'app' or 'tool', not {self.origin!r}.",
                code="invalid_resolve_context",
            )
        if isinstance(self.max_bytes, bool) or not isinstance(self.max_bytes, int):
            raise ConfigurationError(
                f"ResolveContext.max_bytes must be an int, not {type(self.max_bytes).__name__}.",
                code="invalid_resolve_context",
            )
        if self.max_bytes < 0:
            raise ConfigurationError(
                f"ResolveContext.max_bytes must be >= 0, not {self.max_bytes}.",
                code="invalid_resolve_context",
            )


@runtime_checkable
class ContentResolver(Protocol):
    """Turns a ref into bytes, after checking that the context may read it."""

    async def resolve(self, ref: ContentRef, context: ResolveContext) -> bytes:
        """The blob's bytes; raise (preferably a ``LoomError``) to refuse."""
        ...


class StoreResolver:
    """Resolves refs from a ``ContentStore``, authorizing by the address's tenant set."""

    def __init__(self, store: ContentStore) -> None:
        self.store = store

    async def resolve(self, ref: ContentRef, context: ResolveContext) -> bytes:
        """The bytes at ``ref.address`` if the principal's tenant stored them and they fit the budget.

        The blob is read through ``store.open``, which checks the tenancy and verifies the hash as
        it reads. A ref that declares a size must match the blob's (``StoreError`` code
        ``size_mismatch``), checked against the stored size before the read and against the
        bytes after it; a blob over the budget left is refused before any byte is read.
        """
        address = check_address(ref.address)
        if not context.execution_id or context.principal is None:
            missing = "execution_id" if not context.execution_id else "principal"
            raise ContentAccessDeniedError(
                f"read of {address} denied: the resolve context has no {missing}, so the read "
                "cannot be attributed. Pass a ResolveContext with execution_id and principal.",
                address=address,
            )
        _check_cancel(context, address)
        tenant = context.principal.tenant
        try:
            # The store checks the tenancy (absent and foreign alike) and learns the size before
            # any byte of the body is read.
            reader = await asyncio.to_thread(_open, self.store, address, tenant)
        except (ContentAccessDeniedError, ContentNotFoundError):
            reader = None
        # Absent and foreign look alike, so a tenant cannot probe which blobs others stored.
        if reader is None:
            raise ContentAccessDeniedError(
                f"read of {address} denied: tenant {tenant!r} has not stored it in this store "
                "(or it is absent). Store the bytes as that tenant first.",
                address=address,
                tenant=tenant,
            )
        with reader:
            if reader.size > context.max_bytes:
                raise StoreError(
                    f"{address} is {reader.size} bytes, over the {context.max_bytes} bytes left in "
                    "this request's budget; send fewer or smaller media.",
                    code="over_budget",
                    address=address,
                )
            _check_size(ref, reader.size)  # refused before any byte is read
            _check_cancel(context, address)
            # Every provider wire takes media inline (base64 in the JSON body), so the whole
            # blob is needed here; it is read once, verified against its address as it is read.
            data: bytes = await asyncio.to_thread(reader.read)
        _check_size(ref, len(data))
        _check_cancel(context, address)
        return data


def _open(store: ContentStore, address: str, tenant: str) -> Any:
    """``store.open`` (a ``BlobReader``); a store without it is read whole after a tenancy check."""
    opener = getattr(store, "open", None)
    if callable(opener):
        return opener(address, tenant=tenant)
    entry = _stat_or_none(store, address)
    if entry is None or tenant not in entry.tenants:
        raise ContentAccessDeniedError(f"{address} is not available", address=address)
    return _Whole(store.get(address))


class _Whole(io.BytesIO):
    """A blob read whole, with the ``size`` a ``BlobReader`` has."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.size = len(data)


def _stat_or_none(store: ContentStore, address: str) -> StoreEntry | None:
    try:
        return store.stat(address)
    except ContentNotFoundError:
        return None


def _check_size(ref: ContentRef, size: int) -> None:
    """Refuse a blob whose length is not the size its ref declares (a ref without one passes)."""
    if ref.size is not None and ref.size != size:
        raise StoreError(
            f"{ref.address}: the ref declares {ref.size} bytes but the stored blob has {size}. "
            "The ref was edited or built by hand; use the ref put() returned.",
            code="size_mismatch",
            address=ref.address,
        )


def _check_cancel(context: ResolveContext, address: str) -> None:
    if context.cancel is not None and context.cancel.is_set():
        raise StoreError(
            f"fetch of {address} cancelled: the request's byte budget was spent by other fetches.",
            code="cancelled",
            address=address,
        )
