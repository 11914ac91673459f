"""Write and execute the example notebooks (``python notebooks/build.py``).

The notebooks are kept as cell lists in ``cells/`` (one module per notebook) so that changes
review as code; this script writes each ``.ipynb``, runs it with nbclient in this folder
(``store_widget_state=False``: widget state is never saved, so the files stay small and render on
GitHub) and saves it executed. CI then checks the saved outputs with nbval. ``python notebooks/build.py 03`` rebuilds only the notebooks whose name
starts with ``03``. ``--record`` also re-records ``recordings/demo-run.jsonl`` and its media.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat
from cells import NOTEBOOKS
from cells.common import Cells
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
RECORDINGS = HERE / "recordings"


def write(name: str, cells: Cells) -> Path:
    """Write one notebook (unexecuted)."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.metadata["language_info"] = {"name": "python"}
    for kind, source in cells:
        cell = (
            nbformat.v4.new_markdown_cell(source)
            if kind == "md"
            else nbformat.v4.new_code_cell(source)
        )
        nb.cells.append(cell)
    path = HERE / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


def execute(path: Path) -> None:
    """Run a notebook in this folder and save it executed, without widget state."""
    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        store_widget_state=False,
        resources={"metadata": {"path": str(HERE)}},
    ).execute()
    for cell in nb.cells:  # ids vary per write; keep them stable for clean diffs
        cell.pop("id", None)
    nb.nbformat_minor = 4
    nbformat.write(nb, path)


async def record() -> None:
    """Re-record recordings/demo-run.jsonl from a fresh demo run, with the media it cites."""
    from loom_nb.demo import run_demo
    from loom_nb.journal import Journal
    from loom_nb.store import LocalContentStore

    with tempfile.TemporaryDirectory() as tmp:
        run = await run_demo(tmp, out=lambda _line: None)
        RECORDINGS.mkdir(exist_ok=True)
        journal = Journal(run.journal_path)
        journal.export_jsonl(run.execution_id, RECORDINGS / "demo-run.jsonl")
        journal.close()
        media = RECORDINGS / "media"
        shutil.rmtree(media, ignore_errors=True)
        media.mkdir()
        store = LocalContentStore(run.store_path)
        for entry in store.list():
            blob = store.get(entry.address)  # verified read; once per blob
            suffix = ".pdf" if blob.startswith(b"%PDF") else ".png"
            (media / f"{entry.address.removeprefix('sha256:')[:16]}{suffix}").write_bytes(blob)


def main(argv: list[str]) -> int:
    """Build the notebooks named by prefix (all by default)."""
    if "--record" in argv:
        asyncio.run(record())
        argv = [a for a in argv if a != "--record"]
    wanted = [name for name in NOTEBOOKS if not argv or any(name.startswith(a) for a in argv)]
    for name in wanted:
        path = write(name, NOTEBOOKS[name])
        execute(path)
        print(f"built {path.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
