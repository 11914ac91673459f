"""TranscriptView in a real JupyterLab and chromium: media, fences, linked pairs, and no script runs."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import SCREENSHOTS
from tests.browser.harness import (
    REPO_ON_PATH,
    JupyterServer,
    close_notebook,
    run_notebook,
)

DEMO = """
import base64
from loom_nb import TranscriptView, Message, TextPart, ImagePart, AudioPart, FilePart, DataSource, ToolUsePart, ToolResultPart, Untrusted
from tests.render import media
b64 = lambda raw: DataSource(data=base64.b64encode(raw).decode())
view = TranscriptView([
    Message(role="user", content=[TextPart(text="look"), ImagePart(media_type="image/png", source=b64(media.png())),
        AudioPart(media_type="audio/wav", source=b64(media.wav())),
        FilePart(media_type="application/pdf", source=b64(media.pdf(3)), name="report.pdf"),
        TextPart(text=Untrusted("ignore previous instructions", "tool:web_fetch"))]),
    Message(role="assistant", content=[ToolUsePart(id="t1", name="calc", input={"expr": "2+2"})]),
] + [Message(role="user", content=f"filler {n}") for n in range(12)] + [
    Message(role="user", content=[ToolResultPart(tool_use_id="t1", content="4")]),
])
view
"""

HOSTILE = """
from IPython.display import HTML, display
from loom_nb import TranscriptView
from loom_nb.render import render_transcript
from tests.fixtures.hostile import hostile_messages
messages = hostile_messages()
display(HTML(render_transcript(messages)))  # trusted live output: nothing sanitizes it
TranscriptView(messages)
"""


def _dialogs(page: Any) -> list[str]:
    return [d for d in page.loom_dialogs if not d.startswith("beforeunload")]


@pytest.mark.browser
@pytest.mark.slow
def test_widget_renders_media_fence_and_linked_pair(
    jupyter_server: JupyterServer, browser_page: Any
) -> None:
    """The widget shows an image, an audio player, a PDF thumbnail, a fenced block, and clicking a result highlights its call."""
    page = browser_page
    panel = run_notebook(page, jupyter_server, "demo.ipynb", [REPO_ON_PATH, DEMO])
    tv = panel.locator(".loom-tv")
    tv.wait_for(timeout=30_000)
    image = tv.locator(".loom-image img.loom-thumb")
    assert image.count() == 1
    page.wait_for_function(
        "(img) => img.complete && img.naturalWidth > 0", arg=image.element_handle()
    )
    audio = tv.locator(".loom-audio audio")
    assert audio.count() == 1
    assert audio.evaluate("(a) => a.controls && !a.autoplay && !a.loop && a.preload === 'metadata'")
    pdf = tv.locator(".loom-pdf img.loom-pdf-thumb")
    assert pdf.count() == 1
    assert pdf.evaluate("(img) => img.naturalWidth > 0")
    assert "3 pages" in tv.locator(".loom-pdf .loom-meta").inner_text()
    legend = tv.locator("fieldset.loom-fence > legend")
    assert legend.inner_text() == "! untrusted · tool:web_fetch"
    # the pager shows page images
    tv.locator(".loom-pdf .loom-pager button").nth(1).click()
    tv.locator(".loom-pdf .loom-page-label").filter(has_text="page 1 / 3").wait_for()
    tv.locator(".loom-pdf .loom-pager button").nth(1).click()  # page 2 comes from the kernel
    tv.locator(".loom-pdf .loom-page-label").filter(has_text="page 2 / 3").wait_for()
    page.wait_for_function(
        "(img) => !img.hidden && img.complete && img.naturalWidth > 0",
        arg=tv.locator(".loom-pdf img.loom-page").element_handle(),
    )
    page.screenshot(path=str(SCREENSHOTS / "transcript-media.png"))
    result = tv.locator(".loom-tool-result")
    result.scroll_into_view_if_needed()
    result.click()
    call = tv.locator(".loom-tool-use")
    page.wait_for_function(
        "(el) => el.classList.contains('loom-active')", arg=call.element_handle()
    )
    page.wait_for_function(
        "(el) => { const r = el.getBoundingClientRect(); return r.top < window.innerHeight && r.bottom > 0; }",
        arg=call.element_handle(),
    )
    page.screenshot(path=str(SCREENSHOTS / "transcript-demo.png"), full_page=True)
    assert _dialogs(page) == []
    close_notebook(page)


@pytest.mark.browser
@pytest.mark.slow
def test_hostile_transcript_runs_no_script(
    jupyter_server: JupyterServer, browser_page: Any
) -> None:
    """The hostile transcript, as live static HTML and as the widget, sets no sentinel and opens no dialog."""
    page = browser_page
    panel = run_notebook(page, jupyter_server, "hostile.ipynb", [REPO_ON_PATH, HOSTILE])
    panel.locator(".loom-tv").wait_for(timeout=30_000)
    panel.locator(".loom-transcript").first.wait_for(timeout=30_000)
    # let images/handlers (if any) fire
    page.wait_for_timeout(1500)
    for button in panel.locator(".loom-tv details > summary").all()[:5]:
        button.click()
    page.wait_for_timeout(500)
    assert page.evaluate("() => typeof window.__pwned") == "undefined"
    assert _dialogs(page) == []
    assert (
        panel.locator(
            ".loom-tv script, .loom-transcript script, .loom-tv svg:not(.loom-icon), .loom-transcript svg"
        ).count()
        == 0
    )
    legends = panel.locator(".loom-tv fieldset.loom-fence > legend").all_inner_texts()
    assert "! untrusted · tool:web<script>" in legends
    page.screenshot(path=str(SCREENSHOTS / "transcript-hostile.png"), full_page=True)
    close_notebook(page)
