"""The example notebooks in a real JupyterLab: saved (untrusted) view first, then run live.

For each notebook: open it as saved (JupyterLab treats it as untrusted and shows the static HTML
fallback), screenshot that, clear the outputs, run every cell, and check what a reader sees:
images, audio players, PDF thumbnails, fenced blocks, linked tool pairs, the replay stepper moving
between turns, the prompt pad streaming a scripted answer.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import SCREENSHOTS
from tests.browser.harness import (
    JupyterServer,
    close_notebook,
    current_panel,
    open_notebook,
    run_all_cells,
)

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def lab(jupyter_server: JupyterServer) -> JupyterServer:
    """The session's JupyterLab with a copy of notebooks/ (and its recordings) in its root."""
    target = jupyter_server.root_dir / "notebooks"
    shutil.copytree(NOTEBOOKS, target, dirs_exist_ok=True)
    return jupyter_server


def _open_saved(page: Any, lab: JupyterServer, name: str) -> Any:
    open_notebook(page, lab, f"notebooks/{name}.ipynb", timeout_ms=90_000)
    panel = current_panel(page)
    panel.locator(".jp-OutputArea-output").first.wait_for(timeout=30_000)
    page.screenshot(path=str(SCREENSHOTS / f"notebook-{name}-saved.png"), full_page=True)
    return panel


def _run_live(page: Any, name: str) -> Any:
    page.evaluate(
        "() => { window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs'); }"
    )
    page.wait_for_function(
        """() => window.jupyterapp.shell.currentWidget.content.widgets
              .filter((c) => c.model.type === 'code')
              .every((c) => c.model.executionCount === null)"""
    )
    run_all_cells(page, timeout_ms=180_000)
    panel = current_panel(page)
    errors = panel.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    assert errors.count() == 0, errors.all_inner_texts()
    return panel


def _wait_images(page: Any, locator: Any) -> None:
    for handle in locator.element_handles():
        page.wait_for_function("(img) => img.complete && img.naturalWidth > 0", arg=handle)


def _fences_hold_the_injection(panel: Any) -> None:
    legends = panel.locator(".loom-tv fieldset.loom-fence > legend").all_inner_texts()
    assert "! untrusted · tool:web_fetch" in legends


def test_01_tour(lab: JupyterServer, browser_page: Any) -> None:
    """The tour shows its static fallback when saved, then live: a chart, a fence, and a streaming prompt pad."""
    page = browser_page
    saved = _open_saved(page, lab, "01-tour")
    # Untrusted saved outputs: the sanitized static HTML, fence label readable, no widget.
    assert (
        saved.locator(".loom-transcript fieldset > legend")
        .first.inner_text()
        .startswith("! untrusted")
    )
    assert saved.locator(".loom-tv").count() == 0
    panel = _run_live(page, "01-tour")
    panel.locator(".loom-tv").first.wait_for(timeout=30_000)
    _wait_images(page, panel.locator(".loom-tv .loom-image img.loom-thumb"))
    _fences_hold_the_injection(panel)
    bar = panel.locator(".loom-map-progress .loom-map-line")  # chat.map's live progress bar
    bar.first.wait_for(timeout=30_000)
    assert "3/3" in bar.first.inner_text()
    assert "done" in bar.first.inner_text()
    pad = panel.locator(".loom-pp")
    pad.locator(".loom-pp-conversation .loom-tv").wait_for(timeout=30_000)
    pad.scroll_into_view_if_needed()
    pad.locator("textarea.loom-pp-input").fill("Hello?")
    pad.locator("button.loom-pp-send").click()
    answer = pad.locator(".loom-pp-conversation .loom-msg.loom-assistant")
    answer.first.wait_for(timeout=30_000)
    assert "scripted model" in answer.first.inner_text()
    page.screenshot(path=str(SCREENSHOTS / "notebook-01-tour-live.png"), full_page=True)
    close_notebook(page)


def test_02_multimodal(lab: JupyterServer, browser_page: Any) -> None:
    """The multimodal notebook shows an image, an audio player and a PDF thumbnail, and hides another tenant's bytes."""
    page = browser_page
    saved = _open_saved(page, lab, "02-multimodal")
    assert saved.locator(".loom-transcript img").count() >= 2  # chart + PDF page, as static PNGs
    assert saved.locator(".loom-transcript audio").count() >= 1
    panel = _run_live(page, "02-multimodal")
    views = panel.locator(".loom-tv")
    views.first.wait_for(timeout=30_000)
    first = views.nth(0)  # the question with its three uploads
    thumbs = first.locator(".loom-image img.loom-thumb")
    assert thumbs.count() == 1
    _wait_images(page, thumbs)
    assert first.locator(".loom-audio audio").count() == 1
    assert first.locator(".loom-audio audio").evaluate(
        "(a) => a.controls && !a.autoplay && !a.loop"
    )
    pdf = first.locator(".loom-pdf img.loom-pdf-thumb")
    assert pdf.count() == 1
    assert pdf.evaluate("(img) => img.naturalWidth > 0")
    intruder = views.nth(1)  # the same message seen by another tenant
    assert intruder.locator("img.loom-thumb").count() == 0
    assert "unavailable" in intruder.inner_text()
    page.screenshot(path=str(SCREENSHOTS / "notebook-02-multimodal-live.png"), full_page=True)
    close_notebook(page)


def test_03_agent_tools(lab: JupyterServer, browser_page: Any) -> None:
    """The agent notebook fences the hostile page and links each tool result to its call."""
    page = browser_page
    saved = _open_saved(page, lab, "03-agent-tools")
    assert "untrusted · tool:web_fetch" in saved.locator(".loom-transcript").first.inner_text()
    panel = _run_live(page, "03-agent-tools")
    final = panel.locator(".loom-tv").nth(1)
    final.wait_for(timeout=30_000)
    _fences_hold_the_injection(panel)
    _wait_images(page, final.locator(".loom-image img.loom-thumb"))
    result = final.locator(".loom-tool-result").first
    result.scroll_into_view_if_needed()
    result.click()
    call = final.locator(".loom-tool-use").first
    page.wait_for_function(
        "(el) => el.classList.contains('loom-active')", arg=call.element_handle()
    )
    page.screenshot(path=str(SCREENSHOTS / "notebook-03-agent-tools-live.png"), full_page=True)
    close_notebook(page)


def test_04_replay(lab: JupyterServer, browser_page: Any) -> None:
    """The replay notebook's stepper moves between the recorded turns."""
    page = browser_page
    saved = _open_saved(page, lab, "04-replay")
    assert saved.locator("table").count() >= 1  # the static table of turns
    panel = _run_live(page, "04-replay")
    stepper = panel.locator(".loom-stepper")
    stepper.wait_for(timeout=30_000)
    stepper.locator(".loom-turn-label", has_text="turn 1 of 4").wait_for(timeout=15_000)
    stepper.locator(".loom-next").click()
    stepper.locator(".loom-turn-label", has_text="turn 2 of 4").wait_for(timeout=15_000)
    stepper.locator(".loom-next").click()
    stepper.locator(".loom-turn-label", has_text="turn 3 of 4").wait_for(timeout=15_000)
    assert stepper.locator(".loom-step-seen fieldset.loom-fence > legend").count() >= 1
    pages = stepper.locator(".loom-pdf img.loom-page")
    assert pages.count() >= 1
    assert not any(page.is_visible() for page in pages.all())  # no empty image before paging
    page.screenshot(path=str(SCREENSHOTS / "notebook-04-replay-live.png"), full_page=True)
    close_notebook(page)
