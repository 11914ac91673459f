"""Streaming media over the embed limit from the kernel: the request/response protocol (kernel side)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from loom_nb import ReplayStepper, TranscriptView
from loom_nb.agent import agent_loop
from loom_nb.content import AudioPart, DataSource, FilePart, ImagePart, Message, RefSource
from loom_nb.journal import Journal
from loom_nb.providers import ScriptedProvider
from loom_nb.render import render_transcript
from loom_nb.render._resolve import NOT_AVAILABLE
from loom_nb.store import LocalContentStore, Principal, StoreResolver
from loom_nb.widgets._stream import looks_like, stream_messages
from tests.render import media

KIB = 1024


def inline(raw: bytes) -> DataSource:
    return DataSource(data=base64.b64encode(raw).decode())


def big_wav(size: int = 5 * 1024 * KIB) -> bytes:
    """A WAV over the 4 MiB embed limit (real header, then samples)."""
    return media.wav(seconds=size / 16000, rate=8000)


def assemble(messages: Iterable[tuple[dict[str, Any], list[Any]]]) -> tuple[dict[str, Any], bytes]:
    """What the front end does: check the header, put chunks in seq order, join them."""
    messages = list(messages)
    start, _ = messages[0]
    assert start["state"] == "start"
    chunks = messages[1:]
    assert len(chunks) == start["chunks"]
    parts: dict[int, bytes] = {}
    for content, buffers in chunks:
        assert content["state"] == "chunk"
        assert content["ticket"] == start["ticket"]
        assert len(buffers) == 1
        assert len(buffers[0]) == content["length"]
        assert content["offset"] == content["seq"] * start["chunk_bytes"]
        parts[content["seq"]] = bytes(buffers[0])
    assert sorted(parts) == list(range(start["chunks"]))
    return start, b"".join(parts[n] for n in sorted(parts))


def audio_view(raw: bytes, **kwargs: Any) -> TranscriptView:
    part = AudioPart(media_type="audio/wav", source=inline(raw))
    return TranscriptView([Message(role="user", content=[part])], **kwargs)


def test_audio_over_the_embed_limit_is_offered_for_streaming_not_embedded() -> None:
    """The view of a 5 MiB clip carries no bytes, only the offer; the static HTML says where it plays."""
    raw = big_wav()
    view = audio_view(raw)
    item = view.messages[0]["items"][0]
    assert "data" not in item
    assert item["unavailable"] is None
    assert item["stream"]["media_type"] == "audio/wav"
    assert "embed limit is 4.0 MB" in item["stream"]["reason"]
    assert item["size"] == len(raw)
    html = view._repr_mimebundle_()[0]["text/html"]
    assert "audio not embedded" in html
    assert "plays in a live kernel" in html
    assert "audio/wav · 5.0 MB" in html
    assert "<audio" not in html
    assert len(html) < 20_000  # the placeholder, not the clip
    small = audio_view(media.wav()).messages[0]["items"][0]
    assert "stream" not in small
    assert small["data"]


def test_an_image_too_large_to_decode_streams_its_original_bytes() -> None:
    """A 50-megapixel PNG gets no thumbnail: the view offers its original bytes, which stream exactly."""
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("1", (10_000, 5_000)).save(buffer, format="PNG")  # tiny file, too many pixels
    raw = buffer.getvalue()
    view = TranscriptView(
        [Message(role="user", content=[ImagePart(media_type="image/png", source=inline(raw))])]
    )
    item = view.messages[0]["items"][0]
    assert "thumb" not in item
    assert item["stream"]["media_type"] == "image/png"
    assert "image too large to decode (10000x5000 pixels" in item["stream"]["reason"]
    html = view.to_static_html()
    assert "<img" not in html
    assert "10000x5000" in html
    start, joined = assemble(view.stream({"type": "stream", "key": item["key"], "ticket": "i:1"}))
    assert joined == raw
    assert start["media_type"] == "image/png"
    assert start["sha256"] == hashlib.sha256(raw).hexdigest()


def test_stream_chunks_are_ordered_complete_and_hashed() -> None:
    """The reply is a start message then numbered chunks that reassemble the exact bytes."""
    raw = big_wav()
    view = audio_view(raw)
    key = view.messages[0]["items"][0]["key"]
    messages = list(view.stream({"type": "stream", "key": key, "ticket": "a:1"}))
    start, joined = assemble(messages)
    assert joined == raw
    assert start["size"] == len(raw)
    assert start["media_type"] == "audio/wav"
    assert start["sha256"] == hashlib.sha256(raw).hexdigest()
    assert start["chunks"] == -(-len(raw) // (512 * KIB))
    assert start["chunks"] > 1
    assert all(c["type"] == "stream" for c, _ in messages)
    # a smaller chunk size gives more chunks with the same bytes
    small = list(
        stream_messages({"key": key, "ticket": "t"}, view._ctx, "gone", chunk_bytes=100_000)
    )
    assert assemble(small)[1] == raw
    assert small[0][0]["chunks"] == -(-len(raw) // 100_000)


def test_stream_request_through_the_comm_sends_binary_buffers() -> None:
    """A custom message from the front end is answered by several sends, each chunk as a buffer."""
    # Built once: a PDF made twice can differ (its creation date has one-second resolution).
    document = media.pdf(2) + big_wav(1300 * KIB)
    view = TranscriptView(
        [
            Message(
                role="user",
                content=[FilePart(media_type="application/pdf", source=inline(document))],
            )
        ]
    )
    sent: list[tuple[dict[str, Any], list[Any]]] = []
    view.send = lambda content, buffers=None: sent.append((content, buffers or []))  # type: ignore[method-assign]
    view._handle_custom_msg({"type": "stream", "key": "0.0", "ticket": "x"}, [])
    start, joined = assemble(sent)
    assert joined == document
    assert start["media_type"] == "application/pdf"


def test_foreign_and_absent_blobs_get_the_same_refusal(tmp_path: Path) -> None:
    """Streaming reads under the view's principal: another tenant's blob and no blob read alike."""
    raw = big_wav()
    with LocalContentStore(tmp_path / "s") as store:
        ref = store.put(raw, "holder")
        msg = Message(
            role="user", content=[AudioPart(media_type="audio/wav", source=RefSource(ref=ref))]
        )
        owner = TranscriptView([msg], store=store, principal=Principal("holder"))
        key = owner.messages[0]["items"][0]["key"]
        assert assemble(owner.stream({"key": key, "ticket": "1"}))[1] == raw
        prober = TranscriptView([msg], store=store, principal=Principal("prober"))
        foreign = list(prober.stream({"key": key, "ticket": "1"}))
        store.delete(ref.address, "holder")
        absent = list(
            TranscriptView([msg], store=store, principal=Principal("prober")).stream(
                {"key": key, "ticket": "1"}
            )
        )
        # the owner's view was drawn while the blob was there; deleted since, it is refused too
        gone = list(owner.stream({"key": key, "ticket": "1"}))
    assert foreign == absent
    assert len(foreign) == 1
    assert foreign[0][1] == []
    content = foreign[0][0]
    assert content["state"] == "error"
    assert content["code"] == "refused"
    assert content["error"] == f"unavailable: {NOT_AVAILABLE} {ref.address}"
    assert "holder" not in repr(foreign)
    assert gone[0][0]["code"] == "refused"


def test_a_key_or_address_not_in_the_view_is_refused(tmp_path: Path) -> None:
    """The front end can only name parts of its own view: a made-up key or another address is missing."""
    with LocalContentStore(tmp_path / "s") as store:
        mine = store.put(big_wav(), "acme")
        other = store.put(media.pdf(1), "acme")  # same tenant, but not in this view
        msg = Message(
            role="user", content=[AudioPart(media_type="audio/wav", source=RefSource(ref=mine))]
        )
        view = TranscriptView([msg], store=store, principal=Principal("acme"))
        key = view.messages[0]["items"][0]["key"]
        for request in (
            {"key": "9.9", "ticket": "1"},
            {"key": 0, "ticket": "1"},
            {"ticket": "1"},
            {"key": key, "address": other.address, "ticket": "1"},
            {"key": key, "address": None, "ticket": "1"},
        ):
            (content, buffers), *rest = view.stream(request)
            assert not rest
            assert not buffers
            assert content["code"] == "missing", request
            assert content["error"] == "no such media in this transcript"
        ok = list(view.stream({"key": key, "address": mine.address, "ticket": "2"}))
        assert ok[0][0]["state"] == "start"


@pytest.mark.parametrize(
    ("part", "code"),
    [
        (FilePart(media_type="text/html", source=inline(b"<script>alert(1)</script>")), "bad_type"),
        (
            ImagePart(media_type="image/svg+xml", source=inline(b"<svg onload='alert(1)'/>")),
            "bad_type",
        ),
        (
            AudioPart(media_type="text/html", source=inline(b"<script>alert(1)</script>")),
            "bad_type",
        ),
        (
            AudioPart(media_type="audio/wav", source=inline(b"<html><script>alert(1)</script>")),
            "bad_bytes",
        ),
        (
            FilePart(media_type="application/pdf", source=inline(b"<html>not a pdf</html>")),
            "bad_bytes",
        ),
    ],
)
def test_hostile_media_types_and_bytes_are_never_streamed(part: Any, code: str) -> None:
    """Markup never reaches a blob: URL: its type is refused, and bytes must match the claimed type."""
    view = TranscriptView([Message(role="user", content=[part])])
    messages = list(view.stream({"key": "0.0", "ticket": "h"}))
    assert len(messages) == 1
    assert messages[0][0]["code"] == code
    assert messages[0][1] == []


def test_over_the_stream_budget_is_too_large() -> None:
    """A part over the view's max_stream_bytes is refused as too large, naming the budget."""
    raw = big_wav()
    view = audio_view(raw)
    view._ctx.max_stream_bytes = 1024 * KIB
    (content, _), *rest = view.stream({"key": "0.0", "ticket": "b"})
    assert not rest
    assert content["code"] == "too_large"
    assert "streams up to 1048576 bytes" in content["error"]


def test_a_pdf_over_the_render_limit_is_a_placeholder_that_streams(tmp_path: Path) -> None:
    """A ref over the 64 MiB render limit is not a dead end: offered for streaming, shown as such."""
    with LocalContentStore(tmp_path / "s") as store:
        raw = media.pdf(1) + b"%" + b"x" * (65 * 1024 * KIB)
        ref = store.put(raw, "acme")
        part = FilePart(media_type="application/pdf", source=RefSource(ref=ref), name="scan.pdf")
        view = TranscriptView(
            [Message(role="user", content=[part])], store=store, principal=Principal("acme")
        )
        item = view.messages[0]["items"][0]
        assert item["stream"] == {
            "media_type": "application/pdf",
            "reason": f"too large to display ({len(raw)} bytes)",
        }
        assert not item.get("unavailable")
        start, joined = assemble(view.stream({"key": item["key"], "ticket": "p"}))
        assert start["size"] == len(raw)
        assert joined[:5] == b"%PDF-"
        html = render_transcript(
            [Message(role="user", content=[part])], store=store, principal=Principal("acme")
        )
        assert "document not embedded" in html
        assert "opens in a live kernel" in html
        assert "scan.pdf" in html
        stranger = render_transcript(
            [Message(role="user", content=[part])], store=store, principal=Principal("x")
        )
        assert NOT_AVAILABLE in stranger
        assert "not embedded" not in stranger


async def test_stepper_streams_media_of_the_turn_it_showed(tmp_path: Path) -> None:
    """The stepper answers stream requests for the turn named in the request only."""
    raw = big_wav()
    with Journal() as journal, LocalContentStore(tmp_path / "s") as store:
        ref = store.put(raw, "acme")
        audio = AudioPart(media_type="audio/wav", source=RefSource(ref=ref))
        await agent_loop(
            journal.execution("media-run", principal=Principal("acme")),
            ScriptedProvider([{"text": "heard it"}]),
            [],
            [Message(role="user", content=[audio])],
            resolver=StoreResolver(store),
        )
        stepper = ReplayStepper(journal, "media-run", store=store, principal=Principal("acme"))
        item = stepper.current["messages"][0]["items"][0]
        assert item["stream"]["media_type"] == "audio/wav"
        assert assemble(stepper.stream({"key": item["key"], "turn": 0, "ticket": "s"}))[1] == raw
        assert (
            next(stepper.stream({"key": item["key"], "turn": 5, "ticket": "s"}))[0]["code"]
            == "missing"
        )
        stranger = ReplayStepper(journal, "media-run", store=store, principal=Principal("x"))
        assert (
            next(stranger.stream({"key": item["key"], "turn": 0, "ticket": "s"}))[0]["code"]
            == "refused"
        )


@pytest.mark.parametrize(
    ("media_type", "head", "ok"),
    [
        ("audio/wav", b"RIFF\x00\x00\x00\x00WAVEfmt ", True),
        ("audio/mpeg", b"ID3\x04", True),
        ("audio/mpeg", b"\xff\xfb\x90", True),
        ("audio/ogg", b"OggS\x00", True),
        ("audio/webm", b"\x1a\x45\xdf\xa3", True),
        ("audio/mp4", b"\x00\x00\x00\x20ftypM4A ", True),
        ("audio/aac", b"\xff\xf1\x50", True),
        ("image/png", b"\x89PNG\r\n\x1a\n", True),
        ("application/pdf", b"%PDF-1.7", True),
        ("audio/wav", b"<html>", False),
        ("image/png", b"GIF89a", False),
        ("text/html", b"<html>", False),
        ("image/svg+xml", b"<svg>", False),
    ],
)
def test_looks_like(media_type: str, head: bytes, ok: bool) -> None:
    """The sniff agrees with the claimed type for each streamable type, and refuses markup."""
    assert looks_like(media_type, head) is ok


def test_a_request_that_is_not_a_dict_is_missing() -> None:
    """Garbage from the front end (or a caller) is a refusal message, not an exception."""
    view = audio_view(big_wav())
    for junk in (None, "0.0", 7, ["key"]):
        ((content, buffers),) = view.stream(junk)  # type: ignore[arg-type]
        assert content["code"] == "missing"
        assert buffers == []


def test_a_stored_blob_streams_from_the_store_in_chunks_and_its_corruption_ends_the_stream(
    tmp_path: Path,
) -> None:
    """A stored clip is read through the store's open (never get), one chunk per message; a clip
    damaged on disk sends its chunks up to the last, then an error in place of the last chunk."""
    raw = big_wav(3 * 100_000 + 5)  # 4 chunks of 100,000 bytes, the last short
    with LocalContentStore(tmp_path / "s") as store:
        ref = store.put(raw, "acme")
        msg = Message(
            role="user", content=[AudioPart(media_type="audio/wav", source=RefSource(ref=ref))]
        )
        view = TranscriptView([msg], store=store, principal=Principal("acme"))
        key = view.messages[0]["items"][0]["key"]
        reads: list[int] = []
        opened = store.open

        def counting_open(address: str, *, tenant: str) -> Any:
            reader = opened(address, tenant=tenant)
            read = reader.read

            def counted(size: int | None = -1) -> bytes:
                chunk = read(size)
                reads.append(len(chunk))
                return chunk

            reader.read = counted  # type: ignore[method-assign]
            return reader

        store.open = counting_open  # type: ignore[method-assign]
        store.get = None  # type: ignore[assignment,method-assign]  # streaming never reads whole
        good = stream_messages({"key": key, "ticket": "g"}, view._ctx, "gone", chunk_bytes=100_000)
        start, _ = next(good)
        assert start["sha256"] == ref.address.removeprefix("sha256:")
        assert reads == [100_000]  # one chunk read before the first message is sent
        assert assemble([(start, []), *good])[1] == raw
        assert max(reads) == 100_000
        digest = ref.address.removeprefix("sha256:")
        blob = tmp_path / "s" / "objects" / digest[:2] / digest[2:]
        blob.write_bytes(raw[:-1] + bytes([raw[-1] ^ 1]))
        damaged = list(
            stream_messages({"key": key, "ticket": "d"}, view._ctx, "gone", chunk_bytes=100_000)
        )
    assert len(raw) % 100_000  # a short last chunk, which completes the blob
    states = [content["state"] for content, _ in damaged]
    assert states == ["start", "chunk", "chunk", "chunk", "error"]  # the last chunk: never sent
    error = damaged[-1][0]
    assert error["code"] == "unreadable"
    assert "content_corrupted" in error["error"]
    assert sum(len(buffers[0]) for _, buffers in damaged[1:-1]) == 300_000
