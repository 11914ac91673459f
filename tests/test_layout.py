"""The tree keeps the design's shape: one-way layers, no import circle, no module past 600 lines.

The layer order is shared DESIGN.md's ("Layers"); `lint-imports` checks it from the contracts in
pyproject.toml (CI runs it too), and these tests make the same checks part of the test command so
a violation fails where the change was made.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 600
GENERATED = {ROOT / "loom_nb" / "guard" / "_skeleton_data.py"}


def test_the_import_contracts_hold() -> None:
    """Every import goes down the layers and no package's modules import each other in a circle."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from importlinter.cli import lint_imports_command; lint_imports_command()",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def test_no_internal_module_imports_the_package_facade() -> None:
    """``loom_nb/__init__.py`` sits above everything: no module of the package imports it."""
    graph = grimp.build_graph("loom_nb", exclude_type_checking_imports=True)
    assert graph.find_modules_that_directly_import("loom_nb") == set()


def sources() -> list[Path]:
    files = [*(ROOT / "loom_nb").rglob("*.py"), *(ROOT / "loom_nb").rglob("*.js")]
    files += [ROOT / "notebooks" / "build.py"]
    return sorted(p for p in files if p not in GENERATED and "__pycache__" not in p.parts)


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_is_over_600_lines(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{path.relative_to(ROOT)} has {lines} lines: split it along a seam"
