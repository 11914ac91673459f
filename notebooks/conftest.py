"""Test settings for the notebooks run under nbval (the README's test command collects them).

Under pytest-xdist the test command's ``--dist loadscope`` keeps each notebook's cells on one
worker, in order (tests/conftest.py's scheduler does the same when the tests run with them).
"""

from __future__ import annotations

import pytest


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects by the mark added here
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A notebook's cells are ``slow``: ``-m "not slow"`` leaves them out."""
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.slow)
