"""The project's public addresses agree: pyproject's [project.urls], the README's Binder badge and binder/."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

ROOT = Path(__file__).resolve().parents[1]
BADGE = re.compile(
    r"\[!\[Launch Binder\]\(https://mybinder\.org/badge_logo\.svg\)\]"
    r"\((?P<url>https://mybinder\.org/v2/gh/[^)\s]+)\)"
)


def _project() -> dict[str, object]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    project: dict[str, object] = data["project"]
    return project


def _urls() -> dict[str, str]:
    urls = _project()["urls"]
    assert isinstance(urls, dict)
    return {str(k): str(v) for k, v in urls.items()}


def _badge() -> tuple[str, str, str, str]:
    """(owner, repo, ref, urlpath) of the README's Binder badge."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = BADGE.findall(readme)
    assert len(found) == 1, "README.md must carry exactly one Binder badge"
    parts = urlsplit(found[0])
    owner, repo, ref = parts.path.removeprefix("/v2/gh/").split("/", 2)
    (urlpath,) = parse_qs(parts.query)["urlpath"]
    return owner, repo, ref, urlpath


def _github_repo(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    assert parts.scheme == "https"
    assert parts.netloc == "github.com", url
    owner, repo, *_rest = parts.path.strip("/").split("/")
    return owner, repo


def test_project_urls_name_homepage_source_issues_and_changelog() -> None:
    """[project.urls] has the four addresses a package index shows, all on GitHub over https."""
    urls = _urls()
    assert set(urls) >= {"Homepage", "Source", "Issues", "Changelog"}
    for url in urls.values():
        _github_repo(url)


def test_binder_badge_and_project_urls_name_the_same_repository() -> None:
    """The badge launches the repository that Homepage, Source, Issues and Changelog point at."""
    owner, repo, _ref, _path = _badge()
    urls = _urls()
    source = f"https://github.com/{owner}/{repo}"
    assert urls["Source"] == source
    assert urls["Homepage"] == source
    assert urls["Issues"] == f"{source}/issues"
    assert urls["Changelog"].startswith(f"{source}/blob/main/")


def test_changelog_url_names_a_file_in_this_repository() -> None:
    """The Changelog address points at a file that exists here, in Keep a Changelog form."""
    path = urlsplit(_urls()["Changelog"]).path.split("/blob/main/", 1)[1]
    changelog = (ROOT / path).read_text(encoding="utf-8")
    assert changelog.startswith("# Changelog")
    assert "## [Unreleased]" in changelog
    assert "keepachangelog.com" in changelog


def test_binder_badge_opens_a_notebook_binder_can_build() -> None:
    """The badge's urlpath is a committed notebook, and binder/ pins a Python the package supports."""
    _owner, _repo, ref, urlpath = _badge()
    assert ref == "HEAD"
    assert urlpath.startswith("lab/tree/")
    notebook = ROOT / urlpath.removeprefix("lab/tree/")
    assert notebook.suffix == ".ipynb"
    assert notebook.is_file(), f"the Binder badge opens {notebook.name}, which is not committed"
    runtime = (ROOT / "binder" / "runtime.txt").read_text(encoding="utf-8").strip()
    version = runtime.removeprefix("python-")
    classifiers = _project()["classifiers"]
    assert isinstance(classifiers, list)
    assert f"Programming Language :: Python :: {version}" in classifiers


def test_classifiers_list_every_python_from_the_minimum_to_313() -> None:
    """requires-python's minimum and each later minor version up to 3.13 has a classifier."""
    project = _project()
    minimum = re.fullmatch(r">=3\.(\d+)", str(project["requires-python"]))
    assert minimum is not None
    classifiers = project["classifiers"]
    assert isinstance(classifiers, list)
    listed = {c.rsplit(" ", 1)[1] for c in classifiers if c.startswith("Programming Language")}
    for minor in range(int(minimum.group(1)), 14):
        assert f"3.{minor}" in listed
