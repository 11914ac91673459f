"""Machine-readable results of a benchmark, for ``benchmarks/run_all.py``.

A benchmark builds ``Row``s beside what it prints and hands them to ``emit`` at the end. When
``LOOM_BENCH_REPORT`` names a file (``run_all.py`` sets it), ``emit`` appends the rows to it as
JSON lines; otherwise it does nothing, so a benchmark run by hand prints exactly what it did.
``quick()`` is true under ``run_all.py`` (``LOOM_BENCH_QUICK=1``): a benchmark may then use
fewer rounds or sizes so the whole table takes minutes.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

REPORT_ENV = "LOOM_BENCH_REPORT"
QUICK_ENV = "LOOM_BENCH_QUICK"


@dataclass(frozen=True)
class Row:
    """One measured ratio and what it is judged against.

    ``goal`` says which way ``ratio`` must lie from ``bound``: ``">="`` or ``"<="``; ``""`` for a
    ratio printed for information only (no bound); ``ratio`` is None when it could not be
    measured here (a missing optional baseline). ``kind`` names what ``bound`` is: a
    ``"target"`` (what the project asks for) or a ``"bound"`` (what any implementation can reach
    here, measured in the same run); ``share`` is the part of a bound the ratio must reach (or
    stay under): ``Row("replay speed-up", 2.9, 3.6, ">=", "bound", 0.8)`` passes at 2.9 >= 0.8 x 3.6.
    ``reach``: the closest any implementation comes to the goal here, a bound measured in the same
    run (the floor a ratio judged ``<=`` cannot go below, the ceiling one judged ``>=`` cannot go
    above); when the goal lies beyond it, a missed goal is ``unreachable`` on this machine rather
    than a plain FAIL (``verdict``).
    """

    measure: str
    ratio: float | None
    bound: float | None = None
    goal: str = ""
    kind: str = "target"
    share: float = 1.0
    reach: float | None = None

    def of_bound(self) -> float | None:
        """``ratio / bound``, or None without a bound."""
        if self.ratio is None or self.bound is None or self.bound == 0:
            return None
        return self.ratio / self.bound

    def passed(self) -> bool | None:
        """Whether the ratio lies on the goal's side of the bound (None when there is no goal)."""
        return self._meets(self.ratio)

    def reachable(self) -> bool | None:
        """Whether ``reach`` lies on the goal's side of the limit (None without both)."""
        return self._meets(self.reach)

    def limit(self) -> float | None:
        """``share`` of the bound: what the ratio is judged against (None without a bound or goal)."""
        if self.bound is None or self.goal not in (">=", "<="):
            return None
        return self.bound * self.share

    def _meets(self, value: float | None) -> bool | None:
        """Whether ``value`` lies on the goal's side of ``share`` of the bound (None when
        there is no value, bound or goal)."""
        limit = self.limit()
        if value is None or limit is None:
            return None
        return value >= limit if self.goal == ">=" else value <= limit

    def verdict(self) -> str:
        """``pass``, ``FAIL``, ``unreachable (bound N.NNx)`` when the goal lies beyond what this
        machine allows (``reach``), or ``—`` for a ratio printed for information."""
        passed = self.passed()
        if passed is None:
            return "—"
        if passed:
            return "pass"
        if self.reachable() is False:
            assert self.reach is not None
            return f"unreachable (bound {self.reach:.{decimals(self.reach, self.limit())}f}x)"
        return "FAIL"


def quick() -> bool:
    """Whether to run with short settings (``run_all.py`` asks for them)."""
    return os.environ.get(QUICK_ENV, "") == "1"


def emit(rows: list[Row], benchmark: str | None = None) -> None:
    """Append ``rows`` as JSON lines to ``$LOOM_BENCH_REPORT`` when it is set."""
    target = os.environ.get(REPORT_ENV)
    if not target:
        return
    name = benchmark or Path(sys.argv[0]).stem
    with open(target, "a", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps({"benchmark": name, **asdict(row)}) + "\n")


def load(path: Path) -> list[tuple[str, Row]]:
    """The rows a run wrote to ``path``: (benchmark, row) pairs in order."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            data = json.loads(line)
            rows.append((data.pop("benchmark"), Row(**data)))
    return rows


def decimals(value: float | None, limit: float | None) -> int:
    """How many decimals to print ``value`` with beside the ``limit`` it is judged against: two,
    or more (up to six) when the two read the same at two, so that 0.8996x judged against 0.90x
    does not read "0.90x ... FAIL". Two without a value or a limit, or when they are equal."""
    if value is None or limit is None:
        return 2
    for digits in range(2, 7):
        if f"{value:.{digits}f}" != f"{limit:.{digits}f}":
            return digits
    return 2  # equal to six decimals: it meets the limit, and reads so
