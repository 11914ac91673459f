"""The content layer: a content-addressed store with tenancy, budgeted resolution of refs, and GC."""

from loom_nb.store._gc import SweepReport, sweep_unpinned_content
from loom_nb.store._local import LocalContentStore
from loom_nb.store._protocol import ContentStore, StoreEntry
from loom_nb.store._request import MAX_CONCURRENT_FETCHES, resolve_request_content
from loom_nb.store._resolve import ContentResolver, Principal, ResolveContext, StoreResolver

__all__ = [
    "MAX_CONCURRENT_FETCHES",
    "ContentResolver",
    "ContentStore",
    "LocalContentStore",
    "Principal",
    "ResolveContext",
    "StoreEntry",
    "StoreResolver",
    "SweepReport",
    "resolve_request_content",
    "sweep_unpinned_content",
]
