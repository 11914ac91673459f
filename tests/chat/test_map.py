"""``chat.map``: one journaled turn per input, in input order, concurrent, resumable; the chat is
left as it was."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
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
    """A reply that is not the output type fails its item (output_invalid), not the map; it is
    served as failed, and retry_failed asks the model again."""
    provider = Echo(structured=False)  # answers plain text, not JSON
    chat = chat_on(provider, tmp_path)
    result = await chat.map(["ab"], output_type=Word)
    assert result[0] is None
    assert result.errors[0].code == "output_invalid"
    again = await chat.map(["ab"], output_type=Word)  # served as failed: no second call
    assert again.errors[0].code == "output_invalid"
    assert len(provider.calls) == 1
    provider.structured = True  # the model answers properly now: retry_failed asks again
    retried = await chat.map(["ab"], output_type=Word, retry_failed=True)
    assert retried.errors == {}
    assert retried.outputs == [Word(word="ab", length=2)]
    assert len(provider.calls) == 2
    served = await chat.map(["ab"], output_type=Word)  # and the new answer is the one on record
    assert served.outputs == retried.outputs
    assert len(provider.calls) == 2


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
    concurrent = Echo(delay=0.002)
    wide = Chat(concurrent, journal=Journal(), id="wide")
    capped = await wide.map(WORDS, concurrency=8, limits=Limits(max_requests=5))
    assert len(concurrent.calls) == 5  # kept exactly although 8 could be in flight
    assert sum(r is not None for r in capped) == 5
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
    """Wrong concurrency, inputs or mode are ConfigurationErrors; batch mode on a provider with no
    batch API says to use live."""
    chat = chat_on(Echo(), tmp_path)
    with pytest.raises(ConfigurationError) as batch:
        await chat.map(["a"], mode="batch")
    assert batch.value.code == "batch_unsupported"
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


async def test_progress_true_outside_a_notebook_prints_a_line_to_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With progress=True and no kernel, the map prints its progress line to stderr at the end."""
    chat = chat_on(Echo(), tmp_path)
    await chat.map(["a", "b", "c"], progress=True)
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert "map mapper/map-" in last
    assert "3/3" in last
    assert "done" in last
    quiet = chat_on(Echo(), tmp_path / "..")
    await quiet.map(["x"], progress=False)
    assert capsys.readouterr().err == ""


async def test_an_update_too_soon_is_drawn_when_due_and_the_end_cancels_it() -> None:
    """A throttled update is drawn 0.2 s later on the loop (the views end on the latest counts
    though no update follows); a forced one draws at once and drops the one due."""
    progress = MapProgress("m", 3, lambda: False)
    seen = Seen()
    progress.attach(seen)
    progress.done = 1
    progress.update()  # the first draws at once
    progress.done = 2
    progress.update()  # too soon: due later
    assert [line.split(" · ")[0] for line in seen.lines] == ["map m: 1/3"]
    await asyncio.sleep(0.35)
    assert [line.split(" · ")[0] for line in seen.lines] == ["map m: 1/3", "map m: 2/3"]
    progress.done = 3
    progress.update()  # too soon again (on a loaded machine the loop may wake late: drawn now)
    progress.finished = True
    progress.update(force=True)  # the end: drawn now, nothing due after it
    drawn = [line.split(" · ")[0] for line in seen.lines]
    await asyncio.sleep(0.35)
    assert [line.split(" · ")[0] for line in seen.lines] == drawn  # nothing drawn after the end
    assert drawn[:3] == ["map m: 1/3", "map m: 2/3", "map m: 3/3"]
    assert set(drawn[3:]) <= {"map m: 3/3"}  # the late-woken case draws 3/3 twice, never more
    assert seen.lines[-1].endswith("done")


async def test_cost_sums_the_priced_answers_and_the_progress_line_shows_it(tmp_path: Path) -> None:
    """On a priced model, result.cost is the sum of each answer's price; the line shows dollars."""
    import httpx

    from loom_nb.chat._cost import format_cost, price_of
    from loom_nb.providers import AnthropicProvider

    body = {
        "id": "msg",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "fine"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1000, "output_tokens": 100},
    }
    client = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda r: httpx.Response(200, json=body))
    )
    provider = AnthropicProvider("claude-sonnet-4-5", api_key="k" * 24, http_client=client)
    chat = chat_on(provider, tmp_path)
    seen = Seen()
    result = await chat.map(["a", "b", "c"], progress=seen)
    one = price_of(provider, result[0])  # type: ignore[arg-type]
    assert one is not None
    assert one > 0
    assert result.cost == 3 * one
    assert result.costs == [one, one, one]
    assert format_cost(3 * one) in seen.lines[-1]


async def test_a_worker_elsewhere_runs_items_from_the_journal_alone_and_the_map_serves_them(
    tmp_path: Path,
) -> None:
    """load_plan + run_item on another journal handle (another process's) answer items; the map
    then serves them and calls only for the rest."""
    from loom_nb.chat._map_item import run_item

    provider = Echo()
    chat = chat_on(provider, tmp_path)
    words = WORDS[:10]
    holder = Seen()
    task = chat.map(words, concurrency=1, limits=Limits(max_requests=0), progress=holder)
    first = await task  # nothing runs (the limit), but the map's definition is journaled
    assert len(first.errors) == 10
    assert provider.calls == []

    elsewhere = Journal(str(tmp_path / "j.sqlite"))  # a second handle: another writer
    plan = load_plan(elsewhere, first.id)
    worker = Echo()
    for index in (0, 3, 7):
        response = await run_item(plan, index, provider=worker, journal=elsewhere)
        assert response.content == f"echo q{index}"
    elsewhere.close()
    assert worker.calls == ["q0", "q3", "q7"]

    result = await chat.map(words, concurrency=2)
    assert result.errors == {}
    assert result.served == 3
    assert sorted(provider.calls) == sorted(w for i, w in enumerate(words) if i not in (0, 3, 7))


async def test_join_must_be_a_bool_or_none(tmp_path: Path) -> None:
    """join is True, False or None (automatic); anything else is refused before any call."""
    provider = Echo()
    chat = chat_on(provider, tmp_path)
    with pytest.raises(ConfigurationError) as refused:
        await chat.map(["a"], join="yes")  # type: ignore[arg-type]
    assert refused.value.code == "invalid_argument"
    assert provider.calls == []


async def test_a_second_kernel_retries_what_the_first_left_failed_while_it_is_still_open(
    tmp_path: Path,
) -> None:
    """Kernel one (still open) left an item failed; kernel two, on its own handle, retries it and
    completes the map: kernel one's leases on the map and on the failed item were given back."""
    first = chat_on(Echo(fail={"q2"}), tmp_path)
    one = await first.map(WORDS[:5])
    assert set(one.errors) == {2}
    second_provider = Echo()
    second = chat_on(second_provider, tmp_path)  # another Journal handle on the same file
    two = await second.map(WORDS[:5], retry_failed=True)
    assert two.errors == {}
    assert second_provider.calls == ["q2"]
    summaries = {s.execution_id: s.status for s in second.journal.executions()}
    assert summaries[two.id] == "completed"
    assert first.journal is not second.journal


async def test_the_map_on_each_journal_backend_serves_and_retries(
    open_journal: Callable[..., Journal],
) -> None:
    """On SQLite and PostgreSQL (directly and through PgBouncer) alike: a re-run serves every
    finished item in one look at the journal, and retry_failed runs only the failed one."""
    provider = Echo(fail={"q1"})
    chat = Chat(provider, journal=open_journal(), id="backends")  # type: ignore[arg-type]
    first = await chat.map(WORDS[:6], concurrency=3)
    assert set(first.errors) == {1}
    again = await chat.map(WORDS[:6], concurrency=3)
    assert again.served == 6
    assert len(provider.calls) == 6
    provider.fail.clear()
    fixed = await chat.map(WORDS[:6], concurrency=3, retry_failed=True)
    assert fixed.errors == {}
    assert provider.calls[6:] == ["q1"]


@pytest.mark.usefixtures("sigint_raises")
def test_an_interrupt_of_map_sync_stops_the_map_and_is_raised(tmp_path: Path) -> None:
    """Ctrl-C while map_sync waits: no item starts, those in flight are cancelled (journaled as
    failed, never completed), the interrupt is raised; a re-run does the rest.

    The first eight calls answer, the next four hang until cancelled: the interrupt surely finds
    those four in flight, however late a loaded machine delivers it (``interrupt_main`` is seen
    when the waiting thread next wakes)."""
    import _thread
    import threading
    import time

    provider = Echo(hang_after=8)
    chat = chat_on(provider, tmp_path)

    heard = threading.Event()
    lost: list[bool] = []

    def interrupt_when_busy() -> None:
        deadline = time.monotonic() + 120
        while len(provider.calls) < 12 and time.monotonic() < deadline:
            time.sleep(0.001)
        _thread.interrupt_main()
        # Pressed again only if the first press goes unheard for a minute, so that such a fault
        # fails the test (below) instead of hanging it: the four calls hang until cancelled.
        if not heard.wait(60):
            lost.append(True)
            while not heard.is_set():
                _thread.interrupt_main()
                heard.wait(10)

    threading.Thread(target=interrupt_when_busy, daemon=True).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            chat.map_sync(WORDS, concurrency=4, progress=False)
    finally:
        heard.set()
    assert not lost, "the first interrupt was not heard within a minute"
    assert len(provider.calls) == 12  # the four hanging calls held every worker: none started
    assert provider.in_flight == 0
    map_id = next(
        s.execution_id for s in chat.journal.executions() if s.execution_id.count("/") == 1
    )
    outcomes = step_outcomes(chat.journal, [f"{map_id}/{i}" for i in range(len(WORDS))])
    states = sorted(o.state for o in outcomes.values())
    assert states == ["completed"] * 8 + ["failed"] * 4  # cancelled in flight: never completed
    provider.hang_after = None
    rest = chat.map_sync(WORDS, concurrency=4, progress=False)
    assert rest.errors == {}
    assert rest.served == 8
    assert len(provider.calls) == 12 + len(WORDS) - 8
