"""The Binder configuration, checked offline with repo2docker's build plan (no Docker needed)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_binder_files_install_the_package_on_python_311() -> None:
    """binder/ pins Python 3.11 and installs this repository's package with `-e .`."""
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
