"""What the notebook widgets share: the static-fallback mimebundle and on-demand media replies.

``StaticFallbackWidget`` is the base of every widget that has a static form: its
``_repr_mimebundle_`` is anywidget's (the widget view) plus ``text/plain`` from ``repr`` and
``text/html`` from ``to_static_html()`` (what untrusted JupyterLab outputs, GitHub and nbval see),
each honouring ``include`` / ``exclude``.

``media_reply`` answers the front end's request for a full-size image or a PDF page beyond the
first, read from the render context that drew the part; TranscriptView and ReplayStepper differ
only in which context they look the part up in.

``esm_of`` joins front-end files into the one ES module anywidget ships (``_esm`` is a single
module string): the transcript's front end is written as several files by concern
(``TRANSCRIPT_ESM``), which share that module's scope.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anywidget

from loom_nb.render._media import MediaFailure, image_png, pdf_page
from loom_nb.render._resolve import Unavailable, fetch_bytes
from loom_nb.render._view import RenderContext
from loom_nb.widgets._kernel_parent import mend_running_kernel

__all__ = [
    "STATIC",
    "TRANSCRIPT_ESM",
    "StaticFallbackWidget",
    "combined_esm",
    "esm_of",
    "media_reply",
]

STATIC = Path(__file__).parent / "static"
"""The widgets' front-end files (JavaScript and CSS), shipped in the wheel."""

TRANSCRIPT_ESM = ("icons.js", "dom.js", "markdown.js", "media.js", "transcript.js")
"""TranscriptView's front end, in load order: icons, helpers, markdown, kernel round trips, the cards."""

_EXPORT = "export default {"


def esm_of(names: Sequence[str]) -> str:
    """One ES module from ``static/`` files joined in order: earlier files define what later
    ones use, and only the last may ``export default``."""
    sources = [(STATIC / name).read_text(encoding="utf-8") for name in names]
    if any(_EXPORT in source for source in sources[:-1]) or sources[-1].count(_EXPORT) != 1:
        raise RuntimeError(f"of {', '.join(names)}, only the last has one `{_EXPORT}` block")
    return "\n".join(sources)


def combined_esm(name: str) -> str:
    """TranscriptView's front-end module followed by ``static/<name>`` (which may use its classes:
    the replay stepper and the comparison grid draw transcripts with its ``TranscriptDom``)."""
    transcript = esm_of(TRANSCRIPT_ESM)
    own = (STATIC / name).read_text(encoding="utf-8")
    return transcript.replace(_EXPORT, "const transcriptWidget = {", 1) + "\n" + own


class StaticFallbackWidget(anywidget.AnyWidget):
    """An anywidget whose mimebundle also carries its static ``text/html`` and ``text/plain``.

    Making one in an ipykernel 7.4.0 kernel mends that kernel's stale-parent fault first
    (``_kernel_parent``): its front end's messages could otherwise leave a cell at ``[*]``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        mend_running_kernel()
        super().__init__(*args, **kwargs)

    def to_static_html(self) -> str:
        """The sanitizer-safe static HTML of the widget (each subclass says what it shows)."""
        raise NotImplementedError

    def _repr_mimebundle_(self, **kwargs: Any) -> tuple[dict[Any, Any], dict[Any, Any]] | None:
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None:
            return None
        data = bundle[0]
        include, exclude = kwargs.get("include"), kwargs.get("exclude")
        for mime, make in (("text/plain", self.__repr__), ("text/html", self.to_static_html)):
            if (include is None or mime in include) and not (exclude and mime in exclude):
                data[mime] = make()
        return bundle


def media_reply(request: dict[str, Any], ctx: RenderContext | None, missing: str) -> dict[str, Any]:
    """The reply to a front-end ``full`` (image) or ``page`` (PDF) request for a part of ``ctx``.

    The reply echoes ``ticket`` and ``type`` and carries either ``data`` (PNG base64) or
    ``unavailable`` (a reason for people; ``missing`` when ``ctx`` is None or lacks the key).
    """
    reply: dict[str, Any] = {"ticket": str(request.get("ticket", "")), "type": request.get("type")}
    part = ctx.media.get(str(request.get("key", ""))) if ctx is not None else None
    if ctx is None or part is None:
        return {**reply, "unavailable": missing}
    data = fetch_bytes(part.source, store=ctx.store, principal=ctx.principal)
    if isinstance(data, Unavailable):
        return {**reply, "unavailable": data.describe()}
    result: str | MediaFailure
    if request.get("type") == "full" and part.type == "image":
        if part.media_type.lower().startswith("image/svg"):
            return {**reply, "unavailable": "SVG is not rendered"}
        image = image_png(data, ctx.full_px)
        result = image if isinstance(image, MediaFailure) else image[0]
    elif request.get("type") == "page" and part.media_type.lower() == "application/pdf":
        page = request.get("page")
        if not isinstance(page, int) or isinstance(page, bool):
            return {**reply, "unavailable": "page must be a number"}
        result = pdf_page(data, page, page_width=ctx.page_width)
    else:
        return {**reply, "unavailable": "unknown request"}
    if isinstance(result, MediaFailure):
        return {**reply, "unavailable": result.reason}
    return {**reply, "data": result}
