"""The widgets' front ends: files joined into the one ES module anywidget ships, which loads."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from loom_nb.widgets._base import STATIC, TRANSCRIPT_ESM, esm_of
from loom_nb.widgets._grid import CompareGrid
from loom_nb.widgets._mcp import MCPServerView
from loom_nb.widgets._stepper import ReplayStepper
from loom_nb.widgets._transcript import TranscriptView
from loom_nb.widgets._upload import MediaUpload


def test_the_transcript_module_joins_its_files_in_order() -> None:
    """TranscriptView._esm is every transcript file, in load order, with one default export."""
    esm = TranscriptView._esm
    starts = [esm.index((STATIC / name).read_text(encoding="utf-8")) for name in TRANSCRIPT_ESM]
    assert starts == sorted(starts)
    assert esm.count("export default {") == 1
    assert ReplayStepper._esm.count("export default {") == 1


def test_only_the_last_file_may_export(tmp_path: Path) -> None:
    """A default export anywhere but in the last file is refused (the module would not load)."""
    with pytest.raises(RuntimeError):
        esm_of(["transcript.js", "media.js"])


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to load the modules")
@pytest.mark.parametrize(
    "widget", [TranscriptView, ReplayStepper, MCPServerView, MediaUpload, CompareGrid]
)
def test_the_module_loads_as_one_es_module(widget: type, tmp_path: Path) -> None:
    """The joined module parses and runs its top level (classes defined before they are extended)."""
    module = tmp_path / "widget.mjs"
    module.write_text(widget._esm, encoding="utf-8")  # type: ignore[attr-defined]
    script = (
        f"import w from {str(module.as_uri())!r};"
        "if (typeof w.render !== 'function') { process.exit(3); }"
    )
    done = subprocess.run(
        ["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
