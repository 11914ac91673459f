"""The content layer: a content-addressed store with tenancy, budgeted resolution of refs, and GC."""

from __future__ import annotations

from typing import TYPE_CHECKING

from loom_nb._lazy import exports

# name -> module that defines it, imported when the name is first read (loom_nb._lazy); the S3
# store loads its client (obstore) only then, and a turn never loads the sweep.
_EXPORTS: dict[str, str] = {
    "SweepReport": "loom_nb.store._gc",
    "sweep_unpinned_content": "loom_nb.store._gc",
    "LocalContentStore": "loom_nb.store._local",
    "open_store": "loom_nb.store._open",
    "ContentStore": "loom_nb.store._protocol",
    "StoreEntry": "loom_nb.store._protocol",
    "BlobReader": "loom_nb.store._reader",
    "MAX_CONCURRENT_FETCHES": "loom_nb.store._request",
    "resolve_request_content": "loom_nb.store._request",
    "ContentResolver": "loom_nb.store._resolve",
    "Principal": "loom_nb.store._resolve",
    "ResolveContext": "loom_nb.store._resolve",
    "StoreResolver": "loom_nb.store._resolve",
    "S3ContentStore": "loom_nb.store._s3",
}

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

__getattr__, __dir__ = exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # type checkers and IDEs see the real definitions
    from loom_nb.store._gc import SweepReport, sweep_unpinned_content
    from loom_nb.store._local import LocalContentStore
    from loom_nb.store._open import open_store
    from loom_nb.store._protocol import ContentStore, StoreEntry
    from loom_nb.store._reader import BlobReader
    from loom_nb.store._request import MAX_CONCURRENT_FETCHES, resolve_request_content
    from loom_nb.store._resolve import ContentResolver, Principal, ResolveContext, StoreResolver
    from loom_nb.store._s3 import S3ContentStore
