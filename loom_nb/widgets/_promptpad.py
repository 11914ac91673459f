"""PromptPad: exploratory prompting in a notebook, a face over ``Chat``, streaming live, stoppable.

One anywidget holds the text box, the send and stop buttons and the live area (streamed text and
tool-call deltas as they arrive). The conversation is a TranscriptView and the attachments a
MediaUpload, both children of the pad (synced by reference, drawn inside it), so their rendering,
on-demand media and chunked uploads are the ones tested for those widgets.

A send is ``await chat(text, *uploads, stream=True)`` on the pad's ``Chat``: the one code path
(``create_llm_effect``: guard, capabilities before any I/O, refs resolved with the pad's tenant,
then ``provider.stream``), journaled as a step (in memory unless ``journal=`` names one: clicks
in a UI are not code a notebook re-runs). Any ``LoomError`` on the way becomes a refusal shown in
place (kind, code, message, and the remedy for that failure and that kind of provider); the
message is not added to the conversation, so it can be fixed and sent again. The pad does not
run tools: a tool call is shown as it streams, and the next send answers it with an error result
saying so (``chat.run`` runs tools).

Stop cancels the reply in flight (``chat.stop()``: asyncio cancellation of the send's task). The
partial text stays in the conversation marked "stopped"; the step is journaled as failed, never
as completed. The header counts the message in flight while it streams.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import traitlets
from ipywidgets import widget_serialization

from loom_nb.agent import ToolDefinition
from loom_nb.chat import Chat
from loom_nb.chat._attach import user_message
from loom_nb.chat._cost import format_cost
from loom_nb.content import (
    AudioPart,
    FilePart,
    ImagePart,
    LlmResponse,
    Message,
    Part,
    ToolSpec,
)
from loom_nb.errors import ConfigurationError, LoomError
from loom_nb.journal import Journal
from loom_nb.providers._base import ToolDelta
from loom_nb.render._html import STYLE, esc
from loom_nb.render._refusal import refusal_html, refusal_view
from loom_nb.store import Principal
from loom_nb.taint import Untrusted
from loom_nb.widgets._base import StaticFallbackWidget
from loom_nb.widgets._transcript import TranscriptView
from loom_nb.widgets._upload import MediaUpload

__all__ = ["PromptPad"]

_STATIC = Path(__file__).parent / "static"
_log = logging.getLogger(__name__)


class PromptPad(StaticFallbackWidget):
    """A prompt box over ``provider`` (a face over ``Chat``): ``await pad.send(text)`` or type and send.

    With a ``store``, files uploaded through ``pad.upload`` (a MediaUpload for ``tenant``) are
    attached to the next message and resolved for that tenant just before the provider sees them.
    ``pad.chat`` is the conversation (pass ``chat=`` to put a pad over an existing one);
    ``pad.messages`` its history; ``pad.error`` the last refusal (empty if none); ``pad.stop()``
    (or the stop button) cancels a streaming reply.
    """

    _esm = (_STATIC / "promptpad.js").read_text(encoding="utf-8")
    _css = (_STATIC / "promptpad.css").read_text(encoding="utf-8")

    transcript = traitlets.Instance(TranscriptView).tag(sync=True, **widget_serialization)
    """The conversation view (a child widget)."""
    upload = traitlets.Instance(MediaUpload, allow_none=True).tag(sync=True, **widget_serialization)
    """The attachment uploader (None without a store)."""
    live_text = traitlets.Unicode("").tag(sync=True)
    """The text streamed so far by the call in flight."""
    live_tools: traitlets.List[dict[str, Any]] = traitlets.List().tag(sync=True)
    """Tool calls streamed so far: ``{index, id, name, input_json}``."""
    busy = traitlets.Bool(False).tag(sync=True)
    """True while a call is in flight."""
    stopped = traitlets.Bool(False).tag(sync=True)
    """True when the last reply was stopped (its partial text is the last assistant turn)."""
    error: traitlets.Dict[str, Any] = traitlets.Dict().tag(sync=True)
    """The last refusal ``{kind, code, message, remedy}``; empty after a successful send."""
    pending: traitlets.List[str] = traitlets.List().tag(sync=True)
    """The attachments the next message will carry, described for people."""
    status = traitlets.Unicode("").tag(sync=True)
    """One line about the pad: provider, model, message count, tokens, cost."""

    def __init__(
        self,
        provider: Any = None,
        store: Any = None,
        *,
        tenant: str = "notebook",
        principal: Principal | None = None,
        system: str | Untrusted | None = None,
        tools: Sequence[ToolDefinition | ToolSpec] | None = None,
        stream: bool = True,
        journal: Journal | None = None,
        chat: Chat | None = None,
        **kwargs: Any,
    ) -> None:
        if chat is None:
            if not callable(getattr(provider, "stream", None)) or not hasattr(
                provider, "capabilities"
            ):
                raise ConfigurationError(
                    f"PromptPad needs a provider with capabilities, complete() and stream(), not "
                    f"{type(provider).__name__}; pass e.g. ScriptedProvider([...]) or "
                    "AnthropicProvider(model=...).",
                    code="invalid_provider",
                )
            chat = Chat(
                provider,
                system=system,
                tools=[_definition_of(t) for t in tools or []],
                store=store,
                journal=journal if journal is not None else Journal(),
                tenant=(principal.tenant if principal is not None else tenant),
                stream=stream,
            )
        elif not isinstance(chat, Chat):
            raise ConfigurationError(
                f"chat is a Chat, not {type(chat).__name__}.", code="invalid_argument"
            )
        self._chat = chat
        self._store = store if store is not None else chat._store
        self._tenant = chat._principal.tenant
        self._stream = stream
        self._used_uploads = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self.last_exception: BaseException | None = None
        """The exception behind ``error`` (for debugging; the pad shows only its message)."""
        view = TranscriptView(chat.history, store=self._store, principal=chat._principal)
        upload = MediaUpload(self._store, self._tenant) if self._store is not None else None
        super().__init__(transcript=view, upload=upload, **kwargs)
        if upload is not None:
            upload.observe(lambda _change: self._refresh_pending(), names="uploads")
        self._refresh_status()
        self.on_msg(self._on_custom_msg)

    # -- Python API ------------------------------------------------------------------------------

    @property
    def chat(self) -> Chat:
        """The conversation this pad is a face over."""
        return self._chat

    @property
    def messages(self) -> list[Message]:
        """The conversation so far (user and assistant messages, oldest first)."""
        return self._chat.history

    async def send(  # the pad's send is a prompt; comm messages go through AnyWidget.send
        self, text: str, attachments: list[Part] | None = None
    ) -> LlmResponse | None:
        """Send ``text`` (with ``attachments``, default: the new uploads) and stream the answer.

        Returns the response (a stopped one carries the partial text), or None when the message
        was refused (``pad.error`` says why and the conversation is unchanged). Errors that are
        not ``LoomError`` are shown and re-raised.
        """
        if self.busy:
            self._refuse(
                ConfigurationError(
                    "a message is still streaming; wait for its answer (or press stop).",
                    code="pad_busy",
                )
            )
            return None
        self.busy = True
        self.error = {}
        self.stopped = False
        self.live_text = ""
        self.live_tools = []
        extra = list(attachments) if attachments is not None else self._new_uploads()
        try:
            preview = user_message(
                text, extra, self._chat.history, lambda: self._chat.store, self._tenant
            )
            self.transcript.append(preview)
            self._refresh_status(streaming=True)
            try:
                response = await self._chat(
                    text,
                    *extra,
                    stream=self._stream,
                    on_text=self._on_text,
                    on_tool_delta=self._on_tool_delta,
                    on_tool_reset=self._on_reset,
                )
            except BaseException:
                cast(Any, self.transcript).messages = self._chat.history
                raise
        except LoomError as exc:
            self._refuse(exc)
            return None
        except Exception as exc:
            self._refuse(exc)
            raise
        finally:
            self.busy = False
            self._refresh_status()
        turn = self._chat.turns[-1]
        if turn.status == "stopped":
            self.stopped = True
        if len(self._chat.history) > turn.start:
            self.transcript.append(self._chat.history[-1])
        else:
            cast(Any, self.transcript).messages = self._chat.history  # stopped before any text
        if attachments is None and self.upload is not None:
            self._used_uploads = len(self.upload.parts)
        self.live_text = ""
        self.live_tools = []
        self._refresh_pending()
        self._refresh_status()
        return response

    def stop(self) -> bool:
        """Cancel the reply streaming now; True if there was one (its partial text is kept)."""
        return self._chat.stop()

    def _refuse(self, exc: BaseException) -> None:
        self.last_exception = exc
        self.error = refusal_view(exc)

    def _new_uploads(self) -> list[ImagePart | AudioPart | FilePart]:
        return list(self.upload.parts[self._used_uploads :]) if self.upload is not None else []

    # -- streaming callbacks ---------------------------------------------------------------------

    def _on_text(self, delta: str) -> None:
        self.live_text = self.live_text + delta

    def _on_tool_delta(self, delta: ToolDelta) -> None:
        tools = [dict(t) for t in self.live_tools]
        while len(tools) <= delta.index:
            tools.append({"index": len(tools), "id": "", "name": "", "input_json": ""})
        call = tools[delta.index]
        if delta.id is not None:
            call["id"] = delta.id
        if delta.name is not None:
            call["name"] = delta.name
        call["input_json"] = call["input_json"] + delta.input_json
        self.live_tools = tools

    def _on_reset(self) -> None:
        self.live_text = ""
        self.live_tools = []

    # -- front end -------------------------------------------------------------------------------

    def _on_custom_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        if content.get("type") == "stop":
            self.stop()
            return
        if content.get("type") != "send":
            return
        text = content.get("text")
        task = asyncio.ensure_future(self._send_from_ui(text if isinstance(text, str) else ""))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_from_ui(self, text: str) -> None:
        try:
            await self.send(text)
        except Exception:  # shown in place by send(); logged for the kernel log, never raised here
            _log.exception("PromptPad send failed")

    def _refresh_pending(self) -> None:
        self.pending = [
            p.media_type + (f" · {p.name}" if isinstance(p, FilePart) and p.name else "")
            for p in self._new_uploads()
        ]

    def _refresh_status(self, *, streaming: bool = False) -> None:
        provider = self._chat.provider
        model = _text_attr(provider, "model")
        count = len(self.transcript.transcript.messages)
        usage = self._chat.usage
        line = (
            f"{_name_of(provider)}{' · ' + model if model else ''} · "
            f"{count} message{'s' if count != 1 else ''}"
        )
        if self._chat.turns or streaming:
            line += (
                f" · {usage.input_tokens:,} in · {usage.output_tokens:,} out · "
                f"{format_cost(self._chat.cost)}"
            )
        if streaming:
            line += " · streaming"
        self.status = line

    # -- static forms ----------------------------------------------------------------------------

    def to_static_html(self) -> str:
        """The conversation as static HTML, with the last refusal (sanitizer-safe)."""
        refusal = refusal_html(self.error) if self.error else ""
        stopped = (
            '<div class="loom-pp-stopped" style="font-size:12px;font-style:italic">'
            "stopped: the last reply was cancelled; its partial text is kept above</div>"
            if self.stopped
            else ""
        )
        return (
            f'<div class="loom-promptpad"><div style="{STYLE["meta"]}">'
            f"prompt pad · {esc(self.status)}</div>{self.transcript.to_static_html()}{stopped}"
            f"{refusal}</div>"
        )

    def __repr__(self) -> str:
        return f"PromptPad({self.status})"


def _not_run(_value: Any) -> str:
    return "not run: the prompt pad does not run tools (use chat.run for that)."


def _definition_of(item: ToolDefinition | ToolSpec) -> ToolDefinition:
    """A pad takes tool definitions, or bare menu entries it only shows to the model."""
    if isinstance(item, ToolDefinition):
        return item
    if isinstance(item, ToolSpec):
        return ToolDefinition(
            item.name, item.description, input_schema=item.input_schema, fn=_not_run
        )
    raise ConfigurationError(
        f"tools are ToolDefinition or ToolSpec, not {type(item).__name__}.",
        code="invalid_tool_definition",
    )


def _text_attr(provider: object, name: str) -> str | None:
    value = getattr(provider, name, None)
    return value if isinstance(value, str) else None


def _name_of(provider: object) -> str:
    return _text_attr(provider, "name") or type(provider).__name__
