"""ReplayStepper and PromptPad in a real JupyterLab and chromium: stepping turns, streaming a scripted answer."""

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

STEPPER = """
from loom_nb import ReplayStepper
from loom_nb.journal import Journal
from tests.widgets.recording import RECORDING
journal = Journal()
stepper = ReplayStepper(journal, journal.import_jsonl(RECORDING))
stepper
"""

PAD = """
from loom_nb import PromptPad
from loom_nb.providers import ScriptedProvider
answer = "Streaming works: " + " ".join(f"word{n}" for n in range(60)) + " done."
pad = PromptPad(ScriptedProvider([{"text": answer}], chunk_size=7))
pad
"""


@pytest.mark.browser
@pytest.mark.slow
def test_stepper_moves_between_turns(jupyter_server: JupyterServer, browser_page: Any) -> None:
    """Clicking next shows the next turn: its label, step id and the longer transcript the model saw."""
    page = browser_page
    panel = run_notebook(page, jupyter_server, "stepper.ipynb", [REPO_ON_PATH, STEPPER])
    stepper = panel.locator(".loom-stepper")
    stepper.wait_for(timeout=30_000)
    label = stepper.locator(".loom-turn-label")
    assert label.inner_text() == "turn 1 of 3"
    seen = stepper.locator(".loom-step-seen .loom-msg")
    assert seen.count() == 2  # system + the user's question
    assert stepper.locator(".loom-prev").is_disabled()
    page.screenshot(path=str(SCREENSHOTS / "stepper-turn-1.png"), full_page=True)
    stepper.locator(".loom-next").click()
    stepper.locator(".loom-turn-label", has_text="turn 2 of 3").wait_for(timeout=15_000)
    assert "#turn:1:model" in stepper.locator(".loom-step-facts").inner_text()
    assert "+2 messages" in stepper.locator(".loom-changes").inner_text()
    page.wait_for_function(
        "(el) => el.querySelectorAll('.loom-step-seen .loom-msg').length === 4",
        arg=stepper.element_handle(),
    )
    tool = stepper.locator(".loom-step-tool")
    assert tool.count() == 1
    assert "send_note" in tool.inner_text()
    assert stepper.locator(".loom-step-seen fieldset.loom-fence > legend").count() == 1
    page.screenshot(path=str(SCREENSHOTS / "stepper-turn-2.png"), full_page=True)
    stepper.locator(".loom-next").click()
    stepper.locator(".loom-turn-label", has_text="turn 3 of 3").wait_for(timeout=15_000)
    assert stepper.locator(".loom-next").is_disabled()
    assert "It is sunny in Lyon" in stepper.locator(".loom-step-response").inner_text()
    stepper.locator(".loom-prev").click()
    stepper.locator(".loom-turn-label", has_text="turn 2 of 3").wait_for(timeout=15_000)
    assert " · latency: " in stepper.locator(".loom-step-facts").inner_text()
    # "fork here": the kernel forks the run at turn 2 and says how to go on
    stepper.locator("button.loom-fork").click()
    stepper.locator(".loom-forked", has_text="forked at turn 2 as").wait_for(timeout=15_000)
    assert "journal.execution(" in stepper.locator(".loom-forked").inner_text()
    page.screenshot(path=str(SCREENSHOTS / "stepper-forked.png"), full_page=True)
    close_notebook(page)


@pytest.mark.browser
@pytest.mark.slow
def test_prompt_pad_streams_a_scripted_answer(
    jupyter_server: JupyterServer, browser_page: Any
) -> None:
    """Typing and clicking send streams the answer into the live area in several steps, then the transcript."""
    page = browser_page
    panel = run_notebook(page, jupyter_server, "pad.ipynb", [REPO_ON_PATH, PAD])
    pad = panel.locator(".loom-pp")
    pad.wait_for(timeout=30_000)
    pad.locator(".loom-pp-conversation .loom-tv").wait_for(timeout=30_000)  # the child view
    pad.element_handle().evaluate(
        """(el) => {
            window.__loomLive = [];
            const live = el.querySelector('.loom-pp-live-text');
            new MutationObserver(() => window.__loomLive.push(live.textContent))
                .observe(live, {childList: true, characterData: true, subtree: true});
        }"""
    )
    pad.locator("textarea.loom-pp-input").fill("Does streaming work?")
    pad.locator("button.loom-pp-send").click()
    answer = pad.locator(".loom-pp-conversation .loom-msg.loom-assistant")
    answer.wait_for(timeout=30_000)
    assert answer.inner_text().strip().endswith("done.")
    assert "Does streaming work?" in pad.locator(".loom-pp-conversation .loom-user").inner_text()
    steps = [s for s in page.evaluate("() => window.__loomLive") if s]
    assert len(set(steps)) > 3, steps  # the text grew in place, several updates
    assert all(steps[n + 1].startswith(steps[n]) for n in range(len(steps) - 1))
    assert pad.locator("textarea.loom-pp-input").input_value() == ""
    page.screenshot(path=str(SCREENSHOTS / "promptpad-streamed.png"), full_page=True)
    close_notebook(page)


SLOW_PAD = """
import asyncio
from loom_nb import PromptPad
from loom_nb.providers import LlmStreamChunk, ScriptedProvider

class Slow(ScriptedProvider):
    async def stream(self, request, **kwargs):
        for n in range(600):
            yield LlmStreamChunk(kind="text", text=f"word{n} ")
            await asyncio.sleep(0.05)
        yield LlmStreamChunk(kind="done")

pad = PromptPad(Slow([]))
pad
"""


@pytest.mark.browser
@pytest.mark.slow
def test_prompt_pad_stop_button_keeps_the_partial_text(
    jupyter_server: JupyterServer, browser_page: Any
) -> None:
    """Clicking stop while an answer streams cancels it: the partial text stays, marked stopped."""
    page = browser_page
    panel = run_notebook(page, jupyter_server, "stop.ipynb", [REPO_ON_PATH, SLOW_PAD])
    pad = panel.locator(".loom-pp")
    pad.wait_for(timeout=30_000)
    pad.locator(".loom-pp-conversation .loom-tv").wait_for(timeout=30_000)
    stop = pad.locator("button.loom-pp-stop")
    assert stop.is_hidden()  # only while streaming
    pad.locator("textarea.loom-pp-input").fill("Talk for a long time")
    pad.locator("button.loom-pp-send").click()
    page.wait_for_function(
        "(el) => el.querySelector('.loom-pp-live-text').textContent.includes('word3 ')",
        arg=pad.element_handle(),
        timeout=30_000,
    )
    assert "streaming" in pad.locator(".loom-pp-status").inner_text()
    assert "1 message" in pad.locator(".loom-pp-status").inner_text()
    stop.click()
    pad.locator(".loom-pp-stopped").wait_for(state="visible", timeout=30_000)
    answer = pad.locator(".loom-pp-conversation .loom-msg.loom-assistant")
    answer.wait_for(timeout=30_000)
    text = answer.inner_text()
    assert "word0 word1 word2 word3" in text
    assert "word599" not in text
    assert stop.is_hidden()
    # The status line is the pad's last update after a turn (after the stopped mark and the
    # answer), so it may reach the page a moment after them.
    page.wait_for_function(
        "(el) => el.querySelector('.loom-pp-status').textContent.includes('2 messages')",
        arg=pad.element_handle(),
        timeout=30_000,
    )
    assert "2 messages" in pad.locator(".loom-pp-status").inner_text()
    page.screenshot(path=str(SCREENSHOTS / "promptpad-stopped.png"), full_page=True)
    close_notebook(page)
