"""``MapResult.latencies``: each answer's seconds, the journaled duration of its step, whether the
item ran now or was served from the journal; ``step_durations`` reads them in a few queries."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from decimal import Decimal

import pytest

from loom_nb import Chat, Journal
from loom_nb.journal._outcomes import step_durations
from tests.chat.compare_providers import Flaky, echo_anthropic, usage_of
from tests.chat.map_provider import Echo
from tests.chat.priced import price


def _journaled_seconds(journal: Journal, execution_id: str) -> float:
    """The seconds between the item's last step_started and its step_completed event."""
    times: dict[str, datetime] = {}
    for event in journal.events(execution_id):
        if event.kind in {"step_started", "step_completed"}:
            times[event.kind] = event.created
    return (times["step_completed"] - times["step_started"]).total_seconds()


async def test_latencies_are_the_journaled_step_durations() -> None:
    """Each answered item's latency is its step's duration by the journal's clock (a provider
    that sleeps 50 ms takes at least that); a failed item has None; the table has a
    ``latency_s`` column."""
    journal = Journal()
    wall, steady = time.time(), time.monotonic()
    result = await Chat(Echo(delay=0.05, fail={"b"}), journal=journal).map(
        ["a", "b", "c"], progress=False
    )
    # The journal's clock is the wall clock kept steady (``_sql.stamp_ns``): only a clock set back
    # by more than a second while the map ran makes a step's duration short. That is the only slack.
    set_back = max(0.0, (time.monotonic() - steady) - (time.time() - wall))
    assert result.latencies[1] is None
    for index in (0, 2):
        assert result.latencies[index] == pytest.approx(
            _journaled_seconds(journal, f"{result.id}/{index}")
        )
        assert result.latencies[index] >= 0.05 - set_back, set_back
    pytest.importorskip("pandas")
    table = result.to_pandas()
    assert list(table.columns) == [
        "input",
        "text",
        "input_tokens",
        "output_tokens",
        "cost",
        "latency_s",
        "error",
    ]
    assert table["latency_s"].tolist()[0] == result.latencies[0]


async def test_a_clock_set_back_while_a_call_runs_leaves_its_latency_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The wall clock stepped back 45 ms while an item's 50 ms call ran (a virtual machine's clock
    resynchronized, as seen on CI): the item's latency is still at least 50 ms, not 5."""
    real = time.time_ns

    def set_back() -> None:
        monkeypatch.setattr(time, "time_ns", lambda: real() - 45_000_000)

    asyncio.get_running_loop().call_later(0.01, set_back)  # inside the call, after its start
    result = await Chat(Echo(delay=0.05), journal=Journal()).map(["a"], progress=False)
    assert time.time_ns is not real  # the clock was set back while the call ran
    latency = result.latencies[0]
    assert latency is not None
    assert 0.05 <= latency < 1.0


async def test_served_items_report_the_same_latency_as_when_they_ran() -> None:
    """Run again, every item is served, with the latency it had when it ran."""
    journal = Journal()
    first = await Chat(Echo(), journal=journal, id="c").map(["a", "b"], progress=False)
    again = await Chat(Echo(), journal=journal, id="c").map(["a", "b"], progress=False)
    assert again.served == 2
    assert again.latencies == first.latencies
    assert all(isinstance(s, float) for s in again.latencies)


async def test_a_step_run_again_is_timed_from_its_latest_start() -> None:
    """An item that failed and ran again (``retry_failed``) is timed from its second start to its
    completion, not from the first start; an execution the journal lacks has no duration."""
    journal = Journal()
    failed = await Chat(Echo(fail={"a"}), journal=journal, id="c").map(["a"], progress=False)
    assert failed.latencies == [None]
    again = await Chat(Echo(delay=0.05), journal=journal, id="c").map(
        ["a"], retry_failed=True, progress=False
    )
    item = f"{again.id}/0"
    starts = [e.created for e in journal.events(item) if e.kind == "step_started"]
    done = next(e.created for e in journal.events(item) if e.kind == "step_completed")
    assert len(starts) == 2
    found = step_durations(journal, [item, "no-such-execution"])
    assert found == {item: pytest.approx((done - starts[1]).total_seconds())}
    assert again.latencies == [found[item]]


async def test_costs_are_none_where_there_is_no_answer() -> None:
    """``costs`` lists each item's price in input order; None where the price is unknown or the
    item has no answer."""
    sonnet, _ = echo_anthropic("S:")
    priced = await Chat(sonnet, journal=Journal()).map(["a", "bb"], progress=False)
    assert priced.costs == [price(*usage_of("a")), price(*usage_of("bb"))]
    assert sum(priced.costs, Decimal(0)) == priced.cost
    unpriced = await Chat(Flaky(fail={"b"}), journal=Journal()).map(["a", "b"], progress=False)
    assert unpriced.costs == [None, None]
