"""The S3 store's bucket, through obstore: the client's configuration, and each call's failure as a ``StoreError``.

``S3Objects`` is a bucket under a prefix: put, copy, delete, get, head and list, each wrapped so
a missing object is ``ContentNotFoundError``, a conditional create that found the object is
``Exists`` (internal), a request the server did not answer within the store's ``timeout`` is a
``StoreError`` (``store_timeout``), and anything else (the server, the network, the credentials)
is a ``StoreError`` (``store_unavailable``) naming the store, the operation and what to check.

Every request has a deadline (``timeout``, the whole request, body included; connecting has at
most five seconds of it), so a server that accepts a connection and then never answers ends the
call with ``store_timeout`` instead of holding it forever. The
store's own logic (markers, erasing, hashing) lives in ``_s3`` and ``_s3_index``; nothing here
knows what a blob or a tenant is beyond the ``blobs/<hex>`` key.

obstore is an optional dependency: without it this module still imports (``AVAILABLE`` is
False) and opening an S3 store says what to install.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import re
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urlsplit

try:
    import obstore
    from obstore.exceptions import AlreadyExistsError, BaseError, NotFoundError
except ImportError:  # pragma: no cover - the optional dependency is missing
    obstore = None  # type: ignore[assignment]

from loom_nb.errors import ConfigurationError, ContentNotFoundError, StoreError
from loom_nb.store._reader import CHUNK_SIZE, BlobReader

if TYPE_CHECKING:
    from obstore import ObjectMeta
    from obstore.store import S3Store

__all__ = [
    "AVAILABLE",
    "Exists",
    "S3Objects",
    "S3Reader",
    "blob",
    "connect",
    "parse_url",
    "sound",
    "timed_out",
]

AVAILABLE = obstore is not None
"""Whether obstore, the S3 client, is installed."""

_BUCKET = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,253}[A-Za-z0-9])?")
_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*")


class Exists(Exception):
    """Internal: a conditional create found the object already there."""


def parse_url(url: object) -> tuple[str, str]:
    """The bucket and the prefix of an ``s3://bucket/prefix`` URL, or ``invalid_store_url``."""
    if not isinstance(url, str):
        raise ConfigurationError(
            f"an S3 store URL is a string like 's3://bucket/prefix', not {type(url).__name__}.",
            code="invalid_store_url",
        )
    parts = urlsplit(url)
    bucket = parts.netloc
    if parts.scheme != "s3" or not bucket or parts.query or parts.fragment or "@" in bucket:
        raise ConfigurationError(
            f"{url!r} is not an S3 store URL: write 's3://bucket' or 's3://bucket/prefix' "
            "(credentials go in arguments or AWS_* environment variables, not the URL).",
            code="invalid_store_url",
        )
    if not _BUCKET.fullmatch(bucket):
        raise ConfigurationError(
            f"{url!r}: {bucket!r} is not a bucket name; a bucket is letters, digits, dots, "
            "hyphens and underscores, starting and ending with a letter or digit (at most 255).",
            code="invalid_store_url",
        )
    prefix = parts.path.strip("/")
    if not prefix.isprintable():
        raise ConfigurationError(
            f"{url!r}: the prefix {prefix!r} holds a control character.",
            code="invalid_store_url",
        )
    if any(segment in ("", ".", "..") for segment in prefix.split("/")) and prefix:
        raise ConfigurationError(
            f"{url!r}: the prefix {prefix!r} has an empty, '.' or '..' segment.",
            code="invalid_store_url",
        )
    return bucket, prefix


def connect(
    url: str,
    bucket: str,
    prefix: str,
    *,
    endpoint: str | None,
    region: str | None,
    access_key_id: str | None,
    secret_access_key: str | None,
    max_retries: int,
    timeout: float = 120.0,
) -> S3Store:
    """An obstore client for ``bucket``/``prefix``: arguments first, then ``AWS_*`` variables.

    An ``http://`` endpoint is allowed (a local server); an endpoint without a region gets
    ``us-east-1`` (S3-compatible servers ignore it, signing needs one).
    """
    from obstore.store import S3Store

    config: dict[str, Any] = {}
    endpoint = (
        endpoint or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    )
    for name, value in (
        ("endpoint", endpoint),
        ("region", region),
        ("access_key_id", access_key_id),
        ("secret_access_key", secret_access_key),
    ):
        if value is not None:
            if not isinstance(value, str) or not value:
                raise ConfigurationError(
                    f"{name} must be a non-empty string, not {value!r}.",
                    code="invalid_s3_option",
                )
            config[name] = value
    if endpoint:
        _check_endpoint(endpoint)
    if "region" not in config and not os.environ.get("AWS_REGION") and endpoint:
        config["region"] = "us-east-1"  # S3-compatible servers ignore it; signing needs one
    millis = max(1, round(timeout * 1000))
    options: dict[str, Any] = {
        "timeout": f"{millis}ms",
        "connect_timeout": f"{min(millis, 5000)}ms",
    }
    if endpoint and endpoint.startswith("http://"):
        options["allow_http"] = True
    retry: Any = {
        "max_retries": max_retries,
        "retry_timeout": timedelta(seconds=30),
        "backoff": {
            "init_backoff": timedelta(milliseconds=50),
            "max_backoff": timedelta(seconds=2),
            "base": 2,
        },
    }
    try:
        return S3Store(
            bucket,
            prefix=prefix or None,
            client_options=options,  # type: ignore[arg-type]
            retry_config=retry,
            **config,
        )
    except (BaseError, ValueError, TypeError) as exc:
        raise StoreError(
            f"cannot configure the S3 store {url}: {exc}. Check the endpoint, region and "
            "credentials (arguments or AWS_* environment variables).",
            code="store_unavailable",
        ) from exc


def _check_endpoint(endpoint: str) -> None:
    """Refuse an endpoint the client could not turn into requests (it would panic, not fail)."""
    problem = None
    try:
        parts = urlsplit(endpoint)
        host = parts.hostname or ""
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError as exc:
        problem = str(exc)
    else:
        if parts.scheme not in ("http", "https"):
            problem = "it is not an http:// or https:// URL"
        elif not _HOST.fullmatch(host) or not endpoint.isprintable() or " " in endpoint:
            problem = f"{host!r} is not a host name or an IP address"
    if problem is not None:
        raise ConfigurationError(
            f"the S3 endpoint {endpoint!r} is not usable: {problem}. Write it as "
            "http(s)://host[:port] (argument endpoint= or AWS_ENDPOINT_URL).",
            code="invalid_s3_option",
        )


class S3Objects:
    """The objects of the store at ``url``, through the client ``s3``; every call's errors mapped.

    ``what`` (the operation, for messages) and ``where`` (a digest or a key) come first in each
    call; a 64-character ``where`` is a blob's digest and a missing object names its address.
    """

    def __init__(self, url: str, s3: S3Store, *, timeout: float = 120.0) -> None:
        self.url = url
        self.s3 = s3
        self.timeout = timeout
        """Seconds a request may take (its deadline, for messages)."""

    def put(self, what: str, where: str, key: str, data: Any, **options: Any) -> Any:
        return self.call(what, where, lambda: obstore.put(self.s3, key, data, **options))

    def copy(self, what: str, where: str, source: str, target: str) -> None:
        self.call(what, where, lambda: obstore.copy(self.s3, source, target))

    def delete(self, what: str, where: str, keys: str | builtins.list[str]) -> None:
        self.call(what, where, lambda: obstore.delete(self.s3, keys))

    def get(self, what: str, where: str, key: str) -> Any:
        return self.call(what, where, lambda: obstore.get(self.s3, key))

    def get_bytes(self, what: str, where: str, key: str) -> Any:
        """A small object's whole content, in one call."""
        return self.call(what, where, lambda: obstore.get(self.s3, key).bytes())

    def head(self, what: str, where: str, key: str) -> ObjectMeta:
        meta: ObjectMeta = self.call(what, where, lambda: obstore.head(self.s3, key))
        return meta

    def chunks(self, what: str, where: str, result: Any, size: int) -> Iterator[bytes]:
        """A ``get`` result's bytes as they arrive, in chunks of at least ``size`` bytes."""
        stream = self.call(what, where, lambda: result.stream(min_chunk_size=size))
        while True:
            try:
                part = next(stream)
            except StopIteration:
                return
            except (BaseError, OSError, RuntimeError) as exc:
                self.fail(what, where, exc)
            yield part

    def listing(self, prefix: str) -> Iterator[ObjectMeta]:
        """Every object under ``prefix``, a page of LIST at a time."""
        stream = self.call("list", prefix, lambda: obstore.list(self.s3, prefix, chunk_size=1000))
        while True:
            try:
                batch: Sequence[ObjectMeta] = next(stream)
            except StopIteration:
                return
            except BaseError as exc:
                self.fail("list", prefix, exc)
            yield from batch

    def blob_meta(self, digest: str) -> ObjectMeta | None:
        """The blob's metadata (a HEAD), or None when it is not there."""
        try:
            return self.head("head", digest, blob(digest))
        except ContentNotFoundError:
            return None

    def quarantine(self, digest: str, e_tag: str | None) -> None:
        """Move a corrupted object aside to ``corrupt/``, unless a put replaced it since it was read."""
        with contextlib.suppress(StoreError):  # best effort: the read already refused the bytes
            current = self.head("head", digest, blob(digest))
            if e_tag is None or current.get("e_tag") == e_tag:
                self.copy("quarantine", digest, blob(digest), f"corrupt/{digest}")
                self.delete("quarantine", digest, blob(digest))

    def delete_quietly(self, keys: builtins.list[str]) -> None:
        """Delete ``keys``, ignoring failure (leftovers are harmless: a stale marker, a trash copy)."""
        with contextlib.suppress(BaseError, OSError):
            obstore.delete(self.s3, keys)

    def call(self, what: str, where: str, fn: Callable[[], Any]) -> Any:
        """Run one client call with its errors mapped (see the class docstring)."""
        try:
            return fn()
        except AlreadyExistsError as exc:
            raise Exists from exc
        except (FileNotFoundError, NotFoundError) as exc:
            raise ContentNotFoundError(
                f"no object for {where} in {self.url}. Store it first with put().",
                address=f"sha256:{where}" if len(where) == 64 else where,
            ) from exc
        except (BaseError, OSError, RuntimeError) as exc:
            self.fail(what, where, exc)
        except BaseException as exc:
            # The client's Rust side panics (a BaseException) on a request it cannot build;
            # the URL and endpoint are checked up front, this keeps anything left typed.
            if type(exc).__name__ != "PanicException":
                raise
            self.fail(what, where, exc)

    def fail(self, what: str, where: str, exc: BaseException) -> NoReturn:
        """Raise ``store_timeout`` (no answer in time), else ``store_unavailable``, for ``what``."""
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if timed_out(exc):
            raise StoreError(
                f"the S3 store {self.url} did not answer a {what} of {where} within "
                f"{self.timeout:g} s (the server accepted the connection but stalled, or is "
                "overloaded). Check that the server is up and healthy, then retry; for very large "
                "blobs on a slow link open the store with a longer timeout= (seconds).",
                code="store_timeout",
                timeout=self.timeout,
            ) from exc
        raise StoreError(
            f"the S3 store {self.url} failed to {what} {where}: {text}. Check that the server is "
            "reachable, the bucket exists and the credentials may read and write it, then retry.",
            code="store_unavailable",
        ) from exc


class S3Reader(BlobReader):
    """A blob's GET body read through a ``BlobReader`` as it arrives (see ``loom_nb.store._reader``).

    The body is one request: the store's ``timeout`` bounds the whole read, so a reader left
    open longer than that ends in ``store_timeout``.
    """

    def __init__(self, objects: S3Objects, digest: str, result: Any) -> None:
        meta = result.meta
        super().__init__(
            f"sha256:{digest}",
            int(meta["size"]),
            objects.url,
            chunk_size=CHUNK_SIZE,
            on_corrupt=lambda: objects.quarantine(digest, meta.get("e_tag")),
        )
        self._chunks = objects.chunks("open", digest, result, CHUNK_SIZE)
        self._current = memoryview(b"")

    def _fill(self, view: memoryview) -> int:
        while not self._current:
            part = next(self._chunks, None)
            if part is None:
                return 0
            self._current = memoryview(part).cast("B")
        n = min(len(view), len(self._current))
        view[:n] = self._current[:n]
        self._current = self._current[n:]
        return n

    def _release(self) -> None:
        self._current = memoryview(b"")
        close = getattr(self._chunks, "close", None)
        if callable(close):
            close()


def timed_out(exc: BaseException) -> bool:
    """Whether a client error is a request that ran out of time (obstore reports it in its text)."""
    if isinstance(exc, TimeoutError):
        return True
    text = str(exc)
    return "kind: Timeout" in text or "TimedOut" in text or "operation timed out" in text


def blob(digest: str) -> str:
    """The key of the blob with this sha256 hex digest."""
    return f"blobs/{digest}"


def sound(meta: ObjectMeta, size: int, md5: Callable[[], str] | None) -> bool:
    """Whether a present object can stand for ``size`` bytes with this MD5 (as far as S3 tells)."""
    if meta["size"] != size:
        return False
    e_tag = (meta.get("e_tag") or "").strip('"')
    if md5 is None or "-" in e_tag or len(e_tag) != 32:
        return True  # a multipart (or encrypted) ETag is no MD5: every read verifies instead
    return e_tag == md5()
