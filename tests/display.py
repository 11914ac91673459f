"""Show a value as a notebook does: through IPython's display formatter, as ``import loom_nb``
registers it in a running shell."""

from __future__ import annotations

from typing import Any

from IPython.core.formatters import DisplayFormatter

import loom_nb

FORMATTER = DisplayFormatter()
loom_nb._register_display(FORMATTER.mimebundle_formatter)


def displayed(value: Any, *, include: Any = None, exclude: Any = None) -> dict[str, Any]:
    """The mime data a notebook gets for ``value`` (``display(value)`` or ``value`` last in a cell)."""
    data, _ = FORMATTER.format(value, include=include, exclude=exclude)
    return data
