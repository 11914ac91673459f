"""Moved tool media is attributable (issue 14 item 7): each call's media gets a header naming it."""

from __future__ import annotations

from typing import Any

from loom_nb.content import (
    DataSource,
    ImagePart,
    LlmRequest,
    Message,
    TextPart,
    ToolResultPart,
    ToolUsePart,
)
from loom_nb.providers.conformance import CONFORMANCE_PNG
from loom_nb.providers.gemini_wire import gemini_request_body
from loom_nb.providers.openai_wire import openai_request_body


def two_calls_with_images() -> LlmRequest:
    def png() -> ImagePart:
        return ImagePart(media_type="image/png", source=DataSource(data=CONFORMANCE_PNG))

    return LlmRequest(
        messages=[
            Message(role="user", content="Compare the two charts."),
            Message(
                role="assistant",
                content=[
                    ToolUsePart(id="call_a", name="chart_sales", input={}),
                    ToolUsePart(id="call_b", name="chart_costs", input={}),
                ],
            ),
            Message(
                role="user",
                content=[
                    ToolResultPart(tool_use_id="call_a", content=[TextPart(text="sales"), png()]),
                    ToolResultPart(tool_use_id="call_b", content=[png(), png()]),
                    TextPart(text="Which grew?"),
                ],
            ),
        ]
    )


def kinds(parts: list[dict[str, Any]], text_key: str = "text") -> list[str]:
    return [p[text_key] if text_key in p else next(iter(p)) for p in parts]


def test_openai_moved_media_is_headed_per_call_in_call_order() -> None:
    """Each call's images follow a text naming its id and tool; the user's own text comes last."""
    trailing = openai_request_body(two_calls_with_images(), model="gpt-4o")["messages"][4]
    assert [p.get("text", p["type"]) for p in trailing["content"]] == [
        "[media returned by tool call call_a (chart_sales)]",
        "image_url",
        "[media returned by tool call call_b (chart_costs)]",
        "image_url",
        "image_url",
        "Which grew?",
    ]


def test_gemini_moved_media_is_headed_per_call_after_the_function_responses() -> None:
    """Gemini: the function responses, then each call's header and inlineData, then the user's text."""
    parts = gemini_request_body(two_calls_with_images())["contents"][2]["parts"]
    assert kinds(parts) == [
        "functionResponse",
        "functionResponse",
        "[media returned by tool call call_a (chart_sales)]",
        "inlineData",
        "[media returned by tool call call_b (chart_costs)]",
        "inlineData",
        "inlineData",
        "Which grew?",
    ]
