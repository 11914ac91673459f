"""Notebook display of values (Message, LlmResponse, AgentResult, Chat) as the transcript view.

The values live on lower layers and know nothing of widgets (DESIGN.md "Layers"): ``import
loom_nb`` registers the functions here with IPython's mimebundle formatter, by class name, so a
value last in a cell (or passed to ``display``) is shown by them and nothing here is imported
until one is. ``transcript_bundle`` is what each returns: the TranscriptView widget's bundle when
the widget can load (the live view), and in every case the static ``text/html`` of the same views,
which survives JupyterLab's sanitizer, GitHub and nbval, plus a deterministic ``text/plain``. The
widget is imported inside the call, so this module loads without ipywidgets: with no ipywidgets
the bundle is the static HTML alone.

A chat is different in one way: it keeps changing after it is shown. In a shell, ``display_chat``
shows it (registered with IPython's ``ipython_display_formatter``, so ``display(chat)`` and
``chat`` last in a cell both come here) as the same bundle published under a display id, and
each live view made for it keeps that id (``Published``). When a turn lands the chat has its
views republish their static ``text/html`` with ``update_display``, so the output a notebook
saves (what GitHub, nbviewer and a reopened untrusted notebook show) is the transcript as it
last stood, not the "0 turns" it was when the cell ran.
"""

from __future__ import annotations

import logging
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from loom_nb.content import LlmResponse, Message, assistant_message_of, text_of
from loom_nb.render._api import html_of_views, transcript_views
from loom_nb.render._resolve import ContentReader, Viewer
from loom_nb.render._source import Transcript
from loom_nb.render._view import RenderContext
from loom_nb.taint import Untrusted

if TYPE_CHECKING:
    from loom_nb.agent import AgentResult
    from loom_nb.chat import Chat

__all__ = [
    "Published",
    "agent_result_bundle",
    "chat_bundle",
    "display_chat",
    "display_map_progress",
    "message_bundle",
    "response_bundle",
    "transcript_bundle",
]

Bundle = tuple[dict[str, Any], dict[str, Any]]

_log = logging.getLogger(__name__)


def transcript_bundle(
    messages: Sequence[Message],
    *,
    header: str,
    plain: str,
    store: ContentReader | None = None,
    principal: Viewer | None = None,
    system: str | Untrusted | None = None,
    tools: Sequence[str] = (),
    include: Any = None,
    exclude: Any = None,
    approvals: Mapping[str, Mapping[str, Any]] | None = None,
    stats: Mapping[int, Mapping[str, Any]] | None = None,
    on_decision: Any = None,
    on_view: Callable[[Any], None] | None = None,
) -> Bundle:
    """The mimebundle of ``messages`` shown as a transcript headed by ``header``.

    ``approvals`` (call id -> ``approval_state(...)``) marks calls awaiting or decided;
    ``on_decision(call_id, approved)`` gives awaiting calls Approve / Decline buttons in the live
    view; ``stats`` (message index -> ``turn_stats(...)``) adds tokens and latency to turns.
    ``on_view(view)`` is called with the live view when one is made (a ``Chat`` keeps it, weakly,
    to update it as turns land); without the notebook layer there is none and it is not called.
    """
    transcript = Transcript(
        list(messages),
        system,
        list(tools),
        approvals={k: dict(v) for k, v in (approvals or {}).items()},
        stats={k: dict(v) for k, v in (stats or {}).items()},
    )
    data: dict[str, Any]
    try:
        from loom_nb.widgets._transcript import TranscriptView
    except ImportError:
        ctx = RenderContext(store=store, principal=principal, pdf_pages=1)
        data = {"text/html": html_of_views(header, transcript_views(transcript, ctx))}
    else:
        view = TranscriptView(transcript, store=store, principal=principal, on_decision=on_decision)
        view.header = header
        if on_view is not None:
            on_view(view)
        bundle = view._repr_mimebundle_(include=include, exclude=exclude)
        data = dict(bundle[0]) if bundle is not None else {"text/html": view.to_static_html()}
    data["text/plain"] = plain
    wanted = {
        mime: value
        for mime, value in data.items()
        if (include is None or mime in include) and not (exclude and mime in exclude)
    }
    return wanted, {}


def message_bundle(message: Message, *, include: Any = None, exclude: Any = None) -> Bundle:
    """A message shown as a one-message transcript (widget, static HTML, plain text)."""
    return transcript_bundle(
        [message],
        header=f"message · {message.role}",
        plain=repr(message),
        include=include,
        exclude=exclude,
    )


def response_bundle(response: LlmResponse, *, include: Any = None, exclude: Any = None) -> Bundle:
    """A response shown as its assistant turn, headed by model, tokens and stop reason."""
    head = ["response", *([response.model] if response.model else [])]
    if response.provider:
        head.append(f"via {response.provider}")
    usage = response.usage
    cached = f" ({usage.cache_read_tokens:,} cached)" if usage.cache_read_tokens else ""
    head.append(f"{usage.input_tokens:,} in{cached} · {usage.output_tokens:,} out")
    head.append(f"stop: {response.stop_reason}")
    calls = "".join(f"\ntool call {c.name} ({c.id})" for c in response.tool_calls)
    plain = f"{' · '.join(head)}\n{text_of(response.content)}{calls}"
    return transcript_bundle(
        [assistant_message_of(response)],
        header=" · ".join(head),
        plain=plain,
        include=include,
        exclude=exclude,
    )


def agent_result_bundle(result: AgentResult, *, include: Any = None, exclude: Any = None) -> Bundle:
    """An agent run shown as its transcript, headed by status and pending approvals."""
    awaiting = {
        str(d.get("id")): {"state": "awaiting", "by": None, "reason": None}
        for d in result.pending_approvals
    }
    return transcript_bundle(
        result.messages,
        header=result.header(),
        plain=f"AgentResult({result.header()})",
        approvals=awaiting,
        include=include,
        exclude=exclude,
    )


def chat_bundle(chat: Chat, *, include: Any = None, exclude: Any = None) -> Bundle:
    """A chat shown as its transcript; the live view is kept by the chat and follows its turns."""
    return transcript_bundle(**chat._display_arguments(), include=include, exclude=exclude)


def display_chat(chat: Chat) -> None:
    """Show ``chat`` under a display id whose static HTML its live views keep current.

    What IPython calls for ``display(chat)`` and for ``chat`` last in a cell (``import loom_nb``
    registers it in a running shell). The bundle is ``chat_bundle``'s.
    """
    from IPython.display import display

    made: list[Any] = []
    arguments = chat._display_arguments()
    keep = arguments["on_view"]

    def on_view(view: Any) -> None:
        made.append(view)
        keep(view)

    arguments["on_view"] = on_view
    data, _metadata = transcript_bundle(**arguments)
    display_id = uuid.uuid4().hex
    display(data, raw=True, display_id=display_id)
    owner = weakref.ref(chat)
    plain = data["text/plain"]

    def current_plain() -> str:
        live = owner()
        return repr(live) if live is not None else plain

    for view in made:
        view._published = Published(display_id, data, current_plain)


def display_map_progress(progress: Any) -> None:
    """Show a running ``chat.map``'s progress bar (``loom_nb.widgets._map_progress``)."""
    from loom_nb.widgets._map_progress import display_map_progress as show

    show(progress)


class Published:
    """The output a view was displayed in, by display id, republished as the view changes.

    ``publish(html)`` sends ``update_display`` with the output's other data unchanged (the widget
    view, so a live front end keeps showing the widget), ``text/plain`` from ``plain()`` and the
    new ``text/html``; the same HTML twice is sent once. Outside a running IPython shell it does
    nothing. A failure to send is logged once and ends the republishing of that output; the live
    view goes on.
    """

    def __init__(self, display_id: str, data: Mapping[str, Any], plain: Callable[[], str]) -> None:
        self.display_id = display_id
        """The display id the output was published under."""
        self._data = {k: v for k, v in data.items() if k not in {"text/html", "text/plain"}}
        self._html = data.get("text/html")
        self._plain = plain
        self._failed = False

    def publish(self, html: str) -> bool:
        """Republish the output with ``html``; True when an update was sent."""
        if self._failed or html == self._html:
            return False
        from IPython.core.interactiveshell import InteractiveShell

        if not InteractiveShell.initialized():
            return False
        from IPython.display import display

        try:
            data = {**self._data, "text/plain": self._plain(), "text/html": html}
            display(data, raw=True, display_id=self.display_id, update=True)
        except Exception:  # the saved output goes stale; the turn and the live view go on
            self._failed = True
            _log.warning(
                "a displayed chat's saved output could not be updated; display the chat again "
                "to save its current transcript",
                exc_info=True,
            )
            return False
        self._html = html
        return True
