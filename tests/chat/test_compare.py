"""``loom_nb.compare``: every variant's map over the same inputs, totals, transcripts from the journal,
a re-run served from the journal, the table, and the grid shown in a notebook."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

from loom_nb import Chat, Comparison, Journal, compare, compare_sync
from loom_nb.errors import ConfigurationError
from loom_nb.render._grid import opened_item
from loom_nb.render._view import RenderContext
from tests.chat.compare_providers import Flaky, echo_anthropic, usage_of
from tests.chat.priced import price
from tests.display import displayed
from tests.fixtures import hostile
from tests.render.safety import unsafe_parts

INPUTS = ["a", "bb", "ccc"]


async def _two(journal: Journal, **options: Any) -> tuple[Comparison, list[str], Flaky]:
    sonnet, asked = echo_anthropic("S:")
    flaky = Flaky(fail={"bb"})
    comparison = await compare(
        {"sonnet": sonnet, "flaky": flaky}, INPUTS, journal=journal, progress=False, **options
    )
    return comparison, asked, flaky


async def test_every_variant_answers_every_input_in_input_order() -> None:
    """A column per variant, in the order given; each variant's answers in input order."""
    comparison, asked, flaky = await _two(Journal())
    assert list(comparison) == ["sonnet", "flaky"]
    assert comparison.inputs == INPUTS
    assert [r.content for r in comparison["sonnet"]] == ["S: a", "S: bb", "S: ccc"]
    assert comparison["flaky"][0].content == "**a**"
    assert comparison["flaky"][1] is None
    assert sorted(asked) == INPUTS
    assert sorted(flaky.calls) == INPUTS


async def test_totals_add_up_what_the_maps_report() -> None:
    """Each column's totals: the tokens and cost the variant's MapResult reports, its failures,
    and a mean latency that was measured."""
    comparison, _, _ = await _two(Journal())
    totals = comparison.totals()
    sonnet, flaky = totals["sonnet"], totals["flaky"]
    expected_in = sum(usage_of(t)[0] for t in INPUTS)
    expected_out = sum(usage_of(t)[1] for t in INPUTS)
    assert (sonnet.input_tokens, sonnet.output_tokens) == (expected_in, expected_out)
    assert sonnet.input_tokens == comparison["sonnet"].usage.input_tokens
    assert sonnet.cost == sum((price(*usage_of(t)) for t in INPUTS), Decimal(0))
    assert sonnet.cost == comparison["sonnet"].cost
    assert (sonnet.failed, sonnet.unpriced) == (0, 0)
    assert (flaky.failed, flaky.cost, flaky.unpriced) == (1, None, 2)
    assert flaky.input_tokens == usage_of("a")[0] + usage_of("ccc")[0]
    assert sonnet.timed == 3
    assert sonnet.mean_latency_s is not None
    assert sonnet.mean_latency_s >= 0
    assert flaky.text().endswith("cost unknown")


async def test_a_failed_item_shows_its_error_and_its_transcript_from_the_journal() -> None:
    """The failed cell names its error; opened, each item shows what the model was sent (read from
    the journal), and the answer when there is one."""
    comparison, _, _ = await _two(Journal())
    grid = comparison.grid()
    failed = grid.items[1][1]
    assert failed.response is None
    assert failed.error is not None
    assert failed.error.startswith("invalid_request: the flaky server refused 'bb'")
    header, views = opened_item(grid, 1, 1, RenderContext())
    assert header == "input 2 · flaky · transcript · 1 message"
    assert [v["role"] for v in views] == ["user"]
    header, views = opened_item(grid, 2, 0, RenderContext())
    assert header == "input 3 · sonnet · transcript · 2 messages"
    assert views[-1]["items"][0]["text"] == "S: ccc"
    assert "latency_s" in views[-1]["stats"]


async def test_running_the_same_comparison_again_calls_nothing() -> None:
    """The same variants and inputs on the same journal: every item is served (no call), the
    failed one stays failed, and the totals (journaled latencies included) are the same."""
    journal = Journal()
    first, _, _ = await _two(journal)
    sonnet_again, asked_again = echo_anthropic("S:")
    flaky_again = Flaky(fail={"bb"})
    again = await compare(
        {"sonnet": sonnet_again, "flaky": flaky_again}, INPUTS, journal=journal, progress=False
    )
    assert asked_again == []
    assert flaky_again.calls == []
    assert [r.content for r in again["sonnet"]] == [r.content for r in first["sonnet"]]
    assert again["flaky"][1] is None
    assert again["sonnet"].served == 3
    assert again["sonnet"].latencies == first["sonnet"].latencies
    assert all(latency is not None for latency in again["sonnet"].latencies)
    assert again.totals()["sonnet"].text() == first.totals()["sonnet"].text()


async def test_a_chat_variant_seeds_every_item_and_is_not_extended() -> None:
    """A Chat variant's system prompt reaches every item (its transcript shows it); the chat's
    history stays empty; a bare provider shares the chat's journal."""
    journal = Journal()
    terse = Chat(Flaky(), system="Answer tersely.", journal=journal, id="terse")
    sonnet, _ = echo_anthropic("S:")
    comparison = await compare({"terse": terse, "sonnet": sonnet}, ["q"], progress=False)
    assert comparison.chats["terse"] is terse
    assert comparison.chats["sonnet"].journal is journal
    assert comparison.chats["sonnet"].id == "compare-sonnet"
    assert terse.history == []
    _, views = opened_item(comparison.grid(), 0, 0, RenderContext())
    assert views[0]["role"] == "system"
    assert views[0]["items"][0]["text"] == "Answer tersely."


async def test_inputs_from_a_generator_reach_every_variant() -> None:
    """A generator of inputs is read once and given to every variant."""
    sonnet, asked = echo_anthropic("S:")
    flaky = Flaky()
    comparison = await compare(
        {"s": sonnet, "f": flaky}, (t for t in INPUTS), journal=Journal(), progress=False
    )
    assert sorted(asked) == INPUTS
    assert sorted(flaky.calls) == INPUTS
    assert comparison.inputs == INPUTS


async def test_to_pandas_has_a_row_per_input_and_each_variants_columns() -> None:
    """The table: the input, then per variant text, tokens, cost, latency and error."""
    pytest.importorskip("pandas")
    comparison, _, _ = await _two(Journal())
    table = comparison.to_pandas()
    assert list(table.index) == [0, 1, 2]
    assert list(table[("input", "")]) == INPUTS
    assert list(table.columns.get_level_values(0).unique()) == ["input", "sonnet", "flaky"]
    fields = list(table["sonnet"].columns)
    assert fields == ["text", "input_tokens", "output_tokens", "cost", "latency_s", "error"]
    assert list(table[("sonnet", "text")]) == ["S: a", "S: bb", "S: ccc"]
    errors = table[("flaky", "error")]
    assert errors.isna().tolist() == [True, False, True]
    assert errors.iloc[1] == "invalid_request"
    assert table.xs("input_tokens", axis=1, level=1)["sonnet"].sum() == sum(
        usage_of(t)[0] for t in INPUTS
    )


def test_compare_sync_works_from_plain_code() -> None:
    """``compare_sync`` runs the comparison without an event loop of the caller's."""
    sonnet, _ = echo_anthropic("S:")
    comparison = compare_sync({"s": sonnet}, ["x"], journal=Journal(), progress=False)
    assert comparison["s"][0].content == "S: x"


@pytest.mark.parametrize(
    ("variants", "words"),
    [
        ({}, "dict of name"),
        (["x"], "dict of name"),
        ({"": Flaky()}, "non-empty string"),
        ({"x": "not a provider"}, "is a Chat or a provider"),
    ],
)
async def test_bad_variants_are_refused_with_the_remedy(variants: Any, words: str) -> None:
    """No variants, a name that is not a string, or a value that is no chat or provider: refused."""
    with pytest.raises(ConfigurationError, match=words) as caught:
        await compare(variants, ["q"], journal=Journal())
    assert caught.value.code == "invalid_argument"


async def test_the_same_chat_twice_is_refused() -> None:
    """Two names for one Chat would run its map twice at once: refused, naming chat.fork()."""
    chat = Chat(Flaky(), journal=Journal())
    with pytest.raises(ConfigurationError, match=r"chat\.fork\(\)"):
        await compare({"a": chat, "b": chat}, ["q"])


async def test_the_static_table_is_the_saved_output_and_runs_nothing() -> None:
    """The comparison's own bundle is its static table and repr; a hostile answer stays text."""
    flaky = Flaky(lambda text: hostile.ONERROR + " " + hostile.JS_URL)
    comparison = await compare({"x": flaky}, ["<b>q</b>"], journal=Journal(), progress=False)
    bundle = comparison._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}
    assert bundle["text/html"] == comparison._repr_html_()
    assert unsafe_parts(bundle["text/html"]) == []
    assert hostile.ONERROR not in bundle["text/html"]
    assert bundle["text/plain"].startswith("Comparison(1 input × x)\n  x: 1 answered")
    assert comparison._repr_mimebundle_(include={"text/plain"}) == {"text/plain": repr(comparison)}


async def test_shown_in_a_notebook_it_is_the_grid_widget() -> None:
    """Shown in a notebook (the formatter ``import loom_nb`` registers comes before the
    comparison's own static bundle), a Comparison is the CompareGrid widget, with the same static
    table and the comparison's repr."""
    comparison, _, _ = await _two(Journal())
    data = displayed(comparison)
    assert "application/vnd.jupyter.widget-view+json" in data
    assert data["text/plain"] == repr(comparison)
    assert data["text/html"] == comparison.to_static_html()
    plain = displayed(comparison, include={"text/plain"})
    assert plain == {"text/plain": repr(comparison)}


class Boom(BaseException):
    """Raised by a provider past every handler of the map (as an interrupt would be)."""


class Slow(Flaky):
    """A provider whose calls never finish on their own; counts the ones cancelled."""

    def __init__(self) -> None:
        super().__init__()
        self.cancelled = 0
        self.in_flight = asyncio.Event()

    async def complete(self, request: Any, **_options: Any) -> Any:
        self.calls.append("call")
        self.in_flight.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        raise AssertionError("never reached: the call is cancelled")


class Exploding(Flaky):
    """A provider that raises ``Boom`` once the slow variant's calls are in flight."""

    def __init__(self, slow: Slow) -> None:
        super().__init__()
        self.slow = slow

    async def complete(self, request: Any, **_options: Any) -> Any:
        await self.slow.in_flight.wait()
        raise Boom


async def test_a_variant_that_raises_cancels_the_others() -> None:
    """When one variant's map raises, the other variants' calls in flight are cancelled and the
    error reaches the caller."""
    slow = Slow()
    with pytest.raises(Boom):
        await compare(
            {"slow": slow, "boom": Exploding(slow)}, ["q"], journal=Journal(), progress=False
        )
    assert slow.calls == ["call"]
    assert slow.cancelled == 1


async def test_a_comparison_on_each_journal_backend_is_served_with_its_latencies(
    open_journal: Callable[..., Journal],
) -> None:
    """On SQLite and PostgreSQL (directly and through PgBouncer) alike: a re-run calls nothing,
    and the served latencies and the opened transcript come from that journal."""
    journal = open_journal()
    first, asked, _ = await _two(journal)
    sonnet, asked_again = echo_anthropic("S:")
    again = await compare(
        {"sonnet": sonnet, "flaky": Flaky(fail={"bb"})}, INPUTS, journal=journal, progress=False
    )
    assert sorted(asked) == INPUTS
    assert asked_again == []
    assert again["sonnet"].latencies == first["sonnet"].latencies
    assert all(isinstance(s, float) for s in again["sonnet"].latencies)
    header, views = opened_item(again.grid(), 0, 0, RenderContext())
    assert header == "input 1 · sonnet · transcript · 2 messages"
    assert views[-1]["items"][0]["text"] == "S: a"
