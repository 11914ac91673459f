"""The README's Performance table is run_all.py's generated block: its format, not its numbers."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest

from tests.benchmark_modules import BENCHMARKS, benchmark_module

ROOT = BENCHMARKS.parent


@pytest.fixture(scope="module")
def run_all() -> Iterator[ModuleType]:
    """benchmarks/run_all.py imported as the benchmarks import it (their folder on sys.path)."""
    with benchmark_module("run_all") as module:
        yield module


def names() -> list[str]:
    return sorted(p.stem for p in BENCHMARKS.glob("bench_*.py"))


def test_the_readme_block_is_well_formed_and_names_every_benchmark(run_all: ModuleType) -> None:
    """The generated block is there once, with its note and header, and a row per benchmark."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert run_all.readme_block_problems(readme, names()) == []


def test_every_benchmark_hands_back_rows() -> None:
    """Each bench_*.py calls _report.emit, so run_all.py has its rows (none is left out)."""
    silent = [n for n in names() if "emit(" not in (BENCHMARKS / f"{n}.py").read_text()]
    assert silent == []


def test_every_benchmark_that_documents_a_check_is_run_by_run_all_check(
    run_all: ModuleType,
) -> None:
    """A benchmark whose docstring says what its ``--check`` asserts is one ``run_all.py --check``
    runs (bench_anthropic_mapping's check, made by a shared ``main``, was passed over)."""
    documented = [n for n in names() if "``--check``" in (BENCHMARKS / f"{n}.py").read_text()]
    assert "bench_anthropic_mapping" in documented
    skipped = [n for n in documented if not run_all.has_check(BENCHMARKS / f"{n}.py")]
    assert skipped == []


def test_the_format_check_catches_a_broken_block(run_all: ModuleType) -> None:
    """A row with a cell too few, a ratio that is not N.NNx, a missing benchmark, no note."""
    good = run_all.readme_block(
        run_all.markdown_table([("bench_a", "m", "1.20x", "<= 1.50x target", "0.80x", "pass")]),
        run_all.machine_note((0.5, 0.5, 0.5), (1.0, 1.0, 1.0)),
    )
    assert run_all.readme_block_problems(good, ["bench_a"]) == []
    assert run_all.readme_block_problems(good, ["bench_a", "bench_b"]) == ["no row for bench_b"]
    assert run_all.readme_block_problems(good.replace("| 1.20x |", "| fast |"), ["bench_a"])
    assert run_all.readme_block_problems(good.replace(" pass |", " ok |"), ["bench_a"])
    assert run_all.readme_block_problems(good.replace("| m |", "|"), ["bench_a"])
    assert run_all.readme_block_problems(good.replace("Measured", "Run"), ["bench_a"])
    assert run_all.readme_block_problems("no block", ["bench_a"])


def test_rows_judge_their_ratio_against_the_bound_or_target(run_all: ModuleType) -> None:
    """A target is met on its goal's side; a bound with a share scales the limit; no goal, no verdict."""
    row = run_all.Row
    assert row("t", 1.2, 1.5, "<=").passed() is True
    assert row("t", 1.6, 1.5, "<=").passed() is False
    assert row("b", 2.9, 3.6, ">=", "bound", 0.8).passed() is True  # 2.9 >= 2.88
    assert row("b", 2.8, 3.6, ">=", "bound", 0.8).passed() is False
    assert row("i", 1.0).passed() is None
    assert row("i", None, 2.0, ">=").passed() is None
    assert run_all.cells(
        run_all.Outcome("bench_x", 1.0, 0, [row("b", 2.9, 3.6, ">=", "bound", 0.8)])
    )[0] == (
        "bench_x",
        "b",
        "2.90x",
        ">= 0.8 of 3.60x bound",
        "0.81x",
        "pass",
    )
    silent = run_all.Outcome("bench_y", 1.0, 0, [], "no machine-readable output")
    assert run_all.cells(silent)[0][:2] == ("bench_y", "no machine-readable output")


def test_a_missed_target_beyond_the_same_run_bound_reads_unreachable(run_all: ModuleType) -> None:
    """A row whose ``reach`` (the bound no implementation passes here) lies beyond its goal says
    so instead of FAIL; a reachable miss stays FAIL, and a met goal passes whatever the reach."""
    row = run_all.Row
    assert row("t", 2.0, 1.5, "<=", reach=1.7).verdict() == "unreachable (bound 1.70x)"
    assert row("t", 2.0, 1.5, "<=", reach=1.2).verdict() == "FAIL"
    assert row("t", 1.4, 1.5, "<=", reach=1.7).verdict() == "pass"
    assert row("t", 2.0, 1.5, "<=").verdict() == "FAIL"
    # A share of a bound: 0.8 of 3.86x is 3.09x, above a 2.85x reach.
    assert row("b", 2.0, 3.86, ">=", "bound", 0.8, 2.85).verdict() == "unreachable (bound 2.85x)"
    assert row("b", 2.0, 3.86, ">=", "bound", 0.8, 3.20).verdict() == "FAIL"
    assert row("i", 1.0, reach=0.5).verdict() == "—"
    cell = run_all.cells(run_all.Outcome("bench_x", 1.0, 0, [row("t", 0.7, 0.8, ">=", reach=0.75)]))
    assert cell[0][5] == "unreachable (bound 0.75x)"
    block = run_all.readme_block(
        run_all.markdown_table([cell[0]]), run_all.machine_note((0.5,) * 3, (1.0,) * 3)
    )
    assert run_all.readme_block_problems(block, ["bench_x"]) == []
    assert run_all.readme_block_problems(block.replace(" (bound 0.75x)", ""), ["bench_x"])


def test_a_ratio_that_reads_as_its_limit_gets_the_decimals_its_verdict_needs(
    run_all: ModuleType,
) -> None:
    """0.8996x judged against 0.90x reads 0.8996x beside its FAIL, not 0.90x; a ratio two decimals
    already tell from its limit keeps two, and one equal to its limit passes and reads as it."""
    row = run_all.Row
    (tied,) = run_all.cells(run_all.Outcome("bench_x", 1.0, 0, [row("t", 0.8996, 0.9, ">=")]))
    assert tied[2:] == ("0.8996x", ">= 0.90x target", "0.9996x", "FAIL")
    (shared,) = run_all.cells(
        run_all.Outcome("bench_x", 1.0, 0, [row("b", 2.877, 3.6, ">=", "bound", 0.8)])
    )
    assert (shared[2], shared[5]) == ("2.877x", "FAIL")  # 0.8 of 3.60x is 2.88x
    (clear,) = run_all.cells(run_all.Outcome("bench_x", 1.0, 0, [row("t", 0.93, 0.9, ">=")]))
    assert clear[2:] == ("0.93x", ">= 0.90x target", "1.03x", "pass")
    (equal,) = run_all.cells(run_all.Outcome("bench_x", 1.0, 0, [row("t", 0.9, 0.9, ">=")]))
    assert (equal[2], equal[5]) == ("0.90x", "pass")
    unreachable = row("t", 0.7, 0.8, ">=", reach=0.7996)  # a reach that reads as the target
    assert unreachable.verdict() == "unreachable (bound 0.7996x)"
    (info,) = run_all.cells(run_all.Outcome("bench_x", 1.0, 0, [row("i", 0.8996)]))
    assert info[2] == "0.90x"
    block = run_all.readme_block(
        run_all.markdown_table(
            [tied, *run_all.cells(run_all.Outcome("bench_x", 1.0, 0, [unreachable]))]
        ),
        run_all.machine_note((0.5,) * 3, (1.0,) * 3),
    )
    assert run_all.readme_block_problems(block, ["bench_x"]) == []
