"""Render a 500-message transcript with 50 images and 5 PDFs: kernel time and output bytes.

Targets (issue: transcript rendering): under 1 s in the kernel, under 2 MB saved. Prints the
static HTML render, the TranscriptView creation (its views), the bytes of each, and ratios
against a text-only baseline of the same 500 messages measured in the same run.
Also prints the text-only transcript with every assistant reply in markdown (parsed by
markdown-it-py, code highlighted by Pygments) against the same baseline.
Run: ``.venv/bin/python benchmarks/bench_render.py``.
"""

from __future__ import annotations

import base64
import io
import json
import sys
import time
from pathlib import Path

from PIL import Image, ImageDraw

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _report import Row, emit

from loom_nb.content import (
    DataSource,
    FilePart,
    ImagePart,
    Message,
    TextPart,
    ToolResultPart,
    ToolUsePart,
)
from loom_nb.render import render_transcript


def chart(n: int) -> bytes:
    """A 800x600 chart-like PNG (what people paste into prompts), different per n."""
    image = Image.new("RGB", (800, 600), "white")
    draw = ImageDraw.Draw(image)
    for bar in range(12):
        height = 50 + (n * 37 + bar * 53) % 450
        draw.rectangle(
            (40 + bar * 60, 560 - height, 80 + bar * 60, 560), fill=((n * 40) % 255, 90, 160)
        )
    draw.text((40, 20), f"figure {n}", fill="black")
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def pdf(n: int, pages: int = 8) -> bytes:
    """A multi-page PDF with text lines and a rule per page."""
    images = []
    for p in range(pages):
        page = Image.new("RGB", (612, 792), "white")
        draw = ImageDraw.Draw(page)
        for line in range(30):
            draw.text(
                (50, 60 + line * 22),
                f"doc {n} page {p + 1} line {line}: lorem ipsum dolor sit amet",
                fill="black",
            )
        images.append(page)
    out = io.BytesIO()
    images[0].save(out, format="PDF", save_all=True, append_images=images[1:])
    return out.getvalue()


def b64(raw: bytes) -> DataSource:
    return DataSource(data=base64.b64encode(raw).decode())


def transcript(with_media: bool) -> list[Message]:
    """500 messages: text turns and tool pairs, with 50 images and 5 PDFs when asked."""
    messages: list[Message] = []
    images = [chart(n) for n in range(50)] if with_media else []
    pdfs = [pdf(n) for n in range(5)] if with_media else []
    for n in range(500):
        parts: list = [TextPart(text=f"turn {n}: " + "some words of a reply " * 8)]
        if n % 10 == 3 and images:
            parts.append(ImagePart(media_type="image/png", source=b64(images.pop())))
        if n % 100 == 7 and pdfs:
            parts.append(
                FilePart(media_type="application/pdf", source=b64(pdfs.pop()), name=f"doc{n}.pdf")
            )
        role = "user" if n % 2 == 0 else "assistant"
        if role == "assistant" and n % 20 == 1:
            parts.append(ToolUsePart(id=f"t{n}", name="lookup", input={"q": n}))
        if role == "user" and n % 20 == 2:
            parts.insert(0, ToolResultPart(tool_use_id=f"t{n - 1}", content="result"))
        messages.append(Message(role=role, content=parts))
    return messages


MARKDOWN_REPLY = (
    "Here is **the plan** for turn {n}:\n\n1. read the file\n2. chart it\n\n"
    "```python\ndef total(xs):\n    return sum(x * {n} for x in xs)  # add up\n```\n\n"
    "| col | value |\n|---|---|\n| a | {n} |\n\nSee [the docs](https://example.org/{n})."
)


def markdown_transcript() -> list[Message]:
    """The text-only baseline with every assistant reply in markdown (a list, code, a table, a link)."""
    return [
        Message(role=m.role, content=MARKDOWN_REPLY.format(n=n)) if m.role == "assistant" else m
        for n, m in enumerate(transcript(with_media=False))
    ]


def timed(fn) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def main() -> None:
    baseline_msgs = transcript(with_media=False)
    media_msgs = transcript(with_media=True)
    base_t, base_html = timed(lambda: render_transcript(baseline_msgs))
    html_t, html = timed(lambda: render_transcript(media_msgs))
    md_msgs = markdown_transcript()
    md_t, md_html = timed(lambda: render_transcript(md_msgs))

    from loom_nb.widgets import TranscriptView

    view_t, view = timed(lambda: TranscriptView(media_msgs))
    payload = json.dumps(view.messages)
    fallback_t, fallback = timed(view.to_static_html)
    mb = 1024 * 1024
    print("500 messages, 50 images (800x600 PNG), 5 PDFs (8 pages)")
    print(
        f"baseline text-only render_transcript: {base_t * 1000:7.1f} ms  {len(base_html) / mb:5.2f} MB"
    )
    print(
        f"render_transcript (static HTML):      {html_t * 1000:7.1f} ms  {len(html) / mb:5.2f} MB  ({html_t / base_t:.1f}x baseline)"
    )
    print(
        f"250 markdown replies (code, table):   {md_t * 1000:7.1f} ms  {len(md_html) / mb:5.2f} MB  ({md_t / base_t:.1f}x baseline)"
    )
    print(
        f"TranscriptView(...) creation:         {view_t * 1000:7.1f} ms  payload {len(payload) / mb:5.2f} MB"
    )
    print(
        f"TranscriptView static fallback:       {fallback_t * 1000:7.1f} ms  {len(fallback) / mb:5.2f} MB"
    )
    saved = len(fallback) + len(repr(view))
    print(
        f"saved output with store_widget_state=False (text/html + text/plain): {saved / mb:.2f} MB"
    )
    print(f"saved output with widget state stored too: {(saved + len(payload)) / mb:.2f} MB")
    print(
        f"targets: kernel < 1 s -> {'ok' if view_t < 1 and html_t < 1 else 'MISSED'}; saved < 2 MB -> {'ok' if saved < 2 * mb else 'MISSED'}"
    )
    emit(
        [
            Row("static HTML render / text-only render", html_t / base_t),
            Row("250 markdown replies / text-only render", md_t / base_t),
            Row("static HTML render, seconds / 1 s", html_t, 1.0, "<="),
            Row("TranscriptView creation, seconds / 1 s", view_t, 1.0, "<="),
            Row("saved output, MB / 2 MB", saved / mb / 2, 1.0, "<="),
        ]
    )


if __name__ == "__main__":
    main()
