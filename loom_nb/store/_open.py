"""``open_store``: a content store chosen by a URL or a path (issue 16).

``open_store(".loom/store")`` (or ``file:///abs/path``) is the ``LocalContentStore``;
``open_store("s3://bucket/prefix", endpoint=...)`` is the ``S3ContentStore``. Keyword arguments
go to the chosen store's constructor; one the store does not take is a ``ConfigurationError``,
so a typo is not silently ignored. The S3 backend (obstore) is imported only when asked for.
"""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import unquote, urlsplit

from loom_nb.errors import ConfigurationError
from loom_nb.store._protocol import ContentStore

__all__ = ["STORE_SCHEMES", "open_store"]

STORE_SCHEMES = ("file", "s3")
"""URL schemes ``open_store`` understands (anything without ``scheme://`` is a local path)."""

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def open_store(url_or_path: str | os.PathLike[str], **options: Any) -> ContentStore:
    """Open the content store at ``url_or_path``: a local directory, ``file://...`` or ``s3://bucket/prefix``.

    ``options`` are passed to the store (``LocalContentStore(path, durable=..., clock=...)``,
    ``S3ContentStore(url, endpoint=..., region=..., access_key_id=..., secret_access_key=...,
    chunk_size=..., timeout=..., max_retries=..., index=..., clock=...)``).
    """
    if isinstance(url_or_path, os.PathLike):
        return _local(os.fspath(url_or_path), options)
    if not isinstance(url_or_path, str) or not url_or_path.strip():
        raise ConfigurationError(
            f"open_store takes a directory path or a URL such as 's3://bucket/prefix', not "
            f"{url_or_path!r}.",
            code="invalid_store_url",
        )
    match = _SCHEME.match(url_or_path)
    if match is None:
        return _local(url_or_path, options)
    scheme = match.group(1).lower()
    if scheme == "file":
        parts = urlsplit(url_or_path)
        if parts.netloc not in ("", "localhost"):
            raise ConfigurationError(
                f"{url_or_path!r}: a file URL names a local path (file:///abs/path), not a host.",
                code="invalid_store_url",
            )
        return _local(unquote(parts.path), options)
    if scheme == "s3":
        from loom_nb.store._s3 import S3ContentStore

        return _construct(S3ContentStore, url_or_path, options)
    raise ConfigurationError(
        f"{url_or_path!r}: no content store for the scheme {scheme!r}. Use a directory path, "
        "file:///path or s3://bucket/prefix (any S3-compatible server via endpoint=...).",
        code="unsupported_store_url",
    )


def _local(path: str, options: dict[str, Any]) -> ContentStore:
    from loom_nb.store._local import LocalContentStore

    return _construct(LocalContentStore, path, options)


def _construct(cls: Any, target: str, options: dict[str, Any]) -> ContentStore:
    import inspect

    accepted = set(inspect.signature(cls).parameters) - {"path", "url"}
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise ConfigurationError(
            f"{cls.__name__} does not take {', '.join(unknown)}; it takes "
            f"{', '.join(sorted(accepted))}.",
            code="invalid_store_option",
        )
    store: ContentStore = cls(target, **options)
    return store
