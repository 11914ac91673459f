"""A parked Chat in a real JupyterLab: Approve / Decline resume the run and the same view shows the outcome."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import SCREENSHOTS
from tests.browser.harness import REPO_ON_PATH, JupyterServer, close_notebook, run_notebook

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHAT = """
from loom_nb import Chat, Journal, ScriptedProvider, tool

@tool(requires_approval=True)
def send_email(to: str, body: str) -> str:
    \"\"\"Send an email.

    Args:
        to: The address.
        body: The text.
    \"\"\"
    return f"sent to {to}"

chat = Chat(ScriptedProvider([
    {"tool_calls": [{"id": "call_1", "name": "send_email",
                     "input": {"to": "ana@example.com", "body": "May: 48,200 EUR"}}],
     "usage": {"input_tokens": 120, "output_tokens": 14}},
    {"text": "FINAL_REPLY", "usage": {"input_tokens": 150, "output_tokens": 9}},
]), tools=[send_email], journal=Journal(), id="NAME")
result = await chat.run("Email Ana the May revenue.")
assert result.status == "parked"
chat
"""


def _parked_view(page: Any, server: JupyterServer, name: str, final: str) -> Any:
    """Run a notebook whose chat parks on send_email; the chat's view, marked to tell it apart."""
    cell = CHAT.replace("NAME", name).replace("FINAL_REPLY", final)
    panel = run_notebook(page, server, f"{name}.ipynb", [REPO_ON_PATH, cell])
    tv = panel.locator(".loom-tv")
    tv.wait_for(timeout=30_000)
    assert tv.count() == 1
    state = tv.locator(".loom-tool-use .loom-approval-state")
    assert state.inner_text() == "awaiting approval"
    assert "awaiting approval: call_1" in tv.locator(".loom-header").inner_text()
    assert tv.locator(".loom-tool-result").count() == 0
    tv.element_handle().evaluate("(el) => { el.dataset.loomMark = 'displayed-once'; }")
    return tv


SAVED_HTML = """() => {
  const cell = window.jupyterapp.shell.currentWidget.content.widgets[1];
  return [cell.model.outputs.length, cell.model.outputs.get(0).data['text/html']];
}"""


def _one_output_saving(page: Any, tv: Any, final: str) -> None:
    """The cell still has its one output, whose data (what JupyterLab saves) is the transcript
    with the final reply (republished as the run settled), and the same element shows it: the
    view drawn for the update took the transcript over (no second output was displayed)."""
    assert tv.count() == 1
    count, html = page.evaluate(SAVED_HTML)
    assert count == 1
    assert final in html
    assert tv.element_handle().evaluate("(el) => el.dataset.loomMark") == "displayed-once"


def test_approve_resumes_the_chat_and_the_same_view_shows_the_result(
    jupyter_server: JupyterServer, browser_page: Any
) -> None:
    """Approve runs the tool: the displayed view itself then shows the tool result and the final reply."""
    page = browser_page
    tv = _parked_view(page, jupyter_server, "chat-approve", "Done: Ana has the May figure.")
    page.screenshot(path=str(SCREENSHOTS / "chat-approval-awaiting.png"), full_page=True)
    tv.locator(".loom-approve").click()
    tv.locator(".loom-msg", has_text="Done: Ana has the May figure.").wait_for(timeout=30_000)
    result = tv.locator(".loom-tool-result")
    assert result.count() == 1
    assert "sent to ana@example.com" in result.inner_text()
    assert "error" not in result.inner_text()
    assert (
        tv.locator(".loom-tool-use .loom-approval-state").inner_text()
        == "✓ approved by the notebook view"
    )
    assert tv.locator(".loom-approve, .loom-decline").count() == 0
    header = tv.locator(".loom-header").inner_text()
    assert "awaiting" not in header
    assert "· 1 turn ·" in header
    assert "270 in · 23 out" in header  # both model calls of the run
    _one_output_saving(page, tv, "Done: Ana has the May figure.")
    page.screenshot(path=str(SCREENSHOTS / "chat-approval-approved.png"), full_page=True)
    close_notebook(page)


def test_decline_resumes_the_chat_and_the_same_view_shows_the_declined_result(
    jupyter_server: JupyterServer, browser_page: Any
) -> None:
    """Decline answers the call with a declined result, shown in the same view with the model's reply."""
    page = browser_page
    tv = _parked_view(page, jupyter_server, "chat-decline", "Understood, nothing was sent.")
    tv.locator(".loom-decline").click()
    tv.locator(".loom-msg", has_text="Understood, nothing was sent.").wait_for(timeout=30_000)
    result = tv.locator(".loom-tool-result")
    assert result.count() == 1
    assert "loom-is-error" in (result.get_attribute("class") or "")
    assert "declined" in result.inner_text()
    assert "sent to" not in result.inner_text()  # the tool did not run
    assert (
        tv.locator(".loom-tool-use .loom-approval-state").inner_text()
        == "✗ declined by the notebook view; the call was not run"
    )
    assert "awaiting" not in tv.locator(".loom-header").inner_text()
    _one_output_saving(page, tv, "Understood, nothing was sent.")
    page.screenshot(path=str(SCREENSHOTS / "chat-approval-declined.png"), full_page=True)
    close_notebook(page)
