"""A package's public names, imported from their modules when first asked for (PEP 562).

A package ``__init__`` that imports every module it re-exports makes ``from loom_nb.journal
import Journal`` import the work queue, the watch and the timeline too; the first Chat turn of a
process paid for every provider, the MCP client and the HTML renderer that way without using
them. A package built with ``exports`` imports a module on the first read of one of its names
and keeps the value in the package's namespace, so later reads are plain attribute reads.

The table in each ``__init__`` (name -> defining module) is the one list of its public names;
``__all__`` is its sorted keys, and an ``if TYPE_CHECKING:`` block imports the same names so type
checkers and IDEs see the real definitions.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["exports"]


def exports(
    package: str, table: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose names ``table`` maps to modules."""
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # later reads skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *table})

    return __getattr__, __dir__
