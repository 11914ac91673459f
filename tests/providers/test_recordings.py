"""The fixture loader reads all three storage formats of the recorded traffic."""

from __future__ import annotations

import httpx
import pytest

from tests.providers.recordings import ReplayTransport, load_recording, recording_paths


@pytest.mark.parametrize("provider", ["anthropic", "openai", "gemini"])
def test_every_recording_loads_with_a_json_request(provider: str) -> None:
    """Every recording loads, and each request body parses as a JSON object."""
    paths = recording_paths(provider)
    assert paths
    for path in paths:
        recording = load_recording(path)
        assert recording.interactions, path
        for interaction in recording.interactions:
            assert isinstance(interaction.request.json(), dict)
            assert interaction.response.status in {200, 400}


def test_storage_formats_are_told_apart() -> None:
    """Each of the three formats is recognised as what SOURCES.md says it is."""
    assert load_recording("anthropic/tool-roundtrip-nonstream.yaml").storage_format == "pydantic-ai"
    assert (
        load_recording("anthropic/stream-parallel-tools-roundtrip.yaml").storage_format == "vcrpy"
    )
    assert (
        load_recording("anthropic/stream-tool-call-input-json-delta.json").storage_format
        == "opencode"
    )


async def test_gzip_sse_replays_decoded_through_httpx() -> None:
    """A gzip-stored SSE body reaches the client decoded, as httpx would decode the real wire."""
    recording = load_recording("anthropic/stream-parallel-tools-roundtrip.yaml")
    assert recording.interactions[0].response.headers["content-encoding"] == "gzip"
    replay = ReplayTransport(recording)
    async with replay.client() as client:
        response = await client.post("https://api.anthropic.com/v1/messages", json={})
    assert response.text.startswith("event: message_start")
    assert len(replay.requests) == 1


async def test_replay_refuses_more_requests_than_recorded() -> None:
    """Asking a replay for one request too many fails loudly."""
    replay = ReplayTransport(load_recording("anthropic/error-400-invalid-request.yaml"))
    async with replay.client() as client:
        first = await client.post("https://api.anthropic.com/v1/messages", json={})
        assert first.status_code == 400
        with pytest.raises(AssertionError, match="only 1 interactions"):
            await client.post("https://api.anthropic.com/v1/messages", json={})
    assert isinstance(first, httpx.Response)
