"""Transcripts as Markdown text: what ``chat.to_markdown()`` returns and ``chat.export("x.md")`` writes.

Pure: a transcript in, text out as a stream of chunks (so a caller can write a page with big
inline media without holding it); media parts go through a callback (``MediaMarkdown``) that
says what stands for each one (a link to a file written beside the page, a data URI, a
description), so this module reads and writes nothing.

Safety. A Markdown page is read by renderers that pass raw HTML through (GitHub sanitizes it,
many editors and static-site tools do not), so no string from content reaches the page as markup:

- the model's own text is parsed by the same CommonMark parser as the HTML view (raw HTML off,
  ``_markdown.markdown_tree``) and written back from that safe tree: headings, lists, emphasis,
  tables, code blocks, and links only to http(s) and mailto; raw HTML comes out as escaped text,
  any other link as its words;
- a person's text, a tool's output and the model's reasoning are written literally: every
  markup character escaped (``literal``), or inside a code block whose fence is longer than any
  run of backticks in it (``fenced``);
- untrusted content (a part with an ``origin``, an ``Untrusted`` value, a guard fence in the
  text) stays visibly fenced: a quoted block headed "untrusted · <origin>" whose text sits in a
  code block with the info string ``untrusted origin=<origin>``, never rendered as markup.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import quote

from loom_nb.content import (
    AudioPart,
    FilePart,
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolResultPart,
    ToolUsePart,
    to_parts,
)
from loom_nb.render._fence import scan_fences
from loom_nb.render._markdown import BLOCK_TAGS, INLINE_TAGS, markdown_tree
from loom_nb.render._source import Transcript
from loom_nb.render._static import approval_text, stats_text
from loom_nb.render._view import plain_text
from loom_nb.taint import Untrusted, contains_untrusted

__all__ = [
    "MediaMarkdown",
    "fenced",
    "inline_literal",
    "literal",
    "markdown_of_tree",
    "transcript_markdown",
]

MediaPart = ImagePart | AudioPart | FilePart

MediaMarkdown = Callable[[MediaPart, str], Iterable[str]]
"""``media(part, label)``: the Markdown chunks that stand for a media part (``label`` is its
description, e.g. ``image · image/png · 5.0 MB``, already escaped for Markdown)."""

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_ESCAPED = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~&$^=])")
_INFO_SAFE = re.compile(r"[^A-Za-z0-9:/._@+=-]")
_URL_UNSAFE = re.compile(r"[^A-Za-z0-9\-._~:/?#@!$&'*+,;=%]")


def _clean(text: str) -> str:
    """``text`` with CommonMark's line endings made ``\\n`` and other controls made U+FFFD."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("\ufffd", text) if _CONTROL.search(text) else text


def _escape_line(line: str) -> str:
    """One line escaped; its leading blanks kept as no-break spaces, its trailing ones dropped
    (a viewer trims them, and four leading spaces would start a code block)."""
    body = line.lstrip()
    indent = len(line) - len(body)
    return "&nbsp;" * indent + _ESCAPED.sub(r"\\\1", body.rstrip())


def literal(text: str) -> str:
    """``text`` as Markdown that shows exactly these words: markup characters escaped, leading
    spaces kept, each line break a hard break and each blank line a new paragraph."""
    paragraphs: list[list[str]] = [[]]
    for line in _clean(text).split("\n"):
        if line.strip():  # a line of blanks shows as nothing: a paragraph break
            paragraphs[-1].append(_escape_line(line))
        elif paragraphs[-1]:
            paragraphs.append([])
    return "\n\n".join("\\\n".join(lines) for lines in paragraphs if lines)


def inline_literal(text: str) -> str:
    """``text`` escaped for one line (line breaks become spaces)."""
    return _ESCAPED.sub(r"\\\1", _clean(text).replace("\n", " "))


def fenced(text: str, *info: str) -> str:
    """``text`` in a fenced code block no line of it can close (the fence outruns its backticks).

    ``info`` are the words of the info string (the first one names the language); characters a
    word may not hold (spaces, backticks, controls ...) are percent-encoded.
    """
    text = _clean(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    words = " ".join(_INFO_SAFE.sub(_percent, word) for word in info if word)
    end = "" if text.endswith("\n") or not text else "\n"
    return f"{fence}{words}\n{text}{end}{fence}"


def _percent(match: re.Match[str]) -> str:
    return "".join(f"%{byte:02X}" for byte in match[0].encode("utf-8"))


def _code_span(text: str) -> str:
    text = _clean(text).replace("\n", " ")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith(("`", " ")) or text.endswith(("`", " ")) else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _url(href: str) -> str:
    """A link target already checked by ``safe_href``, made safe as a Markdown destination."""
    return (
        _URL_UNSAFE.sub(lambda m: quote(m[0], safe=""), href)
        .replace("(", "%28")
        .replace(")", "%29")
    )


# -- the model's markdown, written back from its safe tree ---------------------------------------


def markdown_of_tree(nodes: list[Any], *, shift: int = 0) -> str:
    """A markdown tree (``_markdown.markdown_tree``) written back as Markdown.

    ``shift`` lowers every heading by that many levels (down to ``######``), so a reply's
    headings sit under the page's own.
    """
    return "\n\n".join(block for block in _blocks(nodes, shift) if block)


def _blocks(nodes: list[Any], shift: int) -> list[str]:
    out: list[str] = []
    run: list[Any] = []  # inline nodes outside a block (a tight list item's text)
    for node in nodes:
        if isinstance(node, dict) and node.get("tag") in BLOCK_TAGS:
            if run:
                out.append(_inline(run))
                run = []
            out.append(_block(node, shift))
        else:
            run.append(node)
    if run:
        out.append(_inline(run))
    return out


def _block(node: dict[str, Any], shift: int) -> str:
    tag = node["tag"]
    children = node.get("children") or []
    if tag == "p":
        return _inline(children)
    if tag in {"h1", "h2", "h3", "h4", "h5", "h6"}:
        return "#" * min(6, int(tag[1]) + shift) + " " + _inline(children, one_line=True)
    if tag == "hr":
        return "---"
    if tag == "pre":
        return fenced(str(node.get("code", "")), str(node.get("lang") or ""))
    if tag == "blockquote":
        inner = markdown_of_tree(children, shift=shift)
        return "\n".join("> " + line if line else ">" for line in inner.split("\n"))
    if tag in {"ul", "ol"}:
        given = node.get("start")
        start = given if isinstance(given, int) and not isinstance(given, bool) else 1
        entries = [c for c in children if isinstance(c, dict)]
        # A tight list's items hold their text directly, a loose one's hold paragraphs.
        loose = any(_tag(c) == "p" for e in entries for c in e.get("children") or [])
        items = []
        for number, item in enumerate(entries):
            marker = f"{start + number}. " if tag == "ol" else "- "
            blocks = [b for b in _blocks(item.get("children") or [], shift) if b]
            body = ("\n\n" if loose else "\n").join(blocks) or " "
            pad = " " * len(marker)
            lines = body.split("\n")
            items.append(
                marker + lines[0] + "".join("\n" + (pad + ln if ln else "") for ln in lines[1:])
            )
        return ("\n\n" if loose else "\n").join(items)
    if tag == "table":
        return _table(node)
    return _inline(children)  # li, tr ... outside their parents: their text


def _tag(node: Any) -> Any:
    return node.get("tag") if isinstance(node, dict) else None


def _table(node: dict[str, Any]) -> str:
    rows: list[list[dict[str, Any]]] = []
    for section in node.get("children") or []:
        for row in section.get("children") or [] if isinstance(section, dict) else []:
            if isinstance(row, dict):
                rows.append([c for c in row.get("children") or [] if isinstance(c, dict)])
    if not rows:
        return ""
    width = max(len(row) for row in rows)
    rule = {"left": ":--", "right": "--:", "center": ":-:"}

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(cells + [""] * (width - len(cells))) + " |"

    head = rows[0]
    text = [line([_inline(c.get("children") or [], one_line=True) for c in head])]
    text.append(line([rule.get(str(c.get("align")), "---") for c in head]))
    text.extend(
        line([_inline(c.get("children") or [], one_line=True) for c in row]) for row in rows[1:]
    )
    return "\n".join(text)


def _inline(nodes: list[Any], *, one_line: bool = False) -> str:
    return "".join(_inline_node(node, one_line) for node in nodes)


def _inline_node(node: Any, one_line: bool) -> str:
    if isinstance(node, str):
        return inline_literal(node)
    if not isinstance(node, dict) or node.get("tag") not in INLINE_TAGS:
        return ""
    tag = node["tag"]
    children = node.get("children") or []
    if tag == "br":
        return " " if one_line else "\\\n"
    if tag == "code":
        return _code_span("".join(c for c in children if isinstance(c, str)))
    if tag == "img":
        words = inline_literal(f"[image: {node.get('alt') or 'no description'}]")
        href = node.get("href")
        return f"{words} · not loaded: <{_url(href)}>" if isinstance(href, str) else words
    inner = _inline(children, one_line=one_line)
    if tag == "a":
        return f"[{inner}]({_url(str(node.get('href', '')))})"
    mark = {"em": "*", "strong": "**", "s": "~~"}[tag]
    return f"{mark}{inner}{mark}" if inner.strip() else inner


# -- a transcript ---------------------------------------------------------------------------------


def transcript_markdown(
    transcript: Transcript, *, header: str, media: MediaMarkdown
) -> Iterator[str]:
    """``transcript`` as Markdown, in chunks: a heading, the system prompt, then each message."""
    yield f"# {inline_literal(header)}\n"
    if transcript.tools:
        yield f"\n{inline_literal('tools: ' + ', '.join(transcript.tools))}\n"
    if transcript.system is not None:
        yield "\n## system\n\n"
        system = transcript.system
        if isinstance(system, Untrusted):
            yield from _untrusted(system.origin, [[_text_block(plain_text(system), system.origin)]])
        else:
            yield literal(system) + "\n"
    names: dict[str, str] = {}
    for number, message in enumerate(transcript.messages):
        yield f"\n## {message.role} · message {number + 1}\n"
        for part in to_parts(message.content):
            if isinstance(part, ToolUsePart):
                names[plain_text(part.id)] = plain_text(part.name)
        for block in _message_blocks(message, transcript, names, media):
            yield "\n"
            yield from block
        stats = stats_text(transcript.stats.get(number))
        if stats:
            yield f"\n*{inline_literal(stats)}*\n"


Block = Iterable[str]


def _message_blocks(
    message: Message, transcript: Transcript, names: dict[str, str], media: MediaMarkdown
) -> list[Block]:
    tokens: list[Any] = []
    for part in to_parts(message.content):
        if isinstance(part, TextPart) and isinstance(part.text, str) and part.origin is None:
            tokens.append(part.text)
        else:
            tokens.append({"kind": "part", "part": part})
    markdown = message.role == "assistant"
    return [_item(item, markdown, transcript, names, media) for item in _grouped(tokens)]


def _grouped(tokens: list[Any]) -> list[dict[str, Any]]:
    """Tokens with the guard's fence tags in trusted text grouped into fence items."""
    return scan_fences(tokens, lambda text: {"kind": "text", "text": text})


def _item(
    item: dict[str, Any],
    markdown: bool,
    transcript: Transcript,
    names: dict[str, str],
    media: MediaMarkdown,
) -> Block:
    kind = item["kind"]
    if kind == "text":
        text = item["text"]
        tree = markdown_tree(text) if markdown else None
        shown = markdown_of_tree(tree, shift=2) if tree is not None else literal(text)
        return [shown + "\n"]
    if kind == "fence":
        origin = str(item["origin"])
        inner = [_quoted_item(i, origin, transcript, names, media) for i in item["items"]]
        return _untrusted(origin, inner, closed=bool(item.get("closed", True)))
    return _part(item["part"], transcript, names, media)


def _quoted_item(
    item: dict[str, Any],
    origin: str,
    transcript: Transcript,
    names: dict[str, str],
    media: MediaMarkdown,
) -> Block:
    """An item inside an untrusted block: its text is never markup, whoever wrote it."""
    if item["kind"] == "text":
        return [_text_block(item["text"], origin)]
    return _item(item, False, transcript, names, media)


def _text_block(text: str, origin: str | None) -> str:
    """Text in a code block: ``untrusted origin=<origin>`` when untrusted, else ``text``."""
    if origin is None:
        return fenced(text, "text") + "\n"
    return fenced(text, "untrusted", f"origin={origin}") + "\n"


def _untrusted(origin: str, blocks: list[Block], *, closed: bool = True) -> Iterator[str]:
    """A quoted block headed "untrusted · <origin>" holding ``blocks`` (every line quoted)."""
    note = "" if closed else " · fence not closed"
    yield f"> **untrusted** · {inline_literal(origin)}{note}\n"
    for block in blocks:
        yield ">\n"
        yield from _quote(block)


def _quote(chunks: Iterable[str]) -> Iterator[str]:
    """``chunks`` with ``>`` at the start of every line, blank ones included (a bare blank line
    would end the quote, and the code block in it). Streamed: a chunk may end mid-line."""
    at_start = True
    for chunk in chunks:
        out = []
        for piece in re.split(r"(\n)", chunk):
            if piece == "\n":
                out.append(">\n" if at_start else "\n")
                at_start = True
            elif piece:
                out.append(("> " if at_start else "") + piece)
                at_start = False
        if out:
            yield "".join(out)


def _part(part: Any, transcript: Transcript, names: dict[str, str], media: MediaMarkdown) -> Block:
    if isinstance(part, TextPart):
        origin = part.origin or (
            part.text.origin if isinstance(part.text, Untrusted) else "unknown"
        )
        return _untrusted(origin, [[_text_block(plain_text(part.text), origin)]])
    if isinstance(part, ToolUsePart):
        return _tool_use(part, transcript)
    if isinstance(part, ToolResultPart):
        return _tool_result(part, transcript, names, media)
    if isinstance(part, ReasoningPart):
        return [_reasoning(part)]
    block = _media(part, media)
    return _untrusted(part.origin, [block]) if part.origin else block


def _tool_use(part: ToolUsePart, transcript: Transcript) -> Block:
    try:
        text = json.dumps(part.model_dump(mode="json")["input"], indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):
        text = "(input not shown: it nests too deep to print)"
    call_id, name = plain_text(part.id), plain_text(part.name)
    head = f"**tool call** · {inline_literal(name)} · call {inline_literal(call_id)}\n"
    approval = approval_text(transcript.approvals.get(call_id))
    body = [head, "\n", fenced(text, "json") + "\n"]
    if approval:
        body.append(f"\n*{inline_literal(approval)}*\n")
    marks = [v.origin for v in (part.id, part.name, part.input) if isinstance(v, Untrusted)]
    if marks or contains_untrusted(part.input) is not False:
        return _untrusted(marks[0] if marks else "values inside the call's input", [body])
    return body


def _tool_result(
    part: ToolResultPart, transcript: Transcript, names: dict[str, str], media: MediaMarkdown
) -> Block:
    name = names.get(part.tool_use_id)
    head = (
        f"result of {name} · {part.tool_use_id}" if name else f"result of call {part.tool_use_id}"
    )
    blocks: list[Block] = [[f"**{inline_literal(head)}**\n"]]
    if part.is_error:
        blocks.append(["*error: the tool failed or the call was refused*\n"])
    content = part.content
    tokens: list[Any] = []
    if isinstance(content, str):
        tokens.append(content)
    elif isinstance(content, Untrusted):
        tokens.append({"kind": "part", "part": TextPart(text=content)})
    else:
        for sub in content:
            if isinstance(sub, TextPart) and isinstance(sub.text, str) and sub.origin is None:
                tokens.append(sub.text)
            else:
                tokens.append({"kind": "part", "part": sub})
    for item in _grouped(tokens):
        if item["kind"] == "text":
            blocks.append([_text_block(item["text"], None)])
        else:
            blocks.append(_item(item, False, transcript, names, media))
    if part.origin:
        return _untrusted(part.origin, blocks)
    return _joined(blocks)


def _joined(blocks: list[Block]) -> Iterator[str]:
    for index, block in enumerate(blocks):
        if index:
            yield "\n"
        yield from block


def _reasoning(part: ReasoningPart) -> str:
    text = part.text if isinstance(part.text, str) else ""
    if part.redacted:
        return "*reasoning · redacted by the vendor*\n"
    if not text:
        return "*reasoning · not shown by the vendor*\n"
    return f"*reasoning · {len(text)} characters*\n\n{fenced(text, 'text')}\n"


def _media(part: MediaPart, media: MediaMarkdown) -> Block:
    bits = [part.type, part.media_type]
    if isinstance(part, FilePart) and part.name:
        bits.append(part.name)
    return media(part, inline_literal(" · ".join(bits)))
