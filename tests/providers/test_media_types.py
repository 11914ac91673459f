"""Media types reach every vendor as lowercase type/subtype, whatever case and parameters the part used."""

from __future__ import annotations

import base64
import json

import pytest

from loom_nb.content import DataSource, FilePart, ImagePart, LlmRequest, Message, TextPart
from loom_nb.providers import AnthropicProvider, GeminiProvider, OpenAIProvider

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(16)).decode()


def _request() -> LlmRequest:
    return LlmRequest(
        messages=[
            Message(
                role="user",
                content=[
                    TextPart(text="look"),
                    ImagePart(media_type="Image/PNG; name=x", source=DataSource(data=PNG)),
                    FilePart(
                        media_type="APPLICATION/PDF", source=DataSource(data=PNG), name="a.pdf"
                    ),
                ],
            )
        ]
    )


@pytest.mark.parametrize(
    "provider",
    [
        AnthropicProvider("claude-sonnet-4-5", api_key="k"),
        OpenAIProvider("gpt-4o", api_key="k"),
        GeminiProvider("gemini-2.5-flash", api_key="k"),
    ],
    ids=["anthropic", "openai", "gemini"],
)
def test_wire_media_types_are_normalized(provider: object) -> None:
    """Case and parameters are dropped on the wire (the capability check already ignores them)."""
    body = json.dumps(provider.wire_body(_request()))  # type: ignore[attr-defined]
    assert "image/png" in body
    assert "application/pdf" in body
    assert "PNG" not in body.replace(PNG, "")
    assert "name=x" not in body
    assert "APPLICATION" not in body
