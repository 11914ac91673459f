"""The Binder configuration: exact pins that agree with pyproject.toml, and repo2docker's build
plan checked offline (no Docker needed)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "binder" / "requirements.txt"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("binder_lock", ROOT / "tools" / "binder_lock.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


binder_lock = _tool()


def _pins() -> dict[str, tuple[str, set[str]]]:
    """The lock's pins: name -> (version, the names on its ``# via`` line)."""
    pins: dict[str, tuple[str, set[str]]] = {}
    name = ""
    for line in LOCK.read_text(encoding="utf-8").splitlines():
        if line.startswith("    # via "):
            pins[name][1].update(v.strip() for v in line.removeprefix("    # via ").split(","))
        elif line and not line.startswith(("#", "-e")):
            assert "==" in line, f"not an exact pin: {line!r}"
            name, version = line.split("==")
            assert name == binder_lock.canonical(name), f"{name} is not in its normalized form"
            pins[name] = (version, set())
    return pins


def _wanted() -> dict[str, tuple[Requirement, str]]:
    """What pyproject.toml asks the lock for: name -> (requirement, its via)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return {
        binder_lock.canonical(req.name): (req, via)
        for req, via in binder_lock.top_requirements(pyproject)
    }


def test_every_requirement_of_pyproject_is_pinned_at_a_version_it_allows() -> None:
    """Each [project] dependency and each dependency of the Binder extras has an exact pin in range."""
    pins = _pins()
    wanted = _wanted()
    assert "ipykernel" in wanted  # the notebooks' kernel, from the notebooks extra
    for name, (req, via) in wanted.items():
        assert name in pins, f"{req} ({via}) is not pinned: run python tools/binder_lock.py"
        version, vias = pins[name]
        assert req.specifier.contains(version, prereleases=True), f"{name}=={version} breaks {req}"
        assert via in vias, f"{name} is not marked as wanted by {via}"


def test_nothing_is_pinned_that_pyproject_no_longer_needs() -> None:
    """Top-level pins are exactly pyproject's requirements, and every other pin is needed by a pin."""
    pins = _pins()
    wanted = _wanted()
    top = {name for name, (_, vias) in pins.items() if any("(pyproject.toml)" in v for v in vias)}
    assert top == set(wanted), (
        "top-level pins differ from pyproject.toml: run python tools/binder_lock.py"
    )
    reached, frontier = set(top), list(top)
    needed_by: dict[str, set[str]] = {}
    for name, (_, vias) in pins.items():
        for via in vias:
            needed_by.setdefault(via, set()).add(name)
        assert all("(pyproject.toml)" in v or v in pins for v in vias), (
            f"{name} needed by an unpinned package"
        )
    while frontier:
        for child in needed_by.get(frontier.pop(), set()) - reached:
            reached.add(child)
            frontier.append(child)
    assert set(pins) - reached == set(), "pins no requirement reaches"
    assert "loom-nb" not in pins  # the project itself is `-e .`
    assert LOCK.read_text(encoding="utf-8").rstrip().endswith("-e .")


def test_the_resolver_follows_extras_markers_and_refuses_what_is_not_installed() -> None:
    """Extras pull in their requirements, markers are read for Binder, and a missing or
    out-of-range package stops the lock instead of pinning a guess."""
    metadata = {
        "a": (
            "1.0",
            [
                "b>=2",
                'c; extra == "fast"',
                'd; python_version < "3.11"',
                'e; sys_platform == "win32"',
            ],
        ),
        "b": ("2.5", ["f"]),
        "c": ("0.3", []),
        "f": ("9", []),
    }

    def lookup(name: str) -> tuple[str, list[str]]:
        if name not in metadata:
            raise importlib.metadata.PackageNotFoundError(name)
        return metadata[name]

    env = binder_lock.binder_environment("3.11")
    pins = binder_lock.resolve([(Requirement("a[fast]>=1"), "top")], lookup, env)
    assert {n: (p.version, p.via) for n, p in pins.items()} == {
        "a": ("1.0", {"top"}), "b": ("2.5", {"a"}), "c": ("0.3", {"a"}), "f": ("9", {"b"}),
    }  # fmt: skip
    plain = binder_lock.resolve([(Requirement("a"), "top")], lookup, env)
    assert "c" not in plain  # the extra was not asked for
    with pytest.raises(SystemExit, match="not installed"):
        binder_lock.resolve([(Requirement("zzz"), "top")], lookup, env)
    with pytest.raises(SystemExit, match="refuses"):
        binder_lock.resolve([(Requirement("b>=3"), "top")], lookup, env)
    text = binder_lock.render(pins, "3.11")
    assert text.startswith("# Exact versions for Binder")
    assert "a==1.0\n    # via top\n" in text
    assert text.endswith("-e .\n")


def test_binder_files_install_the_package_on_python_311() -> None:
    """binder/ pins Python 3.11 and installs this repository's package with `-e .` after its pins."""
    assert (ROOT / "binder" / "runtime.txt").read_text().strip() == "python-3.11"
    requirements = (ROOT / "binder" / "requirements.txt").read_text().split()
    assert "-e" in requirements
    assert requirements[requirements.index("-e") + 1] == "."
    post_build = ROOT / "binder" / "postBuild"
    if post_build.exists():  # only if needed, and then it must stop on the first error
        assert "set -euo pipefail" in post_build.read_text()


def test_repo2docker_plans_the_expected_build() -> None:
    """repo2docker's Dockerfile plan uses Python 3.11, copies the repo, then pip-installs binder/requirements.txt."""
    exe = Path(sys.executable).with_name("jupyter-repo2docker")
    if not exe.exists() and shutil.which("jupyter-repo2docker") is None:
        pytest.fail("jupyter-repo2docker is not installed: pip install -e '.[dev]'")
    out = subprocess.run(
        [str(exe), "--no-build", "--no-run", "--debug", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    plan = out.stdout + out.stderr
    assert "python=3.11" in plan
    copy_all = plan.index("COPY --chown=0:0 src/ ${REPO_DIR}/")
    install = plan.index('pip install --no-cache-dir -r "binder/requirements.txt"')
    assert copy_all < install, "the package must be copied before `-e .` is installed"
