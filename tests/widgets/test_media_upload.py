"""MediaUpload kernel side, driven by faked comm messages: chunked transfer, refusals, add_path."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from loom_nb import MediaUpload
from loom_nb.content import AudioPart, FilePart, ImagePart, Message
from loom_nb.errors import ContentValidationError, StoreError
from loom_nb.store import LocalContentStore
from loom_nb.widgets import _upload as upload_module
from loom_nb.widgets._upload import CHUNK_BYTES, sweep_stale_uploads
from tests.render import media


@pytest.fixture
def store(tmp_path: Path) -> Any:
    """A real local content store."""
    with LocalContentStore(tmp_path / "store") as s:
        yield s


def send_file(
    upload: MediaUpload, name: str, media_type: str, blob: bytes, chunk: int = CHUNK_BYTES
) -> list[dict[str, Any]]:
    """Drive the begin/chunk/end protocol as the front end does, through the comm handler."""
    replies: list[dict[str, Any]] = []
    upload.send = replies.append  # type: ignore[method-assign]
    upload._handle_custom_msg(
        {
            "type": "begin",
            "upload": "u1",
            "name": name,
            "media_type": media_type,
            "size": len(blob),
        },
        [],
    )
    for index, offset in enumerate(range(0, len(blob), chunk)):
        if replies[-1]["type"] != "ack":
            return replies
        upload._handle_custom_msg(
            {"type": "chunk", "upload": "u1", "index": index},
            [memoryview(blob[offset : offset + chunk])],
        )
    if replies[-1]["type"] == "ack":
        upload._handle_custom_msg({"type": "end", "upload": "u1"}, [])
    return replies


def test_fifty_mib_pdf_arrives_in_one_mib_chunks(store: LocalContentStore) -> None:
    """A 50 MiB PDF sent as 1 MiB acknowledged chunks is stored whole and becomes a FilePart ref."""
    blob = b"%PDF-1.4\n" + bytes(range(256)) * (50 * 4096)
    blob = blob[: 50 * 1024 * 1024]
    upload = MediaUpload(store, "acme")
    replies = send_file(upload, "big.pdf", "application/pdf", blob)
    assert [r["type"] for r in replies].count("ack") == 1 + 50
    assert replies[-1]["type"] == "done"
    (part,) = upload.parts
    assert isinstance(part, FilePart)
    assert part.name == "big.pdf"
    assert part.source.ref.size == len(blob)
    assert part.source.ref.address == "sha256:" + hashlib.sha256(blob).hexdigest()
    assert store.get(part.source.ref.address) == blob
    assert store.tenants(part.source.ref.address) == {"acme"}


def test_image_upload_shows_thumbnail_type_size_address(store: LocalContentStore) -> None:
    """An image upload is listed with a PNG thumbnail, media type, size and address."""
    upload = MediaUpload(store, "acme")
    send_file(upload, "cat.png", "image/png", media.png())
    (item,) = upload.uploads
    assert item["media_type"] == "image/png"
    assert item["size"] == len(media.png())
    assert item["address"].startswith("sha256:")
    assert item["thumb"]
    assert isinstance(upload.parts[0], ImagePart)
    Message(role="user", content=[*upload.parts])  # ready for a message


def test_audio_upload_makes_an_audio_part(store: LocalContentStore) -> None:
    """A WAV upload becomes an AudioPart with a ref source."""
    upload = MediaUpload(store, "acme")
    send_file(upload, "a.wav", "audio/wav", media.wav())
    assert isinstance(upload.parts[0], AudioPart)


@pytest.mark.parametrize(
    ("name", "media_type", "blob", "reason"),
    [
        ("x.svg", "image/svg+xml", b"<svg/>", "SVG is not accepted"),
        ("x.exe", "application/x-msdownload", b"MZ", "is not supported"),
        ("fake.png", "image/png", b"<script>alert(1)</script>", "do not look like image/png"),
    ],
)
def test_refused_types_say_why(
    store: LocalContentStore, name: str, media_type: str, blob: bytes, reason: str
) -> None:
    """Unsupported or mislabelled files are refused with a clear message and nothing is stored."""
    upload = MediaUpload(store, "acme")
    replies = send_file(upload, name, media_type, blob)
    assert replies[-1]["type"] == "refused"
    assert reason in replies[-1]["reason"]
    assert upload.parts == []
    assert reason in upload.error
    assert store.list() == []


def test_out_of_order_chunk_is_refused(store: LocalContentStore) -> None:
    """A chunk with the wrong index aborts the upload."""
    upload = MediaUpload(store, "acme")
    upload.handle(
        {"type": "begin", "upload": "u", "name": "a.txt", "media_type": "text/plain", "size": 4}
    )
    reply = upload.handle({"type": "chunk", "upload": "u", "index": 3}, [b"abcd"])
    assert reply["type"] == "refused"
    assert "out of order" in reply["reason"]


def test_short_upload_is_refused_at_end(store: LocalContentStore) -> None:
    """Ending before the declared size arrived refuses the upload."""
    upload = MediaUpload(store, "acme")
    upload.handle(
        {"type": "begin", "upload": "u", "name": "a.txt", "media_type": "text/plain", "size": 10}
    )
    upload.handle({"type": "chunk", "upload": "u", "index": 0}, [b"abc"])
    reply = upload.handle({"type": "end", "upload": "u"})
    assert reply["type"] == "refused"
    assert "3 of 10 bytes" in reply["reason"]


def test_base64_chunks_work_without_buffers(store: LocalContentStore) -> None:
    """A chunk may carry base64 text instead of a binary buffer."""
    upload = MediaUpload(store, "acme")
    upload.handle({"type": "begin", "upload": "u", "name": "n.md", "media_type": "", "size": 2})
    upload.handle({"type": "chunk", "upload": "u", "index": 0, "data": "aGk="})
    assert upload.handle({"type": "end", "upload": "u"})["type"] == "done"
    assert upload.parts[0].media_type == "text/markdown"


def test_add_path_stores_a_server_file(store: LocalContentStore, tmp_path: Path) -> None:
    """add_path stores a file from disk and returns its part."""
    path = tmp_path / "doc.pdf"
    path.write_bytes(media.pdf(2))
    upload = MediaUpload(store, "acme")
    part = upload.add_path(path)
    assert isinstance(part, FilePart)
    assert part.source.ref.size == path.stat().st_size
    assert upload.uploads[0]["thumb"]


def test_add_path_refuses_unsupported_and_missing(store: LocalContentStore, tmp_path: Path) -> None:
    """add_path raises ContentValidationError for an unsupported type and StoreError for a missing file."""
    path = tmp_path / "x.svg"
    path.write_text("<svg/>")
    upload = MediaUpload(store, "acme")
    with pytest.raises(ContentValidationError) as info:
        upload.add_path(path)
    assert info.value.code == "unsupported_upload"
    with pytest.raises(StoreError):
        upload.add_path(tmp_path / "nope.png")


def test_repr_is_deterministic(store: LocalContentStore) -> None:
    """The text/plain repr has no memory address."""
    assert repr(MediaUpload(store, "acme")) == "MediaUpload(0 uploads, tenant='acme')"


def test_saved_output_lists_uploads_and_refs(store: LocalContentStore) -> None:
    """The mimebundle's text/html names each upload, its type, size and ref, with a thumbnail."""
    from tests.fixtures import hostile
    from tests.render.safety import unsafe_parts

    upload = MediaUpload(store, tenant="me")
    send_file(upload, hostile.ONERROR + ".png", "image/png", media.png((120, 80)))
    send_file(upload, "report.pdf", "application/pdf", media.pdf(2))
    html = upload._repr_mimebundle_()[0]["text/html"]
    assert "media upload · 2 uploads · tenant me" in html
    for part in upload.parts:
        assert f"ref {part.source.ref.address}" in html
    assert "report.pdf" in html
    assert "application/pdf · " in html
    assert html.count('src="data:image/png;base64,') == 2  # image and PDF first-page thumbnails
    assert hostile.ONERROR not in html  # the hostile file name is escaped text
    assert unsafe_parts(html) == []


def test_saved_output_of_an_empty_upload_says_so_and_shows_refusals(
    store: LocalContentStore,
) -> None:
    """Before any upload the fallback says nothing was uploaded; a refusal is written out."""
    upload = MediaUpload(store, tenant="me")
    assert "0 uploads · tenant me · nothing uploaded yet" in upload.to_static_html()
    send_file(upload, "x.svg", "image/svg+xml", b"<svg/>")
    assert "refused: x.svg: SVG is not accepted" in upload.to_static_html()


def begin_half(upload: MediaUpload, blob: bytes) -> None:
    """Begin an upload of ``blob`` and send its first half only (a browser that went away)."""
    upload.send = lambda _reply: None  # type: ignore[method-assign]
    upload._handle_custom_msg(
        {
            "type": "begin",
            "upload": "u1",
            "name": "a.pdf",
            "media_type": "application/pdf",
            "size": len(blob),
        },
        [],
    )
    upload._handle_custom_msg(
        {"type": "chunk", "upload": "u1", "index": 0}, [memoryview(blob[: len(blob) // 2])]
    )


def test_close_removes_the_file_of_an_upload_never_ended(
    store: LocalContentStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An upload the browser began and never ended keeps a temporary file; close() removes it."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    upload = MediaUpload(store, "acme")
    begin_half(upload, b"%PDF-1.4\n" + bytes(4096))
    assert [p.name.startswith("loom-upload-") for p in temp.iterdir()] == [True]
    upload.close()
    assert list(temp.iterdir()) == []
    assert upload.parts == []


ROOT = Path(__file__).resolve().parents[2]
"""The checkout, where a kernel process finds ``tests``."""


def mid_upload(store: Path, *then: str) -> str:
    """A kernel's code: a MediaUpload into a store at ``store`` begins a PDF upload and gets
    half of it (``begin_half``), then the lines ``then`` run."""
    return "".join(
        f"{line}\n"
        for line in (
            "from loom_nb import MediaUpload",
            "from loom_nb.store import LocalContentStore",
            "from tests.widgets.test_media_upload import begin_half",
            f"upload = MediaUpload(LocalContentStore({str(store)!r}), 'acme')",
            "begin_half(upload, b'%PDF-1.4\\n' + bytes(4096))",
            *then,
        )
    )


def kernel_options(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A kernel process's own temporary folder (made here), and how to launch the process: that
    folder as its ``TMPDIR``, from the repository (``mid_upload`` imports the tests), in text mode."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    return temp, {"env": {**os.environ, "TMPDIR": str(temp)}, "cwd": ROOT, "text": True}


def test_a_kernel_that_exits_mid_upload_leaves_no_temporary_file(tmp_path: Path) -> None:
    """A process that exits with an upload in flight (the widget never closed) removes its file."""
    script = mid_upload(tmp_path / "store", "print(len(upload._incoming))")
    temp, options = kernel_options(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", script], **options, capture_output=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"  # the upload was in flight when the process ended
    assert list(temp.iterdir()) == []


def _age(path: Path, seconds: float) -> None:
    """Make ``path`` look untouched for ``seconds``."""
    then = time.time() - seconds
    os.utime(path, (then, then))


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=60)
    return child.pid


def test_a_kernel_killed_mid_upload_leaves_a_file_the_next_kernel_removes(
    store: LocalContentStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kill -9 mid-upload runs no finalizer: the file stays, named after the dead kernel's pid,
    until a later kernel's first MediaUpload finds its process gone and the file idle."""
    script = mid_upload(
        tmp_path / "kstore",
        "print(next(iter(upload._incoming.values())).path, flush=True)",
        "import time; time.sleep(120)",
    )
    temp, options = kernel_options(tmp_path)
    kernel = subprocess.Popen([sys.executable, "-c", script], **options, stdout=subprocess.PIPE)
    try:
        assert kernel.stdout is not None
        left = Path(kernel.stdout.readline().strip())
    finally:
        kernel.kill()  # SIGKILL: no finalizer, no atexit
        kernel.wait(timeout=60)
    assert left.parent == temp
    assert left.name.startswith(f"loom-upload-{kernel.pid}-")
    assert left.exists()  # what the killed kernel could not remove
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.setattr(upload_module, "_SWEPT", set())
    MediaUpload(store, "acme").close()  # the file was written just now: maybe a slow upload
    assert left.exists()
    _age(left, upload_module.STALE_UPLOAD_SECONDS + 5)
    monkeypatch.setattr(upload_module, "_SWEPT", set())
    MediaUpload(store, "acme").close()
    assert not left.exists()


def test_the_sweep_removes_only_idle_files_of_gone_kernels(tmp_path: Path) -> None:
    """A live kernel's upload (this one's, another process's), a gone kernel's file written
    lately, and files that are not uploads are kept; an idle one of a gone kernel is removed,
    and an older version's (no pid in its name) once untouched for a day."""
    stale = upload_module.STALE_UPLOAD_SECONDS + 5
    dead = _dead_pid()
    files = {
        "gone-idle": (f"loom-upload-{dead}-abc123", stale, False),
        "gone-recent": (f"loom-upload-{dead}-def456", 30, True),
        "mine-idle": (f"loom-upload-{os.getpid()}-ghi789", stale, True),
        "parent-idle": (f"loom-upload-{os.getppid()}-jkl012", stale, True),
        "old-version-day": ("loom-upload-q1w2e3r4", 25 * 3600, False),
        "old-version-hour": ("loom-upload-t5y6u7i8", 3600, True),
        "not-an-upload": (f"loom-other-{dead}-x", 25 * 3600, True),
    }
    for name, seconds, _kept in files.values():
        (tmp_path / name).write_bytes(b"%PDF")
        _age(tmp_path / name, seconds)
    (tmp_path / f"loom-upload-{dead}-folder").mkdir()  # not a file: never removed
    removed = sweep_stale_uploads(tmp_path)
    assert sorted(Path(p).name for p in removed) == sorted(
        name for name, _s, kept in files.values() if not kept
    )
    assert {p.name for p in tmp_path.iterdir()} == {
        name for name, _s, kept in files.values() if kept
    } | {f"loom-upload-{dead}-folder"}
    assert sweep_stale_uploads(tmp_path / "missing") == []  # no folder: nothing to do
