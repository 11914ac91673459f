"""Views drawn as static HTML that JupyterLab's sanitizer keeps for untrusted outputs.

Every string from a view is escaped with ``esc``; attributes are constants or checked values
(``data_url`` accepts only base64 and a type from a fixed pattern). No ``id``, no ``<style>``,
no script, no iframe/embed/object; long text, full-size media and the model's reasoning sit in
``<details>`` (reasoning always collapsed: it is the model's working, not its answer). A tool
call and its result both show the call id in words ("call t1"), since anchors need ids.
"""

from __future__ import annotations

from typing import Any

from loom_nb.render._html import STYLE, data_url, esc, human_size

__all__ = ["html_of_items", "html_of_message", "html_of_view"]

View = dict[str, Any]

_SUMMARY_CHARS = 240


def html_of_message(view: View) -> str:
    """One message card: role, position, items."""
    role = str(view["role"])
    style = STYLE["card"] + ";" + STYLE.get(f"card_{role}", "")
    label = role if view.get("index", -1) < 0 else f"{role} · message {view['index'] + 1}"
    return (
        f'<div class="loom-msg loom-{esc(role)}" style="{style}">'
        f'<div class="loom-role" style="{STYLE["role"]}">{esc(label)}</div>'
        f"{html_of_items(view['items'])}</div>"
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
            f'<legend style="{STYLE["fence_legend"]}">⚠ untrusted · {esc(view["origin"])}{state}</legend>'
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
    return (
        f'<div class="loom-tool-use" style="{STYLE["tool"]}">'
        f'<div style="{STYLE["tool_label"]}">tool call · {esc(view["name"])} · call {esc(view["id"])}</div>'
        f'<pre style="{STYLE["code"]}">{esc(view["input"])}{esc(cut)}</pre></div>'
    )


def _tool_result(view: View) -> str:
    error = bool(view.get("is_error"))
    name = view.get("tool_name")
    label = f"tool result · answers call {view['tool_use_id']}" + (f" ({name})" if name else "")
    error_label = (
        f'<div class="loom-error" style="{STYLE["error_label"]}">error: the tool failed or the call was refused</div>'
        if error
        else ""
    )
    css = "loom-tool-result loom-is-error" if error else "loom-tool-result"
    return (
        f'<div class="{css}" style="{STYLE["tool_error" if error else "tool"]}">'
        f'<div style="{STYLE["tool_label"]}">{esc(label)}</div>{error_label}'
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


def _image(view: View) -> str:
    label = f"image · {view['media_type']}"
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
    if view.get("unavailable"):
        return f'<div class="loom-audio" style="{STYLE["media"]}">{_unavailable(view)}{_meta(view)}</div>'
    src = data_url(view["player_type"], view["data"])
    return (
        f'<div class="loom-audio" style="{STYLE["media"]}">'
        f'<audio controls preload="metadata" src="{src}"></audio>{_meta(view)}</div>'
    )


def _file(view: View) -> str:
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
    return f'<div class="loom-file" style="{STYLE["media"]}">📄{_meta(view)}{preview}</div>'
