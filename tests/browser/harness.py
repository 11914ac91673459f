"""Real-browser harness: a loopback JupyterLab and Debian chromium driven by Playwright.

Reusable by any browser test (transcripts, notebooks): ``start_jupyter`` runs ``jupyter lab``
on 127.0.0.1 with no token, its config, data and runtime dirs inside a temporary root (nothing
written to the home folder); ``write_notebook`` saves cells to the server's root;
``open_notebook`` opens one and waits for an idle kernel; ``run_all_cells`` runs it;
``close_notebook`` shuts its kernel down without hanging on the confirm dialog.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat

CHROMIUM = Path("/usr/bin/chromium")
"""Debian's chromium, driven through Playwright's bundled node driver (no `playwright install`)."""

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@dataclass
class JupyterServer:
    """A running loopback JupyterLab."""

    process: subprocess.Popen[bytes]
    base_url: str
    root_dir: Path
    log_path: Path

    def stop(self) -> None:
        """Stop the server (SIGINT twice, then kill)."""
        if self.process.poll() is not None:
            return
        for _ in range(2):
            self.process.send_signal(signal.SIGINT)
            time.sleep(0.3)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_jupyter(base: Path, *, timeout: float = 120.0) -> JupyterServer:
    """Start JupyterLab with its root at ``base / 'root'`` and wait until ``/api/status`` answers."""
    root = base / "root"
    root.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
        folder = base / var.lower()
        folder.mkdir(exist_ok=True)
        env[var] = str(folder)
    labconfig = base / "jupyter_config_dir" / "labconfig"
    labconfig.mkdir(parents=True, exist_ok=True)
    (labconfig / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    settings = base / "settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    env["JUPYTERLAB_SETTINGS_DIR"] = str(base / "settings")
    port = _free_port()
    args = [
        sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
        "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=", "--ServerApp.password=",
        "--ServerApp.port_retries=0", "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=None",
        f"--ServerApp.root_dir={root}", "--FileContentsManager.delete_to_trash=False",
    ]  # fmt: skip
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.append("--allow-root")
    log_path = base / "jupyter.log"
    log = log_path.open("wb")
    process = subprocess.Popen(args, env=env, cwd=root, stdout=log, stderr=subprocess.STDOUT)
    server = JupyterServer(process, f"http://127.0.0.1:{port}", root, log_path)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"jupyter lab exited early:\n{log_path.read_text(errors='replace')}")
        try:
            with urllib.request.urlopen(f"{server.base_url}/api/status", timeout=2) as reply:  # noqa: S310 (loopback)
                if reply.status == 200:
                    return server
        except OSError:
            time.sleep(0.3)
    server.stop()
    raise RuntimeError(f"jupyter lab did not answer within {timeout} s")


def write_notebook(server: JupyterServer, name: str, cells: list[str]) -> Path:
    """Save a notebook of code ``cells`` in the server root."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path = server.root_dir / name
    nbformat.write(nb, path)
    return path


def open_notebook(page: Any, server: JupyterServer, name: str, *, timeout_ms: int = 60_000) -> None:
    """Open ``name`` in JupyterLab and wait for its kernel to be idle.

    On a page where this server's JupyterLab is already loaded (``browser_page`` keeps one page for
    all the browser tests) the notebook is opened in it (``docmanager:open``), as a user opens a
    file: loading JupyterLab's front end again costs some 3.5 CPU-seconds. Otherwise the page goes
    to it with ``?reset``, which starts from an empty workspace: without it JupyterLab restores
    every notebook an earlier test on this server left open, and a restored panel can become the
    current widget after this one did, so the test would drive a notebook it never wrote.
    """
    if page.url.startswith(f"{server.base_url}/lab") and page.evaluate(_LAB_READY):
        page.evaluate(
            "(name) => { window.jupyterapp.commands.execute('docmanager:open', {path: name}); }",
            name,
        )
    else:
        page.goto(f"{server.base_url}/lab/tree/{name}?reset")
    page.wait_for_function(
        """(name) => {
            const app = window.jupyterapp;
            const w = app && app.shell.currentWidget;
            return !!(w && w.context && w.context.path === name && w.sessionContext.session
                && w.sessionContext.session.kernel && w.sessionContext.session.kernel.status === 'idle');
        }""",
        arg=name,
        timeout=timeout_ms,
    )


_LAB_READY = """() => {
    const app = window.jupyterapp;
    if (!app || !app.shell || document.querySelector('.jp-Dialog')) return false;
    // Reused only when no document (or dialog) is left open, as a test that failed before closing
    // its notebook leaves one: the page is then loaded afresh, so no hidden panel of it matches
    // a query.
    return !Array.from(app.shell.widgets('main')).some((w) => w.context);
}"""
"""Whether the page holds a loaded JupyterLab with no document or dialog open in it."""


def run_all_cells(page: Any, *, timeout_ms: int = 180_000) -> None:
    """Run every cell of the current notebook and wait until the kernel is idle again (up to 3
    minutes: the other pytest-xdist workers may keep both cores busy meanwhile).

    "Run all" stops at the first cell that raises, so the later cells never get an execution
    count: the wait ends early on an error output (or a dead kernel) and the failure names it,
    instead of timing out minutes later without a word.
    """
    page.evaluate(_LOG_KERNEL_MESSAGES)
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    try:
        handle = _wait_for_cells(page, timeout_ms)
    except Exception as exc:
        if type(exc).__name__ != "TimeoutError":
            raise
        state = page.evaluate(_CELLS_STATE)
        errors = getattr(page, "loom_errors", [])[-20:]
        messages = page.evaluate("() => (window.loomKernelLog || []).slice(-60)")
        raise AssertionError(
            f"the notebook's cells did not all run in time: {state}; page errors: {errors}; "
            f"the kernel connection's last messages: {messages}"
        ) from exc
    result = handle.json_value()
    if result["error"] is not None:
        raise AssertionError(f"a notebook cell failed: {result['error']}\n{result['traceback']}")


_LOG_KERNEL_MESSAGES = """() => {
    const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
    const log = window.loomKernelLog = [];
    const t0 = performance.now();
    // A front end's ids are uuids (the first 8 characters tell them apart); a kernel's are
    // '<session>_<pid>_<count>', alike but for the count at the end.
    const short = (id) => (id || '').includes('_') ? id.split('_').slice(-1)[0] : (id || '').slice(0, 8);
    const entry = (kind, msg) => ({
        at: Math.round(performance.now() - t0), kind, channel: msg.channel,
        type: msg.header.msg_type, id: short(msg.header.msg_id),
        parent: short(msg.parent_header && msg.parent_header.msg_id),
        state: (msg.content && msg.content.execution_state) || undefined,
    });
    kernel.anyMessage.connect((_, args) => { log.push(entry(args.direction, args.msg)); });
    kernel.iopubMessage.connect((_, msg) => { log.push(entry('handled', msg)); });
    kernel.unhandledMessage.connect((_, msg) => { log.push(entry('unhandled', msg)); });
    kernel.connectionStatusChanged.connect((_, status) => {
        log.push({at: Math.round(performance.now() - t0), kind: 'connection', state: status});
    });
}"""
"""Keep every message the current kernel connection sends and receives, and each iopub message it
handled, in ``window.loomKernelLog``: a run that never ends shows which message the page took last."""


_CELLS_STATE = """() => {
    const w = window.jupyterapp.shell.currentWidget;
    const kernel = w.sessionContext.session && w.sessionContext.session.kernel;
    return {
        path: w.context.path,
        kernel: kernel ? kernel.status : null,
        connection: kernel ? kernel.connectionStatus : null,
        pending: kernel && kernel._futures ? [...kernel._futures.keys()].map((id) => id.slice(0, 8)) : null,
        cells: w.content.widgets.filter((c) => c.model.type === 'code').map((c) => ({
            count: c.model.executionCount,
            state: c.model.executionState || null,
            outputs: c.model.outputs.length,
            source: c.model.sharedModel.getSource().slice(0, 60),
        })),
    };
}"""
"""What the page shows of the current notebook's run: its kernel's status, each cell's count."""


def _wait_for_cells(page: Any, timeout_ms: int) -> Any:
    return page.wait_for_function(
        """() => {
            const w = window.jupyterapp.shell.currentWidget;
            const kernel = w.sessionContext.session && w.sessionContext.session.kernel;
            const cells = w.content.widgets.filter((c) => c.model.type === 'code');
            for (const [index, cell] of cells.entries()) {
                const outputs = cell.model.outputs;
                for (let i = 0; i < outputs.length; i++) {
                    const out = outputs.get(i).toJSON();
                    if (out.output_type === 'error') {
                        return {error: `cell ${index}: ${out.ename}: ${out.evalue}`,
                                traceback: (out.traceback || []).join('\\n')};
                    }
                }
            }
            if (!kernel) {
                return false;
            }
            if (kernel.status === 'dead') {
                return {error: 'the kernel died', traceback: ''};
            }
            const done = cells.every((c) => c.model.executionCount !== null)
                && kernel.status === 'idle';
            return done ? {error: null} : false;
        }""",
        timeout=timeout_ms,
    )


def current_panel(page: Any) -> Any:
    """A locator scoped to the current notebook panel (hidden panels also match global queries)."""
    page.evaluate(
        "() => { document.querySelectorAll('[data-loom-current]').forEach((n) => n.removeAttribute('data-loom-current'));"
        " window.jupyterapp.shell.currentWidget.node.setAttribute('data-loom-current', '1'); }"
    )
    return page.locator("[data-loom-current='1']")


def close_notebook(page: Any, *, timeout_ms: int = 30_000) -> None:
    """Close the current notebook and shut its kernel down: confirm JupyterLab's one dialog ("Shut
    down the notebook?"), then wait until the kernel is shut down and the panel disposed.

    Nothing happens when no notebook is current. (It waited for a second dialog before, which
    ``notebook:close-and-shutdown`` never shows: three idle seconds per notebook closed.)
    """
    open_ = page.evaluate(
        """() => {
            const app = window.jupyterapp;
            const w = app && app.shell.currentWidget;
            if (!w || !w.sessionContext) return false;
            window.loomClosing = w;
            app.commands.execute('notebook:close-and-shutdown');
            return true;
        }"""
    )
    if not open_:
        return
    page.locator(".jp-Dialog button.jp-mod-warn").first.click(timeout=timeout_ms)
    page.wait_for_function("() => window.loomClosing.isDisposed", timeout=timeout_ms)


def run_notebook(page: Any, server: JupyterServer, name: str, cells: list[str]) -> Any:
    """Save ``cells`` as notebook ``name``, open it, run every cell; the current panel's locator."""
    write_notebook(server, name, cells)
    open_notebook(page, server, name)
    run_all_cells(page)
    return current_panel(page)


REPO_ON_PATH = f"""
import sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
"""
"""A first notebook cell that lets the kernel import this repository's ``tests`` package."""
