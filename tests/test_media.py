"""Media helpers: the type comes from the bytes, placement from the inline cap, refusals have codes."""

from __future__ import annotations

import base64
import io
import struct
import wave
from pathlib import Path

import pytest
from PIL import Image

from loom_nb import (
    AudioPart,
    DataSource,
    FilePart,
    ImagePart,
    LocalContentStore,
    MediaError,
    OversizedInlinePartError,
    RefSource,
)
from loom_nb.demo import chart_png, memo_pdf
from loom_nb.limits import MAX_INLINE_BYTES
from loom_nb.media import sniff_media_type


def _wav(frames: int = 800) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(struct.pack(f"<{frames}h", *([0] * frames)))
    return buffer.getvalue()


def _noise_png(side: int) -> bytes:
    import random

    rng = random.Random(7)
    image = Image.frombytes(
        "RGB", (side, side), bytes(rng.randrange(256) for _ in range(side * side * 3))
    )
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"%PDF-1.7\n", "application/pdf"),
        (b"RIFF\x24\x00\x00\x00WAVEfmt ", "audio/wav"),
        (b"ID3\x04\x00\x00\x00\x00\x00\x00", "audio/mpeg"),
        (b"\xff\xfb\x90\x64\x00\x00\x00\x00", "audio/mpeg"),
        (b"\xff\xf1\x50\x80\x00\x1f\xfc", "audio/aac"),
        (b"OggS\x00\x02" + bytes(20), "audio/ogg"),
        (b"fLaC\x00\x00\x00\x22", "audio/flac"),
        (b"\x00\x00\x00\x20ftypM4A \x00\x00\x00\x00", "audio/mp4"),
        (b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01\x42\x82\x84webm", "video/webm"),
        ("héllo, world\n".encode(), "text/plain"),
    ],
)
def test_sniffing_reads_magic_numbers_and_text(head: bytes, expected: str) -> None:
    """Each supported container is recognised from its first bytes."""
    assert sniff_media_type(head) == expected


def test_webm_is_audio_when_audio_is_asked_for() -> None:
    """The one ambiguity, a WebM container, resolves to audio for AudioPart."""
    head = b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01\x42\x82\x84webm"
    assert sniff_media_type(head, prefer="audio") == "audio/webm"


@pytest.mark.parametrize(
    "data", [b"", b"\x00\x01\x02binary\x00", b"\xff\xfe\xfd\xfc", b"text\x00nul"]
)
def test_unknown_bytes_are_not_guessed(data: bytes) -> None:
    """Bytes matching no format (binary, NUL in text, empty) give None, never a guess."""
    assert sniff_media_type(data) is None


def test_image_from_path_uses_the_bytes_not_the_name(tmp_path: Path) -> None:
    """A PNG saved as notes.txt is an image/png part, inline under the cap."""
    path = tmp_path / "notes.txt"
    path.write_bytes(chart_png("revenue"))
    part = ImagePart.from_path(path)
    assert part.media_type == "image/png"
    assert isinstance(part.source, DataSource)
    assert base64.b64decode(part.source.data) == path.read_bytes()


def test_a_script_named_like_an_image_is_refused(tmp_path: Path) -> None:
    """cat.png holding a shell script is refused with unknown_media_type, not sent as an image."""
    path = tmp_path / "cat.png"
    path.write_bytes(b"#!/bin/sh\x00rm -rf /")
    with pytest.raises(MediaError) as caught:
        ImagePart.from_path(path)
    assert caught.value.code == "unknown_media_type"
    assert "cat.png" in caught.value.message


def test_text_given_to_the_image_helper_names_the_right_helper(tmp_path: Path) -> None:
    """Wrong modality is its own code, and the message names the helper to use."""
    path = tmp_path / "a.png"
    path.write_text("just text", encoding="utf-8")
    with pytest.raises(MediaError) as caught:
        ImagePart.from_path(path)
    assert caught.value.code == "wrong_modality"
    assert "FilePart.from_path" in caught.value.message


@pytest.mark.parametrize("kind", ["missing", "folder"])
def test_unreadable_paths_are_typed_errors_with_a_remedy(tmp_path: Path, kind: str) -> None:
    """A missing file or a folder is MediaError(unreadable_path) naming the path."""
    target = tmp_path / "nope.png" if kind == "missing" else tmp_path
    with pytest.raises(MediaError) as caught:
        FilePart.from_path(target)
    assert caught.value.code == "unreadable_path"
    assert str(target) in caught.value.message


def test_a_path_that_is_not_a_path_is_refused() -> None:
    """Bytes passed as a path are refused with a pointer to from_bytes."""
    with pytest.raises(MediaError) as caught:
        ImagePart.from_path(b"\x89PNG")  # type: ignore[arg-type]
    assert "from_bytes" in caught.value.message


def test_over_the_cap_without_a_store_is_refused() -> None:
    """Bytes over MAX_INLINE_BYTES with no store raise OversizedInlinePartError with the remedy."""
    data = _noise_png(200)
    assert len(data) > MAX_INLINE_BYTES
    with pytest.raises(OversizedInlinePartError) as caught:
        ImagePart.from_bytes(data)
    assert "store=" in caught.value.message


def test_over_the_cap_with_a_store_travels_by_ref(tmp_path: Path) -> None:
    """With a store, oversized bytes are stored for the tenant and the part carries the ref."""
    store = LocalContentStore(tmp_path / "store")
    data = _noise_png(200)
    part = ImagePart.from_bytes(data, store=store, tenant="me")
    assert isinstance(part.source, RefSource)
    assert part.source.ref.size == len(data)
    assert store.get(part.source.ref.address) == data
    assert store.tenants(part.source.ref.address) == {"me"}


def test_declared_type_must_agree_with_the_bytes() -> None:
    """from_bytes(png, 'image/jpeg') is media_type_mismatch; an alias of the right type passes."""
    with pytest.raises(MediaError) as caught:
        ImagePart.from_bytes(chart_png("x"), "image/jpeg")
    assert caught.value.code == "media_type_mismatch"
    jpeg = io.BytesIO()
    Image.new("RGB", (4, 4)).save(jpeg, format="JPEG")
    assert ImagePart.from_bytes(jpeg.getvalue(), "image/jpg").media_type == "image/jpeg"


def test_from_pil_encodes_png_and_jpeg() -> None:
    """A PIL image becomes PNG (lossless, alpha kept) or JPEG (alpha dropped)."""
    image = Image.new("RGBA", (8, 6), (255, 0, 0, 128))
    png = ImagePart.from_pil(image)
    assert png.media_type == "image/png"
    assert isinstance(png.source, DataSource)
    decoded = Image.open(io.BytesIO(base64.b64decode(png.source.data)))
    assert decoded.size == (8, 6)
    assert decoded.mode == "RGBA"
    assert ImagePart.from_pil(image, format="jpeg").media_type == "image/jpeg"


def test_from_pil_refuses_what_is_not_an_image() -> None:
    """A non-image argument and an unknown format are MediaError, not Pillow's exceptions."""
    with pytest.raises(MediaError):
        ImagePart.from_pil(b"png")
    with pytest.raises(MediaError):
        ImagePart.from_pil(Image.new("RGB", (2, 2)), format="NOPE")


def test_audio_and_file_helpers(tmp_path: Path) -> None:
    """AudioPart.from_path reads WAV; FilePart.from_path reads PDF and text and keeps the name."""
    (tmp_path / "tone.bin").write_bytes(_wav())
    audio = AudioPart.from_path(tmp_path / "tone.bin")
    assert audio.media_type == "audio/wav"
    (tmp_path / "memo").write_bytes(memo_pdf())
    pdf = FilePart.from_path(tmp_path / "memo", store=LocalContentStore(tmp_path / "s"))
    assert pdf.media_type == "application/pdf"
    assert pdf.name == "memo"
    (tmp_path / "notes.md").write_text("# notes\n", encoding="utf-8")
    assert FilePart.from_path(tmp_path / "notes.md").media_type == "text/plain"
    with pytest.raises(MediaError) as caught:
        AudioPart.from_path(tmp_path / "notes.md")
    assert caught.value.code == "wrong_modality"


def test_origin_marks_the_part_untrusted() -> None:
    """origin= is carried onto the part, so the guard fences it."""
    part = ImagePart.from_bytes(chart_png("x"), origin="upload:alice")
    assert part.origin == "upload:alice"
