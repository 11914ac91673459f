"""``chat.map(..., mode="batch")``: the items through a vendor batch API, journaled and resumable."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from loom_nb import (
    AnthropicProvider,
    Chat,
    ConfigurationError,
    GeminiProvider,
    Journal,
    OpenAIProvider,
    ScriptedProvider,
)
from loom_nb.chat import _map_batch
from loom_nb.chat._cost import price_for
from loom_nb.content import LlmResponse
from loom_nb.errors import ProviderError
from loom_nb.providers._http import RetryPolicy
from tests.conftest import JournalBackend
from tests.providers.batch_fake import AnthropicBatches, OpenAIBatches

WORDS = ["alpha", "beta", "gamma", "delta"]


class Crash(Exception):
    """The kernel dying while the batch runs."""


class Sleeps:
    """Stands in for the poll interval's sleep: records it, and can crash on the n-th."""

    def __init__(self, crash_at: int | None = None) -> None:
        self.calls: list[float] = []
        self.crash_at = crash_at

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)
        if self.crash_at is not None and len(self.calls) >= self.crash_at:
            raise Crash


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> Sleeps:
    recorder = Sleeps()
    monkeypatch.setattr(_map_batch.BatchOptions, "sleep", recorder)
    return recorder


def _anthropic(fake: AnthropicBatches) -> AnthropicProvider:
    policy = RetryPolicy(max_retries=2, sleep=Sleeps(), jitter=lambda: 0.0)
    return AnthropicProvider(
        "claude-sonnet-4-5",
        api_key="sk-ant-test-key-123",
        http_client=fake.client(),
        retry_policy=policy,
    )


def _openai(fake: OpenAIBatches) -> OpenAIProvider:
    policy = RetryPolicy(max_retries=2, sleep=Sleeps(), jitter=lambda: 0.0)
    return OpenAIProvider(
        "gpt-4o-mini", api_key="sk-test-key-123", http_client=fake.client(), retry_policy=policy
    )


def _journal(tmp_path: Path) -> Journal:
    return Journal(str(tmp_path / "j.sqlite"))


async def test_anthropic_batch_map_end_to_end(tmp_path: Path, sleeps: Sleeps) -> None:
    """One batch for the map; answers in input order at half the live price; the chat is not extended."""
    fake = AnthropicBatches(polls_until_end=2)
    provider = _anthropic(fake)
    chat = Chat(provider, journal=_journal(tmp_path), id="b1", system="Answer in one word.")
    result = await chat.map(WORDS, mode="batch")
    assert result.errors == {}
    assert [r.content for r in result] == [f"reply to item-{i}" for i in range(4)]
    (submitted,) = fake.submits
    assert [r["custom_id"] for r in submitted["requests"]] == [f"item-{i}" for i in range(4)]
    assert [r["params"] for r in submitted["requests"]] == await _live_bodies(tmp_path, WORDS)
    assert fake.polls == 2
    assert sleeps.calls == [_map_batch.POLL_INTERVAL] * 2
    response = result[0]
    assert response is not None
    full = price_for(
        {"vendor": "anthropic", "model": "claude-sonnet-4-5"},
        response.model_copy(update={"provider_data": {}}),
    )
    assert full is not None
    assert result.cost == 4 * full / 2
    assert chat.history == []


async def _live_bodies(
    tmp_path: Path,
    inputs: list[object],
    *,
    chat_id: str = "b1",
    system: str | None = "Answer in one word.",
    store: object = None,
    tenant: str = "notebook",
) -> list[dict[str, object]]:
    """The bodies the same map sends live (same chat id, system, store and tenant; another
    journal), in input order (one call at a time)."""
    import json

    import httpx

    from tests.providers.batch_fake import fixture

    bodies: list[dict[str, object]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json=fixture("anthropic/results.jsonl")[0]["result"]["message"])

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    provider = AnthropicProvider(
        "claude-sonnet-4-5", api_key="sk-ant-test-key-123", http_client=client
    )
    journal = Journal(str(tmp_path / f"live-{chat_id}.sqlite"))
    chat = Chat(provider, journal=journal, id=chat_id, system=system, store=store, tenant=tenant)
    await chat.map(inputs, concurrency=1)
    return bodies


async def test_a_finished_batch_map_is_served_from_the_journal(
    tmp_path: Path, sleeps: Sleeps
) -> None:
    """Running the same map again, in batch or live mode, sends nothing: the items' steps are the live ones."""
    fake = AnthropicBatches()
    chat = Chat(_anthropic(fake), journal=_journal(tmp_path), id="b2")
    first = await chat.map(WORDS, mode="batch")
    calls = len(fake.requests)
    again = await chat.map(WORDS, mode="batch")
    assert [r.content for r in again] == [r.content for r in first]
    assert len(fake.requests) == calls
    assert again.served == len(WORDS)
    live = await chat.map(WORDS)  # same journaled requests: served, no Messages call
    assert len(fake.requests) == calls
    assert live.served == len(WORDS)
    assert live.cost == first.cost  # still priced at the batch rate


async def test_a_resume_mid_poll_polls_the_same_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kernel dying while the batch runs: a new Chat on the same journal file submits nothing and polls on."""
    fake = AnthropicBatches(polls_until_end=3)
    crashing = Sleeps(crash_at=2)  # dies before the second poll
    monkeypatch.setattr(_map_batch.BatchOptions, "sleep", crashing)
    chat = Chat(_anthropic(fake), journal=_journal(tmp_path), id="b3")
    with pytest.raises(Crash):
        await chat.map(WORDS, mode="batch")
    assert len(fake.submits) == 1
    assert fake.polls == 1
    chat.journal.close()

    later = Sleeps()
    monkeypatch.setattr(_map_batch.BatchOptions, "sleep", later)
    journal = _journal(tmp_path)  # a new process: a new journal handle on the same file
    resumed = Chat(_anthropic(fake), journal=journal, id="b3")
    result = await resumed.map(WORDS, mode="batch")
    assert len(fake.submits) == 1  # the same batch, never submitted again
    assert fake.polls == 3  # it went on polling it
    assert result.errors == {}
    assert [r.content for r in result] == [f"reply to item-{i}" for i in range(4)]
    assert len(later.calls) == 2  # the recorded poll was served without waiting


async def test_openai_batch_map_with_failed_items(tmp_path: Path, sleeps: Sleeps) -> None:
    """Errored and expired items are that item's error; the others answer; a retry sends only the failed ones."""
    fake = OpenAIBatches(outcomes={"item-1": "errored", "item-3": "expired"})
    chat = Chat(_openai(fake), journal=_journal(tmp_path), id="b4")
    result = await chat.map(WORDS, mode="batch")
    assert {i: e.code for i, e in result.errors.items()} == {
        1: "batch_item_errored",
        3: "batch_item_expired",
    }
    assert result[1] is None
    assert isinstance(result[0], LlmResponse)
    assert result[0].content == "reply to item-0"
    assert result.cost is not None
    assert result.cost > Decimal(0)
    fake.outcomes = {}
    retried = await chat.map(WORDS, mode="batch", retry_failed=True)
    assert retried.errors == {}
    assert len(fake.submits) == 2
    second = [line for line in fake.uploads[-1].split(b"\n") if b"custom_id" in line]
    assert len(second) == 2  # only the two failed items went again
    assert [r.content for r in retried] == [f"reply to item-{i}" for i in range(4)]


@pytest.mark.parametrize("kind", ["gemini", "scripted"])
async def test_providers_without_batches_are_refused_before_any_io(
    tmp_path: Path, kind: str
) -> None:
    """mode='batch' on Gemini or a scripted provider: ConfigurationError naming the remedy, nothing sent."""
    import httpx

    sent: list[httpx.Request] = []
    client = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda r: sent.append(r) or httpx.Response(500))
    )
    provider = (
        GeminiProvider("gemini-2.5-flash", api_key="k", http_client=client)
        if kind == "gemini"
        else ScriptedProvider([{"text": "x"}])
    )
    chat = Chat(provider, journal=_journal(tmp_path), id="b5")
    with pytest.raises(ConfigurationError) as caught:
        await chat.map(WORDS, mode="batch")
    assert caught.value.code == "batch_unsupported"
    assert "mode='live'" in caught.value.message
    assert sent == []
    assert chat.journal.executions() == []  # nothing journaled either
    if kind == "scripted":
        assert provider.requests == []  # type: ignore[union-attr]


def _worker(mode: str, journal: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(Path(__file__).with_name("batch_worker.py")), mode, journal],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=False,
    )


@pytest.mark.slow
def test_a_new_process_resumes_the_batch_a_killed_one_submitted(
    journal_backend: JournalBackend,
) -> None:
    """Kernel one submits and polls once, then is SIGKILLed; kernel two submits nothing and polls the same batch."""
    target = journal_backend.url("shared")
    first = _worker("first", target)
    assert first.returncode == -signal.SIGKILL, (first.returncode, first.stdout, first.stderr)
    journal = Journal(target)
    (batch,) = [e.execution_id for e in journal.executions() if e.execution_id.endswith("/batch-0")]
    steps = [e.step_id for e in journal.events(batch) if e.kind == "step_completed"]
    journal.close()
    assert steps == ["#batch:plan", "#batch:submit:0", "#batch:poll:0"]
    second = _worker("resume", target)
    assert second.returncode == 0, second.stderr
    seen = json.loads(second.stdout.strip().splitlines()[-1])
    assert seen["submits"] == 0  # the batch kernel one submitted, never a second one
    assert seen["polls"] == 1
    assert seen["fetches"] == 1
    assert seen["errors"] == []
    assert seen["texts"] == [f"reply to item-{i}" for i in range(4)]


class Watch:
    """A progress view: records what the bar shows, and can press Stop at the first poll."""

    def __init__(self, *, stop: bool = False) -> None:
        self.seen: list[tuple[int, int, int]] = []
        self.stop = stop

    def show(self, progress: object) -> None:
        self.seen.append((progress.in_flight, progress.limit, progress.done))  # type: ignore[attr-defined]
        if self.stop and progress.in_flight:  # type: ignore[attr-defined]
            progress.stop()  # type: ignore[attr-defined]


async def test_progress_shows_the_batch_counts_and_stop_leaves_the_batch_running(
    tmp_path: Path, sleeps: Sleeps
) -> None:
    """While polling the bar shows requests processing of the total; Stop ends the wait, a re-run polls the same batch."""
    fake = AnthropicBatches(polls_until_end=2)
    chat = Chat(_anthropic(fake), journal=_journal(tmp_path), id="b6")
    watch = Watch(stop=True)
    stopped = await chat.map(WORDS, mode="batch", progress=watch)
    assert stopped.stopped
    assert {e.code for e in stopped.errors.values()} == {"map_stopped"}
    assert (4, 4, 0) in watch.seen  # four requests processing of four
    assert fake.polls == 0
    watch = Watch()
    result = await chat.map(WORDS, mode="batch", progress=watch)
    assert result.errors == {}
    assert len(fake.submits) == 1
    assert fake.polls == 2
    assert watch.seen[-1][2] == 4


async def test_an_unanswered_openai_submit_is_found_not_sent_again(
    tmp_path: Path, sleeps: Sleeps
) -> None:
    """The vendor created the batch but its answer was lost: the map says so; the next run adopts that batch."""
    import httpx

    fake = OpenAIBatches()
    route = fake.route
    lost = [True]

    def losing(request: httpx.Request) -> httpx.Response:
        answer = route(request)
        if request.method == "POST" and request.url.path == "/v1/batches" and lost:
            lost.clear()
            raise httpx.ReadTimeout("the answer never came", request=request)
        return answer

    fake.route = losing  # type: ignore[method-assign]
    chat = Chat(_openai(fake), journal=_journal(tmp_path), id="b7")
    with pytest.raises(ProviderError) as caught:
        await chat.map(WORDS, mode="batch")
    assert caught.value.code == "batch_submit_uncertain"
    assert len(fake.submits) == 1  # the vendor has it
    result = await chat.map(WORDS, mode="batch")
    assert len(fake.submits) == 1  # found by its tag, not sent again
    assert fake.lists == 2
    assert result.errors == {}
    assert [r.content for r in result] == [f"reply to item-{i}" for i in range(4)]


async def test_a_poll_failing_for_a_passing_reason_does_not_end_the_map(
    tmp_path: Path, sleeps: Sleeps
) -> None:
    """A poll answered 503 after the provider's retries keeps the last state; the next poll goes on."""
    import httpx

    fake = AnthropicBatches(polls_until_end=1)
    route = fake.route
    outage = [1, 1, 1]  # one poll's worth of attempts (the provider retries twice)

    def flaky(request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and request.url.path.endswith(fake.batch_id) and outage:
            outage.pop()
            return httpx.Response(
                503, json={"type": "error", "error": {"type": "api_error", "message": "down"}}
            )
        return route(request)

    fake.route = flaky  # type: ignore[method-assign]
    chat = Chat(_anthropic(fake), journal=_journal(tmp_path), id="b8")
    result = await chat.map(WORDS, mode="batch")
    assert result.errors == {}
    assert outage == []
    assert len(sleeps.calls) == 2  # a second poll after the failed one


async def test_a_batch_map_validates_structured_output_per_item(
    tmp_path: Path, sleeps: Sleeps
) -> None:
    """With output_type the body asks for the schema, answers become outputs, a bad one is that item's error."""
    from pydantic import BaseModel

    class Word(BaseModel):
        word: str

    def reply(custom_id: str) -> str:
        return "not json" if custom_id == "item-2" else json.dumps({"word": custom_id})

    fake = OpenAIBatches(reply=reply)
    chat = Chat(_openai(fake), journal=_journal(tmp_path), id="b9")
    result = await chat.map(WORDS, mode="batch", output_type=Word)
    from tests.providers.batch_fake import uploaded_lines

    assert all(
        line["body"]["response_format"]["type"] == "json_schema" for line in uploaded_lines(fake)
    )
    assert {i: e.code for i, e in result.errors.items()} == {2: "output_invalid"}
    assert [o.word if o is not None else None for o in result.outputs] == [
        "item-0",
        "item-1",
        None,
        "item-3",
    ]


async def test_max_requests_bounds_the_items_a_batch_submits(
    tmp_path: Path, sleeps: Sleeps
) -> None:
    """limits=Limits(max_requests=2): two items go, two are refused before any I/O and go in the next batch."""
    from loom_nb import Limits

    fake = AnthropicBatches()
    chat = Chat(_anthropic(fake), journal=_journal(tmp_path), id="b10")
    first = await chat.map(WORDS, mode="batch", limits=Limits(max_requests=2))
    assert len(fake.submits[0]["requests"]) == 2
    assert {i: e.code for i, e in first.errors.items()} == {
        2: "budget_exceeded",
        3: "budget_exceeded",
    }
    assert [r.content if r else None for r in first][:2] == ["reply to item-0", "reply to item-1"]
    second = await chat.map(WORDS, mode="batch", limits=Limits(max_requests=10))
    assert second.errors == {}
    assert [r["custom_id"] for r in fake.submits[1]["requests"]] == ["item-2", "item-3"]
    assert second.served == 2


async def test_a_resume_follows_its_batch_and_sends_the_rest_next_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Items a resumed run has to do beyond the batch it follows are not sent twice or lost: the next run sends them."""
    from loom_nb import Limits

    fake = AnthropicBatches()
    monkeypatch.setattr(_map_batch.BatchOptions, "sleep", Sleeps(crash_at=1))
    chat = Chat(_anthropic(fake), journal=_journal(tmp_path), id="b11")
    with pytest.raises(Crash):
        await chat.map(WORDS, mode="batch", limits=Limits(max_requests=2))
    chat.journal.close()  # the kernel died
    monkeypatch.setattr(_map_batch.BatchOptions, "sleep", Sleeps())
    chat = Chat(_anthropic(fake), journal=_journal(tmp_path), id="b11")
    followed = await chat.map(WORDS, mode="batch")
    assert len(fake.submits) == 1
    assert {i: e.code for i, e in followed.errors.items()} == {
        2: "batch_item_not_sent",
        3: "batch_item_not_sent",
    }
    rest = await chat.map(WORDS, mode="batch")
    assert rest.errors == {}
    assert [r["custom_id"] for r in fake.submits[1]["requests"]] == ["item-2", "item-3"]
    assert rest.served == 2


async def test_an_unanswered_anthropic_submit_is_not_sent_again_until_asked(
    tmp_path: Path, sleeps: Sleeps
) -> None:
    """Anthropic cannot look a batch up: after a lost answer the map refuses to submit until retry_failed=True."""
    import httpx

    fake = AnthropicBatches()
    route = fake.route
    lost = [True]

    def losing(request: httpx.Request) -> httpx.Response:
        answer = route(request)
        if request.method == "POST" and lost:
            lost.clear()
            raise httpx.ReadTimeout("the answer never came", request=request)
        return answer

    fake.route = losing  # type: ignore[method-assign]
    chat = Chat(_anthropic(fake), journal=_journal(tmp_path), id="b12")
    for _ in range(2):
        with pytest.raises(ProviderError) as caught:
            await chat.map(WORDS, mode="batch")
        assert caught.value.code == "batch_submit_uncertain"
        assert len(fake.submits) == 1  # the one the vendor holds; never a second blindly
    assert "retry_failed=True" in caught.value.message
    result = await chat.map(WORDS, mode="batch", retry_failed=True)
    assert len(fake.submits) == 2
    assert result.errors == {}


async def test_a_batch_items_stored_media_is_resolved_for_the_chats_tenant_as_live(
    tmp_path: Path, sleeps: Sleeps
) -> None:
    """An item's image by ref is resolved from the store for the chat's tenant when its body is
    built (nothing is journaled for that): the submitted bodies are the live map's, the image's
    bytes included; a ref the tenant did not store is refused before anything is submitted."""
    import base64
    import io

    from PIL import Image

    from loom_nb import LocalContentStore
    from loom_nb.content import ImagePart, RefSource
    from loom_nb.errors import UnresolvedContentError

    buffer = io.BytesIO()
    Image.new("RGB", (3, 2), (200, 30, 90)).save(buffer, format="PNG")
    png = buffer.getvalue()
    store = LocalContentStore(tmp_path / "store")
    image = ImagePart(media_type="image/png", source=RefSource(ref=store.put(png, "team-a")))
    inputs: list[object] = [("Describe it.", image), "plain"]
    fake = AnthropicBatches()
    chat = Chat(
        _anthropic(fake), journal=_journal(tmp_path), id="media", store=store, tenant="team-a"
    )
    result = await chat.map(inputs, mode="batch")
    assert result.errors == {}
    (submitted,) = fake.submits
    params = [request["params"] for request in submitted["requests"]]
    blocks = params[0]["messages"][-1]["content"]
    assert [b["source"]["data"] for b in blocks if b["type"] == "image"] == [
        base64.b64encode(png).decode()
    ]

    live = await _live_bodies(
        tmp_path, inputs, chat_id="media", system=None, store=store, tenant="team-a"
    )
    assert params == live

    foreign = ImagePart(media_type="image/png", source=RefSource(ref=store.put(png[:-1], "team-b")))
    other = Chat(
        _anthropic(fake), journal=_journal(tmp_path), id="foreign", store=store, tenant="team-a"
    )
    with pytest.raises(UnresolvedContentError, match="content_access_denied"):
        await other.map([("Describe it.", foreign)], mode="batch")
    assert len(fake.submits) == 1
