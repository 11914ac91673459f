"""String tests of the renderer: every part kind, trusted and fenced, refs through the store."""

from __future__ import annotations

import base64
import re

import pytest

from loom_nb.content import (
    AudioPart,
    ContentRef,
    DataSource,
    FilePart,
    ImagePart,
    LlmRequest,
    Message,
    ReasoningPart,
    RefSource,
    TextPart,
    ToolResultPart,
    ToolSpec,
    ToolUsePart,
)
from loom_nb.errors import ContentValidationError
from loom_nb.render import render_message, render_part, render_transcript, to_html
from loom_nb.render._resolve import NOT_AVAILABLE
from loom_nb.taint import Untrusted
from tests.render import media
from tests.render.conftest import FakeStore, Viewer
from tests.render.safety import tags_of, unsafe_parts


def data(raw: bytes) -> DataSource:
    return DataSource(data=base64.b64encode(raw).decode())


def fences(html: str) -> list[str]:
    """The fence labels of ``html`` as text (the warning badge's markup taken out)."""
    return [
        re.sub(r"<[^>]+>", "", legend)
        for legend in re.findall(r"<legend[^>]*>(.*?)</legend>", html)
    ]


def test_text_is_escaped_exactly() -> None:
    """A trusted text part renders as one escaped text block, nothing else."""
    html = render_part(TextPart(text="a < b & 'c' \"d\""))
    assert html == (
        '<div class="loom-text" style="white-space:pre-wrap;word-break:break-word;margin:2px 0">'
        "a &lt; b &amp; &#x27;c&#x27; &quot;d&quot;</div>"
    )


def test_text_with_origin_is_fenced_with_a_visible_label() -> None:
    """A text part with an origin sits in a fieldset whose legend reads 'untrusted · <origin>'."""
    html = render_part(TextPart(text="page", origin="tool:web_fetch"))
    assert tags_of(html)[:2] == ["fieldset", "legend"]
    assert fences(html) == ["! untrusted · tool:web_fetch"]


def test_untrusted_value_text_is_fenced_with_its_origin() -> None:
    """An Untrusted text value is boxed and labelled with the Untrusted's origin."""
    html = render_part(TextPart(text=Untrusted("hi", "peer:agent")))
    assert fences(html) == ["! untrusted · peer:agent"]
    assert ">hi</div>" in html


def test_long_text_collapses_into_details() -> None:
    """Text over the collapse length is behind a <details> summary with its length."""
    html = render_part(TextPart(text="word " * 1000))
    assert tags_of(html)[:2] == ["details", "summary"]
    assert "(5000 characters, expand)" in html


def test_huge_text_is_cut_with_a_count() -> None:
    """Text beyond the display cap is cut and the number of characters left out is shown."""
    html = render_part(TextPart(text="y" * 150_000))
    assert "50000 more characters not shown" in html
    assert html.count("y") < 101_000


def test_inline_image_becomes_a_reencoded_png_thumbnail() -> None:
    """An image is shown as a PNG data URL no larger than the thumbnail, with its size."""
    html = render_part(ImagePart(media_type="image/png", source=data(media.png((640, 400)))))
    src = re.search(r'src="data:image/png;base64,([^"]+)"', html)
    assert src is not None
    from io import BytesIO

    from PIL import Image

    thumb = Image.open(BytesIO(base64.b64decode(src.group(1))))
    assert max(thumb.size) == 160
    assert "640×400" in html
    assert unsafe_parts(html) == []


def test_jpeg_is_shown_as_png() -> None:
    """A JPEG is decoded and re-encoded: the page only ever gets image/png."""
    from io import BytesIO

    from PIL import Image

    out = BytesIO()
    Image.new("RGB", (300, 300), (1, 2, 3)).save(out, format="JPEG")
    html = render_part(ImagePart(media_type="image/jpeg", source=data(out.getvalue())))
    assert "data:image/png;base64," in html
    assert "image/jpeg" not in re.findall(r'src="([^"]*)"', html)[0]


def test_untrusted_image_is_fenced() -> None:
    """An image with an origin is inside an untrusted box."""
    html = render_part(
        ImagePart(media_type="image/png", source=data(media.png()), origin="tool:cam")
    )
    assert fences(html) == ["! untrusted · tool:cam"]
    assert "loom-thumb" in html


def test_full_size_image_only_when_asked() -> None:
    """Full-size images are embedded (in <details>) only with full_images=True."""
    msgs = [
        Message(
            role="user",
            content=[ImagePart(media_type="image/png", source=data(media.png((900, 600))))],
        )
    ]
    assert "full size" not in render_transcript(msgs)
    html = render_transcript(msgs, full_images=True)
    assert "<summary" in html
    assert "full size</summary>" in html


def test_svg_is_never_rendered_as_markup() -> None:
    """An SVG image is shown as escaped source text, never as an <svg> or <img>."""
    svg = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'
    html = render_part(ImagePart(media_type="image/svg+xml", source=data(svg)))
    assert "SVG is not rendered" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "img" not in tags_of(html)
    assert unsafe_parts(html) == []


def test_audio_gets_a_player_that_never_autoplays() -> None:
    """Audio renders <audio controls preload=metadata> with a data URL, without autoplay or loop."""
    html = render_part(AudioPart(media_type="audio/wav", source=data(media.wav())))
    assert '<audio controls preload="metadata" src="data:audio/wav;base64,' in html
    assert "autoplay" not in html
    assert "loop" not in html


def test_audio_of_an_unknown_type_is_listed_not_played() -> None:
    """An audio type outside the allowlist gets no player."""
    html = render_part(AudioPart(media_type="audio/x-weird", source=data(b"abc")))
    assert "<audio" not in html
    assert "no player for this audio type" in html


def test_untrusted_audio_is_fenced() -> None:
    """Audio with an origin is inside an untrusted box."""
    html = render_part(AudioPart(media_type="audio/wav", source=data(media.wav()), origin="upload"))
    assert fences(html) == ["! untrusted · upload"]
    assert "<audio" in html


def test_pdf_shows_first_page_thumbnail_page_count_and_pages() -> None:
    """A PDF renders a first-page PNG thumbnail, its page count and PNG page images."""
    html = render_part(
        FilePart(media_type="application/pdf", source=data(media.pdf(5)), name="r.pdf")
    )
    assert "5 pages" in html
    assert "r.pdf" in html
    assert len(re.findall(r"<img ", html)) == 1 + 3
    assert "… 2 more pages not embedded" in html
    assert unsafe_parts(html) == []


def test_untrusted_pdf_is_fenced() -> None:
    """A PDF with an origin is inside an untrusted box."""
    part = FilePart(media_type="application/pdf", source=data(media.pdf(1)), origin="mcp:docs")
    assert fences(render_part(part)) == ["! untrusted · mcp:docs"]


def test_text_file_preview_is_escaped() -> None:
    """A text file shows its contents as escaped text inside <details>."""
    html = render_part(FilePart(media_type="text/plain", source=data(b"<b>hi</b>"), name="n.txt"))
    assert "&lt;b&gt;hi&lt;/b&gt;" in html
    assert "<b>" not in html


def test_other_files_show_type_name_and_size() -> None:
    """A binary file of another type is an icon with its media type, name and size."""
    html = render_part(
        FilePart(media_type="application/zip", source=data(b"PK\x03\x04"), name="a.zip")
    )
    assert "application/zip · a.zip · 4 bytes" in html


def test_tool_use_shows_name_id_and_pretty_input() -> None:
    """A tool call card names the tool and the call id and pretty-prints the input."""
    html = render_part(ToolUsePart(id="t1", name="get_weather", input={"city": "Oslo"}))
    assert "tool call · get_weather · call t1" in html
    assert "{\n  &quot;city&quot;: &quot;Oslo&quot;\n}" in html


def test_tool_use_with_untrusted_input_is_fenced() -> None:
    """A tool call holding an Untrusted value anywhere in its input is boxed as untrusted."""
    html = render_part(ToolUsePart(id="t1", name="f", input={"a": [Untrusted("x", "web")]}))
    assert fences(html) == ["! untrusted · values inside the call&#x27;s input"]


def test_tool_result_pairs_with_its_call_by_visible_id_and_name() -> None:
    """Both cards of a pair show the call id in words, and the result names the tool."""
    messages = [
        Message(role="assistant", content=[ToolUsePart(id="t7", name="lookup", input={})]),
        Message(role="user", content=[ToolResultPart(tool_use_id="t7", content="42")]),
    ]
    html = render_transcript(messages)
    assert "tool call · lookup · call t7" in html
    assert "result of lookup · t7" in html


def test_reasoning_is_collapsed_escaped_and_never_shows_its_signature() -> None:
    """The model's thinking sits in a closed <details>, escaped; signatures and opaque data stay out."""
    part = ReasoningPart(text="<b>step</b> 1", signature="SIGNATURE-xyz", data="DATA-abc")
    html = render_message(Message(role="assistant", content=[part, TextPart(text="answer")]))
    assert '<details class="loom-reasoning"' in html
    assert "<details open" not in html
    assert "reasoning · 13 characters (expand)" in html
    assert "&lt;b&gt;step&lt;/b&gt; 1" in html
    assert "<b>step" not in html
    assert "SIGNATURE-xyz" not in html
    assert "DATA-abc" not in html
    assert html.index("loom-reasoning") < html.index("answer")
    assert not unsafe_parts(html)


def test_redacted_reasoning_says_so_in_words() -> None:
    """Redacted thinking is named as such, with nothing of its payload shown."""
    html = render_part(ReasoningPart(redacted=True, data="ENCRYPTED-payload"))
    assert "reasoning · redacted by the vendor" in html
    assert "ENCRYPTED-payload" not in html


def test_error_result_says_error_in_words() -> None:
    """An is_error result is labelled 'error' in text (not colour alone)."""
    html = render_part(ToolResultPart(tool_use_id="t1", content="boom", is_error=True))
    assert "error: the tool failed or the call was refused" in html
    assert "loom-is-error" in html


@pytest.mark.parametrize(
    ("part", "label"),
    [
        (
            ToolResultPart(tool_use_id="t1", content="x", origin="tool:web"),
            "! untrusted · tool:web",
        ),
        (
            ToolResultPart(tool_use_id="t1", content=Untrusted("x", "tool:rss")),
            "! untrusted · tool:rss",
        ),
    ],
)
def test_untrusted_tool_results_are_fenced(part: ToolResultPart, label: str) -> None:
    """A result with an origin, or with Untrusted content, shows its content boxed."""
    assert fences(render_part(part)) == [label]


def test_tool_result_with_media_parts() -> None:
    """A result holding text and an image renders both inside the result card."""
    part = ToolResultPart(
        tool_use_id="t1",
        content=[
            TextPart(text="chart:"),
            ImagePart(media_type="image/png", source=data(media.png())),
        ],
    )
    html = render_part(part)
    assert "chart:" in html
    assert "data:image/png" in html


def test_guard_fences_in_text_become_boxes() -> None:
    """Text fenced by the guard shows the span inside a labelled box and the rest outside."""
    text = 'before\n<untrusted nonce="0123456789abcdef" origin="tool:web">\ninside\n</untrusted nonce="0123456789abcdef">\nafter'
    html = render_message(Message(role="user", content=text))
    assert fences(html) == ["! untrusted · tool:web"]
    inner = re.search(r"</legend>(.*?)</fieldset>", html)
    assert inner is not None
    assert ">inside</div>" in inner.group(1)
    assert "after" in html.split("</fieldset>")[1]


def test_guard_fence_around_media_parts_boxes_the_media() -> None:
    """A fence-open text part, an image and a fence-close text part give one box holding the image."""
    from loom_nb.guard._fence import close_fence, open_fence

    nonce = "00112233445566778899aabb"
    message = Message(
        role="user",
        content=[
            TextPart(text=open_fence(nonce, "tool:cam")),
            ImagePart(media_type="image/png", source=data(media.png())),
            TextPart(text=close_fence(nonce)),
        ],
    )
    html = render_message(message)
    assert fences(html) == ["! untrusted · tool:cam"]
    inner = re.search(r"</legend>(.*?)</fieldset>", html, re.S)
    assert inner is not None
    assert "loom-thumb" in inner.group(1)


def test_a_fence_only_closes_with_its_own_nonce() -> None:
    """A close tag with another nonce inside a fence is text, and the box stays open."""
    text = '<untrusted nonce="aaaaaaaaaaaa" origin="w">x</untrusted nonce="bbbbbbbbbbbb">still inside</untrusted nonce="aaaaaaaaaaaa">out'
    html = render_message(Message(role="user", content=text))
    inner = re.search(r"</legend>(.*?)</fieldset>", html, re.S)
    assert inner is not None
    assert "still inside" in inner.group(1)
    assert "&lt;/untrusted nonce=&quot;bbbbbbbbbbbb&quot;&gt;" in inner.group(1)


def test_an_unclosed_fence_runs_to_the_end_and_says_so() -> None:
    """A fence never closed boxes the rest of the message and is labelled as not closed."""
    html = render_message(
        Message(role="user", content='ok <untrusted nonce="abcdefab" origin="w">rest')
    )
    assert fences(html) == ["! untrusted · w (fence not closed)"]


def test_guarded_request_renders_with_fences(store: FakeStore) -> None:
    """A request passed through guard_request shows each untrusted text part boxed."""
    from loom_nb.guard import guard_request

    request = LlmRequest(
        messages=[
            Message(role="user", content="hi"),
            Message(role="assistant", content=[ToolUsePart(id="t1", name="fetch", input={})]),
            Message(
                role="user",
                content=[
                    ToolResultPart(tool_use_id="t1", content=Untrusted("page <i>", "tool:fetch"))
                ],
            ),
        ],
        tools=[ToolSpec(name="fetch", description="d", input_schema={"type": "object"})],
        system="be nice",
    )
    html = render_transcript(guard_request(request))
    assert fences(html) == ["! untrusted · tool:fetch"]
    assert "page &lt;i&gt;" in html
    assert "tools: fetch" in html
    assert "be nice" in html


def test_message_card_carries_role_and_position() -> None:
    """A message card is headed by its role and 1-based position."""
    html = render_message(Message(role="assistant", content="x"), 4)
    assert ">assistant · message 5</div>" in html


def test_string_and_parts_content_render_the_same_text() -> None:
    """A string message and a one-text-part message give the same HTML."""
    a = render_message(Message(role="user", content="same"))
    b = render_message(Message(role="user", content=[TextPart(text="same")]))
    assert a == b


def test_render_is_deterministic() -> None:
    """The same transcript renders to the same string twice."""
    msgs = [
        Message(role="user", content=[ImagePart(media_type="image/png", source=data(media.png()))])
    ]
    assert render_transcript(msgs) == render_transcript(msgs)


def test_not_a_transcript_is_a_clear_error() -> None:
    """A value that is no transcript raises ContentValidationError with a stable code."""
    with pytest.raises(ContentValidationError) as info:
        render_transcript(42)
    assert info.value.code == "not_a_transcript"


def test_bad_message_dict_names_its_index() -> None:
    """A malformed message dict raises ContentValidationError naming the message."""
    with pytest.raises(ContentValidationError, match="message 1"):
        render_transcript([{"role": "user", "content": "ok"}, {"role": "robot", "content": "x"}])


# -- refs and the store ------------------------------------------------------------------------


def ref_part(address: str, size: int | None = None) -> ImagePart:
    return ImagePart(
        media_type="image/png", source=RefSource(ref=ContentRef(address=address, size=size))
    )


def test_ref_shown_to_its_tenant(store: FakeStore) -> None:
    """A ref is resolved and shown when the viewer's tenant stored it."""
    address = store.put(media.png(), "acme")
    html = render_part(ref_part(address), store=store, principal=Viewer("acme"))
    assert "data:image/png;base64," in html
    assert address in html


def test_ref_of_another_tenant_is_unavailable_never_bytes(store: FakeStore) -> None:
    """Another tenant's blob shows 'unavailable: not available to this viewer' with the address and no image."""
    address = store.put(media.png(), "acme")
    html = render_part(ref_part(address), store=store, principal=Viewer("evil"))
    assert f"unavailable: {NOT_AVAILABLE} {address}" in html
    assert "data:image" not in html
    assert "acme" not in html
    assert "evil" not in html


@pytest.mark.parametrize(
    ("with_store", "with_principal", "reason"),
    [
        (False, True, "no content store given to the viewer"),
        (True, False, "no principal given to the viewer"),
    ],
)
def test_ref_without_store_or_principal_is_unavailable(
    store: FakeStore, with_store: bool, with_principal: bool, reason: str
) -> None:
    """Without a store or a principal a ref is shown as unavailable with the reason."""
    address = store.put(media.png(), "acme")
    html = render_part(
        ref_part(address),
        store=store if with_store else None,
        principal=Viewer("acme") if with_principal else None,
    )
    assert f"unavailable: {reason} {address}" in html
    assert "data:image" not in html


def test_missing_ref_is_unavailable(store: FakeStore) -> None:
    """A ref to nothing shows the same reason as another tenant's blob."""
    address = "sha256:" + "0" * 64
    html = render_part(ref_part(address), store=store, principal=Viewer("acme"))
    assert f"unavailable: {NOT_AVAILABLE} {address}" in html


def test_ref_size_mismatch_is_unavailable(store: FakeStore) -> None:
    """A ref whose declared size differs from the blob is not shown."""
    address = store.put(media.png(), "acme")
    html = render_part(ref_part(address, size=3), store=store, principal=Viewer("acme"))
    assert "unavailable: size mismatch" in html
    assert "data:image" not in html


def test_real_local_store_authorizes_by_tenant(tmp_path: object) -> None:
    """With LocalContentStore and Principal, the owner sees the image and another tenant does not."""
    from pathlib import Path

    from loom_nb.store import LocalContentStore, Principal

    with LocalContentStore(Path(str(tmp_path)) / "store") as real:
        ref = real.put(media.png(), "acme")
        part = ref_part(ref.address, ref.size)
        assert "data:image/png" in render_part(part, store=real, principal=Principal("acme"))
        denied = render_part(part, store=real, principal=Principal("other", subject="eve"))
        assert NOT_AVAILABLE in denied
        assert "data:image" not in denied
        real.delete(ref.address, "acme")
        gone = render_part(part, store=real, principal=Principal("acme"))
        assert gone == denied  # absent and foreign are indistinguishable


def test_foreign_and_absent_blobs_render_identically(tmp_path: object) -> None:
    """render_transcript of another tenant's blob and of the same address once erased are the same bytes."""
    from pathlib import Path

    from loom_nb.store import LocalContentStore, Principal

    with LocalContentStore(Path(str(tmp_path)) / "store") as real:
        refs = [real.put(media.png((40 + n, 30)), "tenant-holding-it") for n in range(5)]
        msgs = [
            Message(
                role="user",
                content=[ImagePart(media_type="image/png", source=RefSource(ref=r)) for r in refs],
            )
        ]
        foreign = render_transcript(msgs, store=real, principal=Principal("prober"))
        for ref in refs:
            real.delete(ref.address, "tenant-holding-it")
        absent = render_transcript(msgs, store=real, principal=Principal("prober"))
        assert foreign == absent
        assert "tenant-holding-it" not in foreign
        assert "prober" not in foreign
        assert foreign.count(NOT_AVAILABLE) == 5


def test_to_html_writes_a_standalone_page_with_a_script_free_policy(tmp_path: object) -> None:
    """to_html writes a full page with a CSP forbidding scripts and the transcript inside."""
    from pathlib import Path

    out = to_html(
        [Message(role="user", content="<b>hello</b>")], Path(str(tmp_path)) / "t.html", title="<x>"
    )
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert "default-src 'none'" in page
    assert "<title>&lt;x&gt;</title>" in page
    assert "&lt;b&gt;hello&lt;/b&gt;" in page


def test_many_store_images_render_through_the_threaded_prefetch(tmp_path: object) -> None:
    """Six refs (prefetched on worker threads) each show for the owner and none for another tenant."""
    from pathlib import Path

    from loom_nb.store import LocalContentStore, Principal

    with LocalContentStore(Path(str(tmp_path)) / "s") as real:
        refs = [real.put(media.png((100 + n, 80)), "acme") for n in range(6)]
        msgs = [
            Message(
                role="user",
                content=[ImagePart(media_type="image/png", source=RefSource(ref=r)) for r in refs],
            )
        ]
        assert (
            render_transcript(msgs, store=real, principal=Principal("acme")).count("data:image/png")
            == 6
        )
        denied = render_transcript(msgs, store=real, principal=Principal("zed"))
        assert denied.count(NOT_AVAILABLE) == 6
        assert "zed" not in denied
        assert "data:image" not in denied
