"""``chat.export(path)`` and ``chat.to_markdown()``: a conversation written out to keep or share.

The format follows the suffix:

- ``.md``: Markdown (``render._to_markdown``): the model's markdown as markdown, everything else
  literal, untrusted content in quoted code blocks marked ``untrusted origin=...``; images as
  files in ``<stem>_files/`` beside the page (``inline=True``: as ``data:`` URIs in the page),
  other media as links to their files (``_export_media``).
- ``.html``: a standalone page from the render layer's static HTML (the notebook output's own
  renderer: escaped, re-encoded media, no script, a Content-Security-Policy forbidding any).
- ``.jsonl``: JSON Lines, one record per message and one per turn with its usage, for programs:
  ``{"type": "chat", "format": "loom_nb.chat/1", "id", "header", "system", "tools"}`` first, then
  ``{"type": "message", "index", "turn", "message"}`` for each message of ``chat.history``
  (``Message.model_validate(record["message"])`` gives it back, untrusted marks and refs kept),
  after a turn's messages ``{"type": "turn", "turn", "kind", "status", "model", "usage", "cost",
  "messages": [start, end]}``, and last ``{"type": "total", "usage", "cost"}``. Media stay as the
  history holds them: refs by address, inline data inline.

Every format is written to a temporary file beside the target and moved into place, so a failed
export never leaves half a page where an earlier one was. Any other suffix is refused
(``ConfigurationError`` code ``unknown_export_format``).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from loom_nb.chat._records import ChatTurn
from loom_nb.chat._views import tool_names
from loom_nb.content import Message, RefSource, to_parts
from loom_nb.errors import ConfigurationError
from loom_nb.render._source import Transcript

# The Markdown and HTML writers (the render layer's renderer, its media and Pillow) are imported by
# the methods that write, not with the Chat: a turn needs none of them.

if TYPE_CHECKING:
    from decimal import Decimal

    from loom_nb.agent import ToolDefinition, Toolset
    from loom_nb.chat._export_media import MediaOut
    from loom_nb.chat._views import TurnStats
    from loom_nb.content import Usage
    from loom_nb.store import ContentStore, Principal
    from loom_nb.taint import Untrusted

__all__ = ["EXPORT_FORMATS", "ChatExport"]

EXPORT_FORMATS = {".md": "Markdown", ".html": "HTML", ".jsonl": "JSON Lines"}
"""Suffix -> format ``chat.export`` writes."""

JSONL_FORMAT = "loom_nb.chat/1"
"""The ``format`` of a JSON Lines export's first record (changes only with its shape)."""


class ChatExport:
    """``chat.to_markdown()`` and ``chat.export(path)`` of a ``Chat``."""

    if TYPE_CHECKING:  # the Chat state this part reads (defined in _chat.py)
        id: str
        _system: str | Untrusted | None
        _tools: list[ToolDefinition]
        _toolsets: list[Toolset]
        _store: ContentStore | None
        _principal: Principal
        _history: list[Message]
        _turns: list[ChatTurn]
        _stats: TurnStats

        @property
        def store(self) -> ContentStore: ...
        @property
        def usage(self) -> Usage: ...
        @property
        def cost(self) -> Decimal | None: ...
        def header(self) -> str: ...
        def approvals(self) -> dict[str, dict[str, Any]]: ...

    def to_markdown(self, *, inline: bool = False) -> str:
        """The conversation as Markdown text.

        Media are described (kind, type, size, address), or with ``inline=True`` images are
        embedded as ``data:`` URIs; ``chat.export("x.md")`` writes them as files beside the page.
        """
        from loom_nb.chat._export_media import MediaOut

        _check_inline(inline)
        return "".join(
            self._markdown(MediaOut(self._reader, self._principal.tenant, inline=inline))
        )

    def export(self, path: str | os.PathLike[str], *, inline: bool = False) -> Path:
        """Write the conversation to ``path`` as ``.md``, ``.html`` or ``.jsonl``; return the path.

        Markdown writes images (and other media) into ``<stem>_files/`` beside the page, or with
        ``inline=True`` embeds images as ``data:`` URIs and writes no files. The folder of
        ``path`` must exist.
        """
        if not isinstance(path, str | os.PathLike):
            raise ConfigurationError(
                f"path is a file path ending in {', '.join(EXPORT_FORMATS)}, not "
                f"{type(path).__name__}.",
                code="invalid_argument",
            )
        _check_inline(inline)
        target = Path(path)
        suffix = target.suffix.lower()
        if suffix not in EXPORT_FORMATS:
            known = ", ".join(f"{s} ({name})" for s, name in EXPORT_FORMATS.items())
            raise ConfigurationError(
                f"cannot export to {target.name!r}: the suffix {suffix or '(none)'!r} names no "
                f"format. Use one of {known}.",
                code="unknown_export_format",
                suffix=suffix,
            )
        if inline and suffix != ".md":
            raise ConfigurationError(
                f"inline=True is for Markdown; a {EXPORT_FORMATS[suffix]} export always carries "
                "its media as it does. Leave inline out, or export to a .md path.",
                code="invalid_argument",
            )
        if not target.parent.is_dir():
            raise ConfigurationError(
                f"cannot export to {target}: the folder {target.parent} does not exist. Create it "
                "first, or choose a path in an existing folder.",
                code="export_unwritable",
            )
        from loom_nb.chat._export_media import MediaOut, folder_for

        try:
            if suffix == ".md":
                folder = None if inline else folder_for(target)
                media = MediaOut(self._reader, self._principal.tenant, folder=folder, inline=inline)
                _write_chunks(target, self._markdown(media))
            elif suffix == ".html":
                self._write_html(target)
            else:
                _write_chunks(target, self._jsonl())
        except OSError as exc:
            raise ConfigurationError(
                f"cannot export to {target}: {exc.strerror or exc}. Choose a writable path.",
                code="export_unwritable",
            ) from exc
        return target

    # -- formats ---------------------------------------------------------------------------------

    def _transcript(self) -> Transcript:
        return Transcript(
            list(self._history),
            self._system,
            tool_names(self._tools, self._toolsets),
            approvals=self.approvals(),
            stats=self._stats.of(self._turns, len(self._history)),
        )

    def _markdown(self, media: MediaOut) -> Iterator[str]:
        from loom_nb.render._to_markdown import transcript_markdown

        return transcript_markdown(self._transcript(), header=self.header(), media=media)

    def _write_html(self, target: Path) -> None:
        from loom_nb.render._api import to_html

        with _replacing(target) as temp:
            temp.close()
            to_html(
                self._transcript(),
                temp.name,
                store=self._reader(),
                principal=self._principal,
                title=f"chat {self.id}",
                header=self.header(),
            )

    def _jsonl(self) -> Iterator[str]:
        system = self._system
        yield _line(
            {
                "type": "chat",
                "format": JSONL_FORMAT,
                "id": self.id,
                "header": self.header(),
                "system": system
                if isinstance(system, str | None)
                else system.model_dump(mode="json"),
                "tools": tool_names(self._tools, self._toolsets),
            }
        )
        length = len(self._history)
        owner = _turn_of_message(self._turns, length)
        done = 0  # the messages written so far
        for turn, end in _turn_spans(self._turns, length):
            # each turn's messages (a seed's before the first), then its record; a turn that
            # left no message (a stop before any text) has its record in its place all the same
            for index in range(done, end):
                yield self._message_line(index, owner.get(index))
            done = max(done, end)
            yield _line(_turn_record(turn, end))
        for index in range(done, length):
            yield self._message_line(index, owner.get(index))
        cost = self.cost
        yield _line(
            {
                "type": "total",
                "usage": self.usage.model_dump(mode="json"),
                "cost": str(cost) if cost is not None else None,
            }
        )

    def _message_line(self, index: int, turn: ChatTurn | None) -> str:
        return _line(
            {
                "type": "message",
                "index": index,
                "turn": turn.index if turn is not None else None,
                "message": self._history[index].model_dump(mode="json"),
            }
        )

    def _reader(self) -> ContentStore | None:
        """The store to read refs from: the chat's, opened only when the history holds a ref."""
        if self._store is not None:
            return self._store
        for message in self._history:
            if any(_has_ref(part) for part in to_parts(message.content)):
                return self.store
        return None


def _has_ref(part: Any) -> bool:
    if isinstance(getattr(part, "source", None), RefSource):
        return True
    content = getattr(part, "content", None)
    return isinstance(content, list) and any(_has_ref(sub) for sub in content)


def _check_inline(inline: object) -> None:
    if not isinstance(inline, bool):
        raise ConfigurationError(
            f"inline is True or False, not {inline!r}.", code="invalid_argument"
        )


def _turn_spans(turns: list[ChatTurn], length: int) -> Iterator[tuple[ChatTurn, int]]:
    """Each turn with the end (exclusive) of its messages in the history."""
    for number, turn in enumerate(turns):
        end = turns[number + 1].start if number + 1 < len(turns) else length
        yield turn, max(turn.start, min(end, length))


def _turn_of_message(turns: list[ChatTurn], length: int) -> dict[int, ChatTurn]:
    owner: dict[int, ChatTurn] = {}
    for turn, end in _turn_spans(turns, length):
        for index in range(turn.start, end):
            owner[index] = turn
    return owner


def _turn_record(turn: ChatTurn, end: int) -> dict[str, Any]:
    return {
        "type": "turn",
        "turn": turn.index,
        "kind": turn.kind,
        "status": turn.status,
        "model": turn.response.model if turn.response is not None else None,
        "usage": turn.usage.model_dump(mode="json"),
        "cost": str(turn.cost) if turn.cost is not None else None,
        "messages": [turn.start, end],
    }


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


@contextmanager
def _replacing(target: Path) -> Iterator[Any]:
    """A temporary file beside ``target`` that replaces it when the block ends without error."""
    temp = tempfile.NamedTemporaryFile(  # noqa: SIM115 (closed here or by the caller, then moved)
        "w", encoding="utf-8", dir=target.parent, prefix=f".{target.name}.", delete=False
    )
    try:
        yield temp
        temp.close()
        os.replace(temp.name, target)
    except BaseException:
        temp.close()
        Path(temp.name).unlink(missing_ok=True)
        raise


def _write_chunks(target: Path, chunks: Iterable[str]) -> None:
    with _replacing(target) as temp:
        out: TextIO = temp
        for chunk in chunks:
            out.write(chunk)
