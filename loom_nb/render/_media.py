"""Media made safe to show: raster images re-encoded by Pillow, PDF pages rasterised by pdfium.

Nothing a model, tool or upload supplied is shown as it came. An image is decoded by Pillow
under a pixel bound (a header claiming more pixels than ``MAX_IMAGE_PIXELS`` is refused before
any pixel is decoded, and Pillow's ``DecompressionBombWarning`` is raised as an error) and
re-encoded as a PNG thumbnail, so what reaches the page is always a fresh PNG of known size. SVG is
never decoded or rendered as markup (it can carry script); it is shown as escaped source text.
A PDF is opened by pypdfium2 and its pages rendered to PNG (embed/iframe/object are stripped
from untrusted notebook outputs anyway). Audio is embedded only for an allowlisted media type.
Every failure becomes a short reason string, never an exception.
"""

from __future__ import annotations

import base64
import io
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PIL import Image

__all__ = [
    "AUDIO_TYPES",
    "MAX_IMAGE_PIXELS",
    "STREAM_TYPES",
    "TEXT_FILE_TYPES",
    "MediaFailure",
    "PdfView",
    "image_png",
    "pdf_view",
]

MAX_IMAGE_PIXELS = 40_000_000
"""Largest image (width x height) the renderer decodes; about 6300 x 6300."""

AUDIO_TYPES = frozenset(
    {
        "audio/wav",
        "audio/x-wav",
        "audio/wave",
        "audio/mpeg",
        "audio/mp3",
        "audio/ogg",
        "audio/webm",
        "audio/flac",
        "audio/aac",
        "audio/mp4",
    }
)
"""Audio media types given a player; others are listed, not embedded."""

STREAM_TYPES = AUDIO_TYPES | frozenset(
    {"application/pdf", "image/png", "image/jpeg", "image/gif", "image/webp"}
)
"""Media types a live view may stream to the browser and open from a ``blob:`` URL.

Never markup (no text/html, no SVG): a blob URL has the page's origin, so only types the browser
plays or shows in its own viewer are allowed.
"""

TEXT_FILE_TYPES = frozenset(
    {"text/plain", "text/markdown", "text/csv", "application/json", "text/x-python"}
)
"""File types shown as an escaped text preview."""

_MAX_PDF_PIXELS = 4_000_000


@dataclass(frozen=True)
class MediaFailure:
    """Why media could not be decoded (shown in its place)."""

    reason: str
    """Short reason for people."""


@dataclass(frozen=True)
class PdfView:
    """A PDF made displayable: its page count, a first-page thumbnail and the first page images."""

    pages: int
    """Number of pages in the document."""
    thumb: str
    """Base64 PNG of the first page, at thumbnail size."""
    page_images: tuple[str, ...]
    """Base64 PNGs of the first pages, at reading size."""


def image_png(data: bytes, max_side: int) -> tuple[str, int, int] | MediaFailure:
    """The image re-encoded as a base64 PNG no larger than ``max_side``, plus its original size."""
    from PIL import Image, UnidentifiedImageError  # here: a text-only transcript never loads Pillow

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                width, height = image.size
                if width * height > MAX_IMAGE_PIXELS or width <= 0 or height <= 0:
                    return MediaFailure(
                        f"image too large to decode ({width}x{height} pixels; "
                        f"the limit is {MAX_IMAGE_PIXELS} pixels)"
                    )
                if image.format in {"JPEG"}:
                    image.draft("RGB", (max_side, max_side))
                image.seek(0)
                mode = "RGBA" if _has_alpha(image) else "RGB"
                if image.mode in {"RGB", "RGBA", "L"}:
                    image.thumbnail((max_side, max_side), reducing_gap=2.0)
                    frame = image.convert(mode)
                else:
                    frame = image.convert(mode)
                    frame.thumbnail((max_side, max_side), reducing_gap=2.0)
        out = io.BytesIO()
        frame.save(out, format="PNG", compress_level=6)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        return MediaFailure(f"image refused as a decompression bomb ({exc.__class__.__name__})")
    except UnidentifiedImageError:
        return MediaFailure("not an image Pillow can decode")
    except (OSError, ValueError, SyntaxError, EOFError, MemoryError) as exc:
        return MediaFailure(f"image could not be decoded ({exc.__class__.__name__})")
    return base64.b64encode(out.getvalue()).decode("ascii"), width, height


def _has_alpha(image: Image.Image) -> bool:
    return image.mode in {"RGBA", "LA", "PA"} or "transparency" in image.info


def pdf_view(
    data: bytes, *, thumb_side: int, page_width: int, max_pages: int
) -> PdfView | MediaFailure:
    """Page count, first-page thumbnail and the first ``max_pages`` page images of a PDF."""
    import pypdfium2 as pdfium  # imported here: opening pdfium costs time only when a PDF is shown

    try:
        document = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        return MediaFailure(f"not a readable PDF ({_first_line(exc)})")
    try:
        count = len(document)
        if count == 0:
            return MediaFailure("PDF has no pages")
        thumb = _render_page(document, 0, thumb_side, fit_height=True)
        if isinstance(thumb, MediaFailure):
            return thumb
        images: list[str] = []
        for index in range(min(count, max_pages)):
            page = _render_page(document, index, page_width, fit_height=False)
            if isinstance(page, MediaFailure):
                return page
            images.append(page)
        return PdfView(pages=count, thumb=thumb, page_images=tuple(images))
    finally:
        document.close()


def pdf_page(data: bytes, index: int, *, page_width: int) -> str | MediaFailure:
    """One page of a PDF as a base64 PNG (the widget's pager asks for pages one by one)."""
    import pypdfium2 as pdfium

    try:
        document = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        return MediaFailure(f"not a readable PDF ({_first_line(exc)})")
    try:
        if not 0 <= index < len(document):
            return MediaFailure(f"no page {index + 1}")
        return _render_page(document, index, page_width, fit_height=False)
    finally:
        document.close()


def _render_page(
    document: object, index: int, side: int, *, fit_height: bool
) -> str | MediaFailure:
    import pypdfium2 as pdfium

    try:
        page = document[index]  # type: ignore[index]
        try:
            width, height = page.get_size()
            if width <= 0 or height <= 0:
                return MediaFailure(f"page {index + 1} has no size")
            scale = side / max(width, height) if fit_height else side / width
            scale = min(scale, (_MAX_PDF_PIXELS / (width * height)) ** 0.5)
            bitmap = page.render(scale=scale)
            image = bitmap.to_pil().convert("RGB")
        finally:
            page.close()
    except (pdfium.PdfiumError, OSError, ValueError) as exc:
        return MediaFailure(f"PDF page {index + 1} could not be rendered ({_first_line(exc)})")
    # Pages are mostly text: a 32-colour palette keeps them legible at a seventh of the bytes.
    from PIL import Image

    paletted = image.quantize(32, method=Image.Quantize.FASTOCTREE)
    out = io.BytesIO()
    paletted.save(out, format="PNG", compress_level=6)
    return base64.b64encode(out.getvalue()).decode("ascii")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else exc.__class__.__name__)[:120]
