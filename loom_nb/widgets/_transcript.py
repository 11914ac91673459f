"""TranscriptView: one anywidget for a whole transcript, with a static HTML fallback.

One widget, not a tree of stock widgets: measured, one anywidget holding 600 parts is created
in ~5 ms and saves ~100 KB, where 600 stock widgets take ~0.9 s and save 1.7 MB of state. The
kernel side sends render-ready views (``loom_nb.render``: escaped nowhere, because the front end
sets every string as textContent; media as re-encoded PNG base64). Full-size images and PDF pages
beyond the first are fetched on demand through custom messages, so they never bloat saved state.

``_repr_mimebundle_`` adds the static ``text/html`` of the same views (what untrusted JupyterLab
outputs, GitHub and nbval see) and a deterministic ``text/plain``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import traitlets

from loom_nb.content import Message
from loom_nb.render._api import html_of_views, transcript_header, transcript_views
from loom_nb.render._resolve import ContentReader, Viewer
from loom_nb.render._source import Transcript, message_of, transcript_of
from loom_nb.render._view import RenderContext, View, message_view
from loom_nb.widgets._base import StaticFallbackWidget, media_reply

__all__ = ["TranscriptView"]

_STATIC = Path(__file__).parent / "static"


class TranscriptView(StaticFallbackWidget):
    """A live view of a transcript (messages, an ``LlmRequest`` or an ``Execution``).

    ``view.append(message)`` adds a turn in place; assigning ``view.messages`` a list of
    ``Message`` (or message dicts) replaces the transcript. Refs are shown only when
    ``principal``'s tenant stored them in ``store``.
    """

    _esm = (_STATIC / "transcript.js").read_text(encoding="utf-8")
    _css = (_STATIC / "transcript.css").read_text(encoding="utf-8")

    messages: traitlets.List[View] = traitlets.List().tag(sync=True)
    """Render-ready message views (JSON); assign Message objects to replace the transcript."""
    header = traitlets.Unicode("").tag(sync=True)
    """The one-line summary above the transcript."""

    def __init__(
        self,
        source: Any = None,
        store: ContentReader | None = None,
        principal: Viewer | None = None,
        **kwargs: Any,
    ) -> None:
        # One page image per PDF in the synced views: the pager fetches the others on demand.
        self._ctx = RenderContext(store=store, principal=principal, pdf_pages=1)
        self._transcript = transcript_of([] if source is None else source)
        self._internal = True
        super().__init__(
            messages=transcript_views(self._transcript, self._ctx),
            header=transcript_header(self._transcript),
            **kwargs,
        )
        self._internal = False
        self.on_msg(self._on_custom_msg)

    @property
    def transcript(self) -> Transcript:
        """The transcript shown (messages, system prompt, tool names)."""
        return self._transcript

    @traitlets.validate("messages")
    def _check_messages(self, proposal: dict[str, Any]) -> list[View]:
        if getattr(self, "_internal", True):
            return list(proposal["value"])
        # A user assignment: messages (or dicts) become a new transcript, rendered here.
        messages = [message_of(item, n) for n, item in enumerate(proposal["value"])]
        self._transcript = Transcript(messages, self._transcript.system, self._transcript.tools)
        self._ctx = RenderContext(store=self._ctx.store, principal=self._ctx.principal, pdf_pages=1)
        self.header = transcript_header(self._transcript)
        return transcript_views(self._transcript, self._ctx)

    def append(self, message: Message | dict[str, Any]) -> None:
        """Add one message at the end; the front end draws only the new card."""
        msg = message_of(message, len(self._transcript.messages))
        self._transcript.messages.append(msg)
        self._ctx.learn_tools([msg])
        view = message_view(msg, len(self._transcript.messages) - 1, self._ctx)
        self._internal = True
        try:
            self.messages = [*self.messages, view]
            self.header = transcript_header(self._transcript)
        finally:
            self._internal = False

    def extend(self, messages: list[Message | dict[str, Any]]) -> None:
        """Append several messages."""
        for message in messages:
            self.append(message)

    # -- on-demand media -------------------------------------------------------------------------

    def _on_custom_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        self.send(self.answer(content))

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """The reply to a front-end request for a full-size image or a PDF page (kernel side)."""
        return media_reply(request, self._ctx, "no such media in this transcript")

    # -- static forms ----------------------------------------------------------------------------

    def to_static_html(self) -> str:
        """The static HTML of the current views (the ``text/html`` fallback)."""
        return html_of_views(self.header, list(self.messages))

    def __repr__(self) -> str:
        roles = [m.role for m in self._transcript.messages]
        count = len(roles)
        listing = f": {', '.join(roles)}" if roles else ""
        return f"TranscriptView({count} message{'s' if count != 1 else ''}{listing})"
