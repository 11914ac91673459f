"""MediaUpload in a real JupyterLab: a 50 MiB PDF, over the server's 10 MiB message limit, arrives whole."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from loom_nb.demo import memo_pdf
from loom_nb.store import LocalContentStore
from tests.browser.conftest import SCREENSHOTS
from tests.browser.harness import (
    JupyterServer,
    close_notebook,
    run_notebook,
)

SIZE = 50 * 1024 * 1024


@pytest.mark.browser
@pytest.mark.slow
def test_a_50_mib_pdf_arrives_in_chunks(
    jupyter_server: JupyterServer, browser_page: Any, tmp_path: Path
) -> None:
    """Choosing a 50 MiB PDF in the browser stores exactly its bytes, with progress, and lists its address."""
    page = browser_page
    store_dir = tmp_path / "store"
    cell = (
        "from loom_nb import LocalContentStore, MediaUpload\n"
        f"upload = MediaUpload(LocalContentStore({str(store_dir)!r}), tenant='me')\n"
        "upload"
    )
    panel = run_notebook(page, jupyter_server, "upload.ipynb", [cell])
    button = panel.locator(".loom-up .loom-up-drop")
    button.wait_for(timeout=30_000)
    head = memo_pdf()
    data = head + b"%" + os.urandom(SIZE - len(head) - 2) + b"\n"
    address = "sha256:" + hashlib.sha256(data).hexdigest()
    big = tmp_path / "big.pdf"
    big.write_bytes(data)
    with page.expect_file_chooser() as chooser:
        button.click()
    chooser.value.set_files(str(big))
    panel.locator(".loom-up progress:not([hidden])").wait_for(timeout=30_000)
    panel.locator(".loom-up-item", has_text=address).wait_for(timeout=180_000)
    assert "stored big.pdf" in panel.locator(".loom-up-status").inner_text()
    assert panel.locator(".loom-up-error").inner_text() == ""
    page.screenshot(path=str(SCREENSHOTS / "upload-50mib.png"))
    store = LocalContentStore(store_dir)
    assert store.tenants(address) == {"me"}
    assert store.get(address) == data
    close_notebook(page)
