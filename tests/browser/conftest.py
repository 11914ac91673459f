"""Browser fixtures: ``jupyter_server`` (one loopback JupyterLab per session) and ``browser_page``.

Tests marked ``browser`` skip with a reason when /usr/bin/chromium is absent, unless
LOOM_NB_REQUIRE_BROWSER=1 (CI), where a missing browser fails them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.harness import CHROMIUM, CHROMIUM_ARGS, JupyterServer, start_jupyter

SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-output" / "screenshots"
"""Where browser tests save screenshots (gitignored)."""


def _require_browser() -> None:
    if CHROMIUM.exists():
        return
    if os.environ.get("LOOM_NB_REQUIRE_BROWSER") == "1":
        pytest.fail(
            f"{CHROMIUM} is missing and LOOM_NB_REQUIRE_BROWSER=1: install it with `apt-get install -y chromium`"
        )
    pytest.skip(
        f"{CHROMIUM} is absent (install Debian chromium to run browser tests; CI sets LOOM_NB_REQUIRE_BROWSER=1)"
    )


@pytest.fixture(scope="session")
def jupyter_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    """A loopback JupyterLab for the whole session, its dirs under a temporary folder."""
    _require_browser()
    server = start_jupyter(tmp_path_factory.mktemp("jupyter"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="package")
def _browser() -> Iterator[Any]:
    # Package scope, not session: Playwright's sync API keeps an event loop running in this
    # thread while it is open, which would break every async test run after the browser tests
    # (this package's tests run one after another, on one pytest-xdist worker: ``xdist_scope``).
    _require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="package")
def _lab_page(_browser: Any) -> Iterator[Any]:
    # One page for the browser tests: open_notebook opens each test's notebook in the JupyterLab
    # an earlier test loaded (a load is some 3.5 CPU-seconds), when that one closed its own.
    context = _browser.new_context(viewport={"width": 1280, "height": 1600})
    page = context.new_page()
    dialogs: list[str] = []

    def on_dialog(dialog: Any) -> None:
        dialogs.append(f"{dialog.type}: {dialog.message}")
        if dialog.type == "beforeunload":
            dialog.accept()
        else:
            dialog.dismiss()

    page.on("dialog", on_dialog)
    page.loom_dialogs = dialogs
    errors: list[str] = []  # uncaught page errors and console errors, for failure messages
    page.on("pageerror", lambda error: errors.append(f"pageerror: {error}"))
    page.on(
        "console",
        lambda message: (
            errors.append(f"console.{message.type}: {message.text}")
            if message.type in ("error", "warning")
            else None
        ),
    )
    page.loom_errors = errors
    try:
        yield page
    finally:
        context.close()


@pytest.fixture
def browser_page(_lab_page: Any) -> Any:
    """The browser tests' one page, for this test: dialogs it opens are recorded in
    ``page.loom_dialogs`` (this test's only) and dismissed, except JupyterLab's "leave this page?"
    (beforeunload), which is accepted: dismissing it cancels the test's next navigation
    (``Page.goto: net::ERR_ABORTED``) whenever the notebook it leaves is still unsaved.
    Permissions an earlier test granted are taken back; a JupyterLab the earlier test left a
    notebook open in is loaded again (``open_notebook``)."""
    page = _lab_page
    page.loom_dialogs.clear()
    page.loom_errors.clear()
    page.context.clear_permissions()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return page
