"""The test command's pytest-xdist units: what must share a worker does, the rest is spread."""

from __future__ import annotations

from collections import OrderedDict

from tests.conftest import long_first, xdist_scope


def test_a_notebooks_cells_are_one_unit() -> None:
    """Every cell of a notebook is in one unit (one kernel, in order); two notebooks are two."""
    first = xdist_scope("notebooks/01-tour.ipynb::Cell 0")
    assert first == xdist_scope("notebooks/01-tour.ipynb::Cell 17")
    assert first != xdist_scope("notebooks/04-replay.ipynb::Cell 0")


def test_the_browser_tests_are_one_unit() -> None:
    """All browser tests share one worker (one JupyterLab, one Chromium at a time)."""
    assert xdist_scope("tests/browser/test_upload_browser.py::test_a") == xdist_scope(
        "tests/browser/test_notebooks_browser.py::test_01_tour"
    )


def test_module_wide_servers_keep_their_module_on_one_worker() -> None:
    """A module with module-scoped servers and leak checks is one unit."""
    assert xdist_scope("tests/agent/test_mcp.py::test_a") == xdist_scope(
        "tests/agent/test_mcp.py::test_b[x]"
    )


def test_every_other_test_is_a_unit_of_its_own() -> None:
    """Plain tests, parametrized ones included, are handed out one at a time."""
    a = "tests/journal/test_journal_lease.py::test_sigkilled_holder_is_taken_over_at_once[sqlite-0]"
    b = "tests/journal/test_journal_lease.py::test_sigkilled_holder_is_taken_over_at_once[sqlite-1]"
    assert xdist_scope(a) == a
    assert xdist_scope(b) == b


def test_the_long_files_tests_are_handed_out_before_the_rest() -> None:
    """Units of the files known to take seconds a test move to the front, in their order; the
    others keep theirs."""
    queue = OrderedDict.fromkeys(
        [
            "tests/test_content.py::test_a",
            "tests/guard/test_lookalikes.py::test_x",
            "tests/test_content.py::test_b",
            "tests/test_kernel_parent.py::test_y",
        ],
        {},
    )
    long_first(queue)
    assert list(queue) == [
        "tests/guard/test_lookalikes.py::test_x",
        "tests/test_kernel_parent.py::test_y",
        "tests/test_content.py::test_a",
        "tests/test_content.py::test_b",
    ]
