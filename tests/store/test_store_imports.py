"""store/ imports nothing from the journal above it, and its modules import each other in no circle."""

from __future__ import annotations

from pathlib import Path

import loom_nb.store
from tests.journal.test_journal_imports import _cycle, _runtime_imports

PACKAGE = Path(loom_nb.store.__file__).parent


def test_the_store_does_not_import_the_journal() -> None:
    """No module of store/ imports loom_nb.journal outside TYPE_CHECKING (store is layer 4, journal 6)."""
    for path in PACKAGE.glob("*.py"):
        imported = _runtime_imports(path, "loom_nb")
        journal = {
            n for n in imported if n == "loom_nb.journal" or n.startswith("loom_nb.journal.")
        }
        assert not journal, path.name


def test_no_module_of_the_store_imports_another_in_a_circle() -> None:
    """The import graph among store/'s private modules (lazy imports too) has no cycle."""
    graph = {
        f"loom_nb.store.{path.stem}": _runtime_imports(path, "loom_nb.store")
        for path in PACKAGE.glob("_*.py")
        if path.name != "__init__.py"
    }
    assert graph["loom_nb.store._s3"]
    assert _cycle(graph) is None
