"""MCPServerView: an MCP server's state, and a changed menu to review and accept with a button.

When a server offers tool definitions other than the ones its journal pinned, the run is refused
(``MCPToolsChangedError``). Displaying ``MCPServerView(server)`` shows the diff of what changed
and an Accept button that calls ``server.accept_changes()``; the static fallback (saved
notebooks, GitHub) shows the same diff as escaped text. The diff is the server's own text, so the
front end sets it with ``textContent`` only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import traitlets

from loom_nb.errors import LoomError
from loom_nb.render._html import STYLE, esc
from loom_nb.widgets._base import StaticFallbackWidget

__all__ = ["MCPServerView"]

_STATIC = Path(__file__).parent / "static"


class MCPServerView(StaticFallbackWidget):
    """A view of an ``MCPToolset``: name, transport, state, and a refused change with Accept."""

    _esm = (_STATIC / "mcp.js").read_text(encoding="utf-8")
    _css = (_STATIC / "mcp.css").read_text(encoding="utf-8")

    server_name = traitlets.Unicode("").tag(sync=True)
    where = traitlets.Unicode("").tag(sync=True)
    state = traitlets.Unicode("").tag(sync=True)
    diff = traitlets.Unicode("").tag(sync=True)
    note = traitlets.Unicode("").tag(sync=True)

    def __init__(self, server: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._server = server
        self.on_msg(self._on_message)
        self.refresh()

    def refresh(self) -> None:
        """Read the server's state again (after a refused run, or an accept from code)."""
        server = self._server
        self.server_name = str(getattr(server, "name", "?"))
        self.where = repr(server)
        self.state = "running" if getattr(server, "running", False) else "not running"
        self.diff = getattr(server, "pending_changes", None) or ""

    def accept(self) -> None:
        """What the Accept button does: ``server.accept_changes()``, then the view is redrawn."""
        try:
            self._server.accept_changes()
        except LoomError as exc:
            self.note = exc.message
        else:
            self.note = "accepted: the new definitions are the pin; run the chat again"
        self.refresh()

    def _on_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "accept":
            self.accept()

    def __repr__(self) -> str:
        pending = " · a changed menu awaits review" if self.diff else ""
        return f"MCPServerView({self.server_name} · {self.state}{pending})"

    def to_static_html(self) -> str:
        """The server's line and, when a change was refused, its diff (escaped)."""
        head = f"MCP server {esc(self.server_name)} · {esc(self.state)}"
        body = ""
        if self.diff:
            body = (
                f'<div style="{STYLE["tool_label"]}">its tool definitions changed; review, then '
                "accept with server.accept_changes() (a live view has a button):</div>"
                f'<pre style="{STYLE["code"]}">{esc(self.diff)}</pre>'
            )
        return f'<div class="loom-mcp" style="{STYLE["tool"]}"><div>{head}</div>{body}</div>'
