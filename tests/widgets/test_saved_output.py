"""A notebook executed with nbclient and saved shows the transcript from its static HTML."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.render.safety import unsafe_parts

CELL = """
from loom_nb import TranscriptView, Message, TextPart, ToolUsePart, ToolResultPart, Untrusted
view = TranscriptView([
    Message(role="user", content="what is <b>2+2</b>?"),
    Message(role="assistant", content=[ToolUsePart(id="t1", name="calc", input={"expr": "2+2"})]),
    Message(role="user", content=[ToolResultPart(tool_use_id="t1", content=Untrusted("4", "tool:calc"))]),
])
view
"""


@pytest.fixture
def jupyter_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Jupyter and IPython config/data/runtime dirs inside tmp_path (nothing written to home)."""
    for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
        folder = tmp_path / var.lower()
        folder.mkdir()
        monkeypatch.setenv(var, str(folder))
    return tmp_path


@pytest.mark.slow
def test_saved_notebook_output_carries_static_html(jupyter_env: Path) -> None:
    """Executed with store_widget_state=False and saved, the output has the widget view, safe text/html and a stable text/plain."""
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(CELL))
    client = NotebookClient(
        nb,
        kernel_name="python3",
        timeout=120,
        store_widget_state=False,
        resources={"metadata": {"path": str(jupyter_env)}},
    )
    client.execute()
    path = jupyter_env / "saved.ipynb"
    nbformat.write(nb, path)

    saved = nbformat.read(path, as_version=4)
    (output,) = saved.cells[0].outputs
    data = output["data"]
    assert "application/vnd.jupyter.widget-view+json" in data
    assert data["text/plain"] == "TranscriptView(3 messages: user, assistant, user)"
    html = data["text/html"]
    assert "what is &lt;b&gt;2+2&lt;/b&gt;?" in html
    assert "tool call · calc · call t1" in html
    assert "result of calc · t1" in html
    assert "!</span> untrusted · tool:calc" in html
    assert unsafe_parts(html) == []
    assert "widgets" not in saved.metadata  # no widget state stored
