"""The hosted CI workflow runs `.ci/run` on push and pull requests, on each supported Python, with a database."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "ci.yml"


def _workflow() -> dict[Any, Any]:
    data = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _job() -> dict[str, Any]:
    jobs = _workflow()["jobs"]
    assert len(jobs) == 1, "one job runs .ci/run; a second would drift from it"
    (job,) = jobs.values()
    assert isinstance(job, dict)
    return job


def _steps() -> list[dict[str, Any]]:
    steps = _job()["steps"]
    assert isinstance(steps, list)
    return steps


def test_workflow_runs_on_push_and_pull_requests() -> None:
    """Every push and every pull request triggers the workflow, on any branch."""
    data = _workflow()
    # YAML 1.1 (PyYAML) reads the bare key `on` as the boolean true.
    triggers = data.get("on", data.get(True))
    assert isinstance(triggers, dict)
    assert set(triggers) >= {"push", "pull_request"}
    for event in ("push", "pull_request"):
        assert not (triggers[event] or {}).get("branches"), f"{event} is limited to some branches"


def test_matrix_is_python_311_and_313_on_ubuntu() -> None:
    """The job runs on an Ubuntu runner for Python 3.11 and 3.13, each a declared classifier."""
    job = _job()
    assert str(job["runs-on"]).startswith("ubuntu-")
    versions = job["strategy"]["matrix"]["python-version"]
    assert versions == ["3.11", "3.13"]  # strings: a bare 3.10 would read as 3.1
    assert job["strategy"].get("fail-fast") is False, (
        "one version's failure must not hide the other's"
    )
    classifiers = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "classifiers"
    ]
    for version in versions:
        assert f"Programming Language :: Python :: {version}" in classifiers
    assert int(job["timeout-minutes"]) <= 90


def test_setup_python_uses_the_matrix_version_and_caches_pip() -> None:
    """setup-python installs the matrix's Python and keeps pip's cache keyed on pyproject.toml."""
    (setup,) = [s for s in _steps() if str(s.get("uses", "")).startswith("actions/setup-python@")]
    assert setup["with"]["python-version"] == "${{ matrix.python-version }}"
    assert setup["with"]["cache"] == "pip"
    assert setup["with"]["cache-dependency-path"] == "pyproject.toml"
    steps = _steps()
    checkout = next(
        i for i, s in enumerate(steps) if str(s.get("uses", "")).startswith("actions/checkout@")
    )
    assert checkout < steps.index(setup)


def test_the_job_runs_ci_run_after_python_is_set_up() -> None:
    """The job's work is `bash .ci/run`, the script a clean clone runs locally, after setup-python."""
    steps = _steps()
    runs = [i for i, s in enumerate(steps) if s.get("run") == "bash .ci/run"]
    assert len(runs) == 1
    setup = next(
        i for i, s in enumerate(steps) if str(s.get("uses", "")).startswith("actions/setup-python@")
    )
    assert setup < runs[0]
    assert (ROOT / ".ci" / "run").is_file()
    other = [s["run"] for s in steps if "run" in s and s["run"] != "bash .ci/run"]
    assert not other, f"extra commands would make hosted CI differ from .ci/run: {other}"


def test_postgres_service_matches_the_url_the_job_passes() -> None:
    """The PostgreSQL service's user, password, database and port are the ones in the job's URL."""
    job = _job()
    service = job["services"]["postgres"]
    assert str(service["image"]).startswith("postgres:")
    url = urlsplit(job["env"]["LOOM_TEST_POSTGRES"])
    assert url.scheme in {"postgresql", "postgres"}
    assert url.hostname in {"localhost", "127.0.0.1"}
    assert f"{url.port}:5432" in service["ports"]
    assert url.username == service["env"]["POSTGRES_USER"]
    assert url.password == service["env"]["POSTGRES_PASSWORD"]
    assert url.path.lstrip("/") == service["env"]["POSTGRES_DB"]
    assert "pg_isready" in service["options"], (
        "the job must wait until the server accepts connections"
    )


def test_workflow_validates_against_the_github_workflow_schema() -> None:
    """check-jsonschema's vendored GitHub workflow schema accepts the file (offline, no fetch)."""
    script = Path(sysconfig.get_path("scripts")) / "check-jsonschema"
    command = [str(script)] if script.is_file() else [sys.executable, "-m", "check_jsonschema"]
    checked = subprocess.run(
        [*command, "--builtin-schema", "vendor.github-workflows", str(WORKFLOW)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
