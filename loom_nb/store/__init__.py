"""The content layer: a content-addressed store with tenancy, budgeted resolution of refs, and GC."""

from typing import TYPE_CHECKING, Any

from loom_nb.store._gc import SweepReport, sweep_unpinned_content
from loom_nb.store._local import LocalContentStore
from loom_nb.store._open import open_store
from loom_nb.store._protocol import ContentStore, StoreEntry
from loom_nb.store._reader import BlobReader
from loom_nb.store._request import MAX_CONCURRENT_FETCHES, resolve_request_content
from loom_nb.store._resolve import ContentResolver, Principal, ResolveContext, StoreResolver

if TYPE_CHECKING:
    from loom_nb.store._s3 import S3ContentStore

__all__ = [
    "MAX_CONCURRENT_FETCHES",
    "BlobReader",
    "ContentResolver",
    "ContentStore",
    "LocalContentStore",
    "Principal",
    "ResolveContext",
    "S3ContentStore",
    "StoreEntry",
    "StoreResolver",
    "SweepReport",
    "open_store",
    "resolve_request_content",
    "sweep_unpinned_content",
]


def __getattr__(name: str) -> Any:
    # The S3 store loads its client (obstore) only when asked for.
    if name == "S3ContentStore":
        from loom_nb.store._s3 import S3ContentStore

        return S3ContentStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
