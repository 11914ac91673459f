"""PromptPad and ReplayStepper read in both JupyterLab themes: WCAG contrast >= 4.5:1, measured."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import SCREENSHOTS
from tests.browser.harness import REPO_ON_PATH, JupyterServer, close_notebook, run_notebook
from tests.browser.test_theme_markdown_browser import CONTRAST, _set_theme, _slug

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CELL = """
from IPython.display import display
from loom_nb import PromptPad, ReplayStepper
from loom_nb.journal import Journal
from loom_nb.providers import ScriptedProvider
from tests.widgets.recording import RECORDING

pad = PromptPad(ScriptedProvider([{"text": "A **bold** answer with `code`.",
                                   "usage": {"input_tokens": 9, "output_tokens": 7}}]))
await pad.send("first question")
await pad.send("a second one")  # the script has run out: the pad shows the refusal and its remedy
assert pad.error
display(pad)
journal = Journal()
stepper = ReplayStepper(journal, journal.import_jsonl(RECORDING))
display(stepper)
"""

TARGETS = {
    "pad status": ".loom-pp .loom-pp-status",
    "pad message text": ".loom-pp .loom-pp-conversation .loom-text",
    "pad error head": ".loom-pp .loom-pp-error-head",
    "pad error message": ".loom-pp .loom-pp-error-message",
    "pad error remedy": ".loom-pp .loom-pp-error-remedy",
    "stepper label": ".loom-stepper .loom-turn-label",
    "stepper facts": ".loom-stepper .loom-step-facts",
    "stepper section title": ".loom-stepper .loom-step-title",
    "stepper transcript text": ".loom-stepper .loom-step-seen .loom-text",
}


def test_prompt_pad_and_stepper_keep_contrast_in_both_themes(
    jupyter_server: JupyterServer, browser_page: Any
) -> None:
    """Every labelled text of the pad (with a refusal shown) and the stepper is >= 4.5:1 in light and dark."""
    page = browser_page
    try:
        # One run, then each theme switched to with the widgets on screen (no re-run needed).
        panel = run_notebook(page, jupyter_server, "theme-widgets.ipynb", [REPO_ON_PATH, CELL])
        panel.locator(".loom-pp .loom-pp-error").wait_for(timeout=30_000)
        panel.locator(".loom-stepper .loom-step-facts").wait_for(timeout=30_000)
        for theme in ("JupyterLab Light", "JupyterLab Dark"):
            _set_theme(page, theme)
            for label, selector in TARGETS.items():
                nodes = [n for n in panel.locator(selector).all() if n.is_visible()]
                assert nodes, f"{theme}: no {label} rendered ({selector})"
                for node in nodes:
                    result = node.evaluate(CONTRAST)
                    assert result["ratio"] >= 4.5, f"{theme}: {label} {result}"
            page.screenshot(
                path=str(SCREENSHOTS / f"theme-{_slug(theme)}-pad-stepper.png"), full_page=True
            )
        close_notebook(page)
    finally:
        _set_theme(page, "JupyterLab Light")
