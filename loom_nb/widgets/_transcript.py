"""TranscriptView: one anywidget for a whole transcript, with a static HTML fallback.

One widget, not a tree of stock widgets: measured, one anywidget holding 600 parts is created
in ~5 ms and saves ~100 KB, where 600 stock widgets take ~0.9 s and save 1.7 MB of state. The
kernel side sends render-ready views (``loom_nb.render``: escaped nowhere, because the front end
sets every string as textContent; media as re-encoded PNG base64). Full-size images and PDF pages
beyond the first are fetched on demand through custom messages, so they never bloat saved state;
media too large to embed (long audio, huge PDFs and images) and a PDF's original bytes are
streamed on demand in binary chunks (``loom_nb.widgets._stream``) into a ``blob:`` URL.

``_repr_mimebundle_`` adds the static ``text/html`` of the same views (what untrusted JupyterLab
outputs, GitHub and nbval see) and a deterministic ``text/plain``.

Following a chat: ``display(chat)`` makes a view the ``Chat`` keeps (weakly) and updates in place
as turns land (``_follow``: the messages already shown stay as drawn, new ones are drawn, stats
and approvals are set from the chat) and while a reply streams (``live_text``, a provisional
card below the transcript). The bundle's static ``text/html`` is what the view showed when
displayed; a view displayed under a display id republishes it when the chat settles
(``_publish_static``).

Approvals: a call marked awaiting (``view.await_approval(call_id)``, or read from a parked
execution's journal) shows "awaiting approval"; with an ``on_decision(call_id, approved)``
callback the card also has Approve / Decline buttons, and a click calls it (an awaitable it
returns is scheduled on the kernel's event loop; a failure is shown on the card and the call
stays awaiting). The decision is then shown, also in the static HTML: "approved by you, in
this view".
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import traitlets

from loom_nb.content import LlmResponse, Message, assistant_message_of
from loom_nb.errors import ContentValidationError, LoomError
from loom_nb.render._api import html_of_views, transcript_header, transcript_views, with_approvals
from loom_nb.render._resolve import ContentReader, Viewer
from loom_nb.render._source import (
    Transcript,
    approval_state,
    message_of,
    transcript_of,
    turn_stats,
)
from loom_nb.render._view import RenderContext, View, message_view
from loom_nb.widgets._base import (
    STATIC,
    TRANSCRIPT_ESM,
    StaticFallbackWidget,
    esm_of,
    media_reply,
)
from loom_nb.widgets._stream import StreamMessage, stream_messages

__all__ = ["DecisionCallback", "TranscriptView"]

DecisionCallback = Callable[[str, bool], Any]
"""``on_decision(call_id, approved)``: called when a person clicks Approve / Decline (may be async)."""

_DECIDED_HERE = "you, in this view"


class TranscriptView(StaticFallbackWidget):
    """A live view of a transcript (messages, an ``LlmRequest`` or an ``Execution``).

    ``view.append(message)`` adds a turn in place; assigning ``view.messages`` a list of
    ``Message`` (or message dicts) replaces the transcript. Refs are shown only when
    ``principal``'s tenant stored them in ``store``.
    """

    _esm = esm_of(TRANSCRIPT_ESM)
    _css = (STATIC / "transcript.css").read_text(encoding="utf-8")

    messages: traitlets.List[View] = traitlets.List().tag(sync=True)
    """Render-ready message views (JSON); assign Message objects to replace the transcript."""
    header = traitlets.Unicode("").tag(sync=True)
    """The one-line summary above the transcript."""
    decidable = traitlets.Bool(False).tag(sync=True)
    """Whether awaiting calls get Approve / Decline buttons (True when ``on_decision`` is set)."""
    live_text = traitlets.Unicode("").tag(sync=True)
    """Text of a reply still streaming, shown below the transcript ("" when none is in flight)."""
    stoppable = traitlets.Bool(False).tag(sync=True)
    """Whether the reply in flight has a Stop button (True while ``on_stop`` is set)."""
    _key = traitlets.Unicode("").tag(sync=True)
    """A random id of this view's model, by which a view the front end draws again (a republished
    output) finds the DOM of the one it replaces; the front end's model objects differ per view."""

    def __init__(
        self,
        source: Any = None,
        store: ContentReader | None = None,
        principal: Viewer | None = None,
        *,
        on_decision: DecisionCallback | None = None,
        **kwargs: Any,
    ) -> None:
        # One page image per PDF in the synced views: the pager fetches the others on demand.
        self._ctx = RenderContext(store=store, principal=principal, pdf_pages=1)
        self._transcript = transcript_of([] if source is None else source)
        self._internal = True
        super().__init__(
            messages=transcript_views(self._transcript, self._ctx),
            header=transcript_header(self._transcript),
            _key=uuid.uuid4().hex,
            **kwargs,
        )
        self._internal = False
        self._on_decision: DecisionCallback | None = None
        self.on_decision = on_decision
        self._on_stop: Callable[[], Any] | None = None
        self._splices = False  # set when the front-end model says it applies "splice" messages
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
        self._transcript = Transcript(
            messages,
            self._transcript.system,
            self._transcript.tools,
            approvals=self._transcript.approvals,
        )
        self._ctx = RenderContext(store=self._ctx.store, principal=self._ctx.principal, pdf_pages=1)
        self.header = transcript_header(self._transcript)
        return transcript_views(self._transcript, self._ctx)

    def append(
        self, message: Message | LlmResponse | dict[str, Any], *, latency_s: float | None = None
    ) -> None:
        """Add one message at the end; the front end draws only the new card.

        An ``LlmResponse`` is shown as its assistant turn with its reported tokens (and
        ``latency_s``, the seconds the call took, when given).
        """
        stats: dict[str, Any] | None = None
        if latency_s is not None and (
            isinstance(latency_s, bool) or not isinstance(latency_s, int | float) or latency_s < 0
        ):
            raise ContentValidationError(
                f"latency_s is a number of seconds >= 0, not {latency_s!r}",
                code="invalid_latency",
            )
        if isinstance(message, LlmResponse):
            stats = turn_stats(message, latency_s)
            message = assistant_message_of(message)
        msg = message_of(message, len(self._transcript.messages))
        self._transcript.messages.append(msg)
        self._ctx.learn_tools([msg])
        index = len(self._transcript.messages) - 1
        view = message_view(msg, index, self._ctx)
        if stats is not None:
            self._transcript.stats[index] = stats
            view["stats"] = dict(stats)
        if self._transcript.approvals:
            view = with_approvals([view], self._transcript.approvals)[0]
        self._show([*self.messages, view])
        self.header = transcript_header(self._transcript)

    def extend(self, messages: list[Message | dict[str, Any]]) -> None:
        """Append several messages."""
        for message in messages:
            self.append(message)

    def _follow(self, transcript: Transcript, header: str) -> None:
        """Show ``transcript`` in place: what a displayed ``Chat`` calls as its turns land.

        The messages it shares with what is shown (from the start) keep their drawn views; the
        rest are drawn anew, so a new turn costs what it added. Stats and approvals are taken
        from ``transcript``; the front end redraws only the cards that changed.
        """
        shown, target = self._transcript.messages, list(transcript.messages)
        keep, limit = 0, min(len(shown), len(target))
        while keep < limit and (shown[keep] is target[keep] or shown[keep] == target[keep]):
            keep += 1
        offset = 1 if self._transcript.system is not None else 0  # the system card
        views = list(self.messages[: offset + keep])
        self._ctx.learn_tools(target[keep:])
        views.extend(message_view(m, n, self._ctx) for n, m in enumerate(target[keep:], keep))
        # Stats can change only on the new cards or where the old or new transcript has some.
        numbers = set(range(keep, len(target)))
        before, after = self._transcript.stats, transcript.stats
        if before != after:  # compared in C; only then find which entries differ
            numbers.update(n for n in before.keys() ^ after.keys() if n < len(target))
            numbers.update(
                n
                for n in before.keys() & after.keys()
                if before[n] is not after[n] and before[n] != after[n] and n < len(target)
            )
        for number in sorted(numbers):
            stats = transcript.stats.get(number)
            view = views[offset + number]
            if view.get("stats") != stats:
                view = {k: v for k, v in view.items() if k != "stats"}
                if stats is not None:
                    view["stats"] = dict(stats)
                views[offset + number] = view
        approvals = {k: dict(v) for k, v in transcript.approvals.items()}
        if approvals or self._transcript.approvals:  # none before and none now: nothing to mark
            views = with_approvals(views, approvals)
        self._transcript = Transcript(
            target,
            self._transcript.system,
            list(transcript.tools),
            approvals=approvals,
            stats=dict(transcript.stats),  # its count dicts are only read (views hold copies)
        )
        self._show(views)
        self.header = header

    # -- approvals -------------------------------------------------------------------------------

    @property
    def on_decision(self) -> DecisionCallback | None:
        """``on_decision(call_id, approved)``: what Approve / Decline call (None: no buttons).

        It may return an awaitable (e.g. ``chat.decide``), which is scheduled on the running
        event loop. ``Chat``'s display sets it to resume the parked run.
        """
        return self._on_decision

    @on_decision.setter
    def on_decision(self, callback: DecisionCallback | None) -> None:
        if callback is not None and not callable(callback):
            raise ContentValidationError(
                f"on_decision must be a callable (call_id, approved) or None, not "
                f"{type(callback).__name__}",
                code="invalid_callback",
            )
        self._on_decision = callback
        self.decidable = callback is not None

    @property
    def approvals(self) -> dict[str, dict[str, Any]]:
        """Call id -> ``{"state", "by", "reason"}`` for every call that needs or had a decision."""
        return {k: dict(v) for k, v in self._transcript.approvals.items()}

    @property
    def awaiting(self) -> list[str]:
        """The call ids still awaiting a decision, in the order they were marked."""
        return [k for k, v in self._transcript.approvals.items() if v["state"] == "awaiting"]

    def await_approval(self, *call_ids: str) -> None:
        """Mark calls as awaiting approval (shown on their cards; buttons with ``on_decision``)."""
        for call_id in call_ids:
            self.set_approval(call_id, "awaiting")

    def set_approval(
        self, call_id: str, state: str, *, by: str | None = None, reason: str | None = None
    ) -> None:
        """Show ``call_id``'s approval: ``awaiting``, ``approved``, ``declined`` or ``undecidable``.

        ``by`` says who decided (shown as "approved by <by>"); ``reason`` is shown after it.
        """
        if not isinstance(call_id, str) or not call_id:
            raise ContentValidationError(
                f"call_id is a non-empty string, not {call_id!r}", code="invalid_call_id"
            )
        for name, value in (("by", by), ("reason", reason)):
            if value is not None and not isinstance(value, str):
                raise ContentValidationError(
                    f"{name} is a string or None, not {type(value).__name__}",
                    code="invalid_approval_state",
                )
        self._transcript.approvals[call_id] = approval_state(state, by, reason)
        self._redraw_approvals()

    def _redraw_approvals(self) -> None:
        self._show(with_approvals(list(self.messages), self._transcript.approvals))

    # -- incremental sync ------------------------------------------------------------------------

    def _show(self, views: list[View]) -> None:
        """Make ``views`` the synced messages, sending the front end only what changed.

        The views that ``views`` shares with what is shown (from the start, the same or equal
        dicts) are not sent again: the kernel's trait is set without syncing it and a custom
        ``splice`` message carries the rest, which the front-end model applies to its own state
        (so a saved notebook's widget state is whole, and a front end that connects later reads
        the kernel's full trait). A turn of a long chat then costs what it added, not the whole
        transcript. With nothing shared, or before the front end has said it applies splices
        (a headless client such as nbclient records only state updates), the trait syncs as
        usual.
        """
        old = self.messages
        start, limit = 0, min(len(old), len(views))
        while start < limit and (old[start] is views[start] or old[start] == views[start]):
            start += 1
        quiet = start > 0 and self.comm is not None and self._splices
        self._internal = True
        self._quiet_messages = quiet
        try:
            self.messages = views
        finally:
            self._internal = False
            self._quiet_messages = False
        if quiet and (start < len(views) or len(views) < len(old)):
            self.send({"type": "splice", "start": start, "views": views[start:]})

    def _should_send_property(self, key: str, value: Any) -> bool:
        # ipywidgets asks this before syncing a changed trait: ``_show`` sends messages itself.
        if key == "messages" and getattr(self, "_quiet_messages", False):
            return False
        return bool(super()._should_send_property(key, value))

    def decide(self, call_id: str, approved: bool) -> Any:
        """What a click on Approve / Decline does: record the decision and call ``on_decision``.

        Returns what the callback returned (a scheduled task for an awaitable). A call that is
        not awaiting, or a view without a callback, is refused with ``ContentValidationError``.
        """
        if call_id not in self.awaiting:
            raise ContentValidationError(
                f"call {call_id!r} is not awaiting approval (awaiting: "
                f"{', '.join(self.awaiting) or 'none'})",
                code="not_awaiting_approval",
            )
        if not isinstance(approved, bool):
            raise ContentValidationError(
                f"approved is True or False, not {approved!r}", code="invalid_decision"
            )
        callback = self._on_decision
        if callback is None:
            raise ContentValidationError(
                "this view has no on_decision callback; pass TranscriptView(..., on_decision=f)",
                code="no_decision_callback",
            )
        self.set_approval(call_id, "approved" if approved else "declined", by=_DECIDED_HERE)
        try:
            outcome = callback(call_id, approved)
        except Exception as exc:
            self._decision_failed(call_id, exc)
            raise
        if inspect.isawaitable(outcome):
            task = asyncio.ensure_future(outcome)
            task.add_done_callback(lambda done: self._decision_done(call_id, done))
            return task
        return outcome

    def _decision_done(self, call_id: str, task: asyncio.Future[Any]) -> None:
        if task.cancelled():
            self._decision_failed(call_id, asyncio.CancelledError("the decision was cancelled"))
        elif task.exception() is not None:
            self._decision_failed(call_id, task.exception())

    def _decision_failed(self, call_id: str, exc: BaseException | None) -> None:
        message = exc.message if isinstance(exc, LoomError) else f"{type(exc).__name__}: {exc}"
        self.set_approval(call_id, "awaiting", reason=f"the decision failed: {message}")

    # -- stop ------------------------------------------------------------------------------------

    @property
    def on_stop(self) -> Callable[[], Any] | None:
        """What the Stop button of the reply in flight calls (None: no button).

        A displayed ``Chat`` sets it to ``chat.stop`` while a reply streams and clears it after,
        so the partial text is kept and the turn is marked stopped.
        """
        return self._on_stop

    @on_stop.setter
    def on_stop(self, callback: Callable[[], Any] | None) -> None:
        if callback is not None and not callable(callback):
            raise ContentValidationError(
                f"on_stop must be a callable or None, not {type(callback).__name__}",
                code="invalid_callback",
            )
        self._on_stop = callback
        self.stoppable = callback is not None

    def _answer_stop(self, request: dict[str, Any]) -> dict[str, Any]:
        reply: dict[str, Any] = {"ticket": str(request.get("ticket", "")), "type": "stop"}
        callback = self._on_stop
        if callback is None:
            return {**reply, "error": "no reply is in flight"}
        try:
            stopped = callback()
        except Exception as exc:  # shown under the live card, never raised into the kernel
            message = exc.message if isinstance(exc, LoomError) else f"{type(exc).__name__}: {exc}"
            return {**reply, "error": message}
        return {**reply, "ok": stopped is not False}

    # -- on-demand media -------------------------------------------------------------------------

    def _on_custom_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        if content.get("type") == "decision":
            self.send(self._answer_decision(content))
            return
        if content.get("type") == "splices":  # the front-end model applies splice messages
            self._splices = True
            return
        if content.get("type") == "resync":  # the front end missed a splice: send the whole state
            self.send_state("messages")
            return
        if content.get("type") == "stop":
            self.send(self._answer_stop(content))
            return
        if content.get("type") == "stream":
            for reply, buffers in self.stream(content):
                self.send(reply, buffers)
            return
        self.send(self.answer(content))

    def _answer_decision(self, request: dict[str, Any]) -> dict[str, Any]:
        reply: dict[str, Any] = {"ticket": str(request.get("ticket", "")), "type": "decision"}
        call_id, approved = request.get("call_id"), request.get("approved")
        try:
            self.decide(str(call_id), approved)  # type: ignore[arg-type]
        except LoomError as exc:
            return {**reply, "error": exc.message}
        except Exception as exc:  # the callback's own failure: shown on the card, not lost
            return {**reply, "error": f"{type(exc).__name__}: {exc}"}
        return {**reply, "ok": True}

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """The reply to a front-end request for a full-size image or a PDF page (kernel side)."""
        return media_reply(request, self._ctx, "no such media in this transcript")

    def stream(self, request: dict[str, Any]) -> Iterator[StreamMessage]:
        """The chunked reply to a front-end ``stream`` request (kernel side; see ``_stream``).

        Only media parts of this view can be streamed, read under the view's principal.
        """
        return stream_messages(request, self._ctx, "no such media in this transcript")

    # -- static forms ----------------------------------------------------------------------------

    _published: Any = None  # the output this view was displayed in, when it has a display id

    def to_static_html(self) -> str:
        """The static HTML of the current views (the ``text/html`` fallback)."""
        return html_of_views(self.header, list(self.messages))

    def _publish_static(self) -> None:
        """Republish the static HTML of the output this view was displayed in, if it has a
        display id (a displayed ``Chat``'s views: see ``loom_nb.widgets._display.Published``)."""
        if self._published is not None:
            self._published.publish(self.to_static_html())

    def __repr__(self) -> str:
        roles = [m.role for m in self._transcript.messages]
        count = len(roles)
        listing = f": {', '.join(roles)}" if roles else ""
        return f"TranscriptView({count} message{'s' if count != 1 else ''}{listing})"
