"""The S3 store's bucket client: URLs, options, and each call's failure mapped to the store's errors (no server)."""

from __future__ import annotations

from typing import Any

import pytest
from obstore.exceptions import AlreadyExistsError, GenericError, NotFoundError

from loom_nb.errors import ConfigurationError, ContentNotFoundError, StoreError
from loom_nb.store._s3_client import Exists, S3Objects, blob, connect, parse_url, sound


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("s3://bucket", ("bucket", "")),
        ("s3://bucket/", ("bucket", "")),
        ("s3://bucket/a/b/", ("bucket", "a/b")),
    ],
)
def test_a_url_is_a_bucket_and_a_prefix(url: str, expected: tuple[str, str]) -> None:
    """parse_url splits s3://bucket/prefix, the prefix without its outer slashes."""
    assert parse_url(url) == expected


@pytest.mark.parametrize(
    "url",
    [b"s3://b", "http://b/x", "s3://", "s3://user@b", "s3://b?x=1", "s3://b/a//c", "s3://b/a/../c"],
)
def test_a_bad_url_is_invalid_store_url(url: Any) -> None:
    """Anything but s3://bucket[/prefix] with plain segments is refused before any I/O."""
    with pytest.raises(ConfigurationError) as info:
        parse_url(url)
    assert info.value.code == "invalid_store_url"


def test_an_empty_option_is_invalid_s3_option() -> None:
    """An endpoint, region or key given as an empty string (or not a string) is refused."""
    with pytest.raises(ConfigurationError) as info:
        connect(
            "s3://b",
            "b",
            "",
            endpoint="http://127.0.0.1:9",
            region="",
            access_key_id=None,
            secret_access_key=None,
            max_retries=0,
        )
    assert info.value.code == "invalid_s3_option"


def _objects() -> S3Objects:
    s3 = connect(
        "s3://b",
        "b",
        "",
        endpoint="http://127.0.0.1:9",
        region=None,
        access_key_id="k",
        secret_access_key="s",
        max_retries=0,
    )
    return S3Objects("s3://b", s3)


def _raise(exc: BaseException) -> Any:
    raise exc


def test_call_maps_the_clients_errors() -> None:
    """A missing object is ContentNotFoundError (a digest named as its address), an existing one Exists, the rest store_unavailable."""
    objects = _objects()
    digest = "ab" * 32
    with pytest.raises(ContentNotFoundError) as missing:
        objects.call("get", digest, lambda: _raise(NotFoundError("gone")))
    assert missing.value.details["address"] == "sha256:" + digest
    with pytest.raises(Exists):
        objects.call("put", digest, lambda: _raise(AlreadyExistsError("there")))
    with pytest.raises(StoreError) as failed:
        objects.call("put", "loom-store.json", lambda: _raise(GenericError("boom\nmore")))
    assert failed.value.code == "store_unavailable"
    assert "failed to put loom-store.json: boom." in failed.value.message


def test_an_unreachable_server_is_store_unavailable() -> None:
    """A call to a server that does not answer is store_unavailable, naming the store."""
    with pytest.raises(StoreError) as info:
        _objects().blob_meta("ab" * 32)
    assert info.value.code == "store_unavailable"
    assert "s3://b" in info.value.message


def test_sound_trusts_a_single_part_etag_only_when_it_is_the_md5() -> None:
    """The size must match; a 32-hex ETag must be the MD5; a multipart ETag is trusted (reads verify)."""
    md5 = "0" * 32
    assert sound({"size": 3, "e_tag": f'"{md5}"'}, 3, lambda: md5)  # type: ignore[typeddict-item]
    assert not sound({"size": 3, "e_tag": f'"{"1" * 32}"'}, 3, lambda: md5)  # type: ignore[typeddict-item]
    assert not sound({"size": 4, "e_tag": f'"{md5}"'}, 3, lambda: md5)  # type: ignore[typeddict-item]
    assert sound({"size": 3, "e_tag": '"abc-2"'}, 3, lambda: md5)  # type: ignore[typeddict-item]
    assert sound({"size": 3, "e_tag": None}, 3, None)  # type: ignore[typeddict-item]
    assert blob("ab") == "blobs/ab"
