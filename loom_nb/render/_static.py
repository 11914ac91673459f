"""Views drawn as static HTML that JupyterLab's sanitizer keeps for untrusted outputs.

Every string from a view is escaped with ``esc``; attributes are constants or checked values
(``data_url`` accepts only base64 and a type from a fixed pattern). No ``id``, no ``<style>``,
no script, no iframe/embed/object; long text, full-size media and the model's reasoning sit in
``<details>`` (reasoning always collapsed: it is the model's working, not its answer). A tool
call and its result both show the call id in words ("result of chart · call_1"). Where the page
keeps ids (exported pages, ``anchored``), calls and results also get ids of the form
``loom-call-<n>`` / ``loom-result-<n>`` (numbers, never content) and link to each other.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from loom_nb.render._html import STYLE, data_url, esc, human_size, kept
from loom_nb.render._markdown import BLOCK_TAGS, HL_CLASSES, INLINE_TAGS, safe_href

__all__ = [
    "Anchors",
    "anchored",
    "approval_text",
    "html_of_items",
    "html_of_markdown",
    "html_of_message",
    "html_of_view",
    "stats_text",
]

View = dict[str, Any]

_SUMMARY_CHARS = 240


@dataclass
class Anchors:
    """Numbers for the tool calls and results of one page, so they can link by ``#loom-call-<n>``."""

    calls: dict[str, int] = field(default_factory=dict)
    """Call id -> number, for every tool call on the page."""
    results: set[str] = field(default_factory=set)
    """Call ids that have a result on the page."""
    placed: set[str] = field(default_factory=set)
    """Call ids whose first result already carries its id (later duplicates get none)."""

    def number(self, call_id: str) -> int:
        """The call's number (calls first, then ids only results name)."""
        return self.calls.setdefault(call_id, len(self.calls) + 1)


_ANCHORS: ContextVar[Anchors | None] = ContextVar("loom_anchors", default=None)


def _walk(views: list[View], anchors: Anchors) -> None:
    for view in views:
        kind = view.get("kind")
        if kind == "tool_use":
            anchors.number(str(view["id"]))
        elif kind == "tool_result":
            anchors.results.add(str(view["tool_use_id"]))
        _walk(list(view.get("items") or []), anchors)


@contextmanager
def anchored(views: list[View]) -> Iterator[Anchors]:
    """Within this block, calls and results of ``views`` (message views) are rendered with ids and links."""
    anchors = Anchors()
    _walk(views, anchors)
    token = _ANCHORS.set(anchors)
    try:
        yield anchors
    finally:
        _ANCHORS.reset(token)


def html_of_message(view: View) -> str:
    """One message card: role, position, items."""
    role = str(view["role"])
    style = STYLE["card"] + ";" + STYLE.get(f"card_{role}", "")
    label = role if view.get("index", -1) < 0 else f"{role} · message {view['index'] + 1}"
    stats = stats_text(view.get("stats"))
    line = f'<div class="loom-stats" style="{STYLE["stats"]}">{esc(stats)}</div>' if stats else ""
    return (
        f'<div class="loom-msg loom-{esc(role)}" style="{style}">'
        f'<div class="loom-role" style="{STYLE["role"]}">{esc(label)}</div>'
        f"{html_of_items(view['items'])}{line}</div>"
    )


def html_of_items(items: list[View]) -> str:
    """The views in order, as HTML."""
    return "".join(html_of_view(item) for item in items)


def html_of_view(view: View) -> str:
    """One view as HTML."""
    kind = view["kind"]
    if kind == "text":
        return _text(view)
    if kind == "fence":
        state = "" if view.get("closed", True) else " (fence not closed)"
        return (
            f'<fieldset class="loom-fence" style="{STYLE["fence"]}">'
            f'<legend style="{STYLE["fence_legend"]}"><span style="{STYLE["badge"]}">!</span> '
            f"untrusted · {esc(view['origin'])}{state}</legend>"
            f"{html_of_items(view['items'])}</fieldset>"
        )
    if kind == "tool_use":
        return _tool_use(view)
    if kind == "tool_result":
        return _tool_result(view)
    if kind == "reasoning":
        return _reasoning(view)
    if kind == "image":
        return _image(view)
    if kind == "audio":
        return _audio(view)
    return _file(view)


def _text(view: View) -> str:
    text = view["text"]
    cut = (
        f'<div class="loom-cut" style="{STYLE["meta"]}">… {view["omitted"]} more characters not shown</div>'
        if view.get("omitted")
        else ""
    )
    if isinstance(view.get("md"), list):
        body = f'<div class="loom-text loom-md" style="{STYLE["md"]}">{html_of_markdown(view["md"])}</div>'
    else:
        body = f'<div class="loom-text" style="{STYLE["text"]}">{esc(text)}</div>'
    if not view.get("collapsed"):
        return body + cut
    head = text[:_SUMMARY_CHARS].replace("\n", " ")
    return (
        f'<details class="loom-long"><summary style="{STYLE["meta"]}">'
        f"{esc(head)}… ({len(text)} characters, expand)</summary>{body}</details>{cut}"
    )


def _reasoning(view: View) -> str:
    text = str(view.get("text") or "")
    if view.get("redacted"):
        summary = "reasoning · redacted by the vendor (kept for the next turn, not shown)"
    elif not text:
        summary = "reasoning · not shown by the vendor"
    else:
        summary = f"reasoning · {len(text) + int(view.get('omitted') or 0)} characters (expand)"
    body = f'<div class="loom-text" style="{STYLE["text"]}">{esc(text)}</div>' if text else ""
    cut = (
        f'<div class="loom-cut" style="{STYLE["meta"]}">… {view["omitted"]} more characters not shown</div>'
        if view.get("omitted")
        else ""
    )
    return (
        f'<details class="loom-reasoning" style="{STYLE["reasoning"]}">'
        f'<summary style="{STYLE["meta"]}">{esc(summary)}</summary>{body}{cut}</details>'
    )


def _tool_use(view: View) -> str:
    cut = f" … {view['omitted']} more characters" if view.get("omitted") else ""
    anchors = _ANCHORS.get()
    ident = link = ""
    if anchors is not None:
        call_id = str(view["id"])
        number = anchors.number(call_id)
        ident = f' id="loom-call-{number}"'
        if call_id in anchors.results:
            link = f' · <a href="#loom-result-{number}" style="{STYLE["link"]}">its result</a>'
    return (
        f'<div class="loom-tool-use"{ident} style="{STYLE["tool"]}">'
        f'<div style="{STYLE["tool_label"]}">tool call · {_server(view)}{esc(view["name"])} · call {esc(view["id"])}{link}</div>'
        f'<pre style="{STYLE["code"]}">{esc(view["input"])}{esc(cut)}</pre>{_approval(view)}</div>'
    )


def _server(view: View) -> str:
    """``MCP <server> · `` for a call or result of an MCP server's tool, else ""."""
    server = view.get("server")
    return f"MCP {esc(server)} · " if isinstance(server, str) and server else ""


def approval_text(approval: Any) -> str:
    """An approval state in words: ``awaiting approval``, ``approved by … (reason)``, ``declined by …``."""
    if not isinstance(approval, dict):
        return ""
    state = approval.get("state")
    by = approval.get("by")
    who = f" by {by}" if isinstance(by, str) and by else ""
    reason = approval.get("reason")
    why = f": {reason}" if isinstance(reason, str) and reason else ""
    if state == "awaiting":
        return f"awaiting approval{why}"
    if state == "approved":
        return f"✓ approved{who}{why}"
    if state == "declined":
        return f"✗ declined{who}{why}; the call was not run"
    if state == "undecidable":
        return f"✗ not decided{who}{why}"
    return ""


def _approval(view: View) -> str:
    text = approval_text(view.get("approval"))
    if not text:
        return ""
    return (
        f'<div class="loom-approval" style="{STYLE["tool_label"]};margin-top:4px">{esc(text)}</div>'
    )


def stats_text(stats: Any) -> str:
    """A turn's reported cost in words: ``12 in (8 cached) · 40 out tokens · 1.3 s`` (parts not
    reported left out; ``stopped`` after them when the reply was stopped while streaming; ``via
    <provider> <model>`` when a fallback chose who answered)."""
    if not isinstance(stats, dict):
        return ""
    bits: list[str] = []
    tokens_in, tokens_out = stats.get("input_tokens"), stats.get("output_tokens")
    if isinstance(tokens_in, int) and isinstance(tokens_out, int) and (tokens_in or tokens_out):
        bits.append(f"{tokens_in:,} in{_cache_text(stats)} · {tokens_out:,} out tokens")
    latency = stats.get("latency_s")
    if isinstance(latency, int | float) and not isinstance(latency, bool) and latency >= 0:
        bits.append(f"{latency:.1f} s" if latency >= 0.1 else f"{latency * 1000:.0f} ms")
    if stats.get("status") == "stopped":
        bits.append("stopped")
    provider = stats.get("provider")
    if isinstance(provider, str) and provider:
        model = stats.get("model")
        bits.append(f"via {provider}" + (f" {model}" if isinstance(model, str) and model else ""))
    return " · ".join(bits)


def _cache_text(stats: dict[str, Any]) -> str:
    """`` (900 cached, 100 to cache)``: the prompt cache's share of a turn's input, or ``""``."""
    parts = []
    for key, label in (("cache_read_tokens", "cached"), ("cache_write_tokens", "to cache")):
        value = stats.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            parts.append(f"{value:,} {label}")
    return f" ({', '.join(parts)})" if parts else ""


def _tool_result(view: View) -> str:
    error = bool(view.get("is_error"))
    name = view.get("tool_name")
    call_id = str(view["tool_use_id"])
    head = f"result of {_server(view)}{esc(name)} · " if name else "result of call "
    label = head + esc(call_id)
    ident = ""
    anchors = _ANCHORS.get()
    if anchors is not None and call_id in anchors.calls:
        number = anchors.number(call_id)
        label = f'{head}<a href="#loom-call-{number}" style="{STYLE["link"]}">{esc(call_id)}</a>'
        if call_id not in anchors.placed:
            anchors.placed.add(call_id)
            ident = f' id="loom-result-{number}"'
    error_label = (
        f'<div class="loom-error" style="{STYLE["error_label"]}">error: the tool failed or the call was refused</div>'
        if error
        else ""
    )
    css = "loom-tool-result loom-is-error" if error else "loom-tool-result"
    return (
        f'<div class="{css}"{ident} style="{STYLE["tool_error" if error else "tool"]}">'
        f'<div style="{STYLE["tool_label"]}">{label}</div>{error_label}'
        f"{html_of_items(view['items'])}</div>"
    )


def _meta(view: View) -> str:
    bits = [str(view["media_type"])]
    if view.get("name"):
        bits.append(str(view["name"]))
    bits.append(human_size(view.get("size")))
    if view.get("width"):
        bits.append(f"{view['width']}×{view['height']}")
    if view.get("pages"):
        bits.append(f"{view['pages']} page{'s' if view['pages'] != 1 else ''}")
    if view.get("address"):
        bits.append(str(view["address"]))
    return f'<div class="loom-meta" style="{STYLE["meta"]}">{esc(" · ".join(bits))}</div>'


def _unavailable(view: View) -> str:
    return f'<div class="loom-unavailable" style="{STYLE["unavailable"]}">{esc(view["unavailable"])}</div>'


_STREAM_VERB = {"image": "opens", "audio": "plays", "file": "opens"}


def _streamed(view: View) -> str:
    """The placeholder of media too large to embed: what it is, its size, where it plays."""
    offer = view["stream"]
    what = {"image": "image", "audio": "audio", "file": "document"}.get(view["kind"], "media")
    text = (
        f"{what} not embedded: {offer['reason']}. It {_STREAM_VERB.get(view['kind'], 'opens')} "
        "in a live kernel (run the cell: the live view streams it from the kernel)."
    )
    return (
        f'<div class="loom-{esc(view["kind"])} loom-streamed" style="{STYLE["media"]}">'
        f'<div class="loom-unavailable" style="{STYLE["unavailable"]}">{esc(text)}</div>'
        f"{_meta(view)}</div>"
    )


def _image(view: View) -> str:
    label = f"image · {view['media_type']}"
    if view.get("stream"):
        return _streamed(view)
    if view.get("unavailable"):
        source = ""
        if view.get("svg_source") is not None:
            source = (
                f'<details><summary style="{STYLE["meta"]}">SVG source (as text)</summary>'
                f'<pre style="{STYLE["code"]}">{esc(view["svg_source"])}</pre></details>'
            )
        return f'<div class="loom-image" style="{STYLE["media"]}">{_unavailable(view)}{source}{_meta(view)}</div>'
    img = f'<img class="loom-thumb" alt="{esc(label)}" style="{STYLE["thumb"]}" src="{data_url("image/png", view["thumb"])}">'
    full = ""
    if view.get("full"):
        full = (
            f'<details><summary style="{STYLE["meta"]}">full size</summary>'
            f'<img alt="{esc(label)}" style="{STYLE["page"]}" src="{data_url("image/png", view["full"])}"></details>'
        )
    return f'<div class="loom-image" style="{STYLE["media"]}">{img}{full}{_meta(view)}</div>'


def _audio(view: View) -> str:
    if view.get("stream"):
        return _streamed(view)
    if view.get("unavailable"):
        return f'<div class="loom-audio" style="{STYLE["media"]}">{_unavailable(view)}{_meta(view)}</div>'
    src = data_url(view["player_type"], view["data"])
    return (
        f'<div class="loom-audio" style="{STYLE["media"]}">'
        f'<audio controls preload="metadata" src="{src}"></audio>{_meta(view)}</div>'
    )


def _file(view: View) -> str:
    if view.get("stream"):
        return _streamed(view)
    if view.get("unavailable"):
        return f'<div class="loom-file" style="{STYLE["media"]}">{_unavailable(view)}{_meta(view)}</div>'
    if view.get("thumb"):
        alt = esc(f"first page of {view['media_type']}")
        pages = "".join(
            f'<div style="{STYLE["meta"]}">page {n + 1}</div>'
            f'<img alt="page {n + 1}" style="{STYLE["page"]}" src="{data_url("image/png", b64)}">'
            for n, b64 in enumerate(view.get("page_images", []))
        )
        more = view["pages"] - len(view.get("page_images", []))
        rest = (
            f'<div style="{STYLE["meta"]}">… {more} more page{"s" if more != 1 else ""} not embedded</div>'
            if more > 0
            else ""
        )
        return (
            f'<div class="loom-file loom-pdf" style="{STYLE["media"]}">'
            f'<img class="loom-thumb" alt="{alt}" style="{STYLE["thumb"]}" src="{data_url("image/png", view["thumb"])}">'
            f'{_meta(view)}<details><summary style="{STYLE["meta"]}">pages</summary>{pages}{rest}</details></div>'
        )
    preview = ""
    if view.get("preview") is not None:
        more = " …" if view.get("preview_omitted") else ""
        preview = (
            f'<details><summary style="{STYLE["meta"]}">contents</summary>'
            f'<pre style="{STYLE["code"]}">{esc(view["preview"])}{more}</pre></details>'
        )
    return f'<div class="loom-file" style="{STYLE["media"]}">{_meta(view)}{preview}</div>'


# -- markdown ------------------------------------------------------------------------------------

_HL_STYLE: dict[str, str] = {
    "k": f"{kept('color', 'mirror-editor-keyword-color', '#007020')};font-weight:bold",
    "nb": kept("color", "mirror-editor-builtin-color", "#007020"),
    "nf": kept("color", "mirror-editor-def-color", "#0b47b8"),
    "nt": kept("color", "mirror-editor-tag-color", "#007020"),
    "na": kept("color", "mirror-editor-attribute-color", "#4b5f00"),
    "nd": kept("color", "mirror-editor-meta-color", "#7a2cb8"),
    "s": kept("color", "mirror-editor-string-color", "#a11b1b"),
    "m": kept("color", "mirror-editor-number-color", "#116611"),
    "c": f"{kept('color', 'mirror-editor-comment-color', '#3d6b6b')};font-style:italic",
    "o": kept("color", "mirror-editor-operator-color", "#7a2cb8"),
    "p": kept("color", "mirror-editor-punctuation-color", "#1f4f8a"),
    "e": kept("color", "mirror-editor-error-color", "#b00020"),
}
"""Inline styles of highlighted code runs: JupyterLab's editor colours (theme-aware), each after
its hex fallback, which is what a saved (sanitized) output keeps (``_html.kept``)."""

_TAG_STYLE: dict[str, str] = {
    "p": "margin:4px 0",
    "h1": "font-size:1.5em;margin:8px 0 4px 0",
    "h2": "font-size:1.3em;margin:8px 0 4px 0",
    "h3": "font-size:1.15em;margin:6px 0 4px 0",
    "h4": "font-size:1em;margin:6px 0 4px 0",
    "h5": "font-size:1em;margin:4px 0",
    "h6": "font-size:1em;margin:4px 0",
    "ul": "margin:4px 0;padding-left:1.6em",
    "ol": "margin:4px 0;padding-left:1.6em",
    "table": "border-collapse:collapse;margin:4px 0",
    "th": STYLE["cell"],
    "td": STYLE["cell"],
    "blockquote": STYLE["quote"],
    "code": STYLE["code_inline"],
}


def html_of_markdown(nodes: list[Any]) -> str:
    """A markdown tree (``_markdown.markdown_tree``) as HTML: tags from fixed sets, text escaped."""
    return "".join(_md_node(node) for node in nodes)


def _md_node(node: Any) -> str:
    if isinstance(node, str):
        return esc(node)
    if not isinstance(node, dict):
        return ""
    tag = node.get("tag")
    if tag not in BLOCK_TAGS and tag not in INLINE_TAGS:
        return ""
    if tag == "br":
        return "<br>"
    if tag == "hr":
        return f'<hr style="{STYLE["quote"]}">'
    if tag == "pre":
        return _md_code(node)
    if tag == "img":
        return _md_image(node)
    inner = html_of_markdown(node.get("children") or [])
    if tag == "a":
        href = safe_href(str(node.get("href", "")))
        if href is None:
            return inner
        return (
            f'<a href="{esc(href)}" rel="noopener noreferrer nofollow" target="_blank" '
            f'style="{STYLE["link"]}">{inner}</a>'
        )
    style = _TAG_STYLE.get(str(tag), "")
    if tag in {"th", "td"} and node.get("align") in {"left", "right", "center"}:
        style = style.replace("text-align:left", f"text-align:{node['align']}")
    start = node.get("start")
    extra = f' start="{start}"' if tag == "ol" and isinstance(start, int) and start >= 0 else ""
    attr = f' style="{style}"' if style else ""
    return f"<{tag}{attr}{extra}>{inner}</{tag}>"


def _md_code(node: dict[str, Any]) -> str:
    runs = node.get("hl")
    if isinstance(runs, list):
        body = "".join(
            f'<span style="{_HL_STYLE[cls]}">{esc(text)}</span>' if cls in HL_CLASSES else esc(text)
            for cls, text in runs
        )
    else:
        body = esc(str(node.get("code", "")))
    lang = str(node.get("lang") or "")
    legend = f'<div style="{STYLE["meta"]}">{esc(lang)}</div>' if lang else ""
    style = STYLE["code_block"] if isinstance(runs, list) else STYLE["code"]
    return (
        f'<div class="loom-codeblock">{legend}<pre style="{style}"><code>{body}</code></pre></div>'
    )


def _md_image(node: dict[str, Any]) -> str:
    alt = esc(str(node.get("alt") or "no description"))
    href = safe_href(str(node.get("href", "")))
    where = (
        f' · not loaded: <a href="{esc(href)}" rel="noopener noreferrer nofollow" target="_blank" '
        f'style="{STYLE["link"]}">{esc(href)}</a>'
        if href
        else " · not loaded"
    )
    return f'<span class="loom-md-img" style="{STYLE["meta"]}">[image: {alt}]{where}</span>'
