"""Approve / Decline in a real JupyterLab: the buttons call the kernel's on_decision, the cards say who decided."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import SCREENSHOTS
from tests.browser.harness import REPO_ON_PATH, JupyterServer, close_notebook, run_notebook

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CELL = """
from loom_nb import TranscriptView, Message, ToolUsePart, LlmResponse
from loom_nb.content import Usage

def on_decision(call_id, approved):
    view.append(Message(role="user", content=f"kernel saw {call_id}: {'approve' if approved else 'decline'}"))

view = TranscriptView([
    Message(role="user", content="clean up"),
    Message(role="assistant", content=[
        ToolUsePart(id="call_1", name="delete", input={"table": "old"}),
        ToolUsePart(id="call_2", name="drop", input={"table": "older"}),
    ]),
], on_decision=on_decision)
view.append(LlmResponse(content="Two calls need you.", usage=Usage(input_tokens=1200, output_tokens=40)), latency_s=1.26)
view.await_approval("call_1", "call_2")
view
"""


def test_approve_and_decline_buttons_reach_the_kernel(
    jupyter_server: JupyterServer, browser_page: Any
) -> None:
    """Each parked call shows 'awaiting approval' with buttons; clicks run on_decision and the cards update."""
    page = browser_page
    panel = run_notebook(page, jupyter_server, "approvals.ipynb", [REPO_ON_PATH, CELL])
    tv = panel.locator(".loom-tv")
    tv.wait_for(timeout=30_000)
    calls = tv.locator(".loom-tool-use")
    assert calls.count() == 2
    for n in range(2):
        assert calls.nth(n).locator(".loom-approval-state").inner_text() == "awaiting approval"
    assert tv.locator(".loom-stats").inner_text() == "1,200 in · 40 out tokens · 1.3 s"
    page.screenshot(path=str(SCREENSHOTS / "approvals-awaiting.png"), full_page=True)
    calls.nth(0).locator(".loom-approve").click()
    tv.locator(".loom-msg", has_text="kernel saw call_1: approve").wait_for(timeout=15_000)
    tv.locator(
        ".loom-tool-use .loom-approval-state", has_text="✓ approved by you, in this view"
    ).wait_for(timeout=15_000)
    calls.nth(1).locator(".loom-decline").click()
    tv.locator(".loom-msg", has_text="kernel saw call_2: decline").wait_for(timeout=15_000)
    states = tv.locator(".loom-approval-state").all_inner_texts()
    assert states == [
        "✓ approved by you, in this view",
        "✗ declined by you, in this view; the call was not run",
    ]
    assert tv.locator(".loom-approve, .loom-decline").count() == 0  # decided: no buttons left
    page.screenshot(path=str(SCREENSHOTS / "approvals-decided.png"), full_page=True)
    close_notebook(page)
