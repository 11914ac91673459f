"""The request guard: structure, provenance and inline caps in one walk (ADR 0120 decisions 5 and 7).

``guard_request`` is the gate every request passes before a provider sees it. It refuses:

- structure: a ``tool_use`` outside an assistant message, a ``tool_result`` outside a user message,
  media outside a user message, a ``reasoning`` part outside an assistant message
  (``reasoning_outside_assistant``) or one whose fields are not plain strings / plain JSON
  (``bad_reasoning``, ``untrusted_in_reasoning``), a malformed or mismatched media type, bad base64, a malformed ref
  (address, declared size);
- tool pairing, as every vendor pairs them (or answers 400): each ``tool_use`` id is unique in the
  request (``duplicate_tool_use_id``); a ``tool_result`` answers a call of the assistant message
  right before its user message (``orphan_tool_result`` when no earlier message made the call,
  ``stale_tool_result`` when an older one did), once (``duplicate_tool_result``); and that user
  message answers every call (``unanswered_tool_use``). A request may end on an assistant message
  whose calls are still open (a parked agent turn);
- size: an inline part over ``max_inline_bytes`` or a request over ``max_inline_total_bytes``
  (``OversizedInlinePartError``: store the bytes and send a ref);
- provenance: untrusted text in the system prompt or an assistant message, an untrusted value
  anywhere in a ``tool_use`` (id, name, input at any depth, ``provider_data``; the input walk is
  iterative and capped), untrusted media naming a stored ref, an untrusted mark in the tool
  menu (a spec's name, description or ``input_schema`` at any depth; a malformed spec is
  ``bad_tool_spec``).

and rewrites, copy-on-write, only what provenance requires: untrusted text in a user message or a
tool result is fenced (the fence IS the mark: the fenced part carries no ``origin``), a tool
result's ``origin`` moves onto its media items, and an untrusted file loses its ``name``.
Untrusted media keeps its ``origin`` so the provider mapper can bracket it where its wire shape
allows (``fence_untrusted_media``).

The output is a fixed point: guarding it again returns it unchanged, so providers may guard what
the effect layer already guarded without double-fencing. Fences in ``messages[i]`` use the nonce
of the INPUT request cut after that message (``fence_nonce`` of ``messages[: i + 1]`` with the same
system prompt, tools, settings and schema; for the last message, ``fence_nonce(request)``), computed
only when something must be fenced and only after the whole request passed every check. So a
fence is written once, on the turn its message arrives, and stays byte for byte the same on every
later turn: a long run does not re-fence its transcript, and the vendors' prompt caches keep
their prefix. Every refusal is a ``GuardError`` with a stable ``code``; a dict
that does not fit the model is a ``ContentValidationError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loom_nb._checked import guarded_already
from loom_nb._guard_checks import (
    MAX_TOOL_INPUT_DEPTH,
    check_json_value,
    check_ref,
    inline_size,
    media_essence,
    refuse,
)
from loom_nb._guard_fence import (
    PrefixNonces,
    close_fence,
    fence_nonce,
    fence_text,
    fence_untrusted_media,
    neutralize_fences,
    open_fence,
    request_tail,
)
from loom_nb._walk import EMPTY_JSON_SEEN, MediaLocation, Seen, iter_media, part_path
from loom_nb.content import (
    AudioPart,
    DataSource,
    FilePart,
    ImagePart,
    LlmRequest,
    Message,
    Part,
    ReasoningPart,
    RefSource,
    TextPart,
    ToolResultPart,
    ToolSpec,
    ToolUsePart,
    canonical_json,
    parse_request,
)
from loom_nb.errors import GuardError, OversizedInlinePartError
from loom_nb.limits import (
    MAX_INLINE_BYTES,
    MAX_INLINE_TOTAL_BYTES,
    MAX_RESOLVED_BYTES,
    MAX_TOOL_INPUT_NODES,
)
from loom_nb.taint import UNTRUSTED_MARKER, Untrusted

__all__ = [
    "MAX_INLINE_BYTES",
    "MAX_INLINE_TOTAL_BYTES",
    "MAX_RESOLVED_BYTES",
    "MAX_TOOL_INPUT_DEPTH",
    "MAX_TOOL_INPUT_NODES",
    "MediaLocation",
    "check_tool_input",
    "close_fence",
    "fence_nonce",
    "fence_text",
    "fence_untrusted_media",
    "guard_request",
    "iter_media",
    "neutralize_fences",
    "open_fence",
]

_MEDIA = (ImagePart, AudioPart, FilePart)
_MODALITY = {ImagePart: "image", AudioPart: "audio"}


def check_tool_input(value: Any, *, where: str = "input") -> None:
    """Refuse a tool call's input the guard would refuse: untrusted inside, over the node or depth cap, not JSON.

    The agent loop calls this at dispatch to replace an over-cap call with a placeholder before
    it enters the transcript (decision 7), so the guard never has to refuse every later request.
    """
    check_json_value(value, where, in_tool_use=True)


def guard_request(
    request: LlmRequest | dict[str, Any],
    *,
    max_inline_bytes: int = MAX_INLINE_BYTES,
    max_inline_total_bytes: int = MAX_INLINE_TOTAL_BYTES,
) -> LlmRequest:
    """Validate structure and provenance of ``request`` and return what a provider may send.

    Untrusted text in user messages and tool results comes back fenced; everything else is
    returned as it was (the very same objects when nothing needed fencing). Raises a
    ``GuardError`` (``OversizedInlinePartError`` for the inline caps) naming the place and the
    remedy, or ``ContentValidationError`` for a dict that does not fit the content model.
    """
    if guarded_already(request, max_inline_bytes, max_inline_total_bytes):
        assert isinstance(request, LlmRequest)
        return request  # the journaled call guarded this very request unchanged (_checked)
    req = parse_request(request)
    walk = _Walk(max_inline_bytes, max_inline_total_bytes)
    walk.check_system(req.system)
    _check_tools(req.tools)
    messages = req.messages
    if not isinstance(messages, list):
        raise refuse("bad_request", "messages", "messages is not a list", "Pass a list of Message.")
    params = (max_inline_bytes, max_inline_total_bytes)
    start, dirty, seen, fences = 0, [], EMPTY_JSON_SEEN, None
    last = _GUARDED.pop(params, None)
    if last is not None and last.seen.prefix_of(messages):
        # An already-guarded prefix is not walked again: the walk resumes from the state it
        # ended in (issue 15: a turn costs what it added). The prefix must be the same messages
        # with the same parts (``Seen``: a part list changed in place is walked again). The
        # entry was taken out first, so a refusal below leaves no half-extended state behind.
        walk, start, dirty, seen, fences = (
            last.walk,
            len(last.seen),
            last.dirty,
            last.seen,
            last.fences,
        )
    dirty += [mi for mi in range(start, len(messages)) if walk.check_message(mi, messages[mi])]
    if walk.unanswered is not None:
        raise walk.unanswered
    fences = fences if fences is not None else _Fences()
    _GUARDED[params] = _Guarded(seen.grown(messages, start), walk, dirty, fences)
    if not dirty:
        return req
    return req.model_copy(update={"messages": fences.rebuilt(req, messages, dirty, walk)})


class _Fences:
    """The guarded form of each rewritten message of a transcript, kept across turns (issue 15).

    A message's fences use its own nonce (``PrefixNonces``: the request cut after it), so once
    rewritten it stays as it is while the transcript grows; only a new system prompt, tool
    menu, settings or schema (the ``tail`` every nonce covers) rewrites them all again.
    """

    __slots__ = ("done", "nonces", "tail")

    def __init__(self) -> None:
        self.nonces = PrefixNonces()
        self.tail: str | None = None
        self.done: dict[int, Message] = {}

    def rebuilt(
        self, req: LlmRequest, messages: list[Message], dirty: list[int], walk: _Walk
    ) -> list[Message]:
        """``messages`` with every dirty one rewritten (fenced, names dropped, origins moved)."""
        if walk.fencing:
            tail = request_tail(req)
            if tail != self.tail:
                self.done.clear()
                self.tail = tail
        rebuilt = list(messages)
        done = self.done
        for mi in dirty:
            message = done.get(mi)
            if message is None:
                message = messages[mi]
                assert isinstance(message.content, list)  # only part lists are ever dirty
                nonce = (
                    self.nonces.nonce(messages, mi, self.tail or "", walk.input_json)
                    if mi in walk.fencing
                    else ""
                )
                parts = [_rewrite(part, nonce) for part in message.content]
                message = message.model_copy(update={"content": parts})
                done[mi] = message
            rebuilt[mi] = message
        return rebuilt


class _Guarded:
    """A request the guard passed: its messages and the walk's state after the last one."""

    __slots__ = ("dirty", "fences", "seen", "walk")

    def __init__(self, seen: Seen, walk: _Walk, dirty: list[int], fences: _Fences) -> None:
        self.seen = seen
        self.walk = walk
        self.dirty = dirty
        self.fences = fences


_GUARDED: dict[tuple[int, int], _Guarded] = {}
"""The last request passed per cap setting (the effect and the provider guard with different caps)."""


class _Walk:
    """State of one guard pass: calls declared and answered, the inline total, whether to fence.

    Locations travel as indices and become path strings only in a refusal (formatting a path
    for every part would cost more than the checks themselves). A call left unanswered is
    refused only after the whole walk (``unanswered``), so a result that sits in the wrong
    message is reported as that (``stale_tool_result``) rather than as the gap it leaves.
    """

    __slots__ = (
        "answered",
        "calls",
        "declared",
        "expected",
        "fencing",
        "inline_total",
        "input_json",
        "matched",
        "max_inline",
        "max_total",
        "unanswered",
    )

    def __init__(self, max_inline: int, max_total: int) -> None:
        self.declared: dict[str, int] = {}  # call id -> index of the message that made the call
        self.answered: set[str] = set()
        self.calls: dict[str, int] | None = None  # calls of the message just walked: id -> part
        self.expected: dict[str, int] | None = None  # the calls the current message must answer
        self.matched = 0  # results in the current message that answered one of ``expected``
        self.unanswered: GuardError | None = None  # the first call left unanswered
        self.input_json: dict[int, str] = {}  # id(tool_use part) -> canonical JSON of its input
        self.inline_total = 0
        self.max_inline = max_inline
        self.max_total = max_total
        self.fencing: set[int] = set()  # messages with text to fence (each needs its nonce)

    def check_system(self, system: object) -> None:
        if system is None or isinstance(system, str):
            return
        if isinstance(system, Untrusted):
            raise refuse(
                "untrusted_in_system",
                "system",
                "the system prompt is marked untrusted; instructions must come from the application",
                "Move the untrusted text into a user message (it will be fenced) and keep the "
                "system prompt your own.",
            )
        raise refuse("bad_request", "system", "the system prompt is not a string", "Pass a str.")

    def check_message(self, mi: int, message: object) -> bool:
        """Check one message; True when it needs rewriting (fence, name drop, origin move)."""
        if not isinstance(message, Message) or message.role not in ("user", "assistant"):
            raise refuse(
                "bad_message",
                part_path(mi),
                "not a Message with role 'user' or 'assistant'",
                "Build messages with Message(role=..., content=...).",
            )
        content = message.content
        expected = self.calls  # the calls of the message before this one must be answered here
        if expected is not None:
            self.calls = None
        if isinstance(content, str):
            if expected is not None:
                self._unanswered(expected, mi)
            return False
        if not isinstance(content, list):
            raise refuse(
                "bad_message",
                part_path(mi),
                "content is neither a string nor a list of parts",
                "Pass a str or a list of parts.",
            )
        user = message.role == "user"
        self.expected = expected if user else None
        self.matched = 0
        dirty = False
        for pi, part in enumerate(content):
            if isinstance(part, TextPart):
                if part.origin is not None or type(part.text) is not str:
                    dirty = self._untrusted_text(part, user, mi, pi) or dirty
            elif isinstance(part, ToolUsePart):
                if user:
                    raise refuse(
                        "tool_use_outside_assistant",
                        part_path(mi, pi),
                        "tool_use part in a user message",
                        "Only the model's (assistant) turn may call tools; build it with "
                        "assistant_message_of(response).",
                    )
                self._tool_use(part, mi, pi)
            elif isinstance(part, ToolResultPart):
                if not user:
                    raise refuse(
                        "tool_result_outside_user",
                        part_path(mi, pi),
                        "tool_result part in an assistant message",
                        "Send tool results in the user message that follows the assistant turn.",
                    )
                dirty = self._tool_result(part, mi, pi) or dirty
            elif isinstance(part, _MEDIA):
                if not user:
                    raise refuse(
                        "media_outside_user",
                        part_path(mi, pi),
                        f"{part.type} part in an assistant message",
                        "Media goes in user messages (or in a tool_result inside one).",
                    )
                dirty = self._media(part, part.origin, mi, pi, None) or dirty
            elif isinstance(part, ReasoningPart):
                if user:
                    raise refuse(
                        "reasoning_outside_assistant",
                        part_path(mi, pi),
                        "reasoning part in a user message; reasoning is the model's own thinking",
                        "Keep reasoning parts in the assistant turn they came with "
                        "(assistant_message_of(response)); pass your own notes as text.",
                    )
                _check_reasoning(part, part_path(mi, pi))
            else:
                raise refuse(
                    "bad_part",
                    part_path(mi, pi),
                    f"{type(part).__name__} is not a content part",
                    "Use TextPart, ImagePart, AudioPart, FilePart, ToolUsePart, ToolResultPart or "
                    "ReasoningPart.",
                )
        if expected is not None and (not user or self.matched < len(expected)):
            self._unanswered(expected, mi)
        return dirty

    def _unanswered(self, calls: dict[str, int], mi: int) -> None:
        """Note (the first) call of messages[mi - 1] that messages[mi] leaves unanswered."""
        if self.unanswered is not None:
            return
        call_id, pi = next((c, p) for c, p in calls.items() if c not in self.answered)
        self.unanswered = refuse(
            "unanswered_tool_use",
            part_path(mi - 1, pi),
            f"tool_use {call_id!r} is not answered: the next message, messages[{mi}], holds no "
            "tool_result for it, and every vendor refuses a call without its result right after",
            "Answer every call of an assistant turn in the user message right after it (a "
            "tool_result with is_error=True for a call that was not run), or end the request "
            "on that assistant turn.",
            tool_use_id=call_id,
        )

    def _untrusted_text(self, part: TextPart, user: bool, mi: int, pi: int) -> bool:
        """A text part with an origin or a non-str text: fence it (user) or refuse it."""
        where = part_path(mi, pi)
        _check_origin(part.origin, where)
        if not isinstance(part.text, Untrusted) and part.origin is None:
            raise refuse("bad_part", where, "text is not a string", "Pass a str.")
        if not user:
            raise refuse(
                "untrusted_in_assistant",
                where,
                "untrusted text in an assistant message would pose as the model's own words",
                "Pass untrusted text in a user message or a tool result, where it is fenced.",
            )
        _check_text_value(part.text, where)
        self.fencing.add(mi)
        return True

    def _media(
        self,
        part: ImagePart | AudioPart | FilePart,
        origin: object,
        mi: int,
        pi: int,
        ri: int | None,
    ) -> bool:
        """Check one media part; True when it must be rewritten (an untrusted file's name)."""

        def where() -> str:
            return part_path(mi, pi, ri)

        if origin is not None and not isinstance(origin, str):
            raise refuse("bad_origin", where, "origin is not a string", "Pass a str or None.")
        essence = media_essence(part.media_type)
        if essence is None:
            raise refuse(
                "bad_media_type",
                where,
                f"media type {part.media_type!r} is not a well-formed 'type/subtype'",
                "Give the exact type of the bytes, e.g. 'image/png' or 'application/pdf'.",
            )
        expected = _MODALITY.get(type(part))
        if expected is not None and not essence.startswith(expected + "/"):
            raise refuse(
                "media_type_mismatch",
                where,
                f"{part.type} part with media type {part.media_type!r}",
                f"An {part.type} part needs an '{expected}/*' type; use FilePart for other documents.",
            )
        if type(part) is FilePart and part.name is not None and type(part.name) is not str:
            _check_file_name(part.name, lambda: where() + ".name")
        source = part.source
        if type(source) is RefSource:
            check_ref(source.ref, where)
            if origin is not None:
                raise refuse(
                    "untrusted_media_ref",
                    where,
                    "untrusted media names a stored ref; an untrusted party must not choose "
                    "which blob enters the prompt",
                    "Carry untrusted media inline (DataSource), or resolve it yourself and mark "
                    "the trusted copy.",
                )
        elif type(source) is DataSource:
            size = inline_size(source.data, self.max_inline, where)
            self.inline_total += size
            if self.inline_total > self.max_total:
                raise OversizedInlinePartError(
                    f"{where()}: inline media in this request adds up to {self.inline_total} "
                    f"bytes decoded, over the {self.max_total}-byte cap per request. Put the "
                    "bytes in the content store (store.put) and send RefSource parts naming "
                    "their addresses.",
                    code="oversized_inline_total",
                    path=where(),
                    size=self.inline_total,
                    limit=self.max_total,
                )
        else:
            raise refuse(
                "bad_source",
                where,
                f"source is {type(source).__name__}, not a RefSource or DataSource",
                "Use RefSource(ref=ContentRef(address=...)) or DataSource(data=<base64>).",
            )
        return origin is not None and type(part) is FilePart and part.name is not None

    def _tool_use(self, part: ToolUsePart, mi: int, pi: int) -> None:
        call_id, name, tool_input = part.id, part.name, part.input
        if type(call_id) is not str or type(name) is not str or type(tool_input) is not dict:
            self._odd_tool_use(part, part_path(mi, pi))
        if part.provider_data is not None:
            _check_provider_data(part.provider_data, f"{part_path(mi, pi)}.provider_data")

        def where() -> str:
            return f"{part_path(mi, pi)}.input"

        text = check_json_value(tool_input, where, in_tool_use=True)
        if text is not None:
            self.input_json[id(part)] = text
        if not isinstance(call_id, str):  # pragma: no cover - refused above; narrows the type
            return
        first = self.declared.get(call_id)
        if first is not None:
            raise refuse(
                "duplicate_tool_use_id",
                f"{part_path(mi, pi)}.id",
                f"tool_use id {call_id!r} is already the id of an earlier call (in messages[{first}]); "
                "results are paired with calls by id, so ids must be unique in a request",
                "Keep the ids the model returned (assistant_message_of); give a call you build "
                "yourself a fresh id.",
                tool_use_id=call_id,
            )
        self.declared[call_id] = mi
        calls = self.calls
        if calls is None:
            self.calls = {call_id: pi}
        else:
            calls[call_id] = pi

    def _pair(self, call_id: str, mi: int, pi: int) -> None:
        """Pair a result with a call of the message right before its own, once."""
        if call_id in self.answered:
            raise refuse(
                "duplicate_tool_result",
                part_path(mi, pi),
                f"a second tool_result for {call_id!r}; a call is answered exactly once",
                "Keep one result per call (put everything the tool returned in it) and drop the "
                "other.",
                tool_use_id=call_id,
            )
        expected = self.expected
        if expected is None or call_id not in expected:
            made = self.declared[call_id]
            raise refuse(
                "stale_tool_result",
                part_path(mi, pi),
                f"tool_result for {call_id!r} answers a call of messages[{made}], not of the "
                "assistant message right before this one; vendors pair results only with the "
                "calls of the previous turn",
                f"Move the result into the user message right after messages[{made}] (the turn "
                "that made the call), or drop it.",
                tool_use_id=call_id,
            )
        self.answered.add(call_id)
        self.matched += 1

    @staticmethod
    def _odd_tool_use(part: ToolUsePart, where: str) -> None:
        """The slow path of a tool_use: an untrusted or non-str id/name, a non-dict input."""
        for field in ("id", "name"):
            value = getattr(part, field)
            if isinstance(value, Untrusted):
                raise refuse(
                    "untrusted_in_tool_use",
                    f"{where}.{field}",
                    f"the tool call's {field} is untrusted; a tool call built from untrusted "
                    "data is a forged model call",
                    "Tool calls come from the model's response (assistant_message_of).",
                )
            if not isinstance(value, str):
                raise refuse(
                    "bad_part", f"{where}.{field}", f"{field} is not a string", "Pass a str."
                )
        if isinstance(part.input, Untrusted):
            raise refuse(
                "untrusted_in_tool_use",
                f"{where}.input",
                "the tool call's input is untrusted; a tool call built from untrusted data is a "
                "forged model call",
                "Tool calls come from the model's response (assistant_message_of).",
            )
        if not isinstance(part.input, dict):
            raise refuse(
                "tool_input_not_json",
                f"{where}.input",
                "a tool call's input is not a JSON object",
                "Pass a dict.",
            )

    def _tool_result(self, part: ToolResultPart, mi: int, pi: int) -> bool:
        """Check a tool result; True when it must be rewritten (fenced text, origin moved)."""
        if not isinstance(part.tool_use_id, str) or part.tool_use_id not in self.declared:
            raise refuse(
                "orphan_tool_result",
                part_path(mi, pi),
                f"tool_result for {part.tool_use_id!r}, which no earlier assistant message called",
                "Keep the assistant turn with the matching tool_use before its result (a "
                "compaction must not cut between them), or drop the result.",
                tool_use_id=part.tool_use_id,
            )
        self._pair(part.tool_use_id, mi, pi)
        origin = part.origin
        if origin is not None:
            _check_origin(origin, part_path(mi, pi))
        content = part.content
        fence = False  # some text in the result must be fenced
        dirty = origin is not None  # the origin moves into the content
        if type(content) is str:
            fence = dirty
        elif isinstance(content, Untrusted):
            _check_text_value(content, f"{part_path(mi, pi)}.content")
            fence = True
        elif isinstance(content, list):
            for ri, item in enumerate(content):
                if isinstance(item, TextPart):
                    if item.origin is not None or origin is not None or type(item.text) is not str:
                        at = part_path(mi, pi, ri)
                        _check_origin(item.origin, at)
                        _check_text_value(item.text, at)
                        fence = True
                elif isinstance(item, _MEDIA):
                    item_origin = item.origin if item.origin is not None else origin
                    dirty = self._media(item, item_origin, mi, pi, ri) or dirty
                else:
                    raise refuse(
                        "bad_part",
                        part_path(mi, pi, ri),
                        f"{type(item).__name__} cannot appear inside a tool_result",
                        "A tool result holds text, image, audio and file parts.",
                    )
        else:
            raise refuse(
                "bad_part",
                f"{part_path(mi, pi)}.content",
                "tool_result content is not a string, an Untrusted value or a list of parts",
                "Pass one of those.",
            )
        if fence:
            self.fencing.add(mi)
        return dirty or fence


def _check_tools(tools: object) -> None:
    """The tool menu is an instruction position: plain specs only, no untrusted mark at any depth."""
    if not isinstance(tools, list):
        raise refuse("bad_request", "tools", "tools is not a list", "Pass a list of ToolSpec.")
    for ti, spec in enumerate(tools):
        where = f"tools[{ti}]"
        if not isinstance(spec, ToolSpec):
            raise refuse(
                "bad_tool_spec",
                where,
                f"{type(spec).__name__} is not a ToolSpec",
                "Build tools as ToolSpec(name=..., description=..., input_schema={...}).",
            )
        for field in ("name", "description"):
            value = getattr(spec, field)
            if isinstance(value, Untrusted):
                raise refuse(
                    "untrusted_in_tool_spec",
                    f"{where}.{field}",
                    f"the tool's {field} is untrusted; the tool menu is read as instructions",
                    "Write tool names and descriptions yourself; pass untrusted text in a user "
                    "message or a tool result, where it is fenced.",
                )
            if type(value) is not str:
                raise refuse(
                    "bad_tool_spec", f"{where}.{field}", f"{field} is not a string", "Pass a str."
                )
        schema = spec.input_schema
        if not isinstance(schema, dict):
            raise refuse(
                "bad_tool_spec",
                f"{where}.input_schema",
                "input_schema is not a JSON object",
                "Pass a JSON Schema dict.",
            )
        try:
            check_json_value(schema, f"{where}.input_schema", in_tool_use=True)
        except GuardError as exc:
            path = str(exc.details.get("path", f"{where}.input_schema"))
            if exc.code == "untrusted_in_tool_use":
                raise refuse(
                    "untrusted_in_tool_spec",
                    path,
                    "an untrusted value sits in a tool's input_schema; the tool menu is read as "
                    "instructions and a schema cannot be fenced",
                    "Write tool schemas yourself; pass untrusted text in a user message or a "
                    "tool result, where it is fenced.",
                ) from exc
            raise refuse(
                "bad_tool_spec",
                path,
                "a tool's input_schema is not plain JSON of modest size and depth",
                "Pass a JSON Schema made of objects with string keys, arrays, strings, finite "
                "numbers, booleans and null.",
            ) from exc


def _check_file_name(name: object, where: Callable[[], str]) -> None:
    """Refuse a file name that is not a plain string (it would reach a title outside any fence)."""
    if isinstance(name, Untrusted):
        raise refuse(
            "untrusted_file_name",
            where,
            "the file's name is marked untrusted; a name reaches the model as a title, outside "
            "any fence",
            "Mark the whole part untrusted (origin=...), which drops its name, or name it yourself.",
        )
    raise refuse("bad_part", where, "the file's name is not a string", "Pass a str or None.")


def _check_origin(origin: object, where: str) -> None:
    if origin is not None and not isinstance(origin, str):
        raise refuse("bad_origin", where, "origin is not a string", "Pass a str or None.")


def _check_text_value(text: object, where: str) -> None:
    """An untrusted text must be a str, or an ``Untrusted`` holding a str or small plain JSON."""
    if isinstance(text, str):
        return
    if isinstance(text, Untrusted):
        if not isinstance(text.origin, str):
            raise refuse("bad_origin", where, "Untrusted.origin is not a string", "Pass a str.")
        if not isinstance(text.value, str):
            check_json_value(text.value, where, in_tool_use=False)
        return
    raise refuse("bad_part", where, "text is not a string", "Pass a str or Untrusted.")


def _check_reasoning(part: ReasoningPart, where: str) -> None:
    """A reasoning part holds plain strings and plain JSON; an untrusted mark there is forged."""
    for field in ("text", "signature", "data"):
        value = getattr(part, field)
        if isinstance(value, Untrusted):
            raise refuse(
                "untrusted_in_reasoning",
                f"{where}.{field}",
                "a reasoning part carries an untrusted value; it would pose as the model's own "
                "thinking",
                "Reasoning parts come from the model's response (assistant_message_of).",
            )
        if not (type(value) is str or (value is None and field != "text")):
            raise refuse(
                "bad_reasoning",
                f"{where}.{field}",
                f"the reasoning part's {field} is not a string",
                "Pass a str" + (" or None." if field != "text" else "."),
            )
    if type(part.redacted) is not bool:
        raise refuse(
            "bad_reasoning", f"{where}.redacted", "redacted is not a bool", "Pass True or False."
        )
    data = part.provider_data
    if data is None:
        return
    if not isinstance(data, dict):
        raise refuse(
            "bad_reasoning",
            f"{where}.provider_data",
            "provider_data is not a dict",
            "Pass a dict of plain JSON, or None.",
        )
    try:
        check_json_value(data, f"{where}.provider_data", in_tool_use=True)
    except GuardError as exc:
        path = str(exc.details.get("path", f"{where}.provider_data"))
        if exc.code == "untrusted_in_tool_use":
            raise refuse(
                "untrusted_in_reasoning",
                path,
                "a reasoning part's provider_data carries an untrusted mark; it would pose as "
                "vendor data",
                "Reasoning parts come from the model's response (assistant_message_of).",
            ) from exc
        raise refuse(
            "bad_reasoning",
            path,
            "a reasoning part's provider_data is not plain JSON of modest size and depth",
            "Keep the vendor's metadata as it came (objects with string keys, arrays, strings, "
            "numbers, booleans, null).",
        ) from exc


# ---- rewriting (only for messages the walk marked dirty; every check has already passed) ----


def _check_provider_data(data: object, where: str) -> None:
    """A tool call's ``provider_data`` is a dict of plain strings; an untrusted mark there is forged."""
    if not isinstance(data, dict):
        raise refuse(
            "bad_part", where, "provider_data is not a dict", "Pass a dict of str to str, or None."
        )
    for key, value in data.items():
        if isinstance(value, Untrusted) or key == UNTRUSTED_MARKER:
            raise refuse(
                "untrusted_in_tool_use",
                f"{where}.{key}",
                "a tool call's provider_data carries an untrusted mark; a tool call built from "
                "untrusted data is a forged model call",
                "provider_data comes from the model's response (assistant_message_of).",
            )
        if type(key) is not str or type(value) is not str:
            raise refuse(
                "bad_part",
                f"{where}.{key}",
                "provider_data holds a value that is not a string",
                "Pass a dict of str to str (opaque vendor data, e.g. a thought signature).",
            )


def _text_and_origin(text: str | Untrusted, origin: str | None) -> tuple[str, str | None]:
    if isinstance(text, Untrusted):
        value = text.value if isinstance(text.value, str) else canonical_json(text.value)
        return value, origin if origin is not None else text.origin
    return text, origin


def _fenced(text: str | Untrusted, origin: str | None, nonce: str) -> str | None:
    """The fenced form of ``text``, or None when it is trusted (no origin, not Untrusted)."""
    value, effective = _text_and_origin(text, origin)
    if effective is None:
        return None
    return fence_text(value, nonce, effective)


def _rewrite(part: Part, nonce: str) -> Part:
    if isinstance(part, TextPart):
        fenced = _fenced(part.text, part.origin, nonce)
        if fenced is None:
            return part
        return part.model_copy(update={"text": fenced, "origin": None})
    if isinstance(part, FilePart) and part.origin is not None and part.name is not None:
        return part.model_copy(update={"name": None})
    if isinstance(part, ToolResultPart):
        return _rewrite_result(part, nonce)
    return part


def _rewrite_result(part: ToolResultPart, nonce: str) -> ToolResultPart:
    origin = part.origin
    content = part.content
    if not isinstance(content, list):
        fenced = _fenced(content, origin, nonce)
        if fenced is None:
            return part
        return part.model_copy(update={"content": fenced, "origin": None})
    items: list[Any] = []
    for item in content:
        if isinstance(item, TextPart):
            own = item.origin if item.origin is not None else origin
            fenced = _fenced(item.text, own, nonce)
            items.append(
                item if fenced is None else item.model_copy(update={"text": fenced, "origin": None})
            )
        else:
            item_origin = item.origin if item.origin is not None else origin
            update: dict[str, Any] = {}
            if item_origin is not None and item.origin is None:
                update["origin"] = item_origin
            if item_origin is not None and isinstance(item, FilePart) and item.name is not None:
                update["name"] = None
            items.append(item.model_copy(update=update) if update else item)
    return part.model_copy(update={"content": items, "origin": None})
