"""Vendor batch APIs (``providers._batch``): wire formats, results per item, retries, refusals."""

from __future__ import annotations

import json
from decimal import Decimal

import anthropic.types.messages as anthropic_batches
import httpx
import openai.types as openai_types
import pytest
from anthropic.types.messages.batch_create_params import BatchCreateParams
from openai.types.batch_create_params import BatchCreateParams as OpenAIBatchCreateParams
from openai.types.chat import ChatCompletion
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from openai.types.responses import Response as ResponsesResponse
from pydantic import BaseModel

from loom_nb.chat._cost import price_for
from loom_nb.content import LlmResponse, Usage
from loom_nb.errors import ConfigurationError, ProviderError, StructuredOutputError
from loom_nb.providers import (
    AnthropicProvider,
    GeminiProvider,
    OpenAIProvider,
    OpenAIResponsesProvider,
    ScriptedProvider,
)
from loom_nb.providers._batch import BATCH_ID_FIELD
from loom_nb.providers._http import RetryPolicy
from loom_nb.providers.batches import batch_api
from tests.providers.batch_fake import AnthropicBatches, OpenAIBatches, fixture, uploaded_lines
from tests.providers.sdk_types import check_typed

REQUEST = {"messages": [{"role": "user", "content": "What is 2+2?"}], "system": "Be brief."}


def _anthropic(fake: AnthropicBatches, policy: RetryPolicy, **kwargs: object) -> AnthropicProvider:
    return AnthropicProvider(
        "claude-sonnet-4-5",
        api_key="sk-ant-test-key-123",
        http_client=fake.client(),
        retry_policy=policy,
        **kwargs,
    )


def _openai(fake: OpenAIBatches, policy: RetryPolicy) -> OpenAIProvider:
    return OpenAIProvider(
        "gpt-4o-mini", api_key="sk-test-key-123", http_client=fake.client(), retry_policy=policy
    )


def test_fixtures_fit_the_vendor_sdk_types() -> None:
    """Every reconstructed fixture validates against the official SDK's type for it."""
    for name in ("anthropic/batch-created.json", "anthropic/batch-ended.json"):
        anthropic_batches.MessageBatch.model_validate(fixture(name), strict=False)
    for name in ("anthropic/results.jsonl", "anthropic/results-not-succeeded.jsonl"):
        for line in fixture(name):
            parsed = anthropic_batches.MessageBatchIndividualResponse.model_validate(line)
            assert parsed.result.type == line["result"]["type"]
    for name in ("openai/batch-validating.json", "openai/batch-completed.json"):
        openai_types.Batch.model_validate(fixture(name))
    openai_types.FileObject.model_validate(fixture("openai/file-uploaded.json"))
    (line,) = fixture("openai/output.jsonl")
    ChatCompletion.model_validate(line["response"]["body"])
    refused, expired = fixture("openai/errors.jsonl")
    assert refused["response"]["body"]["error"]["code"] == "context_length_exceeded"
    assert expired["response"] is None
    assert expired["error"]["code"] == "batch_expired"


async def test_anthropic_batch_end_to_end(fast_retries: RetryPolicy) -> None:
    """Submit sends each item's exact ``complete`` body; poll maps the counts; results map back by custom_id."""
    fake = AnthropicBatches(polls_until_end=2)
    provider = _anthropic(fake, fast_retries)
    api = batch_api(provider)
    items = [
        api.item(f"item-{i}", {**REQUEST, "messages": [{"role": "user", "content": f"q{i}"}]})
        for i in range(3)
    ]
    state = await api.submit(items, tag="t")
    (sent,) = fake.submits
    check_typed(sent, BatchCreateParams)
    assert [r["params"] for r in sent["requests"]] == [
        provider.wire_body({**REQUEST, "messages": [{"role": "user", "content": f"q{i}"}]})
        for i in range(3)
    ]
    assert fake.requests[0].headers["x-api-key"] == "sk-ant-test-key-123"
    assert fake.requests[0].headers["anthropic-version"] == "2023-06-01"
    assert (state.batch_id, state.ended, state.counts.processing) == (fake.batch_id, False, 3)
    state = await api.poll(state)
    assert not state.ended
    state = await api.poll(state)
    assert state.ended
    assert state.counts.succeeded == 3
    assert state.counts.total == 3
    outcomes = await api.results(state)
    assert set(outcomes) == {"item-0", "item-1", "item-2"}
    reply = outcomes["item-1"]
    assert isinstance(reply, LlmResponse)
    assert reply.content == "reply to item-1"
    assert reply.usage == Usage(input_tokens=11, output_tokens=36)
    assert reply.model == "claude-sonnet-4-5-20250929"
    assert reply.provider_data[BATCH_ID_FIELD] == fake.batch_id


async def test_anthropic_items_that_did_not_succeed(fast_retries: RetryPolicy) -> None:
    """Errored, expired, canceled and missing items each become a ProviderError with their own code."""
    outcomes_wanted = {
        "a": "errored",
        "b": "expired",
        "c": "canceled",
        "d": "missing",
        "e": "succeeded",
    }
    fake = AnthropicBatches(outcomes=outcomes_wanted)
    api = batch_api(_anthropic(fake, fast_retries))
    state = await api.submit([api.item(k, REQUEST) for k in outcomes_wanted], tag="t")
    state = await api.poll(state)
    assert (state.counts.errored, state.counts.expired, state.counts.canceled) == (1, 1, 1)
    outcomes = await api.results(state)
    codes = {k: getattr(v, "code", None) for k, v in outcomes.items()}
    assert codes == {
        "a": "batch_item_errored",
        "b": "batch_item_expired",
        "c": "batch_item_canceled",
        "d": "batch_item_missing",
        "e": None,
    }
    errored = outcomes["a"]
    assert isinstance(errored, ProviderError)
    assert errored.error_type == "invalid_request_error"
    assert not errored.retryable
    assert "max_tokens" in errored.message
    assert isinstance(outcomes["b"], ProviderError)
    assert outcomes["b"].retryable


async def test_openai_batch_end_to_end(fast_retries: RetryPolicy) -> None:
    """The input file holds each item's exact body; the batch is created for it; output and error files map back."""
    wanted = {"r0": "succeeded", "r1": "errored", "r2": "expired", "r3": "succeeded"}
    fake = OpenAIBatches(outcomes=wanted)
    provider = _openai(fake, fast_retries)
    api = batch_api(provider)
    state = await api.submit([api.item(k, REQUEST) for k in wanted], tag="digest-1")
    lines = uploaded_lines(fake)
    assert [line["custom_id"] for line in lines] == list(wanted)
    for line in lines:
        assert (line["method"], line["url"]) == ("POST", "/v1/chat/completions")
        assert line["body"] == provider.wire_body(REQUEST)
        check_typed(line["body"], CompletionCreateParamsNonStreaming)
    assert b'name="purpose"\r\n\r\nbatch' in fake.uploads[0]
    (created,) = fake.submits
    check_typed(created, OpenAIBatchCreateParams)
    assert created["input_file_id"] == "file-abc123"
    assert created["metadata"] == {"loom_nb_tag": "digest-1"}
    assert fake.requests[0].headers["authorization"] == "Bearer sk-test-key-123"
    assert (state.status, state.ended) == ("validating", False)
    state = await api.poll(state)
    assert state.ended
    assert (state.counts.succeeded, state.counts.errored) == (2, 2)
    outcomes = await api.results(state)
    assert isinstance(outcomes["r0"], LlmResponse)
    assert outcomes["r0"].content == "reply to r0"
    assert outcomes["r0"].usage == Usage(input_tokens=24, output_tokens=8)
    refused, expired = outcomes["r1"], outcomes["r2"]
    assert isinstance(refused, ProviderError)
    assert refused.code == "batch_item_errored"
    assert refused.status == 400
    assert refused.details["vendor_code"] == "context_length_exceeded"
    assert isinstance(expired, ProviderError)
    assert expired.code == "batch_item_expired"
    assert fake.fetches == 2


async def test_openai_responses_batches_go_to_v1_responses(fast_retries: RetryPolicy) -> None:
    """An OpenAIResponsesProvider's batch targets /v1/responses and reads Responses bodies."""
    fake = OpenAIBatches(endpoint="/v1/responses")
    provider = OpenAIResponsesProvider(
        "gpt-4o-mini",
        api_key="sk-test-key-123",
        http_client=fake.client(),
        retry_policy=fast_retries,
    )
    api = batch_api(provider)
    state = await api.submit([api.item("x", REQUEST)], tag="t")
    assert fake.submits[0]["endpoint"] == "/v1/responses"
    assert uploaded_lines(fake)[0]["url"] == "/v1/responses"
    state = await api.poll(state)
    outcomes = await api.results(state)
    ResponsesResponse.model_validate(fake._lines(error_file=False)[0]["response"]["body"])
    assert isinstance(outcomes["x"], LlmResponse)
    assert outcomes["x"].content == "reply to x"


class Answer(BaseModel):
    value: int


async def test_structured_output_is_validated_per_item(fast_retries: RetryPolicy) -> None:
    """With an output type, an item whose text is not the model is a StructuredOutputError for that item only."""
    fake = OpenAIBatches()
    api = batch_api(_openai(fake, fast_retries))
    item = api.item("x", REQUEST, output_type=Answer)
    assert item.body["response_format"]["type"] == "json_schema"
    state = await api.poll(await api.submit([item], tag="t"))
    outcomes = await api.results(state, {"x": Answer})
    assert isinstance(outcomes["x"], StructuredOutputError)


async def test_a_submit_is_never_sent_twice_after_a_timeout(fast_retries: RetryPolicy) -> None:
    """A submit whose answer timed out is batch_submit_uncertain at once; a 529 before it is retried."""
    attempts: list[int] = []

    def fail(request: httpx.Request) -> httpx.Response | None:
        attempts.append(1)
        if len(attempts) == 1:
            return httpx.Response(
                529,
                json={"type": "error", "error": {"type": "overloaded_error", "message": "busy"}},
            )
        raise httpx.ReadTimeout("no answer", request=request)

    fake = AnthropicBatches(fail_submit=fail)
    api = batch_api(_anthropic(fake, fast_retries))
    with pytest.raises(ProviderError) as caught:
        await api.submit([api.item("a", REQUEST)], tag="t")
    assert caught.value.code == "batch_submit_uncertain"
    assert len(attempts) == 2  # the 529 was retried, the timeout was not


async def test_polls_are_retried(fast_retries: RetryPolicy, sleeps: object) -> None:
    """A poll answered 503 is tried again (it changes nothing at the vendor)."""
    fake = AnthropicBatches()
    api = batch_api(_anthropic(fake, fast_retries))
    state = await api.submit([api.item("a", REQUEST)], tag="t")
    route = fake.route
    failures = [1]

    def flaky(request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and failures:
            failures.pop()
            return httpx.Response(
                503, json={"type": "error", "error": {"type": "api_error", "message": "x"}}
            )
        return route(request)

    fake.route = flaky  # type: ignore[method-assign]
    state = await api.poll(state)
    assert state.ended
    assert not failures


async def test_a_results_url_on_another_host_is_not_followed(fast_retries: RetryPolicy) -> None:
    """The key goes only to the configured host: a foreign results_url is replaced by the documented path."""
    fake = AnthropicBatches()
    api = batch_api(_anthropic(fake, fast_retries))
    state = await api.poll(await api.submit([api.item("a", REQUEST)], tag="t"))
    state = state.model_copy(update={"results": {"results_url": "https://evil.example/steal"}})
    outcomes = await api.results(state)
    assert isinstance(outcomes["a"], LlmResponse)
    assert all(r.url.host == "api.anthropic.com" for r in fake.requests)


async def test_openai_find_adopts_the_tagged_batch(fast_retries: RetryPolicy) -> None:
    """A batch created earlier with the same tag is found (a resume after an unanswered submit)."""
    fake = OpenAIBatches()
    api = batch_api(_openai(fake, fast_retries))
    items = [api.item("a", REQUEST)]
    assert await api.find("tag-1", items) is None
    await api.submit(items, tag="tag-1")
    found = await api.find("tag-1", items)
    assert found is not None
    assert found.batch_id == fake.batch_id
    assert await api.find("other", items) is None
    assert len(fake.submits) == 1


def test_providers_without_a_batch_api_are_refused_before_any_io() -> None:
    """Gemini, scripted and any other provider: ConfigurationError batch_unsupported naming the remedy."""
    calls: list[httpx.Request] = []
    client = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda r: calls.append(r) or httpx.Response(500))
    )
    for provider in (
        GeminiProvider("gemini-2.5-flash", api_key="k", http_client=client),
        ScriptedProvider([]),
    ):
        with pytest.raises(ConfigurationError) as caught:
            batch_api(provider)
        assert caught.value.code == "batch_unsupported"
        assert "mode='live'" in caught.value.message
    assert calls == []


def test_a_refused_item_is_refused_before_any_io(fast_retries: RetryPolicy) -> None:
    """An item a live call would refuse (an undeclared modality) is refused when the item is built."""
    fake = AnthropicBatches()
    api = batch_api(
        _anthropic(fake, fast_retries, capabilities=None, base_url="https://gateway.example")
    )
    image = {
        "type": "image",
        "media_type": "image/png",
        "source": {"kind": "data", "data": "iVBORw0KGgo="},
    }
    with pytest.raises(Exception) as caught:
        api.item("a", {"messages": [{"role": "user", "content": [image]}]})
    assert getattr(caught.value, "code", None) == "unsupported_modality"
    assert fake.requests == []


def test_batch_responses_are_priced_at_the_batch_rate() -> None:
    """A batch-marked response costs half: genai-prices' batch variant, or half the standard price without one."""
    usage = Usage(input_tokens=100_000, output_tokens=20_000)
    for vendor, model in (
        ("anthropic", "claude-sonnet-4-5"),
        ("openai", "gpt-4o-mini"),
        ("anthropic", "claude-3-5-haiku-latest"),
    ):
        identity = {"vendor": vendor, "model": model}
        live = price_for(identity, LlmResponse(usage=usage, model=model))
        batch = price_for(
            identity, LlmResponse(usage=usage, model=model, provider_data={BATCH_ID_FIELD: "b"})
        )
        assert live is not None
        assert batch is not None
        assert batch == live / 2, (model, live, batch)
        assert batch > Decimal(0)


def test_batch_request_bodies_are_json() -> None:
    """The submit body of an item is plain JSON (what the journal and the wire carry)."""
    fake = AnthropicBatches()
    api = batch_api(_anthropic(fake, RetryPolicy()))
    item = api.item("a", REQUEST)
    assert json.loads(json.dumps(item.body)) == item.body


async def test_a_batch_that_failed_as_a_whole_fails_every_item(fast_retries: RetryPolicy) -> None:
    """OpenAI's ``failed`` status (validation refused the file): every item is batch_failed with the vendor's reason."""
    fake = OpenAIBatches(failed="The model `gpt-x` does not exist")
    api = batch_api(_openai(fake, fast_retries))
    state = await api.poll(
        await api.submit([api.item("a", REQUEST), api.item("b", REQUEST)], tag="t")
    )
    openai_types.Batch.model_validate(fake._batch(ended=True))
    assert state.ended
    assert state.status == "failed"
    outcomes = await api.results(state)
    assert {k: getattr(v, "code", None) for k, v in outcomes.items()} == {
        "a": "batch_failed",
        "b": "batch_failed",
    }
    assert "gpt-x" in str(outcomes["a"])
    assert fake.fetches == 0


async def test_results_stream_line_by_line_under_the_size_cap(fast_retries: RetryPolicy) -> None:
    """A results file larger than max_response_bytes is read line by line; one line over it is response_too_large."""
    fake = AnthropicBatches()
    provider = _anthropic(fake, fast_retries, max_response_bytes=1500)
    api = batch_api(provider)
    items = [api.item(f"i{n}", REQUEST) for n in range(6)]
    state = await api.poll(await api.submit(items, tag="t"))
    outcomes = await api.results(state)  # six lines of ~600 bytes: the file is over the cap
    assert all(isinstance(o, LlmResponse) for o in outcomes.values())
    fake.reply = lambda custom_id: "x" * 2000
    with pytest.raises(ProviderError) as caught:
        await api.results(state)
    assert caught.value.code == "response_too_large"
