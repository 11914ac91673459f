"""``chat.map``: one journaled turn per input, in input order, concurrent, resumable; the chat is
left as it was."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic import BaseModel

from loom_nb import (
    BudgetExceededError,
    Chat,
    ConfigurationError,
    Journal,
    Limits,
    MapResult,
    ScriptedProvider,
    TextPart,
)
from loom_nb.chat import MapProgress
from loom_nb.chat._map_plan import load_plan
from loom_nb.journal._outcomes import step_outcomes
from tests.chat.map_provider import Echo

WORDS = [f"q{i}" for i in range(40)]


def chat_on(provider: object, tmp_path: Path, **options: object) -> Chat:
    journal = Journal(str(tmp_path / "j.sqlite"))
    return Chat(provider, journal=journal, id="mapper", **options)  # type: ignore[arg-type]


async def test_results_keep_the_input_order_although_items_finish_out_of_order(
    tmp_path: Path,
) -> None:
    """Items answered in any order come back in input order, each the answer to its own input."""

    class Shuffled(Echo):
        async def complete(self, request, **options):  # type: ignore[no-untyped-def]
            index = int(request.messages[-1].content[1:])
            await asyncio.sleep(0.002 * ((index * 7) % 5))  # later inputs often finish first
            return await super().complete(request, **options)

    provider = Shuffled()
    chat = chat_on(provider, tmp_path)
    result = await chat.map(WORDS, concurrency=6)
    assert isinstance(result, MapResult)
    assert [r.content if r else None for r in result] == [f"echo {w}" for w in WORDS]
    assert provider.calls != WORDS  # they were not answered in order, yet came back in order
    assert sorted(provider.calls) == sorted(WORDS)
    assert result.errors == {}
    assert result.usage.input_tokens == 10 * len(WORDS)


async def test_concurrency_bounds_the_calls_in_flight(tmp_path: Path) -> None:
    """At most ``concurrency`` provider calls are in flight, and that many are reached."""
    provider = Echo(delay=0.003)
    chat = chat_on(provider, tmp_path)
    result = await chat.map(WORDS, concurrency=3)
    assert provider.max_in_flight == 3
    assert result.pacing["max_in_flight"] == 3
    provider2 = Echo(delay=0.003)
    chat2 = Chat(provider2, journal=Journal(), id="other")
    await chat2.map(WORDS, concurrency=1)
    assert provider2.max_in_flight == 1


async def test_a_429_storm_halves_the_limit_waits_and_everything_completes(
    tmp_path: Path,
) -> None:
    """Rate-limit refusals with Retry-After cut the calls in flight, then every item completes."""
    provider = Echo(delay=0.002, storm=12, retry_after=0.01)
    chat = chat_on(provider, tmp_path)
    result = await chat.map(WORDS, concurrency=8)
    assert result.errors == {}
    assert [r.content if r else None for r in result] == [f"echo {w}" for w in WORDS]
    assert len(provider.calls) == len(WORDS) + 12  # each refused call was sent again
    assert result.pacing["throttled"] == 12
    limits = result.pacing["limits"]
    assert limits[0] == 8
    assert min(limits) <= 4
    # After the storm the calls in flight stayed below the ceiling for a while.
    after = provider.in_flight_seen[12 : 12 + 8]
    assert max(after) < 8


async def test_a_failing_item_does_not_stop_the_others_and_retry_failed_runs_only_it(
    tmp_path: Path,
) -> None:
    """A failed item is journaled with its error; a re-run serves it as failed, retry_failed reruns it."""
    provider = Echo(fail={"q5"})
    chat = chat_on(provider, tmp_path)
    result = await chat.map(WORDS, concurrency=4)
    assert result[5] is None
    assert set(result.errors) == {5}
    assert result.errors[5].code == "invalid_request"
    assert all(r is not None for i, r in enumerate(result) if i != 5)
    outcome = step_outcomes(chat.journal, [f"{result.id}/5"])[f"{result.id}/5"]
    assert outcome.state == "failed"
    assert outcome.error["code"] == "invalid_request"

    again = await chat.map(WORDS, concurrency=4)  # served: no call at all
    assert len(provider.calls) == len(WORDS)
    assert set(again.errors) == {5}
    assert again.errors[5].code == "invalid_request"
    assert again.served == len(WORDS)
    assert again.ran == 0

    provider.fail.clear()
    retried = await chat.map(WORDS, concurrency=4, retry_failed=True)
    assert provider.calls[len(WORDS) :] == ["q5"]  # only the failed item ran again
    assert retried.errors == {}
    assert retried[5] is not None
    assert retried[5].content == "echo q5"


async def test_running_the_same_map_again_serves_every_item_with_no_call(tmp_path: Path) -> None:
    """The same cell run again finds the same map; a new process (new journal handle) too."""
    provider = Echo()
    chat = chat_on(provider, tmp_path)
    first = await chat.map(WORDS)
    assert len(provider.calls) == len(WORDS)
    second = await chat.map(WORDS)
    assert len(provider.calls) == len(WORDS)
    assert second.id == first.id
    assert second.served == len(WORDS)
    assert [r.content for r in second if r] == [r.content for r in first if r]
    chat.journal.close()
    fresh = Echo()
    reopened = chat_on(fresh, tmp_path)
    third = await reopened.map(WORDS)
    assert fresh.calls == []
    assert third.served == len(WORDS)
    other = await reopened.map([*WORDS, "extra"])  # other inputs: another map
    assert other.id != first.id
    assert len(fresh.calls) == len(WORDS) + 1


async def test_the_chat_is_not_extended_and_each_item_is_seeded_with_it(tmp_path: Path) -> None:
    """Each item's request is the chat's system, history and settings plus its input; the chat's
    history, turns and usage are unchanged."""
    scripted = ScriptedProvider(
        [{"text": "first answer", "usage": {"input_tokens": 5, "output_tokens": 1}}]
        + [lambda r: {"text": "ok"}] * 3
    )
    chat = chat_on(scripted, tmp_path, system="Be brief.", settings={"temperature": 0.0})
    await chat("hello")
    history, turns, usage = chat.history, chat.turns, chat.usage
    result = await chat.map(["a", ("b",), {"text": "c"}])
    assert [r.content for r in result if r] == ["ok", "ok", "ok"]
    assert chat.history == history
    assert chat.turns == turns
    assert chat.usage == usage
    for request, text in zip(scripted.requests[1:], "abc", strict=True):
        assert request.system == "Be brief."
        assert request.settings is not None
        assert request.settings.temperature == 0.0
        assert [m.content for m in request.messages[:2]] == ["hello", "first answer"]
        assert request.messages[-1].content == text
    plan = load_plan(chat.journal, result.id)  # the definition is rebuilt from the journal alone
    assert len(plan) == 3
    assert plan.base.system == "Be brief."
    assert plan.chat_id == "mapper"
    assert plan.request(1).messages[-1].content == "b"


async def test_attachments_go_with_their_input(tmp_path: Path) -> None:
    """A tuple's (and a dict's) attachments become parts of that item's user message."""
    scripted = ScriptedProvider([lambda r: {"text": "seen"}] * 2)
    chat = chat_on(scripted, tmp_path)
    note = tmp_path / "note.txt"
    note.write_text("a small note")
    await chat.map([("read this", str(note)), {"text": "and this", "attachments": [str(note)]}])
    for request in scripted.requests:
        parts = request.messages[-1].content
        assert isinstance(parts, list)
        assert isinstance(parts[0], TextPart)
        assert len(parts) == 2


class Word(BaseModel):
    """A structured answer."""

    word: str
    length: int


async def test_output_type_validates_every_answer_and_fills_outputs(tmp_path: Path) -> None:
    """With output_type, each response's output is the validated model; outputs lists them."""
    provider = Echo(structured=True)
    chat = chat_on(provider, tmp_path)
    result = await chat.map(["ab", "abc"], output_type=Word)
    assert result.outputs == [Word(word="ab", length=2), Word(word="abc", length=3)]
    served = await chat.map(["ab", "abc"], output_type=Word)  # served answers validate too
    assert served.outputs == result.outputs
    assert len(provider.calls) == 2
    plan = load_plan(chat.journal, result.id)
    assert plan.output_type is Word


async def test_an_answer_that_does_not_validate_is_that_items_error(tmp_path: Path) -> None:
    """A reply that is not the output type fails its item (output_invalid), not the map."""
    provider = Echo(structured=False)  # answers plain text, not JSON
    chat = chat_on(provider, tmp_path)
    result = await chat.map(["ab"], output_type=Word)
    assert result[0] is None
    assert result.errors[0].code == "output_invalid"


async def test_to_pandas_has_a_row_per_input_and_the_outputs_as_columns(tmp_path: Path) -> None:
    """to_pandas: one row per input, indexed by the Series' labels, output fields as columns."""
    pd = pytest.importorskip("pandas")
    provider = Echo(structured=True, fail={"zz"})
    chat = chat_on(provider, tmp_path)
    series = pd.Series(["ab", "zz", "abcd"], index=["x", "y", "z"])
    result = await chat.map(series, output_type=Word)
    frame = result.to_pandas()
    assert list(frame.index) == ["x", "y", "z"]
    assert list(frame["input"]) == ["ab", "zz", "abcd"]
    assert frame.loc["x", "word"] == "ab"
    assert frame.loc["z", "length"] == 4
    assert frame.loc["y", "error"] == "invalid_request"
    assert pd.isna(frame.loc["y", "word"])
    assert list(frame["input_tokens"].dropna()) == [10, 10]


def test_map_sync_works_from_plain_code(tmp_path: Path) -> None:
    """map_sync runs the map with no event loop running and returns the result."""
    provider = Echo()
    chat = chat_on(provider, tmp_path)
    result = chat.map_sync(["one", "two"], concurrency=2)
    assert [r.content for r in result if r] == ["echo one", "echo two"]


async def test_a_spending_limit_stops_starting_items(tmp_path: Path) -> None:
    """limits= bounds the map: once reached, no item starts; those left say budget_exceeded."""
    provider = Echo()
    chat = chat_on(provider, tmp_path)
    result = await chat.map(WORDS, concurrency=1, limits=Limits(max_requests=5))
    assert len(provider.calls) == 5
    assert sum(r is not None for r in result) == 5
    assert {e.code for e in result.errors.values()} == {"budget_exceeded"}
    assert isinstance(result.errors[5], BudgetExceededError)
    assert "chat.map(..., limits=" in result.errors[5].message
    # The refusal was journaled, yet it is no failure: with the limit raised, the rest runs.
    rest = await chat.map(WORDS, concurrency=1, limits=Limits(max_requests=len(WORDS)))
    assert rest.errors == {}
    assert len(provider.calls) == len(WORDS)


class Seen:
    """A progress view that keeps what it was shown."""

    def __init__(self) -> None:
        self.progress: MapProgress | None = None
        self.lines: list[str] = []

    def show(self, progress: MapProgress) -> None:
        self.progress = progress
        self.lines.append(progress.line())


async def test_stop_cancels_the_calls_in_flight_and_a_rerun_goes_on(tmp_path: Path) -> None:
    """Stop starts nothing more and cancels what is in flight (journaled failed, never completed);
    running the map again runs exactly the items that did not finish."""
    provider = Echo(delay=0.05)
    chat = chat_on(provider, tmp_path)
    seen = Seen()
    task = asyncio.ensure_future(chat.map(WORDS, concurrency=4, progress=seen))
    await provider.reached(4)
    assert seen.progress is not None
    assert seen.progress.in_flight == 4
    assert seen.progress.stop() is True
    result = await task
    assert result.stopped
    assert len(result.errors) == len(WORDS)
    assert {e.code for e in result.errors.values()} == {"map_stopped"}
    outcomes = step_outcomes(chat.journal, [f"{result.id}/{i}" for i in range(len(WORDS))])
    assert {o.state for o in outcomes.values()} == {"failed"}
    assert len(outcomes) == 4
    provider.delay = 0
    again = await chat.map(WORDS, concurrency=4)
    assert again.errors == {}
    assert len(provider.calls) == 4 + len(WORDS)
    assert seen.progress.finished
    assert seen.progress.stopped
    assert "stopped" in seen.progress.line()


async def test_cancelling_the_awaiting_task_cancels_the_items_cleanly(tmp_path: Path) -> None:
    """Cancelling the task awaiting the map cancels its calls (journaled failed) and propagates."""
    provider = Echo(delay=0.05)
    chat = chat_on(provider, tmp_path)
    task = asyncio.ensure_future(chat.map(WORDS, concurrency=3))
    await provider.reached(3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert provider.in_flight == 0
    summaries = [s for s in chat.journal.executions() if "/map-" in s.execution_id]
    assert all(s.status != "completed" for s in summaries if s.execution_id.count("/") == 2)


async def test_bad_arguments_and_batch_mode_are_refused_with_the_remedy(tmp_path: Path) -> None:
    """Wrong concurrency, inputs or mode are ConfigurationErrors; batch mode says to use live."""
    chat = chat_on(Echo(), tmp_path)
    with pytest.raises(ConfigurationError) as batch:
        await chat.map(["a"], mode="batch")
    assert batch.value.code == "map_batch_unavailable"
    assert "mode='live'" in batch.value.message
    with pytest.raises(ConfigurationError):
        await chat.map(["a"], concurrency=0)
    with pytest.raises(ConfigurationError) as text:
        await chat.map("abc")
    assert text.value.code == "invalid_map_inputs"
    with pytest.raises(ConfigurationError) as keys:
        await chat.map([{"prompt": "a"}])
    assert "attachments" in keys.value.message


async def test_the_result_html_escapes_inputs_and_answers(tmp_path: Path) -> None:
    """Untrusted inputs and replies are escaped in the result's HTML."""
    chat = chat_on(Echo(), tmp_path)
    result = await chat.map(["<script>alert(1)</script>"])
    page = result._repr_html_()
    assert "<script>" not in page
    assert "&lt;script&gt;" in page
    assert "1 items" in repr(result) or "1 answered" in repr(result)
