"""The comparison grid in a real JupyterLab and chromium: the live widget (a click opens an item's
transcript, totals, both themes) and the saved notebook's static table, with hostile replies
inert in both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from loom_nb.spending import format_cost
from tests.browser.conftest import SCREENSHOTS
from tests.browser.harness import (
    REPO_ON_PATH,
    JupyterServer,
    close_notebook,
    current_panel,
    open_notebook,
    run_notebook,
)
from tests.browser.test_theme_markdown_browser import CONTRAST, _set_theme, _slug
from tests.chat.priced import price
from tests.fixtures.grids import EXPECTED_TOTALS

pytestmark = [pytest.mark.browser, pytest.mark.slow]

GRIDS = """
from IPython.display import display
from loom_nb.widgets import CompareGrid
from tests.fixtures.grids import hostile_grid, sample_grid
display(CompareGrid(hostile_grid()))
CompareGrid(sample_grid())
"""

COMPARE = """
from loom_nb import Journal, compare
from tests.chat.compare_providers import Flaky, echo_anthropic
from tests.fixtures.grids import ONERROR_REPLY
sonnet, _ = echo_anthropic("S:")
hostile = Flaky(lambda text: ONERROR_REPLY + " [a bad link](javascript:window.__pwned=3)")
comparison = await compare({"sonnet": sonnet, "hostile": hostile}, ["one", "two"],
                           journal=Journal(), progress=False)
comparison
"""

NOTHING_RAN = "() => window.__pwned === undefined"

LINKS = """(root) => [...root.querySelectorAll('a')].map((a) => ({
  href: a.getAttribute('href'), rel: a.getAttribute('rel'), text: a.textContent }))"""

TARGETS = {
    "reply text": ".loom-grid-cell .loom-text",
    "cell stats": ".loom-grid-cell .loom-stats",
    "failed cell": ".loom-grid-error",
    "input head": ".loom-grid-input-text",
    "variant head": ".loom-grid-variant",
    "totals": "td.loom-grid-total",
    "opened transcript": ".loom-grid-panel .loom-msg .loom-text",
}


def _dialogs(page: Any) -> list[str]:
    return [d for d in page.loom_dialogs if not d.startswith("beforeunload")]


def _check_hostile(grid: Any) -> None:
    """The hostile grid: the onerror reply is text, no image element, links only https with rel."""
    text = grid.inner_text()
    assert '<img src=x onerror="window.__pwned=2;alert(2)">' in text
    assert "[a bad link](javascript:window.__pwned=3)" in text
    assert grid.locator("img").count() == 0
    links = grid.evaluate(LINKS)
    assert links, "the https link is drawn"
    for link in links:
        assert link["href"].startswith("https://"), link
        # the view writes "noopener noreferrer nofollow"; JupyterLab's sanitizer sets "noopener"
        assert "noopener" in (link["rel"] or "").split(), link


def _check_compared(grid: Any) -> None:
    """The grid of ``COMPARE``: its heads, the priced column's totals, the hostile column inert."""
    heads = [h.inner_text() for h in grid.locator(".loom-grid-variant").all()]
    assert heads == ["sonnet", "hostile"]
    sonnet_total = grid.locator("td.loom-grid-total").nth(0).inner_text()
    assert sonnet_total.startswith("2 answered · 26 in · 10 out tokens · avg ")
    assert sonnet_total.endswith(format_cost(2 * price(13, 5)))
    assert grid.locator("td.loom-grid-total").nth(1).inner_text().endswith("cost unknown")
    text = grid.inner_text()
    assert '<img src=x onerror="window.__pwned=2;alert(2)">' in text
    assert "[a bad link](javascript:window.__pwned=3)" in text
    assert grid.locator("img").count() == 0
    assert grid.locator("a").count() == 0


def test_live_grid_opens_transcripts_and_runs_nothing(
    jupyter_server: JupyterServer, browser_page: Any
) -> None:
    """The widget: a column per variant, a row per input, totals; a click on a cell opens that
    item's whole transcript under the grid; hostile replies stay text; readable in both themes."""
    page = browser_page
    panel = run_notebook(page, jupyter_server, "compare-live.ipynb", [REPO_ON_PATH, GRIDS, COMPARE])
    grids = panel.locator(".loom-tv.loom-compare")
    grids.nth(1).wait_for(timeout=30_000)
    hostile, sample = grids.nth(0), grids.nth(1)
    heads = [h.inner_text() for h in sample.locator(".loom-grid-variant").all()]
    assert heads == ["short", "long"]
    assert sample.locator(".loom-grid-cell").count() == 4
    totals = [t.inner_text() for t in sample.locator("td.loom-grid-total").all()]
    assert totals == EXPECTED_TOTALS
    assert sample.locator(".loom-grid-error").inner_text() == "failed: ProviderError: overloaded"
    assert sample.locator(".loom-grid-panel").is_hidden()

    sample.locator(".loom-grid-cell").nth(0).click()  # input 1, variant "short"
    opened = sample.locator(".loom-grid-panel .loom-header")
    opened.filter(has_text="input 1 · short").wait_for(timeout=30_000)
    roles = [r.inner_text() for r in sample.locator(".loom-grid-panel .loom-msg .loom-role").all()]
    assert roles == ["system", "user · message 1", "assistant · message 2"]
    assert "Be brief." in sample.locator(".loom-grid-panel").inner_text()
    assert "loom-grid-active" in (
        sample.locator(".loom-grid-cell").nth(0).get_attribute("class") or ""
    )
    sample.locator(".loom-grid-cell").nth(3).locator(".loom-grid-open").click()  # input 2, "long"
    opened.filter(has_text="input 2 · long").wait_for(timeout=30_000)
    sample.locator(".loom-grid-close").click()
    sample.locator(".loom-grid-panel").wait_for(state="hidden", timeout=10_000)

    _check_hostile(hostile)
    hostile.locator(".loom-grid-cell").nth(0).click()
    hostile.locator(".loom-grid-panel .loom-header").filter(has_text="input 1 · a").wait_for(
        timeout=30_000
    )
    legend = hostile.locator(".loom-grid-panel fieldset.loom-fence > legend").first.inner_text()
    assert legend == "! untrusted · tool:fetch"
    assert hostile.locator(".loom-grid-panel img").count() == 0
    compared = panel.locator(".jp-Notebook .jp-Cell").nth(2).locator(".loom-tv.loom-compare")
    compared.wait_for(timeout=30_000)
    _check_compared(compared)
    compared.locator(".loom-grid-cell").nth(
        0
    ).click()  # "one" through sonnet, read from the journal
    compared.locator(".loom-grid-panel .loom-header").filter(
        has_text="input 1 · sonnet · transcript · 2 messages"
    ).wait_for(timeout=30_000)
    cards = compared.locator(".loom-grid-panel .loom-msg")
    assert [m.locator(".loom-role").inner_text() for m in cards.all()] == [
        "user · message 1",
        "assistant · message 2",
    ]
    assert cards.nth(1).locator(".loom-text").inner_text() == "S: one"
    assert "13 in · 5 out tokens" in cards.nth(1).locator(".loom-stats").inner_text()
    assert page.evaluate(NOTHING_RAN)
    assert _dialogs(page) == []
    page.screenshot(path=str(SCREENSHOTS / "compare-live.png"), full_page=True)

    sample.locator(".loom-grid-cell").nth(0).click()
    opened.filter(has_text="input 1 · short").wait_for(timeout=30_000)
    try:
        for theme in ("JupyterLab Dark", "JupyterLab Light"):
            _set_theme(page, theme)
            for label, selector in TARGETS.items():
                nodes = [n for n in sample.locator(selector).all() if n.is_visible()]
                assert nodes, f"{theme}: no {label} drawn ({selector})"
                for node in nodes:
                    result = node.evaluate(CONTRAST)
                    assert result["ratio"] >= 4.5, f"{theme}: {label} {result}"
            page.screenshot(path=str(SCREENSHOTS / f"compare-{_slug(theme)}.png"), full_page=True)
    finally:
        _set_theme(page, "JupyterLab Light")
    close_notebook(page)


def test_saved_notebook_shows_the_static_table(
    jupyter_server: JupyterServer,
    browser_page: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Executed by nbclient and opened untrusted: no widget, the static table through the real
    sanitizer, with its totals, a cell's transcript opening from its details, and nothing run."""
    for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
        (tmp_path / var.lower()).mkdir()
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell(s) for s in [REPO_ON_PATH, GRIDS, COMPARE]]
    NotebookClient(nb, kernel_name="python3", timeout=120, store_widget_state=False).execute()
    nbformat.write(nb, jupyter_server.root_dir / "compare-saved.ipynb")

    page = browser_page
    open_notebook(page, jupyter_server, "compare-saved.ipynb")
    panel = current_panel(page)
    tables = panel.locator(".loom-compare")
    tables.nth(1).wait_for(timeout=30_000)
    assert panel.locator(".loom-tv").count() == 0  # untrusted: the static HTML, no widget
    hostile, sample = tables.nth(0), tables.nth(1)
    assert sample.locator("td.loom-grid-cell").count() == 4
    totals = [t.inner_text() for t in sample.locator("td.loom-grid-total").all()]
    assert totals == EXPECTED_TOTALS
    transcript = sample.locator("details.loom-grid-transcript").nth(0)
    assert transcript.locator(".loom-transcript").is_hidden()
    transcript.locator("summary").click()
    transcript.locator(".loom-transcript").wait_for(timeout=10_000)
    assert "input 1 · short · transcript · 2 messages" in transcript.inner_text()
    assert "Be brief." in transcript.inner_text()

    _check_hostile(hostile)
    hostile.locator("details.loom-grid-transcript").nth(0).locator("summary").click()
    legend = hostile.locator("fieldset.loom-fence > legend").first
    legend.wait_for(timeout=10_000)
    assert legend.inner_text() == "! untrusted · tool:fetch"
    compared = tables.nth(2)
    _check_compared(compared)
    first = compared.locator("details.loom-grid-transcript").nth(0)
    first.locator("summary").click()
    first.locator(".loom-transcript").wait_for(timeout=10_000)
    assert "input 1 · sonnet · transcript · 2 messages" in first.inner_text()
    assert "S: one" in first.inner_text()
    assert page.evaluate(NOTHING_RAN)
    assert _dialogs(page) == []
    page.screenshot(path=str(SCREENSHOTS / "compare-saved-untrusted.png"), full_page=True)
    close_notebook(page)
