"""Light and dark JupyterLab themes, and rendered markdown, in a real JupyterLab and chromium.

The contrast of text, tool JSON and fence legends is computed from the colours chromium rendered
(WCAG 2 relative luminance, backgrounds composited up the ancestor chain), for the live widget,
the live (trusted) static HTML, and a saved (untrusted, sanitized) static HTML output, in
"JupyterLab Light" and "JupyterLab Dark". Screenshots of both themes go to test-output/screenshots.
"""

from __future__ import annotations

from typing import Any

import nbformat
import pytest

from loom_nb.content import Message, ReasoningPart, TextPart, ToolResultPart, ToolUsePart
from loom_nb.render import render_transcript
from loom_nb.taint import Untrusted
from tests.browser.conftest import SCREENSHOTS
from tests.browser.harness import (
    REPO_ON_PATH,
    JupyterServer,
    close_notebook,
    current_panel,
    open_notebook,
    run_notebook,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REPLY = (
    "Here is the **plan**:\n\n1. read the file\n2. chart it\n\n"
    "```python\ndef total(xs):\n    return sum(xs)  # add up\n```\n\n"
    "See [the docs](https://example.org/docs) and `inline code`."
)


def _messages() -> list[Message]:
    return [
        Message(role="user", content="chart the sales"),
        Message(
            role="assistant",
            content=[
                ReasoningPart(text="The user wants a chart; **sum** first.", signature="sig"),
                TextPart(text=REPLY),
                ToolUsePart(id="call_1", name="chart", input={"column": "sales", "kind": "bar"}),
            ],
        ),
        Message(
            role="user",
            content=[
                ToolResultPart(
                    tool_use_id="call_1",
                    content=[TextPart(text=Untrusted("rows: 12, **not bold**", "tool:chart"))],
                )
            ],
        ),
        Message(role="assistant", content="Done: the chart shows **12** rows."),
    ]


CELL = """
from IPython.display import HTML, display
from loom_nb import TranscriptView
from loom_nb.render import render_transcript
from tests.browser.test_theme_markdown_browser import _messages
from tests.fixtures.hostile import hostile_markdown_messages
display(HTML(render_transcript(_messages())))
view = TranscriptView(_messages())
view
"""

HOSTILE_CELL = """
from IPython.display import HTML, display
from loom_nb import TranscriptView
from loom_nb.render import render_transcript
from tests.fixtures.hostile import hostile_markdown_messages
display(HTML(render_transcript(hostile_markdown_messages())))
TranscriptView(hostile_markdown_messages())
"""

CONTRAST = """
(el) => {
  const parse = (c) => {
    const m = String(c).match(/rgba?\\(([^)]+)\\)/);
    if (!m) return null;
    const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const over = (top, bottom) => [0, 1, 2].map((i) => top[i] * top[3] + bottom[i] * (1 - top[3])).concat([1]);
  const chain = [];
  for (let n = el; n; n = n.parentElement) chain.unshift(n);
  let bg = [255, 255, 255, 1];
  for (const n of chain) {
    const c = parse(getComputedStyle(n).backgroundColor);
    if (c && c[3] > 0) bg = over(c, bg);
  }
  const fg = over(parse(getComputedStyle(el).color), bg);
  const lum = (c) => {
    const [r, g, b] = c.slice(0, 3).map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const a = lum(fg), b = lum(bg);
  return { ratio: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05), fg: fg.join(","), bg: bg.join(",") };
}
"""

TARGETS = {
    "text": ".loom-text",
    "tool JSON": ".loom-tool-use pre",
    "fence legend": "fieldset.loom-fence > legend",
    "code block": ".loom-md pre",
    "role": ".loom-role",
}


def _set_theme(page: Any, theme: str) -> None:
    light = "true" if "Light" in theme else "false"
    page.evaluate(
        "(t) => { window.jupyterapp.commands.execute('apputils:change-theme', {theme: t}); }", theme
    )
    # Wait for the theme's own variables, not only the flag: the stylesheet loads after it flips.
    page.wait_for_function(
        """(light) => {
            if (document.body.dataset.jpThemeLight !== light) return false;
            const bg = getComputedStyle(document.body).getPropertyValue('--jp-layout-color1').trim();
            const probe = document.createElement('div');
            probe.style.color = bg;
            document.body.appendChild(probe);
            const rgb = getComputedStyle(probe).color.match(/\\d+/g).map(Number);
            probe.remove();
            const dark = rgb[0] + rgb[1] + rgb[2] < 384;
            return light === 'true' ? !dark : dark;
        }""",
        arg=light,
        timeout=30_000,
    )
    page.wait_for_timeout(500)


def _fresh_page(page: Any, server: JupyterServer, name: str) -> Any:
    # A new tab for the saved notebook: navigating the old one away can be cancelled by its
    # beforeunload prompt (the run notebook is unsaved), which chromium reports as ERR_ABORTED.
    fresh = page.context.new_page()
    fresh.on("dialog", lambda dialog: dialog.accept())
    open_notebook(fresh, server, name)
    return fresh


def _contrasts(root: Any) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for label, selector in TARGETS.items():
        nodes = root.locator(selector).all()
        found[label] = [node.evaluate(CONTRAST) for node in nodes]
    return found


def _assert_readable(where: str, theme: str, found: dict[str, list[dict[str, Any]]]) -> None:
    for label in ("text", "tool JSON", "fence legend"):
        assert found[label], f"{where}: no {label} rendered"
    for label, results in found.items():
        for result in results:
            assert result["ratio"] >= 4.5, f"{where} in {theme}: {label} {result}"


def test_contrast_in_light_and_dark_themes(
    jupyter_server: JupyterServer, browser_page: Any
) -> None:
    """Text, tool JSON and fence legends keep >= 4.5:1 in both themes: widget, live and saved HTML."""
    page = browser_page
    saved = nbformat.v4.new_notebook()
    saved.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    cell = nbformat.v4.new_code_cell("view", execution_count=1)
    cell.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={"text/html": render_transcript(_messages()), "text/plain": "TranscriptView(...)"},
        )
    ]
    saved.cells = [cell]
    nbformat.write(saved, jupyter_server.root_dir / "saved-theme.ipynb")
    themes = ("JupyterLab Light", "JupyterLab Dark")
    try:
        # The notebook runs once (in the light theme) and each theme is then switched to, as a
        # user does with outputs on screen: what is drawn must follow the theme without a re-run.
        panel = run_notebook(page, jupyter_server, "theme.ipynb", [REPO_ON_PATH, CELL])
        widget = panel.locator(".loom-tv")
        widget.wait_for(timeout=30_000)
        live = panel.locator(".loom-transcript").first
        live.wait_for(timeout=30_000)
        for theme in themes:
            _set_theme(page, theme)
            _assert_readable("widget", theme, _contrasts(widget))
            _assert_readable("live static HTML", theme, _contrasts(live))
            widget.scroll_into_view_if_needed()
            page.screenshot(
                path=str(SCREENSHOTS / f"theme-{_slug(theme)}-live.png"), full_page=True
            )
        close_notebook(page)

        saved_page = _fresh_page(page, jupyter_server, "saved-theme.ipynb")
        panel = current_panel(saved_page)
        untrusted = panel.locator(".loom-transcript").first
        untrusted.wait_for(timeout=30_000)
        # The sanitizer ran: the saved output lost its var() colours but kept its structure.
        assert panel.locator(".jp-OutputArea-output .loom-md strong").count() >= 1
        for theme in themes:
            _set_theme(saved_page, theme)
            _assert_readable("saved (untrusted) HTML", theme, _contrasts(untrusted))
            saved_page.screenshot(
                path=str(SCREENSHOTS / f"theme-{_slug(theme)}-saved.png"), full_page=True
            )
        close_notebook(saved_page)
        saved_page.close()
    finally:
        _set_theme(page, "JupyterLab Light")


def _slug(theme: str) -> str:
    return "dark" if "Dark" in theme else "light"


def test_markdown_in_widget_and_copy_button(
    jupyter_server: JupyterServer, browser_page: Any
) -> None:
    """The widget draws the reply's markdown (list, highlighted code, link) and copies code."""
    page = browser_page
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    panel = run_notebook(page, jupyter_server, "markdown.ipynb", [REPO_ON_PATH, CELL])
    tv = panel.locator(".loom-tv")
    tv.wait_for(timeout=30_000)
    md = tv.locator(".loom-md").first
    assert md.locator("strong").first.inner_text() == "plan"
    assert md.locator("ol > li").count() == 2
    assert tv.locator(".loom-md pre .loom-hl-k").first.inner_text() == "def"
    link = md.locator("a.loom-md-link")
    assert link.get_attribute("href") == "https://example.org/docs"
    assert link.get_attribute("rel") == "noopener noreferrer nofollow"
    fenced = tv.locator("fieldset.loom-fence .loom-text").inner_text()
    assert fenced == "rows: 12, **not bold**"  # untrusted stays literal
    reasoning = tv.locator("details.loom-reasoning")
    assert reasoning.count() == 1
    assert reasoning.evaluate("(d) => d.open") is False  # collapsed until asked
    assert reasoning.locator("summary").inner_text() == "reasoning · 38 characters (expand)"
    reasoning.locator("summary").click()
    assert reasoning.locator(".loom-text").inner_text() == "The user wants a chart; **sum** first."
    assert "sig" not in reasoning.inner_text()
    tv.locator(".loom-copy").first.click()
    tv.locator(".loom-copy", has_text="copied").wait_for(timeout=5_000)
    copied = page.evaluate("() => navigator.clipboard.readText()")
    assert copied == "def total(xs):\n    return sum(xs)  # add up\n"
    page.screenshot(path=str(SCREENSHOTS / "markdown-widget.png"), full_page=True)
    close_notebook(page)


def test_hostile_markdown_runs_nothing_and_loads_nothing(
    jupyter_server: JupyterServer, browser_page: Any
) -> None:
    """Hostile markdown, as live static HTML and as the widget: no script, no image, safe links only."""
    page = browser_page
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    panel = run_notebook(page, jupyter_server, "hostile-md.ipynb", [REPO_ON_PATH, HOSTILE_CELL])
    panel.locator(".loom-tv").wait_for(timeout=30_000)
    panel.locator(".loom-transcript").first.wait_for(timeout=30_000)
    page.wait_for_timeout(1500)
    for node in panel.locator(".loom-md a, .loom-md code").all()[:8]:
        node.hover()
    assert page.evaluate("() => typeof window.__pwned") == "undefined"
    assert [d for d in page.loom_dialogs if not d.startswith("beforeunload")] == []
    roots = ".loom-tv .loom-md, .loom-transcript .loom-md"
    assert panel.locator(f":is({roots}) :is(img, script, svg, iframe, object, embed)").count() == 0
    hrefs = panel.locator(f":is({roots}) a").evaluate_all(
        "(as) => as.map((a) => a.getAttribute('href'))"
    )
    assert hrefs
    assert all(h.startswith("https://") for h in hrefs), hrefs
    assert not [url for url in requests if "evil.example" in url]
    page.screenshot(path=str(SCREENSHOTS / "markdown-hostile.png"), full_page=True)
    close_notebook(page)
