"""Shared fixtures for the renderer tests: a fake store, and media bytes."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import pytest

from loom_nb.errors import ContentNotFoundError


@dataclass
class FakeStore:
    """A dict-backed content reader with tenant sets (the two methods the renderer uses)."""

    blobs: dict[str, bytes] = field(default_factory=dict)
    owners: dict[str, set[str]] = field(default_factory=dict)

    def put(self, data: bytes, tenant: str) -> str:
        address = "sha256:" + hashlib.sha256(data).hexdigest()
        self.blobs[address] = data
        self.owners.setdefault(address, set()).add(tenant)
        return address

    def get(self, address: str) -> bytes:
        if address not in self.blobs:
            raise ContentNotFoundError(f"no blob at {address}")
        return self.blobs[address]

    def tenants(self, address: str) -> set[str]:
        return set(self.owners.get(address, set()))


@dataclass(frozen=True)
class Viewer:
    """A principal stand-in."""

    tenant: str


@pytest.fixture
def store() -> FakeStore:
    """An empty fake store."""
    return FakeStore()
