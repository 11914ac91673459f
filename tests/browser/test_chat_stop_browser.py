"""A displayed Chat in a real JupyterLab: the live card's Stop button stops a streaming reply."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import SCREENSHOTS
from tests.browser.harness import (
    REPO_ON_PATH,
    JupyterServer,
    close_notebook,
    current_panel,
    open_notebook,
    write_notebook,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SETUP = """
import asyncio
from loom_nb import Chat, Journal, LlmResponse, LlmStreamChunk, ScriptedProvider

class Hanging:
    \"\"\"Streams a partial answer, then waits until it is cancelled.\"\"\"
    capabilities = ScriptedProvider([]).capabilities
    name = "hanging"

    async def complete(self, request):
        raise AssertionError("not used")

    async def stream(self, request):
        yield LlmStreamChunk(kind="text", text="PARTIAL_")
        yield LlmStreamChunk(kind="text", text="ANSWER")
        await asyncio.Event().wait()
        yield LlmStreamChunk(kind="done", response=LlmResponse(content="never"))

chat = Chat(Hanging(), journal=Journal(), id="stop-in-view", stream=True)
chat
"""

TURN = """
reply = await chat("Tell me everything.")
print("STATUS", chat.turns[-1].status, repr(reply.content))
print("SPLICES", [view._splices for view in chat._views])
"""


def test_stop_in_the_chat_view_keeps_the_partial_text_marked_stopped(
    jupyter_server: JupyterServer, browser_page: Any
) -> None:
    """While the cell awaits the reply, Stop in the displayed view ends it: the partial text stays, marked stopped."""
    page = browser_page
    write_notebook(jupyter_server, "chat-stop.ipynb", [REPO_ON_PATH, SETUP, TURN])
    open_notebook(page, jupyter_server, "chat-stop.ipynb")
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    panel = current_panel(page)
    tv = panel.locator(".loom-tv")
    live = tv.locator(".loom-live")
    live.locator(".loom-live-text", has_text="PARTIAL_ANSWER").wait_for(timeout=60_000)
    stop = live.locator(".loom-stop")
    assert stop.is_visible()
    assert "replying" in tv.locator(".loom-header").inner_text()
    page.screenshot(path=str(SCREENSHOTS / "chat-stop-streaming.png"), full_page=True)
    stop.click()
    panel.locator(".jp-OutputArea-output", has_text="STATUS stopped").wait_for(timeout=30_000)
    assert "STATUS stopped 'PARTIAL_ANSWER'" in panel.inner_text()
    # The page's model said it applies splices, so the turns above reached it incrementally.
    assert "SPLICES [True]" in panel.inner_text()
    tv.locator(".loom-msg", has_text="PARTIAL_ANSWER").wait_for(timeout=30_000)
    assert live.is_hidden()
    card = tv.locator(".loom-msg", has_text="PARTIAL_ANSWER")
    assert "stopped" in card.locator(".loom-stats").inner_text()
    header = tv.locator(".loom-header").inner_text()
    assert "stopped: turn 0" in header
    assert "replying" not in header
    page.screenshot(path=str(SCREENSHOTS / "chat-stop-stopped.png"), full_page=True)
    close_notebook(page)
