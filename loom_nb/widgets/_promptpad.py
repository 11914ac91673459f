"""PromptPad: exploratory prompting in a notebook, streaming live, refusals shown in place.

One anywidget holds the text box, the send button and the live area (streamed text and tool-call
deltas as they arrive). The conversation is a TranscriptView and the attachments a MediaUpload,
both children of the pad (synced by reference, drawn inside it), so their rendering, on-demand
media and chunked uploads are the ones tested for those widgets.

A send runs what a journaled model call runs live (``create_llm_effect``'s order): the guard,
the provider's declared capabilities (before any I/O), resolution of upload refs into bytes with
the pad's principal, then ``provider.stream`` drained by ``collect_stream`` whose callbacks update
the live traits. Any ``LoomError`` on the way becomes a refusal shown in place (kind, code,
message, what to do); the message is not added to the conversation, so it can be fixed and sent
again. The pad does not run tools: a tool call is shown as it streams, and the next send answers
it with an error result saying so (use ``agent_loop`` to run tools).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from pathlib import Path
from typing import Any, cast

import traitlets
from ipywidgets import widget_serialization

from loom_nb.capabilities import assert_request_supported
from loom_nb.content import (
    AudioPart,
    FilePart,
    ImagePart,
    LlmRequest,
    LlmResponse,
    Message,
    Part,
    TextPart,
    ToolResultPart,
    ToolSpec,
    ToolUsePart,
    assistant_message_of,
    to_parts,
)
from loom_nb.errors import ConfigurationError, LoomError
from loom_nb.guard import guard_request
from loom_nb.providers._base import ToolDelta, collect_stream
from loom_nb.render._html import esc
from loom_nb.render._refusal import refusal_html, refusal_view
from loom_nb.store import Principal, ResolveContext, StoreResolver, resolve_request_content
from loom_nb.taint import Untrusted
from loom_nb.widgets._base import StaticFallbackWidget
from loom_nb.widgets._transcript import TranscriptView
from loom_nb.widgets._upload import MediaUpload

__all__ = ["PromptPad"]

_STATIC = Path(__file__).parent / "static"
_log = logging.getLogger(__name__)
_sessions = itertools.count(1)


class PromptPad(StaticFallbackWidget):
    """A prompt box over ``provider``: ``await pad.send(text)`` or type and click send.

    With a ``store``, files uploaded through ``pad.upload`` (a MediaUpload for ``tenant``) are
    attached to the next message and resolved with ``principal`` just before the provider sees
    them. ``pad.messages`` is the conversation; ``pad.error`` the last refusal (empty if none).
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
    error: traitlets.Dict[str, Any] = traitlets.Dict().tag(sync=True)
    """The last refusal ``{kind, code, message, remedy}``; empty after a successful send."""
    pending: traitlets.List[str] = traitlets.List().tag(sync=True)
    """The attachments the next message will carry, described for people."""
    status = traitlets.Unicode("").tag(sync=True)
    """One line about the pad: provider, model, message count."""

    def __init__(
        self,
        provider: Any,
        store: Any = None,
        *,
        tenant: str = "notebook",
        principal: Principal | None = None,
        system: str | Untrusted | None = None,
        tools: list[ToolSpec] | None = None,
        stream: bool = True,
        **kwargs: Any,
    ) -> None:
        if not callable(getattr(provider, "stream", None)) or not hasattr(provider, "capabilities"):
            raise ConfigurationError(
                f"PromptPad needs a provider with capabilities, complete() and stream(), not "
                f"{type(provider).__name__}; pass e.g. ScriptedProvider([...]) or "
                "AnthropicProvider(model=...).",
                code="invalid_provider",
            )
        self._provider = provider
        self._store = store
        self._principal = principal or Principal(tenant=tenant)
        self._system = system
        self._tools = list(tools or [])
        self._stream = stream
        self._messages: list[Message] = []
        self._used_uploads = 0
        self._session = f"prompt-pad-{next(_sessions)}"
        self._sends = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self.last_exception: BaseException | None = None
        """The exception behind ``error`` (for debugging; the pad shows only its message)."""
        view = TranscriptView([], store=store, principal=self._principal)
        upload = MediaUpload(store, tenant) if store is not None else None
        super().__init__(transcript=view, upload=upload, **kwargs)
        if upload is not None:
            upload.observe(lambda _change: self._refresh_pending(), names="uploads")
        self._refresh_status()
        self.on_msg(self._on_custom_msg)

    # -- Python API ------------------------------------------------------------------------------

    @property
    def messages(self) -> list[Message]:
        """The conversation so far (user and assistant messages, oldest first)."""
        return list(self._messages)

    async def send(  # the pad's send is a prompt; comm messages go through AnyWidget.send
        self, text: str, attachments: list[Part] | None = None
    ) -> LlmResponse | None:
        """Send ``text`` (with ``attachments``, default: the new uploads) and stream the answer.

        Returns the response, or None when the message was refused (``pad.error`` says why and
        the conversation is unchanged). Errors that are not ``LoomError`` are shown and re-raised.
        """
        if self.busy:
            self._refuse(
                ConfigurationError(
                    "a message is still streaming; wait for its answer.", code="pad_busy"
                )
            )
            return None
        self.busy = True
        self.error = {}
        self.live_text = ""
        self.live_tools = []
        try:
            message = self._user_message(text, attachments)
            request = LlmRequest(
                messages=[*self._messages, message], tools=self._tools, system=self._system
            )
            self.transcript.append(message)
            try:
                response = await self._call(request)
            except BaseException:
                cast(Any, self.transcript).messages = list(self._messages)
                raise
        except LoomError as exc:
            self._refuse(exc)
            return None
        except Exception as exc:
            self._refuse(exc)
            raise
        finally:
            self.busy = False
        self._messages.extend([message, assistant_message_of(response)])
        self.transcript.append(assistant_message_of(response))
        if attachments is None and self.upload is not None:
            self._used_uploads = len(self.upload.parts)
        self.live_text = ""
        self.live_tools = []
        self._refresh_pending()
        self._refresh_status()
        return response

    def _refuse(self, exc: BaseException) -> None:
        self.last_exception = exc
        self.error = refusal_view(exc)

    def _user_message(self, text: str, attachments: list[Part] | None) -> Message:
        if not isinstance(text, str):
            raise ConfigurationError(
                f"the prompt is text (str), not {type(text).__name__}.", code="invalid_prompt"
            )
        parts: list[Part] = self._unanswered_calls()
        if text:
            parts.append(TextPart(text=text))
        extra = list(attachments) if attachments is not None else self._new_uploads()
        parts.extend(extra)
        if not parts:
            raise ConfigurationError(
                "nothing to send: type a message or attach a file.", code="empty_prompt"
            )
        if len(parts) == 1 and isinstance(parts[0], TextPart):
            return Message(role="user", content=text)
        return Message(role="user", content=parts)

    def _unanswered_calls(self) -> list[Part]:
        """Error results for the last turn's tool calls (the pad runs no tools)."""
        if not self._messages or self._messages[-1].role != "assistant":
            return []
        return [
            ToolResultPart(
                tool_use_id=part.id if isinstance(part.id, str) else str(part.id.value),
                content="not run: the prompt pad does not run tools (use agent_loop for that).",
                is_error=True,
            )
            for part in to_parts(self._messages[-1].content)
            if isinstance(part, ToolUsePart)
        ]

    def _new_uploads(self) -> list[ImagePart | AudioPart | FilePart]:
        return list(self.upload.parts[self._used_uploads :]) if self.upload is not None else []

    async def _call(self, request: LlmRequest) -> LlmResponse:
        """Guard → capabilities → resolve refs (pad's principal) → stream (or complete)."""
        guarded = guard_request(request)
        assert_request_supported(
            guarded,
            self._provider.capabilities,
            provider=_name_of(self._provider),
            model=_text_attr(self._provider, "model"),
        )
        self._sends += 1
        context = ResolveContext(
            execution_id=self._session, step_id=f"send:{self._sends}", principal=self._principal
        )
        resolver = StoreResolver(self._store) if self._store is not None else None
        resolved = await resolve_request_content(guarded, resolver, context)
        if not self._stream:
            response: LlmResponse = await self._provider.complete(resolved)
            return response
        return await collect_stream(
            self._provider.stream(resolved),
            on_text=self._on_text,
            on_tool_delta=self._on_tool_delta,
            on_tool_reset=self._on_reset,
        )

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
        if not (isinstance(content, dict) and content.get("type") == "send"):
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

    def _refresh_status(self) -> None:
        model = _text_attr(self._provider, "model")
        count = len(self._messages)
        self.status = (
            f"{_name_of(self._provider)}{' · ' + model if model else ''} · "
            f"{count} message{'s' if count != 1 else ''}"
        )

    # -- static forms ----------------------------------------------------------------------------

    def to_static_html(self) -> str:
        """The conversation as static HTML, with the last refusal (sanitizer-safe)."""
        refusal = refusal_html(self.error) if self.error else ""
        return (
            f'<div class="loom-promptpad"><div style="font-size:12px;color:#555">'
            f"prompt pad · {esc(self.status)}</div>{self.transcript.to_static_html()}{refusal}</div>"
        )

    def __repr__(self) -> str:
        return f"PromptPad({self.status})"


def _text_attr(provider: object, name: str) -> str | None:
    value = getattr(provider, name, None)
    return value if isinstance(value, str) else None


def _name_of(provider: object) -> str:
    return _text_attr(provider, "name") or type(provider).__name__
