"""Assistant text as CommonMark: parsed by markdown-it-py into a small tree of safe nodes.

The tree is data, not HTML: the static renderer serializes it (escaping every string, attributes
constant or checked), and the widget's front end builds the DOM from it with ``createElement``
and ``textContent``; no string from a model is ever parsed as HTML on either side.

Safety rules, all applied here (the front end re-checks links and tags against the same lists):

- raw HTML is off (markdown-it ``html=False``): ``<b>`` in a reply stays the text ``<b>``;
- a link keeps its target only for ``http``, ``https`` and ``mailto``; any other scheme
  (``javascript:``, ``data:``, ``vbscript:``, ``file:``, relative) becomes plain text;
- an image is never loaded: it becomes the inert text ``[image: alt]``, followed by a link to a
  remote ``http(s)`` address (a link, not a fetch) or the words "inline data not shown";
- code blocks are highlighted by Pygments into ``[class, text]`` runs from a fixed class set;
- nesting is bounded by markdown-it's ``maxNesting`` (20), so a hostile reply cannot recurse deep.

Only trusted assistant text outside fences is rendered as markdown (``_view``); untrusted text
stays literal inside its fence.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when first used: rendering plain text never loads the parser
    from markdown_it import MarkdownIt
    from markdown_it.tree import SyntaxTreeNode

__all__ = [
    "BLOCK_TAGS",
    "HL_CLASSES",
    "INLINE_TAGS",
    "highlight",
    "markdown_tree",
    "safe_href",
]

Node = dict[str, Any] | str

BLOCK_TAGS = frozenset(
    {
        "p", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "ul", "ol", "li", "hr",
        "pre", "table", "thead", "tbody", "tr", "th", "td",
    }
)  # fmt: skip
"""Block elements a markdown tree may hold (``pre`` is a code block with ``code`` and ``hl``)."""

INLINE_TAGS = frozenset({"em", "strong", "s", "code", "a", "br", "img"})
"""Inline elements (``img`` is drawn as inert text, never as an image)."""

HL_CLASSES = frozenset({"k", "nb", "nf", "nt", "na", "nd", "s", "m", "c", "o", "p", "e"})
"""Highlight classes of code runs: keyword, builtin, def, tag, attribute, decorator, string,
number, comment, operator, punctuation, error; ``""`` is plain."""

MAX_HIGHLIGHT_CHARS = 20_000
"""Code blocks longer than this are shown without highlighting (Pygments time stays bounded)."""

_SAFE_HREF = re.compile(r"(?:https?://[^\s\x00-\x1f\x7f]+|mailto:[^\s\x00-\x1f\x7f:/]+)\Z", re.I)
_ALIGN = re.compile(r"text-align:(left|right|center)\Z")
_MARKUP = re.compile(
    r"[\\`*_\[\]<>#|~!&]|^\s*(?:[-+>]|\d+[.)])\s|^ {4}|^\s*(?:-{3,}|={3,})\s*$", re.M
)


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False, "breaks": True}).enable(
        ["table", "strikethrough"]
    )


def safe_href(url: str) -> str | None:
    """``url`` when it is an ``http(s)://`` or ``mailto:`` address without spaces or controls, else None."""
    return url if _SAFE_HREF.match(url) else None


def markdown_tree(text: str) -> list[Node] | None:
    """The block nodes of ``text`` as CommonMark, or None when it is plain prose (no markup).

    None means the text reads the same either way, so views and saved state stay small.
    """
    if not _MARKUP.search(text):
        return None
    from markdown_it.tree import SyntaxTreeNode

    root = SyntaxTreeNode(_parser().parse(text))
    blocks = _blocks(root.children)
    if len(blocks) == 1 and isinstance(blocks[0], dict) and blocks[0].get("tag") == "p":
        children = blocks[0]["children"]
        if len(children) == 1 and children[0] == text.strip():
            return None
    return blocks


def _blocks(nodes: list[SyntaxTreeNode]) -> list[Node]:
    out: list[Node] = []
    for node in nodes:
        out.extend(_block(node))
    return out


def _block(node: SyntaxTreeNode) -> list[Node]:
    kind = node.type
    if kind == "paragraph":
        inline = _inline_of(node)
        return inline if node.hidden else [{"tag": "p", "children": inline}]
    if kind == "heading":
        return [{"tag": node.tag, "children": _inline_of(node)}]
    if kind in {"bullet_list", "ordered_list"}:
        element: dict[str, Any] = {"tag": node.tag, "children": _blocks(node.children)}
        start = node.attrs.get("start")
        if kind == "ordered_list" and isinstance(start, int) and start != 1:
            element["start"] = start
        return [element]
    if kind in {"list_item", "blockquote", "table", "thead", "tbody", "tr"}:
        return [{"tag": node.tag, "children": _blocks(node.children)}]
    if kind in {"th", "td"}:
        element = {"tag": node.tag, "children": _inline_of(node)}
        align = _ALIGN.match(str(node.attrs.get("style", "")))
        if align:
            element["align"] = align.group(1)
        return [element]
    if kind in {"fence", "code_block"}:
        lang = node.info.strip().split(" ", 1)[0][:40] if kind == "fence" else ""
        return [{"tag": "pre", "lang": lang, "code": _src(node), "hl": highlight(_src(node), lang)}]
    if kind == "hr":
        return [{"tag": "hr"}]
    if kind == "inline":
        return _inline(node.children)
    # html_block cannot occur with html=False; anything unknown is kept as its text.
    return [{"tag": "p", "children": [_src(node)]}] if _src(node) else []


def _src(node: SyntaxTreeNode) -> str:
    """A markdown-it node's source text (a parser node, not a Message: no parts to walk)."""
    text = node.content
    return text if isinstance(text, str) else ""


def _inline_of(node: SyntaxTreeNode) -> list[Node]:
    """The inline content of a paragraph, heading or table cell (its one ``inline`` child)."""
    inline: list[SyntaxTreeNode] = []
    for child in node.children:
        inline.extend(child.children if child.type == "inline" else [child])
    return _inline(inline)


def _inline(nodes: list[SyntaxTreeNode]) -> list[Node]:
    out: list[Node] = []

    def text(value: str) -> None:
        if not value:
            return
        if out and isinstance(out[-1], str):
            out[-1] += value
        else:
            out.append(value)

    for node in nodes:
        kind = node.type
        if kind in {"text", "html_inline"}:
            text(_src(node))
        elif kind == "softbreak" or kind == "hardbreak":
            out.append({"tag": "br"})
        elif kind == "code_inline":
            out.append({"tag": "code", "children": [_src(node)]})
        elif kind in {"em", "strong", "s"}:
            out.append({"tag": node.tag, "children": _inline(node.children)})
        elif kind == "link":
            href = safe_href(str(node.attrs.get("href", "")))
            children = _inline(node.children)
            if href is None:
                for child in children:
                    if isinstance(child, str):
                        text(child)
                    else:
                        out.append(child)
            else:
                out.append({"tag": "a", "href": href, "children": children})
        elif kind == "image":
            alt = "".join(_plain(child) for child in node.children)
            element: dict[str, Any] = {"tag": "img", "alt": alt}
            href = safe_href(str(node.attrs.get("src", "")))
            if href is not None:
                element["href"] = href
            out.append(element)
        else:
            text(_src(node))
    return out


def _plain(node: SyntaxTreeNode) -> str:
    if node.type in {"text", "code_inline", "html_inline"}:
        return _src(node)
    return "".join(_plain(child) for child in node.children)


def _class_of(token_type: Any) -> str:
    from pygments import token as t  # type: ignore[import-untyped]

    for kind, cls in (
        (t.Comment, "c"),
        (t.String, "s"),
        (t.Number, "m"),
        (t.Keyword, "k"),
        (t.Name.Builtin, "nb"),
        (t.Name.Function, "nf"),
        (t.Name.Class, "nf"),
        (t.Name.Tag, "nt"),
        (t.Name.Attribute, "na"),
        (t.Name.Decorator, "nd"),
        (t.Operator, "o"),
        (t.Punctuation, "p"),
        (t.Error, "e"),
    ):
        if token_type in kind:
            return cls
    return ""


def highlight(code: str, lang: str) -> list[list[str]] | None:
    """``code`` as ``[class, text]`` runs from Pygments' lexer for ``lang``; None when unknown or too long."""
    if not lang or len(code) > MAX_HIGHLIGHT_CHARS:
        return None
    from pygments.lexers import get_lexer_by_name  # type: ignore[import-untyped]
    from pygments.util import ClassNotFound  # type: ignore[import-untyped]

    try:
        lexer = get_lexer_by_name(lang, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None
    runs: list[list[str]] = []
    for token_type, value in lexer.get_tokens(code):
        cls = _class_of(token_type)
        if runs and runs[-1][0] == cls:
            runs[-1][1] += value
        else:
            runs.append([cls, value])
    return runs
