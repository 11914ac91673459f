"""TranscriptView kernel side: payload, in-place updates, on-demand media, mimebundle, Execution input."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest

from loom_nb import TranscriptView
from loom_nb.content import (
    DataSource,
    FilePart,
    ImagePart,
    LlmRequest,
    Message,
    RefSource,
    TextPart,
    ToolResultPart,
    ToolUsePart,
)
from loom_nb.errors import ConfigurationError, ContentValidationError
from loom_nb.render import AUDIO_TYPES
from loom_nb.render._resolve import NOT_AVAILABLE
from loom_nb.store import LocalContentStore, Principal
from tests.fixtures import hostile
from tests.render import media
from tests.render.safety import unsafe_parts

B64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")


def data(raw: bytes) -> DataSource:
    return DataSource(data=base64.b64encode(raw).decode())


def walk(node: Any, path: str = "") -> list[tuple[str, Any]]:
    """Every (key path, leaf) of a JSON value."""
    if isinstance(node, dict):
        return [leaf for k, v in node.items() for leaf in walk(v, f"{path}.{k}")]
    if isinstance(node, list):
        return [leaf for n, v in enumerate(node) for leaf in walk(v, f"{path}[{n}]")]
    return [(path, node)]


def test_repr_is_deterministic_and_lists_roles() -> None:
    """text/plain names the message count and roles, with no memory address."""
    view = TranscriptView(
        [Message(role="user", content="a"), Message(role="assistant", content="b")]
    )
    assert repr(view) == "TranscriptView(2 messages: user, assistant)"
    assert (
        view._repr_mimebundle_()[0]["text/plain"] == "TranscriptView(2 messages: user, assistant)"
    )


def test_mimebundle_has_widget_view_and_sanitizer_safe_html() -> None:
    """The bundle carries the widget view and a static text/html of the same transcript."""
    view = TranscriptView([Message(role="user", content="<b>hi</b>")])
    bundle = view._repr_mimebundle_()[0]
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == view.model_id
    assert "&lt;b&gt;hi&lt;/b&gt;" in bundle["text/html"]
    assert unsafe_parts(bundle["text/html"]) == []


def test_mimebundle_honours_exclude() -> None:
    """exclude=['text/html'] leaves the static fallback out."""
    view = TranscriptView([Message(role="user", content="x")])
    assert "text/html" not in view._repr_mimebundle_(exclude=["text/html"])[0]


def test_messages_payload_is_json_with_png_thumbnails() -> None:
    """The synced messages are plain JSON; images travel as base64 PNG thumbnails."""
    view = TranscriptView(
        [
            Message(
                role="user", content=[ImagePart(media_type="image/png", source=data(media.png()))]
            )
        ]
    )
    payload = json.loads(json.dumps(view.messages))
    image = payload[0]["items"][0]
    assert image["kind"] == "image"
    assert base64.b64decode(image["thumb"]).startswith(b"\x89PNG")
    assert "full" not in image  # full size comes on demand


def test_append_updates_in_place() -> None:
    """append adds one view and keeps the earlier ones identical."""
    view = TranscriptView([Message(role="user", content="one")])
    first = view.messages[0]
    changes: list[Any] = []
    view.observe(changes.append, names="messages")
    view.append(Message(role="assistant", content="two"))
    assert len(view.messages) == 2
    assert view.messages[0] == first
    assert view.messages[1]["items"][0]["text"] == "two"
    assert len(changes) == 1
    assert view.header == "transcript · 2 messages"


def test_appended_result_names_the_earlier_call() -> None:
    """A result appended after its call is labelled with the call's tool name."""
    view = TranscriptView(
        [Message(role="assistant", content=[ToolUsePart(id="t1", name="calc", input={})])]
    )
    view.append(
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "3"}]}
    )
    assert view.messages[1]["items"][0]["tool_name"] == "calc"


def test_assigning_messages_replaces_the_transcript() -> None:
    """Setting view.messages to Message objects renders them."""
    view = TranscriptView([Message(role="user", content="old")])
    view.messages = [Message(role="user", content="new"), {"role": "assistant", "content": "ok"}]
    assert [m["items"][0]["text"] for m in view.messages] == ["new", "ok"]
    assert repr(view) == "TranscriptView(2 messages: user, assistant)"


def test_assigning_bad_messages_is_a_clear_error() -> None:
    """A malformed message assigned raises ContentValidationError naming it."""
    view = TranscriptView([])
    with pytest.raises(ContentValidationError, match="message 0"):
        view.messages = [{"role": "robot"}]


def test_request_input_shows_system_and_tools() -> None:
    """An LlmRequest shows a system card and the tool names in the header."""
    request = LlmRequest(
        messages=[Message(role="user", content="q")],
        system="sys",
        tools=[{"name": "f", "description": "d", "input_schema": {}}],
    )
    view = TranscriptView(request)
    assert view.messages[0]["role"] == "system"
    assert view.header == "transcript · 1 message · tools: f"


def test_full_size_image_on_demand(tmp_path: Path) -> None:
    """A 'full' request returns the image re-encoded at reading size, for the viewer's tenant only."""
    with LocalContentStore(tmp_path / "s") as store:
        ref = store.put(media.png((900, 500)), "acme")
        msg = Message(
            role="user", content=[ImagePart(media_type="image/png", source=RefSource(ref=ref))]
        )
        view = TranscriptView([msg], store=store, principal=Principal("acme"))
        key = view.messages[0]["items"][0]["key"]
        reply = view.answer({"type": "full", "key": key, "ticket": "1"})
        assert reply["ticket"] == "1"
        assert base64.b64decode(reply["data"]).startswith(b"\x89PNG")
        other = TranscriptView([msg], store=store, principal=Principal("evil"))
        denied = other.answer({"type": "full", "key": key, "ticket": "2"})
        assert "data" not in denied
        assert denied["unavailable"] == f"unavailable: {NOT_AVAILABLE} {ref.address}"


def test_view_of_a_foreign_blob_equals_the_view_of_an_absent_one(tmp_path: Path) -> None:
    """TranscriptView's data and its on-demand replies do not tell another tenant's blob from no blob."""
    with LocalContentStore(tmp_path / "s") as store:
        ref = store.put(media.png((90, 50)), "holder")
        msg = Message(
            role="user", content=[ImagePart(media_type="image/png", source=RefSource(ref=ref))]
        )
        foreign = TranscriptView([msg], store=store, principal=Principal("prober"))
        key = foreign.messages[0]["items"][0]["key"]
        foreign_reply = foreign.answer({"type": "full", "key": key, "ticket": "1"})
        store.delete(ref.address, "holder")
        absent = TranscriptView([msg], store=store, principal=Principal("prober"))
        assert absent.messages == foreign.messages
        assert absent.answer({"type": "full", "key": key, "ticket": "1"}) == foreign_reply
        assert "holder" not in repr(foreign.messages) + repr(foreign_reply)
        html_of = lambda view: view._repr_mimebundle_()[0]["text/html"]  # noqa: E731
        assert html_of(absent) == html_of(foreign)


def test_pdf_page_on_demand() -> None:
    """A 'page' request returns that page as PNG; a page out of range is a reason."""
    view = TranscriptView(
        [
            Message(
                role="user",
                content=[FilePart(media_type="application/pdf", source=data(media.pdf(6)))],
            )
        ]
    )
    item = view.messages[0]["items"][0]
    assert item["pages"] == 6
    assert len(item["page_images"]) == 1  # the pager fetches the others on demand
    reply = view.answer({"type": "page", "key": item["key"], "page": 5, "ticket": "t"})
    assert base64.b64decode(reply["data"]).startswith(b"\x89PNG")
    assert (
        view.answer({"type": "page", "key": item["key"], "page": 9})["unavailable"] == "no page 10"
    )
    assert "unavailable" in view.answer({"type": "page", "key": "nope", "page": 0})


def test_custom_message_round_trip_through_the_comm() -> None:
    """A custom message from the front end gets its answer sent back through widget.send."""
    view = TranscriptView(
        [
            Message(
                role="user", content=[ImagePart(media_type="image/png", source=data(media.png()))]
            )
        ]
    )
    sent: list[Any] = []
    view.send = sent.append  # type: ignore[method-assign]
    view._handle_custom_msg({"type": "full", "key": "0.0", "ticket": "9"}, [])
    assert sent
    assert sent[0]["ticket"] == "9"
    assert "data" in sent[0]


def test_hostile_payload_puts_content_only_in_text_fields() -> None:
    """In the widget payload every media field is real base64 or an allowlisted type; hostile text only in text fields."""
    view = TranscriptView(hostile.hostile_messages())
    payload = json.loads(json.dumps(view.messages))
    for path, leaf in walk(payload):
        key = path.rsplit(".", 1)[-1].split("[")[0]
        if key in {"thumb", "full", "data", "page_images"} and leaf is not None:
            assert isinstance(leaf, str), path
            assert B64.fullmatch(leaf), path
        if key == "player_type":
            assert leaf in AUDIO_TYPES
        if key == "kind":
            assert leaf in {"text", "fence", "image", "audio", "file", "tool_use", "tool_result"}
    assert unsafe_parts(view.to_static_html()) == []
    assert len(json.dumps(payload)) < 400_000  # the 10 MB text is cut


def test_hostile_untrusted_spans_are_fence_views_in_the_payload() -> None:
    """Untrusted parts reach the widget as fence views labelled with their origin."""
    view = TranscriptView(hostile.hostile_messages())
    origins = [leaf for path, leaf in walk(view.messages) if path.endswith(".origin")]
    assert "tool:web<script>" in origins
    assert any(o.startswith("mcp:") for o in origins)


def test_execution_shows_latest_model_call_and_final_response() -> None:
    """An Execution shows the messages of its latest model call plus the response it got."""
    import asyncio

    from loom_nb.journal import Journal, create_llm_effect
    from loom_nb.providers import ScriptedProvider

    async def run() -> Any:
        provider = ScriptedProvider([{"text": "first"}, {"text": "second answer"}])
        effect = create_llm_effect(provider)
        journal = Journal()
        execution = journal.execution("x")
        await effect(execution, "#turn:0:llm", {"messages": [{"role": "user", "content": "hello"}]})
        await effect(
            execution,
            "#turn:1:llm",
            {
                "messages": [
                    {"role": "user", "content": "hello"},
                    {"role": "assistant", "content": "first"},
                    {"role": "user", "content": "again"},
                ],
                "system": "sys",
            },
        )
        return execution

    execution = asyncio.run(run())
    view = TranscriptView(execution)
    assert repr(view) == "TranscriptView(4 messages: user, assistant, user, assistant)"
    texts = [m["items"][0]["text"] for m in view.messages]
    assert texts == ["sys", "hello", "first", "again", "second answer"]


def test_text_part_in_widget_keeps_markup_as_text() -> None:
    """Markup in text reaches the payload unchanged, as a text field (the front end sets textContent)."""
    view = TranscriptView([Message(role="user", content=[TextPart(text=hostile.SCRIPT)])])
    assert view.messages[0]["items"][0] == {
        "kind": "text",
        "text": hostile.SCRIPT,
        "omitted": 0,
        "collapsed": False,
    }


def test_esm_never_uses_innerhtml() -> None:
    """The front-end code builds the DOM without innerHTML/outerHTML/insertAdjacentHTML/eval."""
    source = TranscriptView._esm
    for bad in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "eval(",
        "new Function",
        "document.write",
    ):
        assert bad not in source
    assert "textContent" in source


def test_tool_result_without_call_keeps_its_id() -> None:
    """A result whose call is not in the transcript still shows its id, with no tool name."""
    view = TranscriptView(
        [Message(role="user", content=[ToolResultPart(tool_use_id="zz", content="x")])]
    )
    item = view.messages[0]["items"][0]
    assert item["tool_use_id"] == "zz"
    assert item["tool_name"] is None


@pytest.mark.parametrize(
    ("argument", "value"),
    [
        ("store", ImagePart(media_type="image/png", source=DataSource(data="aGk="))),
        ("store", "/tmp/store"),
        ("principal", 3),
        ("principal", {"tenant": "acme"}),
    ],
)
def test_a_store_or_principal_the_view_cannot_use_is_refused_with_the_remedy(
    argument: str, value: Any
) -> None:
    # A view made with one would fail later, on the first ref it showed, with an AttributeError.
    with pytest.raises(ConfigurationError, match=f"{argument} must") as refused:
        TranscriptView([Message(role="user", content="hi")], **{argument: value})
    assert refused.value.code == "invalid_argument"
    assert refused.value.details["argument"] == argument
    assert "loom_nb." in str(refused.value)  # names what to pass instead
