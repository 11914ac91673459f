"""Tenant markers: the tenant's key encoding, parsing marker keys, and what a blob's markers describe."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from loom_nb.errors import ConfigurationError, StoreError
from loom_nb.store._s3_index import Marker, entry_of, micros, parse_marker, tenant_key, tenant_of

DIGEST = "ab" * 32


@pytest.mark.parametrize("tenant", ["acme", "é/ü?&", "€" * 170, "x"])
def test_a_tenant_key_round_trips(tenant: str) -> None:
    """A tenant's key is URL-safe (no '/' or '='), and decodes back to the tenant."""
    key = tenant_key(tenant)
    assert "/" not in key
    assert "=" not in key
    assert tenant_of(key) == tenant


@pytest.mark.parametrize("tenant", ["€" * 171, "\ud800", ""])
def test_a_tenant_that_cannot_be_a_key_is_refused(tenant: str) -> None:
    """Over 512 bytes of UTF-8 (an object key's limit), a lone surrogate, or an empty tenant is invalid_tenant."""
    with pytest.raises(StoreError) as info:
        tenant_key(tenant)
    assert info.value.code == "invalid_tenant"


def test_a_marker_key_is_parsed_and_junk_is_ignored() -> None:
    """tenants/<hex>/<tenant>/<put>-<size>-<created>-<nonce> parses; any other key is None."""
    encoded = tenant_key("acme")
    marker = parse_marker(f"tenants/{DIGEST}/{encoded}/{20:016d}-7-{10:016d}-abc")
    assert marker is not None
    assert (marker.tenant, marker.put, marker.size, marker.created) == ("acme", 20, 7, 10)
    assert marker.encoded == encoded
    for junk in (
        f"tenants/{DIGEST}/{encoded}/1-2-3",
        f"tenants/abc/{encoded}/1-2-3-n",
        f"blobs/{DIGEST}",
        f"tenants/{DIGEST}/{encoded}/x-2-3-n",
        f"tenants/{DIGEST}/_w/1-2-3-n",  # not UTF-8
    ):
        assert parse_marker(junk) is None, junk


def test_a_blobs_entry_spans_its_markers() -> None:
    """Size is the largest, created the earliest, last_put the latest; no markers is no entry."""
    markers = [Marker("k1", "a", put=30, size=5, created=10), Marker("k2", "b", 40, 5, 20)]
    entry = entry_of(DIGEST, markers)
    assert entry is not None
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    assert entry.address == "sha256:" + DIGEST
    assert entry.created == epoch + timedelta(microseconds=10)
    assert entry.last_put == epoch + timedelta(microseconds=40)
    assert entry.tenants == frozenset({"a", "b"})
    assert entry_of(DIGEST, []) is None


def test_micros_needs_an_aware_moment() -> None:
    """A timezone-aware moment is microseconds since the epoch; a naive one is naive_datetime."""
    assert micros(datetime(1970, 1, 1, 0, 0, 1, 5, tzinfo=UTC)) == 1_000_005
    with pytest.raises(ConfigurationError) as info:
        micros(datetime(2024, 1, 1))
    assert info.value.code == "naive_datetime"
