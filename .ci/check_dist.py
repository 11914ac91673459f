"""Release check: what `python -m build` made ships the right files, and the wheel works installed.

    python .ci/check_dist.py contents DIST_DIR   # sdist and wheel hold what they should, nothing else
    python .ci/check_dist.py installed VENV_DIR  # the wheel installed in VENV_DIR runs `loom-nb demo`

`contents` compares the archives with the files git would commit (tracked, or new and not
ignored): the wheel must hold every one of them under loom_nb/ (the widgets' JS and CSS, py.typed),
the sdist every one under loom_nb/, tests/ and notebooks/; neither may hold anything else (a
virtual env, test output, the demo's .loom/, caches). `installed` runs the demo from the installed
console script in an empty folder with that venv off PATH, then pastes the command it printed
into bash, opens the transcript it named, and loads the widgets' assets.

Standard library only: it runs under any Python.
"""

from __future__ import annotations

import email.parser
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

ROOT = Path(__file__).resolve().parents[1]
SDIST_MUST_HOLD = ("loom_nb/", "tests/", "notebooks/", "README.md", "pyproject.toml")


def fail(message: str) -> None:
    """Stop the check with ``message`` on stderr."""
    print(f"release check: {message}", file=sys.stderr)
    raise SystemExit(1)


def committable_files() -> set[str]:
    """Paths git would commit here: tracked files plus new files no .gitignore excludes."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return {p for p in listed.split("\0") if p and (ROOT / p).is_file()}


def _one(dist: Path, pattern: str) -> Path:
    found = sorted(dist.glob(pattern))
    if len(found) != 1:
        fail(f"expected one {pattern} in {dist}, found {[p.name for p in found]}")
    return found[0]


def check_wheel(wheel: Path, files: set[str]) -> None:
    """The wheel holds exactly the package's files plus its metadata, with the console script."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.Parser().parsestr(archive.read(info).decode())
        entry_points = archive.read(info.replace("METADATA", "entry_points.txt")).decode()
    package = {n for n in names if ".dist-info/" not in n}
    expected = {f for f in files if f.startswith("loom_nb/")}
    if missing := sorted(expected - package):
        fail(f"the wheel lacks {missing}")
    if extra := sorted(package - expected):
        fail(f"the wheel holds files git would not commit: {extra}")
    if "loom-nb = loom_nb.cli:main" not in entry_points:
        fail("the wheel declares no loom-nb console script")
    urls = {value.split(",", 1)[0].strip() for value in metadata.get_all("Project-URL") or []}
    if not {"Homepage", "Source", "Issues", "Changelog"} <= urls:
        fail(f"the wheel's metadata has project URLs {sorted(urls)}")
    if "Programming Language :: Python :: 3.13" not in (metadata.get_all("Classifier") or []):
        fail("the wheel's metadata does not declare Python 3.13")
    print(f"  wheel  {wheel.name}: {len(package)} package files, metadata and loom-nb script")


def check_sdist(sdist: Path, files: set[str]) -> None:
    """The sdist holds the package, tests and notebooks, and nothing git would not commit."""
    with tarfile.open(sdist) as archive:
        members = [m.name for m in archive.getmembers() if m.isfile()]
    top = sdist.name.removesuffix(".tar.gz") + "/"
    if stray := [m for m in members if not m.startswith(top)]:
        fail(f"the sdist has members outside {top}: {stray[:5]}")
    inside = {m.removeprefix(top) for m in members} - {"PKG-INFO"}
    if extra := sorted(inside - files):
        fail(f"the sdist holds files git would not commit: {extra[:20]}")
    wanted = {f for f in files if f.startswith(SDIST_MUST_HOLD)}
    if missing := sorted(wanted - inside):
        fail(f"the sdist lacks {missing[:20]}")
    print(f"  sdist  {sdist.name}: {len(inside)} files, all committable, package, tests, notebooks")


def contents(dist: Path) -> None:
    """Check the one wheel and the one sdist in ``dist``."""
    files = committable_files()
    check_wheel(_one(dist, "*.whl"), files)
    check_sdist(_one(dist, "*.tar.gz"), files)


def _printed(stdout: str, label: str) -> str:
    lines = [line.strip() for line in stdout.splitlines() if line.strip().startswith(f"{label}: ")]
    if len(lines) != 1:
        fail(f"the demo printed {len(lines)} '{label}:' lines:\n{stdout}")
    return lines[0].split(": ", 1)[1]


def installed(venv: Path) -> None:
    """Run the demo from the wheel installed in ``venv`` as a newcomer would, then what it printed."""
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p) != bindir
    )
    with tempfile.TemporaryDirectory(prefix="loom-release-") as tmp:
        run = Path(tmp)
        where = subprocess.run(
            [bindir / "python", "-c", "import loom_nb.widgets, loom_nb; print(loom_nb.__file__)"],
            cwd=run,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if not Path(where).is_relative_to(venv.resolve()) and not Path(where).is_relative_to(venv):
            fail(f"loom_nb was imported from {where}, not from the wheel installed in {venv}")
        demo = subprocess.run(
            [bindir / "loom-nb", "demo"], cwd=run, env=env, capture_output=True, text=True
        )
        if demo.returncode != 0 or "completed after" not in demo.stdout:
            fail(f"`loom-nb demo` from the wheel failed:\n{demo.stdout}\n{demo.stderr}")
        page = urlsplit(_printed(demo.stdout, "transcript"))
        if page.scheme != "file" or not Path(url2pathname(page.path)).is_file():
            fail(f"the transcript URL {page.geturl()} names no file")
        command = _printed(demo.stdout, "inspect")
        shown = subprocess.run(
            ["bash", "-c", command], cwd=run, env=env, capture_output=True, text=True
        )
        if shown.returncode != 0 or "completed" not in shown.stdout:
            fail(f"the printed `{command}` did not run as pasted:\n{shown.stderr}")
    print(f"  demo   ran from the installed wheel ({where}); `{command}` ran as pasted")


def main(argv: list[str]) -> None:
    """Dispatch ``contents DIST`` or ``installed VENV``."""
    if len(argv) != 2 or argv[0] not in {"contents", "installed"}:
        fail("usage: check_dist.py contents DIST_DIR | installed VENV_DIR")
    target = Path(argv[1]).absolute()
    if argv[0] == "contents":
        contents(target)
    else:
        installed(target)


if __name__ == "__main__":
    main(sys.argv[1:])
