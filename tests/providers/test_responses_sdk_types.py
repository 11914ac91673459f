"""Every Responses API body loom_nb builds is valid for the ``openai`` SDK's request types (issue 30 item 8).

``ResponseCreateParamsNonStreaming`` / ``ResponseCreateParamsStreaming`` are OpenAI's own typed
description of ``POST /v1/responses``; ``tests/providers/sdk_types.py`` validates a body against
them with unknown keys refused. The cases cover each kind of input item the mapper writes (text,
image, file, fenced untrusted media, reasoning items, function calls and their outputs with
media) and the fields settings and structured output add. The recorded exchanges replayed in
``test_openai_responses.py`` are checked the same way there.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from loom_nb.capabilities import Capabilities
from loom_nb.content import (
    DataSource,
    FilePart,
    ImagePart,
    LlmRequest,
    Message,
    ReasoningPart,
    TextPart,
    ToolResultPart,
    ToolSpec,
    ToolUsePart,
)
from loom_nb.providers import OpenAIResponsesProvider
from loom_nb.settings import ModelSettings
from tests.providers.sdk_types import responses_body_errors

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
PDF = "JVBERi0xLjQKJcTl8uXrp/Og0MTGCjEgMCBvYmoKPDwvVHlwZS9DYXRhbG9nPj4KZW5kb2JqCnRyYWlsZXIKPDw+PgolJUVPRgo="
IMAGE = ImagePart(media_type="image/png", source=DataSource(data=PNG))
DOC = FilePart(media_type="application/pdf", source=DataSource(data=PDF), name="a.pdf")
TOOL = ToolSpec(
    name="shot",
    description="Take a screenshot",
    input_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
)


class City(BaseModel):
    """A structured answer."""

    city: str


def transcript() -> list[Message]:
    """A conversation with every kind of item the Responses mapper writes."""
    return [
        Message(role="user", content=[TextPart(text="look"), IMAGE, DOC]),
        Message(
            role="assistant",
            content=[
                ReasoningPart(
                    text="step",
                    data="gAAAAB-encrypted",
                    provider_data={
                        "vendor": "openai",
                        "api": "responses",
                        "id": "rs_1",
                        "summary": ["a"],
                    },
                ),
                TextPart(text="Taking a shot."),
                ToolUsePart(id="call_1", name="shot", input={"n": 1}, provider_data={"item_id": "fc_1"}),
                ToolUsePart(id="call_2", name="shot", input={"n": 2}),
            ],
        ),
        Message(
            role="user",
            content=[
                ToolResultPart(tool_use_id="call_1", content=[TextPart(text="here"), IMAGE]),
                ToolResultPart(
                    tool_use_id="call_2", content=[IMAGE], origin="tool:browser", is_error=True
                ),
                TextPart(text="and this page", origin="tool:web"),
                ImagePart(media_type="image/png", source=DataSource(data=PNG), origin="tool:web"),
            ],
        ),
    ]  # fmt: skip


CASES: dict[str, tuple[str, LlmRequest, dict[str, Any]]] = {
    "text": ("gpt-4o", LlmRequest(messages=[Message(role="user", content="hi")]), {}),
    "system and tools": (
        "gpt-4o",
        LlmRequest(system="Be brief.", messages=transcript()[:1], tools=[TOOL]),
        {},
    ),
    "every item kind": ("gpt-4o", LlmRequest(messages=transcript(), tools=[TOOL]), {}),
    "sampling settings": (
        "gpt-4.1",
        LlmRequest(messages=transcript()),
        {"settings": ModelSettings(max_tokens=99, temperature=0.5, top_p=0.9)},
    ),
    "reasoning settings and structured output": (
        "o4-mini",
        LlmRequest(messages=transcript()),
        {"settings": ModelSettings(reasoning_effort="low"), "output_type": City},
    ),
}


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_responses_body_is_valid_for_the_sdk_types(case: str, stream: bool) -> None:
    """The body as sent, streamed or not, validates against the SDK's create params."""
    model, request, kwargs = CASES[case]
    provider = OpenAIResponsesProvider(
        model, api_key="sk-test", capabilities=Capabilities(image=["*"], file=["*"])
    )
    body = provider.wire_body(request, stream=stream, **kwargs)
    assert responses_body_errors(body) is None, responses_body_errors(body)


def test_a_user_image_carries_detail() -> None:
    """An input_image in a user message says detail: auto (required there by ResponseInputImageParam)."""
    provider = OpenAIResponsesProvider(
        "gpt-4o", api_key="sk-test", capabilities=Capabilities(image=["*"])
    )
    body = provider.wire_body(LlmRequest(messages=[Message(role="user", content=[IMAGE])]))
    assert body["input"][0]["content"] == [
        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "auto"}
    ]


def test_the_checker_refuses_what_the_sdk_refuses() -> None:
    """The check is not vacuous: a missing detail, an unknown key and a wrong role are each refused."""
    image = {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"}
    base = {"model": "gpt-4o", "store": False}
    bad = [
        {**base, "input": [{"role": "user", "content": [image]}]},
        {**base, "input": [{"role": "user", "content": "hi", "colour": "red"}]},
        {**base, "input": [{"role": "tool", "content": "hi"}]},
    ]
    for body in bad:
        assert responses_body_errors(body) is not None, body
    assert responses_body_errors({**base, "input": [{"role": "user", "content": "hi"}]}) is None
