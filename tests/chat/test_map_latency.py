"""``MapResult.latencies`` and ``costs``: each answer's seconds, measured live and read back from the
journal's timestamps when the item is served."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import pytest

from loom_nb import Chat, Journal
from loom_nb.journal._outcomes import step_outcomes
from tests.chat.compare_providers import Flaky, echo_anthropic, usage_of
from tests.chat.map_provider import Echo
from tests.chat.priced import price


def _journaled_seconds(journal: Journal, execution_id: str) -> float:
    """The seconds between the item's step_started and step_completed events."""
    times = {
        e.kind: e.created
        for e in journal.events(execution_id)
        if e.kind in {"step_started", "step_completed"}
    }
    started, completed = times["step_started"], times["step_completed"]
    assert isinstance(started, datetime)
    return (completed - started).total_seconds()


async def test_live_items_have_a_latency_and_failed_ones_none() -> None:
    """Each answered item has a measured latency (seconds >= 0); a failed item has None; the
    table has a ``latency_s`` column."""
    chat = Chat(Echo(fail={"b"}), journal=Journal())
    result = await chat.map(["a", "b", "c"], progress=False)
    assert result.latencies[1] is None
    assert all(isinstance(s, float) and s >= 0 for s in (result.latencies[0], result.latencies[2]))
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


async def test_served_items_report_the_journaled_duration() -> None:
    """Run again, every item is served; its latency is the journal's step duration, the same
    number ``step_outcomes`` reads for that execution."""
    journal = Journal()
    await Chat(Echo(), journal=journal, id="c").map(["a", "b"], progress=False)
    again = await Chat(Echo(), journal=journal, id="c").map(["a", "b"], progress=False)
    assert again.served == 2
    for index in range(2):
        item = f"{again.id}/{index}"
        expected = _journaled_seconds(journal, item)
        assert again.latencies[index] == pytest.approx(expected)
        assert step_outcomes(journal, [item])[item].latency_s == pytest.approx(expected)


async def test_costs_are_public_and_none_where_there_is_no_answer() -> None:
    """``costs`` lists each item's price in input order; None where the price is unknown or the
    item has no answer."""
    sonnet, _ = echo_anthropic("S:")
    priced = await Chat(sonnet, journal=Journal()).map(["a", "bb"], progress=False)
    assert priced.costs == [price(*usage_of("a")), price(*usage_of("bb"))]
    assert sum(priced.costs, Decimal(0)) == priced.cost
    unpriced = await Chat(Flaky(fail={"b"}), journal=Journal()).map(["a", "b"], progress=False)
    assert unpriced.costs == [None, None]
