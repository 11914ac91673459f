"""Where an S3 store keeps its tenant index, agreed through the bucket's ``loom-store.json`` (issue 16).

Every client of one store has to keep its index in the same place: a client counting marker
objects would take blobs only PostgreSQL rows name for orphans, and its sweep would reclaim
them. So the first client to use a store records its index in ``loom-store.json`` (a
conditional create; the database by its identity, never a way to reach it or a credential), and
a later one opened with another index is refused (``store_index_mismatch``).

Pairing with a journal. A store given to a PostgreSQL journal (``Journal(url, store=...)``, and
``loom-nb`` for a store and a journal named together) is told so through
``S3ContentStore._follow_journal``; unless it was opened with an index of its own (``index=`` or
``$LOOM_STORE_INDEX``) or its bucket already records marker objects, it keeps its index in the
journal's database from its first use on. The journal is only duck-typed here: the store layer
does not import the journal (DESIGN.md, "Layers"); ``_pg_index`` shares its pool.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from loom_nb.errors import ConfigurationError, ContentNotFoundError
from loom_nb.store._s3_client import Exists, S3Objects
from loom_nb.store._s3_index import TenantIndex

__all__ = ["LAYOUT", "IndexChoice", "check_same_index"]

LAYOUT = "loom-store.json"
"""The object that records where the store's tenant index is kept."""


class IndexChoice:
    """A store's tenant index: the one it was opened with, or its paired journal's, checked once.

    ``chosen`` says the index was asked for (``index=`` or ``$LOOM_STORE_INDEX``), so a paired
    journal does not replace it.
    """

    def __init__(self, objects: S3Objects, index: TenantIndex, *, chosen: bool) -> None:
        self._objects = objects
        self.index = index
        """The tenant index in use (it may change once, on first use, to a paired journal's)."""
        self._chosen = chosen
        self._pair_with: Any = None  # a journal (or its URL) to keep the index beside
        self._lock = threading.Lock()
        self._checked = threading.Event()  # set once the layout was checked

    def follow(self, journal: Any) -> None:
        """Keep the tenant index in ``journal``'s PostgreSQL database, unless told otherwise.

        No I/O here: on first use (``check``) nothing changes when the store was opened with an
        index of its own or its bucket already records marker objects; a new bucket, or one that
        records PostgreSQL, takes the journal's database, which is then checked to be the
        recorded one.
        """
        with self._lock:
            if not self._chosen and not self._checked.is_set():
                self._pair_with = journal

    def check(self) -> None:
        """On first use: the store's ``loom-store.json`` says where its index is, and must agree."""
        if self._checked.is_set():
            return
        with self._lock:
            if self._checked.is_set():  # another thread checked it meanwhile
                return
            if self._pair_with is not None and not self._chosen:
                self._take_journal_index(self._pair_with)
            ours = self.index.layout()
            recorded = self._recorded_layout(ours)
            if recorded is not None:
                check_same_index(self._objects.url, recorded, ours)
            self._checked.set()

    def _take_journal_index(self, journal: Any) -> None:
        """Under the lock, on first use: switch to ``journal``'s database unless the bucket records markers."""
        recorded = self._recorded_layout(None)
        if recorded is not None and recorded.get("index") != "postgresql":
            return
        from loom_nb.store._pg_index import PostgresIndex

        previous = self.index
        self.index = PostgresIndex(journal, self._objects.url)
        self._chosen = True
        previous.close()

    def _recorded_layout(self, ours: dict[str, str] | None) -> dict[str, Any] | None:
        """The layout the bucket records; with ``ours``, first try to record it (None: ours is now it)."""
        if ours is not None:
            wanted = json.dumps({"format": 1, **ours}).encode()
            try:
                self._objects.put("put", LAYOUT, LAYOUT, wanted, mode="create")
                return None
            except Exists:
                pass
        try:
            found = self._objects.get_bytes("get", LAYOUT, LAYOUT)
        except ContentNotFoundError:
            return None
        try:
            recorded = json.loads(bytes(found))
        except ValueError:
            recorded = None
        return recorded if isinstance(recorded, dict) else {}


def check_same_index(url: str, recorded: dict[str, Any], ours: dict[str, str]) -> None:
    """Refuse a client whose tenant index is not the one the bucket records (``store_index_mismatch``).

    Two indexes of one bucket would each count only their own tenants, and either one's sweep
    would reclaim blobs only the other names.
    """
    kind = ours["index"]
    if recorded.get("index") != kind:
        remedy = (
            f"index=<a Journal or URL of that database> (the bucket records it at "
            f"{recorded.get('where', 'an unrecorded place')}), or through "
            "Journal(<that database's URL>, store=...), which pairs them"
            if recorded.get("index") == "postgresql"
            else "without index= and without a PostgreSQL journal paired with it"
        )
        raise ConfigurationError(
            f"the S3 store {url} keeps its tenant index in {recorded.get('index')!r}, but it was "
            f"opened with the index in {kind!r}. Open it the way it was first used: {remedy}.",
            code="store_index_mismatch",
        )
    theirs, mine = recorded.get("database"), ours.get("database")
    if kind == "postgresql" and theirs is not None and mine is not None and theirs != mine:
        raise ConfigurationError(
            f"the S3 store {url} keeps its tenant index in the PostgreSQL database at "
            f"{recorded.get('where', '?')}, but it was opened with the index in another "
            f"database, {ours.get('where', '?')}: each would count only its own tenants and "
            "its sweep would reclaim the other's blobs. Open the store with that database "
            "(index=<its URL>, or a Journal on it).",
            code="store_index_mismatch",
        )
