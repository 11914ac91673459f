"""Real media bytes for tests: PNG, JPEG, WAV and multi-page PDF made on the spot."""

from __future__ import annotations

import io
import math
import struct

from PIL import Image, ImageDraw


def png(size: tuple[int, int] = (320, 200), color: tuple[int, int, int] = (200, 40, 40)) -> bytes:
    """A PNG with a shape on it."""
    image = Image.new("RGB", size, color)
    ImageDraw.Draw(image).ellipse((10, 10, size[0] // 2, size[1] // 2), fill=(255, 255, 255))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def wav(seconds: float = 0.25, rate: int = 8000) -> bytes:
    """A mono 16-bit 440 Hz sine WAV.

    The sine repeats after ``rate / gcd(440, rate)`` samples (200 at 8 kHz): one period is packed
    and repeated, so a clip of minutes costs what a few hundred samples do, not a second of CPU.
    """
    count = int(seconds * rate)
    period = rate // math.gcd(440, rate)
    one = b"".join(
        struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * n / rate))) for n in range(period)
    )
    frames = (one * (count // period + 1))[: 2 * count]
    header = struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF",
        36 + len(frames),
        b"WAVE",
        b"fmt ",
        16,
        1,
        1,
        rate,
        rate * 2,
        2,
        16,
        b"data",
        len(frames),
    )
    return header + frames


def pdf(pages: int = 3) -> bytes:
    """A PDF with ``pages`` pages, each with a filled rectangle (drawn by Pillow)."""
    images = []
    for n in range(pages):
        page = Image.new("RGB", (300, 400), "white")
        draw = ImageDraw.Draw(page)
        draw.rectangle((20, 20 + 30 * n, 280, 60 + 30 * n), fill=(0, 0, 0))
        draw.text((30, 350), f"page {n + 1}", fill=(0, 0, 0))
        images.append(page)
    out = io.BytesIO()
    images[0].save(out, format="PDF", save_all=True, append_images=images[1:])
    return out.getvalue()
