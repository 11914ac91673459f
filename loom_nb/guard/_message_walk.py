"""The guard's walk over a request's messages: structure, tool pairing, inline caps, provenance.

One ``MessageWalk`` holds the state of a pass (calls declared and answered, the inline total, which
messages need fences) and checks one message at a time, so a later turn resumes from the state
the last one ended in instead of walking the transcript again.
"""

from __future__ import annotations

from typing import Any

from loom_nb.content import (
    AudioPart,
    DataSource,
    FilePart,
    ImagePart,
    Message,
    ReasoningPart,
    RefSource,
    TextPart,
    ToolResultPart,
    ToolUsePart,
)
from loom_nb.errors import GuardError, OversizedInlinePartError
from loom_nb.guard._checks import (
    check_json_walked,
    check_ref,
    flat_plain_json,
    inline_size,
    media_essence,
    refuse,
    where_text,
)
from loom_nb.guard._part_checks import (
    check_file_name,
    check_origin,
    check_provider_data,
    check_reasoning,
    check_text_value,
)
from loom_nb.guard._walk import part_path
from loom_nb.taint import Untrusted, is_minted_media_origin

_MEDIA = (ImagePart, AudioPart, FilePart)
_MODALITY = {ImagePart: "image/", AudioPart: "audio/"}
_ROLES = ("user", "assistant")

_TEXT, _TOOL_USE, _TOOL_RESULT, _MEDIA_PART, _REASONING = range(5)
"""The branches of the part walk."""


def _kind_of(part: object) -> int | None:
    """The branch of a part not of an exact part class, by the isinstance tests the walk always
    made, in the same order (None: not a content part)."""
    if isinstance(part, TextPart):
        return _TEXT
    if isinstance(part, ToolUsePart):
        return _TOOL_USE
    if isinstance(part, ToolResultPart):
        return _TOOL_RESULT
    if isinstance(part, _MEDIA):
        return _MEDIA_PART
    if isinstance(part, ReasoningPart):
        return _REASONING
    return None


def _bad_message(mi: int) -> GuardError:
    return refuse(
        "bad_message",
        part_path(mi),
        "not a Message with role 'user' or 'assistant'",
        "Build messages with Message(role=..., content=...).",
    )


class MessageWalk:
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
        "media_kinds",
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
        # (modality, media_type) of every media part walked; None once one was not of the exact
        # built-in classes (a subclass could compare equal to another pair and hide it)
        self.media_kinds: set[tuple[str, str]] | None = set()

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

    def check_messages(self, messages: list[Any], start: int) -> list[int]:
        """Check ``messages[start:]`` in order; the indices of those that need rewriting (fence,
        name drop, origin move)."""
        dirty: list[int] = []
        for mi in range(start, len(messages)):
            message = messages[mi]
            if not isinstance(message, Message):
                raise _bad_message(mi)
            role = message.role
            if role not in _ROLES:
                raise _bad_message(mi)
            content = message.content
            if isinstance(content, str):  # the common turn; it answers none of the calls before
                expected, self.calls = self.calls, None
                if expected is not None:
                    self._unanswered(expected, mi)
                continue
            if self._check_content(mi, role, content):
                dirty.append(mi)
        return dirty

    def _check_content(self, mi: int, role: str, content: object) -> bool:
        """Check the content of messages[mi], not a string (``check_messages`` took those);
        True when it needs rewriting."""
        expected = self.calls  # the calls of the message before this one must be answered here
        if expected is not None:
            self.calls = None
        if not isinstance(content, list):
            raise refuse(
                "bad_message",
                part_path(mi),
                "content is neither a string nor a list of parts",
                "Pass a str or a list of parts.",
            )
        user = role == "user"
        self.expected = expected if user else None
        self.matched = 0
        dirty = False
        parts: list[Any] = content  # sorted by kind below, not by isinstance
        for pi, part in enumerate(parts):
            # Exact classes by identity first: no caller code runs (a dict lookup would call a
            # metaclass's __eq__), and an isinstance test that fails against a pydantic model
            # class costs a metaclass call (four of them for a media part).
            cls = type(part)
            if cls is TextPart:
                kind: int | None = _TEXT
            elif cls is ToolUsePart:
                kind = _TOOL_USE
            elif cls is ToolResultPart:
                kind = _TOOL_RESULT
            elif cls is ImagePart or cls is AudioPart or cls is FilePart:
                kind = _MEDIA_PART
            else:
                kind = _kind_of(part)
            if kind == _TEXT:
                if part.origin is not None or type(part.text) is not str:
                    dirty = self._untrusted_text(part, user, mi, pi) or dirty
            elif kind == _TOOL_USE:
                if user:
                    raise refuse(
                        "tool_use_outside_assistant",
                        part_path(mi, pi),
                        "tool_use part in a user message",
                        "Only the model's (assistant) turn may call tools; build it with "
                        "assistant_message_of(response).",
                    )
                self._tool_use(part, mi, pi)
            elif kind == _TOOL_RESULT:
                if not user:
                    raise refuse(
                        "tool_result_outside_user",
                        part_path(mi, pi),
                        "tool_result part in an assistant message",
                        "Send tool results in the user message that follows the assistant turn.",
                    )
                dirty = self._tool_result(part, mi, pi) or dirty
            elif kind == _MEDIA_PART:
                if not user:
                    raise refuse(
                        "media_outside_user",
                        part_path(mi, pi),
                        f"{part.type} part in an assistant message",
                        "Media goes in user messages (or in a tool_result inside one).",
                    )
                dirty = self._media(part, part.origin, mi, pi, None) or dirty
            elif kind == _REASONING:
                if user:
                    raise refuse(
                        "reasoning_outside_assistant",
                        part_path(mi, pi),
                        "reasoning part in a user message; reasoning is the model's own thinking",
                        "Keep reasoning parts in the assistant turn they came with "
                        "(assistant_message_of(response)); pass your own notes as text.",
                    )
                check_reasoning(part, part_path(mi, pi))
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
        check_origin(part.origin, where)
        if not isinstance(part.text, Untrusted) and part.origin is None:
            raise refuse("bad_part", where, "text is not a string", "Pass a str.")
        if not user:
            raise refuse(
                "untrusted_in_assistant",
                where,
                "untrusted text in an assistant message would pose as the model's own words",
                "Pass untrusted text in a user message or a tool result, where it is fenced.",
            )
        check_text_value(part.text, where)
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
        where = (mi, pi, ri)  # formatted only for a refusal (where_text)
        if origin is not None and not isinstance(origin, str):
            raise refuse("bad_origin", where, "origin is not a string", "Pass a str or None.")
        media_type: object = part.media_type  # read once: checked, noted and compared the same
        essence = media_essence(media_type)
        if essence is None:
            raise refuse(
                "bad_media_type",
                where,
                f"media type {media_type!r} is not a well-formed 'type/subtype'",
                "Give the exact type of the bytes, e.g. 'image/png' or 'application/pdf'.",
            )
        cls = type(part)
        kinds = self.media_kinds
        if kinds is not None:
            kind: object = part.type
            if cls in _MEDIA and type(kind) is str and type(media_type) is str:
                kinds.add((kind, media_type))
            else:
                self.media_kinds = None
        expected = _MODALITY.get(cls)
        if expected is not None and not essence.startswith(expected):
            raise refuse(
                "media_type_mismatch",
                where,
                f"{part.type} part with media type {media_type!r}",
                f"An {part.type} part needs an '{expected}*' type; use FilePart for other documents.",
            )
        if type(part) is FilePart and part.name is not None and type(part.name) is not str:
            check_file_name(part.name, lambda: where_text(where) + ".name")
        source = part.source
        if type(source) is RefSource:
            check_ref(source.ref, where)
            if origin is not None and not (ri is not None and is_minted_media_origin(origin)):
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
                at = where_text(where)
                raise OversizedInlinePartError(
                    f"{at}: inline media in this request adds up to {self.inline_total} "
                    f"bytes decoded, over the {self.max_total}-byte cap per request. Put the "
                    "bytes in the content store (store.put) and send RefSource parts naming "
                    "their addresses.",
                    code="oversized_inline_total",
                    path=at,
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
            check_provider_data(part.provider_data, f"{part_path(mi, pi)}.provider_data")
        # check_json_value's first test, made here so the common input (one small flat object)
        # needs neither its call nor a location function; the rest of it otherwise.
        if not flat_plain_json(tool_input):
            text = check_json_walked(
                tool_input, lambda: f"{part_path(mi, pi)}.input", in_tool_use=True
            )
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
        call_id = part.tool_use_id
        if not isinstance(call_id, str) or call_id not in self.declared:
            raise refuse(
                "orphan_tool_result",
                part_path(mi, pi),
                f"tool_result for {call_id!r}, which no earlier assistant message called",
                "Keep the assistant turn with the matching tool_use before its result (a "
                "compaction must not cut between them), or drop the result.",
                tool_use_id=call_id,
            )
        self._pair(call_id, mi, pi)
        origin = part.origin
        if origin is not None:
            check_origin(origin, part_path(mi, pi))
        content = part.content
        fence = False  # some text in the result must be fenced
        dirty = origin is not None  # the origin moves into the content
        if type(content) is str:
            fence = dirty
        elif isinstance(content, Untrusted):
            check_text_value(content, f"{part_path(mi, pi)}.content")
            fence = True
        elif isinstance(content, list):
            for ri, item in enumerate(content):
                if isinstance(item, TextPart):
                    if item.origin is not None or origin is not None or type(item.text) is not str:
                        at = part_path(mi, pi, ri)
                        check_origin(item.origin, at)
                        check_text_value(item.text, at)
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
