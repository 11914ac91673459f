"""Structured output: each vendor's native JSON-schema mode on the wire, pydantic validation, the journal."""

from __future__ import annotations

import io
import json
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, Field

from loom_nb.content import LlmRequest, Message, ToolSpec
from loom_nb.errors import ConfigurationError, StructuredOutputError
from loom_nb.journal import Journal, create_llm_effect
from loom_nb.providers import (
    AnthropicProvider,
    GeminiProvider,
    OpenAIProvider,
    ScriptedProvider,
    collect_stream,
)
from loom_nb.providers._structured import anthropic_schema, strict_openai_schema
from loom_nb.settings import ModelSettings
from tests.providers.answers import anthropic_answer, openai_answer

HI = LlmRequest(messages=[Message(role="user", content="Who wrote Dune?")])


class Author(BaseModel):
    """Who wrote a book."""

    name: str = Field(description="Full name")
    born: int = Field(ge=1800)
    alias: str | None = None


class Book(BaseModel):
    """A book and its author (a nested model: $defs and a $ref)."""

    title: str
    author: Author = Field(description="The writer")


ANSWER = '{"title": "Dune", "author": {"name": "Frank Herbert", "born": 1920, "alias": null}}'


def gemini_answer(text: str) -> dict[str, Any]:
    return {
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 9},
    }  # fmt: skip


def mock(answer: dict[str, Any], bodies: list[dict[str, Any]]) -> httpx.AsyncClient:
    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json=answer)

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


async def test_openai_sends_a_strict_json_schema_and_returns_the_model() -> None:
    """response_format is json_schema, strict, every object closed and fully required; output is a Book."""
    bodies: list[dict[str, Any]] = []
    provider = OpenAIProvider(
        "gpt-4o",
        api_key="k",
        http_client=mock(openai_answer(ANSWER, model="gpt-4o", tokens_in=3, tokens_out=9), bodies),
    )
    reply = await provider.complete(HI, output_type=Book)
    assert isinstance(reply.output, Book)
    assert reply.output.author.born == 1920
    assert reply.content == ANSWER
    fmt = bodies[0]["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "Book"
    assert fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema["additionalProperties"] is False
    author = schema["$defs"]["Author"]
    assert author["required"] == ["name", "born", "alias"]
    assert author["additionalProperties"] is False
    # The $ref with a sibling description is inlined (strict mode takes a bare $ref only).
    assert "$ref" not in schema["properties"]["author"]
    assert schema["properties"]["author"]["description"] == "The writer"
    assert schema["properties"]["author"]["additionalProperties"] is False


def test_a_free_form_dict_field_falls_back_to_non_strict() -> None:
    """A dict[str, str] field cannot be expressed in strict mode: the schema goes as is, strict false."""

    class Tags(BaseModel):
        tags: dict[str, str]

    original = Tags.model_json_schema()
    schema, strict = strict_openai_schema(original)
    assert strict is False
    assert schema == original


async def test_anthropic_uses_native_output_config_format() -> None:
    """Anthropic gets output_config.format json_schema; numeric limits move into the description."""
    bodies: list[dict[str, Any]] = []
    provider = AnthropicProvider(
        "claude-sonnet-4-5",
        api_key="k",
        http_client=mock(anthropic_answer(ANSWER, tokens_in=3, tokens_out=9), bodies),
    )
    reply = await provider.complete(HI, output_type=Book)
    assert reply.output == Book.model_validate_json(ANSWER)
    fmt = bodies[0]["output_config"]["format"]
    assert fmt["type"] == "json_schema"
    born = fmt["schema"]["$defs"]["Author"]["properties"]["born"]
    assert "minimum" not in born
    assert "minimum: 1800" in born["description"]
    assert fmt["schema"]["$defs"]["Author"]["additionalProperties"] is False
    assert "tools" not in bodies[0]
    # The original schema is not mutated by the per-vendor rewrite.
    assert anthropic_schema(Book.model_json_schema()) != Book.model_json_schema()
    assert "minimum" in Book.model_json_schema()["$defs"]["Author"]["properties"]["born"]


async def test_gemini_uses_response_json_schema_alongside_settings() -> None:
    """Gemini gets responseMimeType application/json and responseJsonSchema in generationConfig."""
    bodies: list[dict[str, Any]] = []
    provider = GeminiProvider(
        "gemini-2.5-flash", api_key="k", http_client=mock(gemini_answer(ANSWER), bodies)
    )
    reply = await provider.complete(HI, output_type=Book, settings=ModelSettings(temperature=0.0))
    assert isinstance(reply.output, Book)
    config = bodies[0]["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"] == Book.model_json_schema()
    assert config["temperature"] == 0.0


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"title": "Dune", "author": {"name": "F", "born": 1500}}', "author.born"),
        ('{"title": "Dune"}', "author"),
    ],
)
async def test_an_answer_that_does_not_validate_is_a_typed_error_with_the_raw_text(
    text: str, field: str
) -> None:
    """A mismatch is StructuredOutputError(output_invalid) naming the field and keeping the text."""
    provider = OpenAIProvider(
        "gpt-4o",
        api_key="k",
        http_client=mock(openai_answer(text, model="gpt-4o", tokens_in=3, tokens_out=9), []),
    )
    with pytest.raises(StructuredOutputError) as info:
        await provider.complete(HI, output_type=Book)
    assert info.value.code == "output_invalid"
    assert info.value.raw_text == text
    assert info.value.details["field"] == field


async def test_text_that_is_not_json_or_empty_is_refused() -> None:
    """Prose, or no text at all, where JSON was asked for is StructuredOutputError too."""
    for text in ("Frank Herbert wrote it.", ""):
        provider = AnthropicProvider(
            "claude-sonnet-4-5",
            api_key="k",
            http_client=mock(anthropic_answer(text, tokens_in=3, tokens_out=9), []),
        )
        with pytest.raises(StructuredOutputError) as info:
            await provider.complete(HI, output_type=Book)
        assert info.value.raw_text == text


async def test_stream_validates_the_final_response() -> None:
    """A streamed call's done chunk carries the validated output."""
    sse = "".join(
        "data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": piece}}]}) + "\n\n"
        for piece in (ANSWER[:20], ANSWER[20:])
    )
    sse += 'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    bodies: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(request.content)
        return httpx.Response(
            200, content=sse.encode(), headers={"content-type": "text/event-stream"}
        )

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    provider = OpenAIProvider("gpt-4o", api_key="k", http_client=client)
    reply = await collect_stream(provider.stream(HI, output_type=Book))
    assert reply.output == Book.model_validate_json(ANSWER)
    assert b'"response_format"' in bodies[0]


async def test_a_schema_on_the_request_without_a_type_gives_the_json_value() -> None:
    """A request carrying output_schema but no output_type gets the decoded JSON as output."""
    provider = ScriptedProvider([{"text": '{"a": 1}'}])
    request = LlmRequest(messages=HI.messages, output_schema={"type": "object"})
    reply = await provider.complete(request)
    assert reply.output == {"a": 1}


async def test_output_type_must_be_a_pydantic_model() -> None:
    """Anything but a BaseModel subclass is ConfigurationError(invalid_output_type) before any I/O."""
    bodies: list[dict[str, Any]] = []
    provider = OpenAIProvider(
        "gpt-4o",
        api_key="k",
        http_client=mock(openai_answer("{}", model="gpt-4o", tokens_in=3, tokens_out=9), bodies),
    )
    for bad in (dict, Book(title="x", author=Author(name="y", born=1900)), "Book"):
        with pytest.raises(ConfigurationError) as info:
            await provider.complete(HI, output_type=bad)  # type: ignore[arg-type]
        assert info.value.code == "invalid_output_type"
    assert bodies == []


async def test_the_output_is_not_serialized() -> None:
    """response.output never reaches the response's JSON (the journal keeps only the text)."""
    reply = await ScriptedProvider([{"text": ANSWER}]).complete(HI, output_type=Book)
    assert "output" not in reply.model_dump(mode="json")
    assert isinstance(reply.output, Book)


def _step_inputs(journal: Journal, execution_id: str) -> list[dict[str, Any]]:
    out = io.StringIO()
    journal.export_jsonl(execution_id, out)
    inputs = []
    for line in out.getvalue().splitlines():
        record = json.loads(line)
        if record["kind"] == "step_completed":
            payload = record["payload"]
            inputs.append(json.loads(payload) if isinstance(payload, str) else payload)
    return inputs


async def test_effect_records_the_schema_and_replays_into_the_model() -> None:
    """create_llm_effect(output_type=) journals the schema and returns a fresh Book on replay, no provider."""
    journal = Journal()
    live = journal.execution("so")
    effect = create_llm_effect(ScriptedProvider([{"text": ANSWER}]), output_type=Book)
    first = await effect(live, "llm", HI)
    assert isinstance(first.output, Book)
    [payload] = _step_inputs(journal, "so")
    assert payload["input"]["output_schema"] == Book.model_json_schema()
    assert "output" not in payload["output"]

    replay = journal.execution("so")
    again = await create_llm_effect(ScriptedProvider([]), output_type=Book)(replay, "llm", HI)
    assert again.output == first.output
    assert again.output is not first.output


async def test_effect_surfaces_an_invalid_live_answer_as_a_failed_step() -> None:
    """A live answer that does not validate fails the step with output_invalid (journaled as failed)."""
    journal = Journal()
    execution = journal.execution("bad")
    effect = create_llm_effect(ScriptedProvider([{"text": "not json"}]), output_type=Book)
    with pytest.raises(StructuredOutputError):
        await effect(execution, "llm", HI)
    out = io.StringIO()
    journal.export_jsonl("bad", out)
    assert '"output_invalid"' in out.getvalue()


async def test_a_turn_that_calls_tools_is_not_validated_yet() -> None:
    """With tools, the model may call one before answering: that turn has output None, no error."""
    provider = ScriptedProvider([{"tool_calls": [{"id": "t1", "name": "lookup", "input": {}}]}])
    reply = await provider.complete(HI, output_type=Book)
    assert reply.output is None
    assert reply.tool_calls[0].name == "lookup"


@pytest.mark.parametrize(
    ("make", "tools"),
    [
        (
            lambda c: AnthropicProvider("claude-3-5-sonnet-latest", api_key="k", http_client=c),
            False,
        ),
        (
            lambda c: AnthropicProvider("claude-sonnet-4-20250514", api_key="k", http_client=c),
            False,
        ),
        (lambda c: GeminiProvider("gemini-2.5-flash", api_key="k", http_client=c), True),
    ],
)
async def test_structured_output_a_model_cannot_do_is_refused_before_io(
    make: Any, tools: bool
) -> None:
    """Older Claude models, and Gemini before 3 with tools, refuse output_type with a code; nothing is sent."""
    bodies: list[dict[str, Any]] = []
    provider = make(mock(anthropic_answer(ANSWER, tokens_in=3, tokens_out=9), bodies))
    tool = ToolSpec(name="f", description="d", input_schema={"type": "object"})
    request = LlmRequest(messages=HI.messages, tools=[tool] if tools else [])
    with pytest.raises(ConfigurationError) as info:
        await provider.complete(request, output_type=Book)
    assert info.value.code == "unsupported_output_type"
    assert bodies == []


async def test_newer_models_take_structured_output() -> None:
    """Opus 4.1, Haiku 4.5 and Gemini 3 with tools are let through."""
    for model in ("claude-opus-4-1-20250805", "claude-haiku-4-5"):
        bodies: list[dict[str, Any]] = []
        p = AnthropicProvider(
            model,
            api_key="k",
            http_client=mock(anthropic_answer(ANSWER, tokens_in=3, tokens_out=9), bodies),
        )
        await p.complete(HI, output_type=Book)
        assert "output_config" in bodies[0]
    bodies = []
    g = GeminiProvider(
        "gemini-3-pro-preview", api_key="k", http_client=mock(gemini_answer(ANSWER), bodies)
    )
    tool = ToolSpec(name="f", description="d", input_schema={"type": "object"})
    await g.complete(LlmRequest(messages=HI.messages, tools=[tool]), output_type=Book)
    assert "responseJsonSchema" in bodies[0]["generationConfig"]


class BookV2(BaseModel):
    """Book with one more field: a different schema."""

    title: str
    author: Author
    year: int | None = None


async def test_replay_with_a_changed_schema_or_settings_diverges() -> None:
    """The schema and the effective settings are step inputs: changing either on replay is input_changed."""
    from loom_nb.errors import ReplayDivergenceError

    journal = Journal()
    live = journal.execution("div")
    provider = ScriptedProvider([{"text": ANSWER}], settings=ModelSettings(temperature=0.1))
    await create_llm_effect(provider, output_type=Book)(live, "llm", HI)

    same = journal.execution("div")
    replayed = ScriptedProvider([], settings=ModelSettings(temperature=0.1))
    again = await create_llm_effect(replayed, output_type=Book)(same, "llm", HI)
    assert isinstance(again.output, Book)

    for provider_settings, output_type in (
        (ModelSettings(temperature=0.1), BookV2),
        (ModelSettings(temperature=0.9), Book),
    ):
        replay = journal.execution("div")
        effect = create_llm_effect(
            ScriptedProvider([], settings=provider_settings), output_type=output_type
        )
        with pytest.raises(ReplayDivergenceError) as info:
            await effect(replay, "llm", HI)
        assert info.value.code == "input_changed"
