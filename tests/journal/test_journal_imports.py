"""journal/'s modules import each other in no circle, function-level imports included (DESIGN.md, "Layers")."""

from __future__ import annotations

import ast
from pathlib import Path

import loom_nb.journal

PACKAGE = Path(loom_nb.journal.__file__).parent


def _runtime_imports(path: Path, package: str) -> set[str]:
    """Modules of ``package`` that ``path`` imports outside ``if TYPE_CHECKING:``, at any depth."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for node in ast.walk(block)
    }
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        found |= {n for n in names if n.startswith(package + ".")}
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle in ``graph``, or None."""
    state: dict[str, int] = {}
    trail: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        trail.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                return [*trail[trail.index(target) :], target]
            if target not in state and (found := visit(target)):
                return found
        trail.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return None


def test_no_module_of_the_journal_imports_another_in_a_circle() -> None:
    """The import graph among journal/'s private modules (lazy imports too) has no cycle."""
    graph = {
        f"loom_nb.journal.{path.stem}": _runtime_imports(path, "loom_nb.journal")
        for path in PACKAGE.glob("_*.py")
        if path.name != "__init__.py"
    }
    assert graph["loom_nb.journal._journal"]  # the scan sees imports at all
    assert _cycle(graph) is None


def test_the_cycle_finder_finds_a_planted_circle() -> None:
    """A planted a -> b -> a is reported, so the test above can fail."""
    assert _cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
