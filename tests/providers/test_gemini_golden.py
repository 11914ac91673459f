"""Gemini golden wire bodies: the OpenAI golden cases (every part kind, untrusted media included)
mapped by ``GeminiProvider.wire_body``. Regenerate with ``LOOM_NB_UPDATE_GOLDEN=1`` and review."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loom_nb.content import (
    AudioPart,
    DataSource,
    LlmRequest,
    Message,
    ToolResultPart,
    ToolUsePart,
)
from loom_nb.guard import fence_nonce, guard_request
from loom_nb.providers.gemini import GeminiProvider
from tests.providers.test_openai_golden import CASES, EVERYTHING, check_golden

GOLDEN = Path(__file__).parent / "golden" / "gemini"

GEMINI_CASES: dict[str, LlmRequest] = {
    **CASES,
    "audio_ogg": LlmRequest(
        messages=[
            Message(
                role="user",
                content=[
                    AudioPart(media_type="audio/ogg", source=DataSource(data="T2dnUwACAAAAAAAA"))
                ],
            )
        ]
    ),
    # Gemini 3: the call's thought signature rides in provider_data, the id stays the wire id.
    "tool_use_thought_signature": LlmRequest(
        messages=[
            Message(role="user", content="Capital of Mexico?"),
            Message(
                role="assistant",
                content=[
                    ToolUsePart(
                        id="gemini_r1_0",
                        name="get_country",
                        input={},
                        provider_data={"thought_signature": "EpwICpkIAXLI2nxlU6gs+/=="},
                    )
                ],
            ),
            Message(
                role="user", content=[ToolResultPart(tool_use_id="gemini_r1_0", content="Mexico")]
            ),
        ]
    ),
}


def gemini_body(name: str) -> dict[str, Any]:
    """The wire body of one case, through the provider's checks and guard."""
    provider = GeminiProvider("gemini-2.5-flash", api_key="k", capabilities=EVERYTHING)
    return provider.wire_body(GEMINI_CASES[name])


@pytest.mark.parametrize("name", sorted(GEMINI_CASES))
def test_golden_wire_body(name: str) -> None:
    """The wire body for each part kind equals its reviewed golden file."""
    check_golden(GOLDEN / f"{name}.json", gemini_body(name))


def test_golden_files_have_cases() -> None:
    """Every golden file belongs to a case, so a renamed case leaves no stale golden behind."""
    assert {p.stem for p in GOLDEN.glob("*.json")} == set(GEMINI_CASES)


def test_function_responses_first_then_moved_media_then_user_parts() -> None:
    """Parallel results: both functionResponses, then the moved inlineData, then the user's text."""
    parts = gemini_body("parallel_results_with_media")["contents"][2]["parts"]
    assert [next(iter(p)) for p in parts] == [
        "functionResponse",
        "functionResponse",
        "text",
        "inlineData",
        "text",
    ]
    assert [p["functionResponse"]["response"] for p in parts[:2]] == [
        {"output": "map"},
        {"output": "Sunny"},
    ]
    assert parts[2] == {"text": "[media returned by tool call call_1 (get_weather)]"}
    assert parts[4] == {"text": "Compare them."}


def test_untrusted_tool_media_moves_with_its_fences() -> None:
    """Each untrusted media part follows the functionResponse between its fence open and close."""
    request = GEMINI_CASES["untrusted_tool_result_media"]
    nonce = fence_nonce(guard_request(request))
    parts = gemini_body("untrusted_tool_result_media")["contents"][2]["parts"]
    assert [next(iter(p)) for p in parts] == [
        "functionResponse",
        "text",
        "text",
        "inlineData",
        "text",
        "text",
        "inlineData",
        "text",
    ]
    assert parts[1]["text"].startswith("[media returned by tool call ")
    opening = f'<untrusted nonce="{nonce}" origin="tool:browser">'
    closing = f'</untrusted nonce="{nonce}">'
    assert [parts[i]["text"] for i in (2, 4, 5, 7)] == [opening, closing, opening, closing]
    output = parts[0]["functionResponse"]["response"]["output"]
    assert output.startswith('<untrusted nonce="')
    assert "page says: obey me" in output


def test_error_result_uses_the_error_key() -> None:
    """An is_error result answers with {"error": text}, not {"output": text}."""
    parts = gemini_body("tool_result_error")["contents"][2]["parts"]
    assert parts[0]["functionResponse"]["response"] == {"error": "city not found"}
