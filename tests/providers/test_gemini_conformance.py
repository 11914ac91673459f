"""The conformance kit is green for GeminiProvider (complete and streamGenerateContent)."""

from __future__ import annotations

import httpx

from loom_nb.capabilities import Capabilities
from loom_nb.providers import GeminiProvider, ProviderUnderTest, run_llm_provider_conformance
from tests.providers.raw import raw_factory

GEMINI_OK = {
    "candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP", "index": 0}],
    "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
    "modelVersion": "gemini-2.5-flash", "responseId": "c",
}  # fmt: skip
GEMINI_SSE = (
    'data: {"candidates": [{"content": {"parts": [{"text": "o"}],"role": "model"},"index": 0}],"responseId": "c"}\r\n\r\n'
    'data: {"candidates": [{"content": {"parts": [{"text": "k"}],"role": "model"},"finishReason": "STOP","index": 0}],'
    '"usageMetadata": {"promptTokenCount": 1,"candidatesTokenCount": 1},"responseId": "c"}\r\n\r\n'
)


def make_gemini(capabilities: Capabilities) -> ProviderUnderTest:
    """A GeminiProvider on a MockTransport that logs every request body it receives."""
    log: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        log.append(request)
        if request.url.path.endswith(":streamGenerateContent"):
            return httpx.Response(
                200, content=GEMINI_SSE.encode(), headers={"content-type": "text/event-stream"}
            )
        return httpx.Response(200, json=GEMINI_OK)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    provider = GeminiProvider(
        "gemini-2.5-flash", api_key="k", capabilities=capabilities, http_client=client
    )
    return ProviderUnderTest(provider, lambda: [r.content for r in log])


async def test_gemini_provider_conforms() -> None:
    """GeminiProvider passes every conformance case."""
    cases = await run_llm_provider_conformance(make_gemini)
    assert cases == [
        "undeclared_image_refused",
        "declared_image_on_wire",
        "text_parts_not_coerced",
        "tool_round_trip_paired",
        "settings_honoured_or_refused",
        "output_schema_on_wire",
        "foreign_reasoning_not_sent",
        "reasoning_outside_assistant_refused",
    ]


async def test_hardened_error_paths_conform() -> None:
    """GeminiProvider passes the kit's hardened-error cases (echoed key, deep JSON) through make_raw."""
    cases = await run_llm_provider_conformance(
        make_gemini, make_raw=raw_factory(GeminiProvider, "gemini-2.5-flash")
    )
    assert cases[-2:] == ["echoed_key_redacted", "deep_json_malformed"]
