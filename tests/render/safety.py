"""An HTML safety checker for renderer output: parses the HTML and lists everything that could run.

Used by the render and widget tests. It walks every tag (html.parser, the way a browser tokenizes)
and reports script/style/iframe-like tags, event-handler attributes, ``id`` attributes, any
``href`` other than an ``http(s)://`` or ``mailto:`` link on ``<a rel="noopener noreferrer
nofollow">`` (rendered markdown links), and any ``src`` that is not a PNG or an allowlisted
audio data URL with real base64.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

from loom_nb.render import AUDIO_TYPES

FORBIDDEN_TAGS = {
    "script",
    "style",
    "iframe",
    "embed",
    "object",
    "svg",
    "math",
    "link",
    "meta",
    "base",
    "form",
    "input",
}
_B64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_SAFE_LINK = re.compile(
    r"(?:https?://[^\s\x00-\x1f\x7f\"'<>]+|mailto:[^\s\x00-\x1f\x7f:/\"'<>]+)\Z", re.I
)


class _Checker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag in FORBIDDEN_TAGS:
            self.problems.append(f"tag <{tag}>")
        named = dict(attrs)
        for name, value in attrs:
            if name == "href" and tag == "a" and _SAFE_LINK.match(value or ""):
                if named.get("rel") != "noopener noreferrer nofollow":
                    self.problems.append(f"link without rel=noopener on <{tag}>")
                continue
            if name.startswith("on"):
                self.problems.append(f"event handler {name} on <{tag}>")
            if name in {
                "id",
                "href",
                "action",
                "formaction",
                "srcset",
                "xlink:href",
                "autoplay",
                "loop",
            }:
                self.problems.append(f"attribute {name} on <{tag}>")
            if name == "src":
                self.problems.extend(_check_src(tag, value or ""))
            if name == "style" and value and re.search(r"url\(|expression|javascript", value, re.I):
                self.problems.append(f"style with a URL on <{tag}>")


def _check_src(tag: str, src: str) -> list[str]:
    match = re.fullmatch(r"data:([a-z]+/[a-z0-9.+-]+);base64,(.*)", src, re.S)
    if not match or not _B64.fullmatch(match.group(2)):
        return [f"src {src[:60]!r} on <{tag}>"]
    kind = match.group(1)
    if tag == "img" and kind != "image/png":
        return [f"img of type {kind}"]
    if tag == "audio" and kind not in AUDIO_TYPES:
        return [f"audio of type {kind}"]
    if tag not in {"img", "audio"}:
        return [f"src on <{tag}>"]
    return []


def unsafe_parts(html: str) -> list[str]:
    """Everything in ``html`` that could run script or load something (empty when safe)."""
    checker = _Checker()
    checker.feed(html)
    checker.close()
    return checker.problems


def tags_of(html: str) -> list[str]:
    """The start tags of ``html``, in order."""
    checker = _Checker()
    checker.feed(html)
    return checker.tags
