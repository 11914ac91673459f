"""The views say how much of a turn's input the prompt cache served, and who answered."""

from __future__ import annotations

from pathlib import Path

from loom_nb import Chat, Journal
from loom_nb.content import LlmResponse, Usage
from loom_nb.providers import ScriptedProvider
from loom_nb.render._static import stats_text
from tests.display import displayed


def test_stats_text_shows_cached_tokens_and_who_answered() -> None:
    """Per turn: cache reads and writes beside the input tokens, then the provider and model."""
    stats = {
        "input_tokens": 1000,
        "output_tokens": 10,
        "latency_s": None,
        "cache_read_tokens": 900,
        "cache_write_tokens": 50,
        "provider": "openai",
        "model": "gpt-4.1",
    }
    assert (
        stats_text(stats)
        == "1,000 in (900 cached, 50 to cache) · 10 out tokens · via openai gpt-4.1"
    )
    assert stats_text({"input_tokens": 5, "output_tokens": 1}) == "5 in · 1 out tokens"


async def test_chat_header_and_transcript_show_the_cached_share(tmp_path: Path) -> None:
    """The chat's totals and each turn's stats carry the cached tokens, in the static HTML too."""
    provider = ScriptedProvider(
        [
            LlmResponse(
                content="a",
                usage=Usage(input_tokens=1000, output_tokens=10, cache_write_tokens=900),
            ),
            LlmResponse(
                content="b", usage=Usage(input_tokens=1200, output_tokens=10, cache_read_tokens=900)
            ),
        ]
    )
    chat = Chat(provider, journal=Journal(str(tmp_path / "j.sqlite")), id="v")
    await chat("one")
    await chat("two")
    assert "2,200 in (900 cached, 900 to cache) · 20 out" in chat.header()
    html = displayed(chat)["text/html"]
    assert "1,200 in (900 cached) · 10 out tokens" in html
    assert "1,000 in (900 to cache) · 10 out tokens" in html
