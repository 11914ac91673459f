"""MCP tool results: what a call journals, and the ``ToolResultPart`` built from it (issue 28).

Live, a call's ``CallToolResult`` becomes the tool step's journaled outcome: text items as text
(cut to ``max_text_chars``), image and audio bytes put into the content store and named by ref
(the journal never holds media bytes), an embedded resource's text as text and its blob as a
stored file, a resource link as a line of text naming it. The server never names an address:
it sends bytes, and the address is their hash. Media whose bytes are not what the server
declared (an "image" that no image decoder reads) is replaced by a note.

The result part is built from that outcome, live and replayed alike, so a replay builds the same
transcript without the server. For a server not declared ``trusted`` every piece is marked with
the origin ``mcp:<server>/<tool>``: the guard fences the text (a forged fence closer in it is
neutralised) and the media (each provider brackets it with fence text), and the mark keeps the
text out of any later tool call's input. An ``isError`` result is an error result; a call that
timed out, or whose server exited or failed, is an error result with the reason, and the run
goes on.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, ClassVar

from loom_nb.agent._results import error_result
from loom_nb.agent._tools import ToolDefinition
from loom_nb.capabilities import Capabilities, assert_request_supported
from loom_nb.content import (
    AudioPart,
    ContentRef,
    FilePart,
    ImagePart,
    LlmRequest,
    Message,
    Part,
    RefSource,
    ResultPart,
    TextPart,
    ToolResultPart,
    ToolUsePart,
)
from loom_nb.errors import ConfigurationError, LoomError, MCPToolsChangedError
from loom_nb.guard import caches_kept
from loom_nb.media import sniff_media_type
from loom_nb.taint import Untrusted

__all__ = ["MCP_OUTCOME_KEY", "MCPTool", "call_outcome", "failed_outcome", "mcp_result_part"]

MCP_OUTCOME_KEY = "mcp"
"""Key of the journaled outcome of an MCP call: ``{"mcp": {"server", "tool", ...}}``."""

DEFAULT_MAX_TEXT_CHARS = 100_000


class MCPTool(ToolDefinition):
    """A ``ToolDefinition`` lent by an ``MCPToolset``: one tool of one MCP server.

    Its result part is built by the toolset's rules (text marked ``mcp:<server>/<tool>`` unless the
    server is trusted, media by ref), and a changed menu or a server that does not start refuses
    the run instead of becoming an error result.
    """

    refusals: ClassVar[tuple[type[BaseException], ...]] = (MCPToolsChangedError, ConfigurationError)

    def __init__(
        self, *args: Any, server: str, mcp_name: str, trusted: bool, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.server = server
        """The name of the server the tool belongs to."""
        self.mcp_name = mcp_name
        """The tool's name on the server (the menu's name may carry a prefix)."""
        self.trusted = trusted
        """Whether the server was declared trusted (its results are then not marked)."""

    def result_part(
        self, call_id: str, outcome: Any, *, capabilities: Capabilities
    ) -> ToolResultPart | None:
        """The result part for a journaled MCP outcome."""
        return mcp_result_part(
            call_id, self.name, outcome, trusted=self.trusted, capabilities=capabilities
        )


def failed_outcome(server: str, tool: str, error_type: str, message: str) -> dict[str, Any]:
    """The journaled outcome of a call that produced no result (timeout, exit, protocol error)."""
    return {
        MCP_OUTCOME_KEY: {
            "server": server,
            "tool": tool,
            "error": {"type": error_type, "message": message[:4000]},
        }
    }


def call_outcome(
    result: Any,
    *,
    server: str,
    tool: str,
    store: Any,
    tenant: str,
    max_text_chars: int = DEFAULT_MAX_TEXT_CHARS,
) -> dict[str, Any]:
    """The journaled outcome of a ``CallToolResult``: items as text, media stored by ref."""
    items: list[dict[str, Any]] = []
    budget = [max_text_chars]
    for block in getattr(result, "content", None) or []:
        items.extend(_items(block, store, tenant, budget))
    if not items and getattr(result, "structured_content", None) is not None:
        from loom_nb.content import canonical_json

        items.append(_text(canonical_json(result.structured_content), budget))
    return {
        MCP_OUTCOME_KEY: {
            "server": server,
            "tool": tool,
            "is_error": bool(getattr(result, "is_error", False)),
            "content": items,
        }
    }


def _text(text: str, budget: list[int]) -> dict[str, Any]:
    """A text item cut to what is left of the result's character budget."""
    left = max(budget[0], 0)
    if len(text) > left:
        cut = len(text) - left
        text = text[:left] + f"\n… ({cut:,} more characters from the server were cut)"
    budget[0] = left - min(len(text), left)
    return {"type": "text", "text": text}


def _items(block: Any, store: Any, tenant: str, budget: list[int]) -> list[dict[str, Any]]:
    kind = getattr(block, "type", None)
    if kind == "text":
        return [_text(str(block.text), budget)]
    if kind in ("image", "audio"):
        return [_media(kind, block.data, block.mime_type, None, store, tenant)]
    if kind == "resource_link":
        about = f": {block.description}" if getattr(block, "description", None) else ""
        kind_of = f" ({block.mime_type})" if getattr(block, "mime_type", None) else ""
        return [_text(f"[resource link {block.name!s} <{block.uri!s}>{kind_of}{about}]", budget)]
    if kind == "resource":
        resource = block.resource
        uri = str(getattr(resource, "uri", ""))
        if getattr(resource, "text", None) is not None:
            return [_text(f"[resource {uri}]\n{resource.text}", budget)]
        blob = getattr(resource, "blob", None)
        if blob is not None:
            media_type = getattr(resource, "mime_type", None) or "application/octet-stream"
            return [_media("file", blob, media_type, uri.rsplit("/", 1)[-1] or None, store, tenant)]
    return [_text(f"[a {kind!s} content block, which loom_nb does not show]", budget)]


def _media(
    kind: str, data: str, declared: str, name: str | None, store: Any, tenant: str
) -> dict[str, Any]:
    """A stored media item, or a text note when the bytes are missing, wrong or unstorable."""
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError, TypeError):
        return {"type": "text", "text": f"[{kind} from the server: its data is not base64]"}
    sniffed = sniff_media_type(raw, prefer="audio" if kind == "audio" else None)
    media_type = str(declared).split(";")[0].strip().lower()
    if kind in ("image", "audio"):
        if sniffed is None or not sniffed.startswith(kind + "/"):
            return {
                "type": "text",
                "text": f"[{kind} from the server: {len(raw):,} bytes declared {media_type!r} "
                f"that are not {kind} loom_nb can read; not shown]",
            }
        media_type = sniffed
    elif sniffed is not None and sniffed != "text/plain":
        media_type = sniffed
    if store is None:
        return {
            "type": "text",
            "text": f"[{kind} from the server ({media_type}, {len(raw):,} bytes) not kept: no "
            "content store; give the toolset store=... or run it in a Chat]",
        }
    ref = store.put(raw, tenant)
    item: dict[str, Any] = {
        "type": kind,
        "media_type": media_type,
        "ref": {"address": ref.address, "size": ref.size},
    }
    if name:
        item["name"] = name
    return item


def mcp_result_part(
    call_id: str,
    name: str,
    outcome: Any,
    *,
    trusted: bool,
    capabilities: Capabilities,
) -> ToolResultPart:
    """The result part for a journaled MCP outcome (``{"ok": {"mcp": ...}}`` or ``{"error": ...}``)."""
    body = outcome.get("ok") if isinstance(outcome, dict) else None
    mcp = body.get(MCP_OUTCOME_KEY) if isinstance(body, dict) else None
    if not isinstance(mcp, dict):
        err = outcome.get("error") if isinstance(outcome, dict) else None
        message = err.get("message") if isinstance(err, dict) else "the call's record is malformed"
        return error_result(call_id, name, "mcp_call_failed", str(message))
    server, tool = str(mcp.get("server")), str(mcp.get("tool"))
    origin = None if trusted else f"mcp:{server}/{tool}"
    error = mcp.get("error")
    if isinstance(error, dict):
        return error_result(
            call_id,
            name,
            str(error.get("type") or "mcp_error"),
            str(error.get("message") or ""),
            origin=origin,
        )
    is_error = bool(mcp.get("is_error"))
    parts = [_part(item, origin) for item in mcp.get("content") or []]
    if not parts:
        parts = [TextPart(text="(the tool returned no content)")]
    if all(isinstance(p, TextPart) for p in parts):
        text = "\n".join(str(p.text) for p in parts if isinstance(p, TextPart))
        content: Any = text if origin is None else Untrusted(text, origin)
        return ToolResultPart(tool_use_id=call_id, content=content, is_error=is_error)
    result = ToolResultPart(tool_use_id=call_id, content=parts, is_error=is_error)
    if _sendable(call_id, name, result, capabilities):
        return result
    # Media the provider does not take would make every later request fail: say so instead.
    shown: list[ResultPart] = [
        p
        if isinstance(p, TextPart)
        else TextPart(
            text=f"[{p.type} result ({p.media_type}) not shown: the model's provider does not "
            "take this media type]",
        )
        for p in parts
    ]
    return ToolResultPart(tool_use_id=call_id, content=shown, is_error=is_error)


def _part(item: Any, origin: str | None) -> ResultPart:
    if not isinstance(item, dict):
        return TextPart(text="[malformed item]")
    kind = item.get("type")
    if kind == "text":
        text = str(item.get("text", ""))
        return TextPart(text=text) if origin is None else TextPart(text=text, origin=origin)
    raw_ref = item.get("ref")
    ref: dict[str, Any] = raw_ref if isinstance(raw_ref, dict) else {}
    source = RefSource(ref=ContentRef(address=str(ref.get("address")), size=ref.get("size")))
    media_type = str(item.get("media_type"))
    if kind == "image":
        return ImagePart(media_type=media_type, source=source, origin=origin)
    if kind == "audio":
        return AudioPart(media_type=media_type, source=source, origin=origin)
    name = item.get("name") if origin is None else None  # an untrusted name would sit unfenced
    return FilePart(media_type=media_type, source=source, name=name, origin=origin)


def _sendable(call_id: str, name: str, result: ToolResultPart, capabilities: Capabilities) -> bool:
    """Whether the next request could carry this result (the guard and the capabilities agree)."""
    from loom_nb.guard import guard_request

    use: list[Part] = [ToolUsePart(id=call_id, name=name, input={})]
    answer: list[Part] = [result]
    probe = LlmRequest(
        messages=[Message(role="assistant", content=use), Message(role="user", content=answer)]
    )
    with caches_kept():
        try:
            guard_request(probe)
            assert_request_supported(probe, capabilities)
        except LoomError:
            return False
    return True
