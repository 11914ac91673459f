"""Which tenant index a store uses: loom-store.json recorded once and checked, and the pairing with a journal."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from loom_nb.errors import ConfigurationError, ContentNotFoundError
from loom_nb.store._s3_client import Exists
from loom_nb.store._s3_layout import LAYOUT, IndexChoice, check_same_index


class FakeObjects:
    """The two calls IndexChoice makes on the bucket, on a dict (a conditional create, a read)."""

    url = "s3://b"

    def __init__(self, recorded: dict[str, Any] | None = None) -> None:
        self.objects: dict[str, bytes] = {}
        if recorded is not None:
            self.objects[LAYOUT] = json.dumps(recorded).encode()

    def put(self, what: str, where: str, key: str, data: bytes, *, mode: str) -> None:
        assert mode == "create"
        if key in self.objects:
            raise Exists
        self.objects[key] = data

    def get_bytes(self, what: str, where: str, key: str) -> bytes:
        if key not in self.objects:
            raise ContentNotFoundError(f"no {key}", address=key)
        return self.objects[key]


class FakeIndex:
    """A tenant index that only says what it is."""

    def __init__(self, kind: str = "objects", database: str | None = None) -> None:
        self.kind = kind
        self.database = database
        self.closed = False

    def layout(self) -> dict[str, str]:
        found = {"index": self.kind}
        return {**found, "database": self.database} if self.database else found

    def close(self) -> None:
        self.closed = True


def _choice(objects: FakeObjects, index: FakeIndex, *, chosen: bool = False) -> IndexChoice:
    return IndexChoice(objects, index, chosen=chosen)  # type: ignore[arg-type]


def test_the_first_use_records_the_index_and_later_ones_agree() -> None:
    """A new bucket gets loom-store.json naming the index; a second client with the same index passes."""
    objects = FakeObjects()
    _choice(objects, FakeIndex()).check()
    assert json.loads(objects.objects[LAYOUT]) == {"format": 1, "index": "objects"}
    _choice(objects, FakeIndex()).check()


def test_a_client_with_another_index_is_refused() -> None:
    """A bucket recording PostgreSQL refuses a marker-object client (and the other way round)."""
    objects = FakeObjects({"format": 1, "index": "postgresql", "where": "db:5432/x"})
    with pytest.raises(ConfigurationError) as info:
        _choice(objects, FakeIndex()).check()
    assert info.value.code == "store_index_mismatch"
    assert "db:5432/x" in info.value.message


def test_a_paired_journal_takes_over_only_when_the_index_was_not_chosen() -> None:
    """follow() is ignored by a store opened with an index of its own, and once the layout was checked."""
    objects = FakeObjects()
    chosen = _choice(objects, FakeIndex(), chosen=True)
    chosen.follow("postgresql://ignored")
    chosen.check()
    assert chosen.index.kind == "objects"
    checked = _choice(objects, FakeIndex())
    checked.check()
    checked.follow("postgresql://ignored")
    assert checked._pair_with is None


def test_a_bucket_recording_markers_keeps_them_despite_a_paired_journal() -> None:
    """A journal paired with a store whose bucket records marker objects changes nothing."""
    objects = FakeObjects({"format": 1, "index": "objects"})
    index = FakeIndex()
    choice = _choice(objects, index)
    choice.follow(object())  # not even looked at: the bucket decides first
    choice.check()
    kept: object = choice.index
    assert kept is index
    assert not index.closed


def test_another_database_is_refused() -> None:
    """Two PostgreSQL indexes of one bucket in different databases: store_index_mismatch."""
    recorded = {"index": "postgresql", "database": "1/a/public", "where": "h:5432/a"}
    check_same_index("s3://b", recorded, {"index": "postgresql", "database": "1/a/public"})
    with pytest.raises(ConfigurationError) as info:
        check_same_index("s3://b", recorded, {"index": "postgresql", "database": "2/b/public"})
    assert info.value.code == "store_index_mismatch"


def test_the_check_runs_once_under_concurrency() -> None:
    """Threads racing the first use record the layout once, and every one of them passes."""
    objects = FakeObjects()
    choice = _choice(objects, FakeIndex())
    errors: list[BaseException] = []

    def use() -> None:
        try:
            choice.check()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert list(objects.objects) == [LAYOUT]
