"""``Executions``: how many times some functions' code runs inside a block, for tests that pin
down repeated work by count rather than by time (issue 31)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


class Executions:
    """Counts how many times each of some functions' code runs (a profile hook: no patching,
    so calls through any imported name count). ``counts`` maps each function's qualified name to
    its count."""

    def __init__(self, *functions: Callable[..., Any]) -> None:
        self._codes = {f.__code__: f.__qualname__ for f in functions}
        self.counts = dict.fromkeys(self._codes.values(), 0)

    def __enter__(self) -> Executions:
        def hook(frame: Any, event: str, arg: Any) -> None:
            if event == "call" and frame.f_code in self._codes:
                self.counts[self._codes[frame.f_code]] += 1

        sys.setprofile(hook)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)
