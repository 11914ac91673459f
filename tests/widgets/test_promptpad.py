"""PromptPad on the kernel side: streaming updates, tool deltas, uploads resolved, refusals shown in place."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from loom_nb import PromptPad
from loom_nb.capabilities import Capabilities
from loom_nb.content import (
    ContentRef,
    DataSource,
    ImagePart,
    LlmRequest,
    RefSource,
    TextPart,
    ToolResultPart,
)
from loom_nb.errors import ProviderError
from loom_nb.providers import LlmStreamChunk, ScriptedProvider
from loom_nb.store import LocalContentStore, Principal
from tests.render import media
from tests.render.safety import unsafe_parts


def _watch(pad: PromptPad, name: str) -> list[Any]:
    seen: list[Any] = []
    pad.observe(lambda change: seen.append(change["new"]), names=name)
    return seen


async def test_streamed_text_arrives_in_several_updates() -> None:
    """Each text delta updates live_text, so the answer grows in place before it lands in the transcript."""
    pad = PromptPad(ScriptedProvider([{"text": "The sky is blue today."}], chunk_size=4))
    seen = _watch(pad, "live_text")
    response = await pad.send("colour?")
    assert response is not None
    assert response.content == "The sky is blue today."
    growing = [s for s in seen if s]
    assert len(growing) == 6
    assert growing[0] == "The "
    assert growing[-1] == "The sky is blue today."
    assert seen[-1] == ""  # cleared once the answer is in the conversation
    assert [m.role for m in pad.messages] == ["user", "assistant"]
    assert [v["role"] for v in pad.transcript.messages] == ["user", "assistant"]
    assert pad.busy is False


async def test_tool_calls_show_as_they_stream() -> None:
    """Tool deltas build up a live call (id and name first, then the input JSON piece by piece)."""
    provider = ScriptedProvider(
        [{"tool_calls": [{"id": "c1", "name": "lookup", "input": {"query": "lyon weather"}}]}],
        chunk_size=5,
    )
    pad = PromptPad(provider)
    seen = _watch(pad, "live_tools")
    await pad.send("look it up")
    calls = [s[0] for s in seen if s]
    assert calls[0] == {"index": 0, "id": "c1", "name": "lookup", "input_json": ""}
    assert len(calls) > 3
    assert calls[-1]["input_json"] == '{"query":"lyon weather"}'
    assert calls[1]["input_json"] == '{"que'


async def test_a_pending_tool_call_is_answered_with_an_error_on_the_next_send() -> None:
    """The pad runs no tools: the next message carries an error result for each open call, so it stays valid."""
    provider = ScriptedProvider(
        [{"tool_calls": [{"id": "c1", "name": "lookup", "input": {}}]}, {"text": "fine"}]
    )
    pad = PromptPad(provider)
    await pad.send("look")
    await pad.send("never mind")
    sent = provider.requests[-1].messages[-1].content
    assert isinstance(sent, list)
    assert isinstance(sent[0], ToolResultPart)
    assert sent[0].is_error
    assert sent[0].tool_use_id == "c1"
    assert sent[1] == TextPart(text="never mind")


async def test_uploads_are_attached_and_resolved_with_the_pads_principal(tmp_path: Path) -> None:
    """An upload's ref stays in the conversation; the provider receives its bytes inline."""
    store = LocalContentStore(tmp_path / "store")
    provider = ScriptedProvider([{"text": "a red image"}, {"text": "ok"}])
    pad = PromptPad(provider, store, tenant="team-a")
    assert pad.upload is not None
    picture = tmp_path / "red.png"
    picture.write_bytes(media.png())
    pad.upload.add_path(picture)
    assert pad.pending == ["image/png"]
    await pad.send("what is this?")
    first = pad.messages[0].content
    assert isinstance(first, list)
    assert first[1].source.kind == "ref"  # type: ignore[union-attr]
    seen = provider.requests[0].messages[0].content
    assert isinstance(seen, list)
    assert isinstance(seen[1], ImagePart)
    assert seen[1].source.kind == "data"
    assert base64.b64decode(seen[1].source.data) == picture.read_bytes()  # type: ignore[union-attr]
    assert pad.pending == []
    await pad.send("and now?")  # the upload is not attached twice
    assert provider.requests[1].messages[-1].content == "and now?"


def _refusal_pads(tmp_path: Path) -> dict[str, tuple[PromptPad, list[Any]]]:
    png = DataSource(data=base64.b64encode(media.png()).decode())
    store = LocalContentStore(tmp_path / "store")
    foreign = store.put(media.png(), "team-b")
    return {
        "UnsupportedModalityError": (
            PromptPad(ScriptedProvider([{"text": "x"}], capabilities=Capabilities())),
            [ImagePart(media_type="image/png", source=png)],
        ),
        "GuardError": (
            PromptPad(ScriptedProvider([{"text": "x"}])),
            [ToolResultPart(tool_use_id="ghost", content="<b>no call</b>")],
        ),
        "ProviderError": (PromptPad(ScriptedProvider([])), []),
        "UnresolvedContentError": (
            PromptPad(ScriptedProvider([{"text": "x"}]), store, tenant="team-a"),
            [ImagePart(media_type="image/png", source=RefSource(ref=foreign))],
        ),
    }


@pytest.mark.parametrize(
    "kind", ["UnsupportedModalityError", "GuardError", "ProviderError", "UnresolvedContentError"]
)
async def test_each_refusal_is_a_message_in_place(kind: str, tmp_path: Path) -> None:
    """A refused send returns None, leaves the conversation as it was, and shows kind, code, message, remedy."""
    pad, attachments = _refusal_pads(tmp_path)[kind]
    assert await pad.send("hello", attachments=attachments) is None
    error = pad.error
    assert error["kind"] == kind
    assert error["code"] == pad.last_exception.code  # type: ignore[union-attr]
    assert error["message"]
    assert error["remedy"]
    assert pad.messages == []
    assert pad.transcript.messages == []
    html = pad._repr_mimebundle_()[0]["text/html"]  # type: ignore[index]
    assert f"refused · {kind}" in html
    assert "Traceback" not in html
    assert unsafe_parts(html) == []


async def test_a_refusal_clears_on_the_next_good_send() -> None:
    """After a refusal, a message that goes through clears the error and joins the conversation."""
    pad = PromptPad(ScriptedProvider([{"text": "hi"}], capabilities=Capabilities()))
    png = ImagePart(
        media_type="image/png", source=DataSource(data=base64.b64encode(media.png()).decode())
    )
    assert await pad.send("look", attachments=[png]) is None
    assert pad.error["code"]
    assert await pad.send("just text") is not None
    assert pad.error == {}


class _Broken:
    """A provider whose stream fails with something that is not a LoomError (a bug)."""

    capabilities = Capabilities()

    async def complete(self, request: LlmRequest) -> Any:
        raise RuntimeError("socket exploded")

    async def stream(self, request: LlmRequest) -> AsyncIterator[LlmStreamChunk]:
        raise RuntimeError("socket exploded")
        yield  # pragma: no cover


async def test_an_unexpected_error_is_shown_and_reraised() -> None:
    """A non-Loom failure is shown as an unexpected error in place and still raised to the caller."""
    pad = PromptPad(_Broken())
    with pytest.raises(RuntimeError):
        await pad.send("hi")
    assert pad.error["code"] == "unexpected_error"
    assert pad.error["message"] == "socket exploded"
    assert pad.busy is False


async def test_the_send_button_message_streams_the_answer() -> None:
    """A ``send`` message from the front end runs the call in the background and fills the transcript."""
    pad = PromptPad(ScriptedProvider([{"text": "scripted answer"}], chunk_size=3))
    pad._on_custom_msg(pad, {"type": "send", "text": "hi"}, [])
    assert pad._tasks
    await asyncio.gather(*pad._tasks)
    assert [m.role for m in pad.messages] == ["user", "assistant"]
    assert pad.transcript.messages[-1]["items"][0]["text"] == "scripted answer"


async def test_an_empty_prompt_is_refused_in_place() -> None:
    """Sending nothing (no text, no attachment) is a clear refusal, not a call."""
    provider = ScriptedProvider([{"text": "x"}])
    pad = PromptPad(provider)
    assert await pad.send("") is None
    assert pad.error["code"] == "empty_prompt"
    assert provider.requests == []


def test_a_provider_without_stream_is_refused() -> None:
    """Building a pad over something that is not a provider raises a ConfigurationError naming the fix."""
    with pytest.raises(Exception, match="ScriptedProvider") as caught:
        PromptPad(object())
    assert getattr(caught.value, "code", None) == "invalid_provider"


async def test_repr_and_static_fallback() -> None:
    """text/plain is deterministic; text/html is the escaped conversation with no style/id/script."""
    pad = PromptPad(ScriptedProvider([{"text": "<img src=x onerror=alert(1)>"}]))
    await pad.send("<script>alert(2)</script>")
    bundle = pad._repr_mimebundle_()
    assert bundle is not None
    data = bundle[0]
    assert data["text/plain"] == (
        "PromptPad(ScriptedProvider · 2 messages · 0 in · 0 out · cost unknown)"
    )
    html = data["text/html"]
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert unsafe_parts(html) == []
    assert "<style" not in html
    state = pad.get_state()
    assert state["transcript"].startswith("IPY_MODEL_")
    assert state["upload"] is None


async def test_provider_error_keeps_the_http_status() -> None:
    """A provider's HTTP status is part of the message shown."""

    class _Failing(ScriptedProvider):
        async def stream(self, request: Any) -> AsyncIterator[LlmStreamChunk]:
            raise ProviderError("rate limited", code="rate_limited", status=429, provider="x")
            yield  # pragma: no cover

    pad = PromptPad(_Failing([]), principal=Principal(tenant="t"))
    assert await pad.send("hi") is None
    assert pad.error["message"] == "rate limited (HTTP 429)"
    assert pad.error["code"] == "rate_limited"


def test_ref_attachment_without_store_fails_closed() -> None:
    """A ref sent with no store to read it from is refused (never sent unresolved)."""
    provider = ScriptedProvider([{"text": "x"}])
    pad = PromptPad(provider)
    ref = ContentRef(address="sha256:" + "0" * 64)
    image = ImagePart(media_type="image/png", source=RefSource(ref=ref))
    assert asyncio.run(pad.send("hi", attachments=[image])) is None
    assert pad.error["kind"] == "UnresolvedContentError"
    assert provider.requests == []


async def test_an_exhausted_script_says_to_add_a_turn_not_to_check_a_key() -> None:
    """The remedy follows the provider kind: a scripted model's end is not an API-key problem."""
    pad = PromptPad(ScriptedProvider([]))
    assert await pad.send("hi") is None
    assert pad.error["code"] == "script_exhausted"
    assert "add a turn" in pad.error["remedy"]
    assert "API key" not in pad.error["remedy"]


@pytest.mark.parametrize(
    ("code", "status", "expected"),
    [
        ("authentication_failed", 401, "API key was refused"),
        ("rate_limited", 429, "wait"),
        ("not_found", 404, "model name"),
        ("provider_unreachable", None, "running at the provider's base_url"),
    ],
)
def test_provider_remedies_follow_the_failure(code: str, status: int | None, expected: str) -> None:
    """Each provider failure gets the remedy for what failed."""
    from loom_nb.render._refusal import refusal_view

    view = refusal_view(ProviderError("x", code=code, status=status, provider="anthropic"))
    assert expected in view["remedy"]


class _Hanging(ScriptedProvider):
    """Streams two text deltas, then waits until cancelled."""

    def __init__(self) -> None:
        super().__init__([])
        self.started = asyncio.Event()

    async def stream(self, request: Any, **_kwargs: Any) -> AsyncIterator[LlmStreamChunk]:
        yield LlmStreamChunk(kind="text", text="Partial ")
        yield LlmStreamChunk(kind="text", text="answer")
        self.started.set()
        await asyncio.Event().wait()
        yield LlmStreamChunk(kind="done")  # pragma: no cover


async def test_the_stop_button_keeps_the_partial_text_marked_stopped() -> None:
    """Stop from the front end cancels the stream; the partial text stays, marked stopped, not completed."""
    provider = _Hanging()
    pad = PromptPad(provider)
    pad._on_custom_msg(pad, {"type": "send", "text": "tell me"}, [])
    await provider.started.wait()
    assert pad.busy
    assert pad.live_text == "Partial answer"
    assert "1 message" in pad.status
    assert "streaming" in pad.status
    pad._on_custom_msg(pad, {"type": "stop"}, [])
    await asyncio.gather(*pad._tasks)
    assert not pad.busy
    assert pad.stopped
    assert [m.content for m in pad.messages] == ["tell me", "Partial answer"]
    assert [v["role"] for v in pad.transcript.messages] == ["user", "assistant"]
    assert pad.chat.turns[-1].status == "stopped"
    events = pad.chat.journal.events(pad.chat.id)
    steps = [(e.kind, e.step_id) for e in events if e.kind in ("step_failed", "step_completed")]
    assert steps == [("step_failed", "#chat:0:model"), ("step_completed", "#chat:1:stop")]
    assert "2 messages" in pad.status
    assert "streaming" not in pad.status
    html = pad._repr_mimebundle_()[0]["text/html"]  # type: ignore[index]
    assert "stopped: the last reply was cancelled" in html
    assert pad.stop() is False  # nothing in flight any more


async def test_a_pad_over_an_existing_chat_shares_its_history() -> None:
    """PromptPad(chat=...) is a face over that Chat: one history, one journal."""
    from loom_nb import Chat
    from loom_nb.journal import Journal

    chat = Chat(ScriptedProvider([{"text": "one"}, {"text": "two"}]), journal=Journal(), id="p")
    await chat("first")
    pad = PromptPad(chat=chat)
    assert [v["role"] for v in pad.transcript.messages] == ["user", "assistant"]
    await pad.send("second")
    assert [m.content for m in chat.history] == ["first", "one", "second", "two"]
    assert [e.step_id for e in chat.journal.events("p") if e.kind == "step_completed"] == [
        "#chat:0:model",
        "#chat:1:model",
    ]
