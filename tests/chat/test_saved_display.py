"""A chat displayed early is saved as it last stood: its output's static HTML follows the turns."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from IPython.core.displaypub import CapturingDisplayPublisher
from IPython.core.interactiveshell import InteractiveShell
from nbclient import NotebookClient

import loom_nb
from loom_nb import Chat, Journal, ScriptedProvider
from loom_nb.widgets._display import Published
from tests.glyphs import emoji_in
from tests.render.sanitizer import effective

CODE_REPLY = "Here:\n\n```python\ndef total(xs):\n    return sum(xs)  # add\n```"


@pytest.fixture
def shell() -> Iterator[Any]:
    """An in-process IPython shell whose display messages are recorded (``shell.display_pub.outputs``)."""
    instance = InteractiveShell.instance()
    instance.display_pub = CapturingDisplayPublisher()
    loom_nb._register_display()
    try:
        yield instance
    finally:
        InteractiveShell.clear_instance()


def _display_ids(outputs: list[dict[str, Any]]) -> list[tuple[str, bool]]:
    return [(o["transient"]["display_id"], o["update"]) for o in outputs]


async def test_a_displayed_chat_republishes_its_output_once_per_turn(shell: Any) -> None:
    """Shown in a shell, a chat's output has a display id; each landed turn updates it once."""
    chat = Chat(
        ScriptedProvider([{"text": "first"}, {"text": CODE_REPLY}]), journal=Journal(), id="s"
    )
    shell.display_formatter.format(chat)  # what `chat` last in a cell does
    outputs = shell.display_pub.outputs
    ((display_id, update),) = _display_ids(outputs)
    assert not update
    assert "chat s · 0 turns" in outputs[0]["data"]["text/html"]
    view_data = outputs[0]["data"]["application/vnd.jupyter.widget-view+json"]
    await chat("one")
    await chat("two")
    assert _display_ids(outputs) == [(display_id, False), (display_id, True), (display_id, True)]
    last = outputs[-1]["data"]
    assert last["application/vnd.jupyter.widget-view+json"] == view_data  # the same live widget
    assert last["text/plain"] == repr(chat)
    assert "chat s · 2 turns" in last["text/html"]
    assert "def" in html.unescape(last["text/html"])
    chat.undo()  # an undo is a change too
    assert len(outputs) == 4
    assert "chat s · 1 turn" in outputs[-1]["data"]["text/html"]


async def test_a_refused_turn_and_an_unchanged_chat_publish_nothing(shell: Any) -> None:
    """A turn that fails leaves the transcript as it was: no update is sent for it."""
    chat = Chat(ScriptedProvider([{"text": "only"}]), journal=Journal(), id="r")
    shell.display_formatter.format(chat)
    await chat("one")
    assert len(shell.display_pub.outputs) == 2
    with pytest.raises(Exception):  # the script is used up
        await chat("two")
    assert len(shell.display_pub.outputs) == 2


def test_published_sends_nothing_outside_a_shell() -> None:
    """With no IPython shell running, republishing is a no-op (nothing printed, False)."""
    assert not InteractiveShell.initialized()
    published = Published("d1", {"text/html": "<p>a</p>", "text/plain": "a"}, lambda: "a")
    assert published.publish("<p>b</p>") is False


def test_a_failing_publish_stops_republishing_with_one_warning(
    shell: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A send that fails is logged once; later changes are not tried again."""

    def broken() -> str:
        raise RuntimeError("no iopub")

    published = Published("d2", {"text/html": "<p>a</p>"}, broken)
    assert published.publish("<p>b</p>") is False
    assert published.publish("<p>c</p>") is False
    assert caplog.text.count("could not be updated") == 1


CELLS = [
    """
from loom_nb import Chat, Journal, ScriptedProvider
chat = Chat(ScriptedProvider([{"text": "first answer"}, {"text": CODE}, {"text": "the last turn's words"}]),
            journal=Journal(), id="saved")
chat
""",
    'reply = await chat("one")',
    'reply = await chat("show me code")',
    'reply = await chat("and finally")',
]


@pytest.fixture
def jupyter_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Jupyter and IPython config/data/runtime dirs inside tmp_path (nothing written to home)."""
    for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
        folder = tmp_path / var.lower()
        folder.mkdir()
        monkeypatch.setenv(var, str(folder))
    return tmp_path


@pytest.mark.slow
def test_the_saved_notebook_shows_the_last_turn(jupyter_env: Path) -> None:
    """Executed by nbclient and saved, the chat displayed in cell 1 holds the last turn's text,
    keeps its code colours through the sanitizer, and needs no emoji font."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"CODE = {CODE_REPLY!r}")]
    nb.cells += [nbformat.v4.new_code_cell(source) for source in CELLS]
    NotebookClient(
        nb,
        kernel_name="python3",
        timeout=120,
        store_widget_state=False,
        resources={"metadata": {"path": str(jupyter_env)}},
    ).execute()
    path = jupyter_env / "saved.ipynb"
    nbformat.write(nb, path)

    saved = nbformat.read(path, as_version=4)
    (output,) = saved.cells[1].outputs
    data = output["data"]
    assert "application/vnd.jupyter.widget-view+json" in data  # live, it is still the widget
    page = data["text/html"]
    assert "the last turn&#x27;s words" in page
    assert "chat saved · 3 turns" in page
    assert data["text/plain"].startswith("Chat(chat saved · 3 turns")
    assert [cell.outputs for cell in saved.cells[2:]] == [[], [], []]
    runs = re.findall(r'<span style="([^"]*)">([^<]*)</span>', page)
    colours = {html.unescape(text): effective(style, "color") for style, text in runs}
    assert colours["def"] is not None
    assert colours["def"].startswith("#")
    assert colours["# add"] is not None
    assert colours["# add"] != colours["def"]
    assert emoji_in(page) == []
