"""Media over the embed limit streams from the kernel in a real JupyterLab: audio plays, a PDF opens.

The kernel sends the bytes in numbered binary chunks over the widget's comm; the page assembles
them into a Blob of the part's media type. Each test compares what the browser holds (the blob
behind the element's ``blob:`` URL) with the bytes the kernel had, by length and SHA-256.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from tests.browser.conftest import SCREENSHOTS
from tests.browser.harness import REPO_ON_PATH, JupyterServer, close_notebook, run_notebook
from tests.render import media

SECONDS = 330.0  # 8 kHz 16-bit mono: 16000 bytes a second, so about 5.0 MiB, over the 4 MiB limit

CELL = f"""
import base64, hashlib, tempfile
from loom_nb import TranscriptView, Message, TextPart, AudioPart, FilePart, DataSource, RefSource
from loom_nb.store import LocalContentStore, Principal
from tests.render import media
b64 = lambda raw: DataSource(data=base64.b64encode(raw).decode())
long_talk = media.wav(seconds={SECONDS}, rate=8000)
report = media.pdf(3)
print("report", len(report), hashlib.sha256(report).hexdigest())
view = TranscriptView([
    Message(role="user", content=[TextPart(text="a long recording and a report"),
        AudioPart(media_type="audio/wav", source=b64(long_talk)),
        FilePart(media_type="application/pdf", source=b64(report), name="report.pdf")]),
])
display(view)
store = LocalContentStore(tempfile.mkdtemp())
ref = store.put(long_talk, "acme")
gone = TranscriptView([Message(role="user", content=[AudioPart(media_type="audio/wav", source=RefSource(ref=ref))])],
                      store=store, principal=Principal("acme"))
display(gone)
_ = store.delete(ref.address, "acme")  # drawn while it was there; asked for after it went
"""

BLOB_FACTS = """async (url) => {
    const blob = await (await fetch(url)).blob();
    const digest = await crypto.subtle.digest("SHA-256", await blob.arrayBuffer());
    const hex = [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
    return { size: blob.size, type: blob.type, sha256: hex };
}"""


@pytest.mark.browser
@pytest.mark.slow
def test_long_audio_and_a_pdf_stream_into_blob_urls(
    jupyter_server: JupyterServer, browser_page: Any
) -> None:
    """Load-and-play fills an audio element from a blob: URL of the exact bytes; a PDF opens the same way."""
    page = browser_page
    panel = run_notebook(page, jupyter_server, "stream.ipynb", [REPO_ON_PATH, CELL])
    views = panel.locator(".loom-tv")
    views.nth(1).wait_for(timeout=30_000)
    view, gone = views.nth(0), views.nth(1)
    wav = media.wav(seconds=SECONDS, rate=8000)
    assert len(wav) > 4 * 1024 * 1024

    audio = view.locator(".loom-audio")
    assert "too large to embed" in audio.locator(".loom-stream-note").inner_text()
    assert audio.locator("audio").count() == 0  # nothing embedded until asked
    page.screenshot(path=str(SCREENSHOTS / "stream-audio-placeholder.png"), full_page=True)
    audio.locator("button.loom-stream-load").click()
    player = audio.locator("audio")
    player.wait_for(timeout=60_000)
    src = player.get_attribute("src") or ""
    assert src.startswith("blob:")
    page.wait_for_function(
        "(a) => a.readyState >= 1 && isFinite(a.duration)",
        arg=player.element_handle(),
        timeout=30_000,
    )
    duration = player.evaluate("(a) => a.duration")
    assert abs(duration - SECONDS) < 0.5
    facts = page.evaluate(BLOB_FACTS, src)
    assert facts == {
        "size": len(wav),
        "type": "audio/wav",
        "sha256": hashlib.sha256(wav).hexdigest(),
    }
    assert audio.locator(".loom-stream").get_attribute("data-loom-sha256") == facts["sha256"]
    assert "loaded 5.0 MB" in audio.locator(".loom-stream-status").inner_text()

    pdf = view.locator(".loom-pdf")
    pdf.locator("button.loom-stream-load").click()
    frame = pdf.locator("iframe.loom-pdf-frame")
    frame.wait_for(timeout=30_000)
    pdf_src = frame.get_attribute("src") or ""
    assert pdf_src.startswith("blob:")
    facts = page.evaluate(BLOB_FACTS, pdf_src)
    printed = panel.locator(".jp-OutputArea-output pre").filter(has_text="report ").inner_text()
    _, size, digest = printed.split()
    assert facts == {"size": int(size), "type": "application/pdf", "sha256": digest}
    assert pdf.locator(".loom-stream").get_attribute("data-loom-sha256") == digest
    frame.scroll_into_view_if_needed()
    page.wait_for_timeout(1500)  # let the browser's PDF viewer paint for the screenshot
    page.screenshot(path=str(SCREENSHOTS / "stream-audio-pdf-loaded.png"), full_page=True)

    # the blob deleted after the view was drawn: a clear refusal and a retry, not a dead end
    gone.locator("button.loom-stream-load").click()
    status = gone.locator(".loom-stream-status.loom-error")
    status.wait_for(timeout=30_000)
    assert status.inner_text().startswith(
        "could not load: unavailable: not available to this viewer"
    )
    assert gone.locator("button.loom-stream-load").inner_text().startswith("retry")
    assert gone.locator("audio").count() == 0
    page.screenshot(path=str(SCREENSHOTS / "stream-refused.png"), full_page=True)
    close_notebook(page)
