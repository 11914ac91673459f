"""A model step's input as what changed since the previous model step, and the request's hash (issue 15).

Journaling every model call's whole request made a long agent run quadratic: turn ``t`` wrote
all ``2t`` messages again. A model step now journals its messages as a delta of the previous
model step of the same execution::

    {"messages": {"__loomMessages": {"base": 4, "keep": 9, "append": [<message>, ...]}}, "tools": ...}

meaning "the first 9 messages of the request journaled at position 4, then these". The first
model call, one whose messages share no prefix with the previous one (after compaction), or one
with no known predecessor journals its messages in full, as before. ``Journal.events`` expands
deltas back into whole requests (what views and the replay stepper read); recordings keep the
delta form, which stays self-contained because a base is always an earlier step of the same
execution (a fork copies its prefix).

The step's input hash is the hash of the WHOLE request, computed incrementally: each message is
hashed once (``sha256`` of its canonical JSON, cached per message object along the transcript),
the message hashes are chained (``chain[i] = sha256(chain[i-1] + hash[i])``), and the input hash
is ``sha256`` over the chain's last link, the canonical JSON of the rest of the request (tools,
system, settings) and the provider's declared capabilities. So replay detects an edited message
anywhere in the transcript (``input_changed``), and a replay on a provider that declares other
capabilities diverges instead of silently rebuilding a different transcript (issue 15, item 5).
Per turn, hashing and the journaled delta cost what the turn added, not the transcript's length.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import marshal
from dataclasses import dataclass, field
from typing import Any, get_args

from loom_nb.capabilities import Capabilities
from loom_nb.content import (
    LlmRequest,
    LlmResponse,
    Message,
    StopReason,
    ToolCall,
    ToolSpec,
    Usage,
    canonical_json,
)
from loom_nb.errors import JournalError
from loom_nb.guard import EMPTY_JSON_SEEN, Seen
from loom_nb.journal._codec import encode_text, encode_value
from loom_nb.journal._timeline import Event
from loom_nb.settings import ModelSettings

__all__ = [
    "DELTA_MARKER",
    "EncodedInput",
    "ModelBase",
    "ModelInput",
    "ModelStepInput",
    "expand_messages",
    "expanded_events",
    "model_input",
]

DELTA_MARKER = "__loomMessages"
"""Key of the object that stands for a model step's messages journaled as a delta."""

_MEDIA_KEY = '"media_type":'
"""In a message's canonical JSON whenever the message holds a media part (``ImagePart``,
``AudioPart``, ``FilePart``: each has a ``media_type``); text that merely contains the words is
escaped inside a JSON string and never matches, a tool input that has the key only costs a walk."""

_EMPTY_CHAIN = "sha256:" + hashlib.sha256(b"").hexdigest()


def _sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class ModelBase:
    """The last model request an execution journaled or replayed: what the next one is a delta of.

    Kept by the execution (not by one effect object), so every model call on it, live or
    replayed, in whatever effect, computes its delta against the same predecessor.
    """

    position: int
    """The position of the step that carried the request."""
    seen: Seen = field(default_factory=lambda: Seen(json=True))
    """The request's messages (the objects and their part lists, so an unchanged prefix is found
    by identity and a part list changed in place since is not taken for unchanged)."""
    hashes: list[str] = field(default_factory=list)
    """Each message's content hash."""
    chain: list[str] = field(default_factory=list)
    """``chain[i]``: the running hash of messages ``0..i`` (the request hash's message part)."""
    rest: dict[str, Any] | None = None
    """The request without its messages, as JSON values (tools, system, settings, schema)."""
    declared: Any = None
    """The provider's declared capabilities as JSON values."""
    tail: str = ""
    """The canonical JSON of ``{"capabilities": declared, "request": rest}`` (hashed last)."""
    around: tuple[str, str] = ("{", "}")
    """The journaled input's canonical JSON before and after its messages' value (the fields of
    ``rest``, in sorted key order around ``"messages"``), made once per ``rest``."""
    plain: bool = True
    """Whether ``around`` holds no ``NaN`` / ``Infinity`` (see ``ModelInput.assembled``)."""
    rest_key: _RestKey | None = None
    """What ``rest`` and ``declared`` were dumped from (``_rest_key``), so the next request with
    the same tools, system and settings, on the same declared patterns, reuses them instead of
    dumping them again."""
    media: bool = True
    """False when no message of the request holds a media part (its canonical JSON names no
    ``media_type``), so a live step need not walk the request for pins or for the capability
    check (``MediaOnce.none``); True when one may."""


class ModelStepInput(dict[str, Any]):
    """The whole request as a dict, for a wrapper around an execution that reads step inputs.

    ``Execution.execute`` recognises it and journals the model step as a delta with the whole
    request's hash, exactly as when the effect calls the execution directly.
    """

    def __init__(self, request: LlmRequest, capabilities: Any) -> None:
        super().__init__(request.model_dump(mode="json"))
        self.request = request
        self.capabilities = capabilities


@dataclass
class ModelInput:
    """A model request prepared for journaling: its input hash, the new base, and the input."""

    input_hash: str
    base: ModelBase
    previous: ModelBase | None
    rest: dict[str, Any]
    texts: list[str]
    """Canonical JSON of each message from ``keep`` on (what the delta appends)."""
    keep: int

    def journaled(self) -> dict[str, Any]:
        """The step input as journaled, as a value (what ``journaled_text`` is the JSON of)."""
        appended = [json.loads(text) for text in self.texts]
        value = dict(self.rest)
        if self.previous is not None and self.keep > 0:
            value["messages"] = {
                DELTA_MARKER: {
                    "append": appended,
                    "base": self.previous.position,
                    "keep": self.keep,
                }
            }
        else:
            value["messages"] = appended
        return value

    def journaled_text(self, step_id: str) -> EncodedInput:
        """The step input's canonical JSON, assembled from the messages' canonical JSON already
        made for hashing (built only when the step runs live; equal to encoding ``journaled()``:
        sorted keys, compact separators, UTF-8 kept)."""
        text = self.assembled()
        if text is None:
            # Maybe a non-finite float, which the journal refuses (it is not JSON): the general
            # encoder decides and names the step (a string that merely says so costs this once).
            text = encode_text(self.journaled(), step_id=step_id, what="input")
        return EncodedInput(text, self)

    def assembled(self) -> str | None:
        """The input's canonical JSON assembled from the texts the hashing made, or None when it
        may hold a non-finite float (``journaled_text`` then asks the general encoder). Replay
        compares it with the recorded input (``Execution``), so a served step reads only the
        recorded output."""
        appended = "[" + ",".join(self.texts) + "]"
        if self.previous is not None and self.keep > 0:
            messages = (
                '{"' + DELTA_MARKER + '":{"append":' + appended
                + ',"base":' + str(self.previous.position)
                + ',"keep":' + str(self.keep) + "}}"
            )  # fmt: skip
        else:
            messages = appended
        if not self.base.plain or "NaN" in messages or "Infinity" in messages:
            return None
        before, after = self.base.around
        return before + messages + after


class EncodedInput:
    """A step input given as its canonical JSON text (the execution journals ``text`` as is).

    ``value()`` is the input as a value, made only if someone asks (the model step's function
    never reads its input: the request travels beside it).
    """

    __slots__ = ("_source", "text")

    def __init__(self, text: str, source: ModelInput) -> None:
        self.text = text
        self._source = source

    def value(self) -> dict[str, Any]:
        return self._source.journaled()


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
"""The encoder of ``canonical_json`` (made once: ``json.dumps`` with options builds one a call)."""


_KEYS: dict[str, str] = {}
"""The canonical JSON of each request field's name (a handful of names, encoded once)."""


def _key(name: str) -> str:
    text = _KEYS.get(name)
    if text is None:
        text = _KEYS[name] = _CANONICAL.encode(name)
    return text


def model_input(
    request: LlmRequest, previous: ModelBase | None, position: int, capabilities: Any
) -> ModelInput:
    """Hash ``request`` against ``previous`` (the execution's last model request) and plan its delta."""
    if previous is not None and previous.position >= position:
        previous = None  # rewound: the remembered request is not before this step
    messages: list[Message] = request.messages  # only read here (the walk keeps its own list)
    if type(messages) is not list:
        messages = list(messages)
    keep = 0
    hashes: list[str] = []
    chain: list[str] = []
    seen = EMPTY_JSON_SEEN
    if previous is not None:
        seen = previous.seen
        # The common case, an agent turn, is a prefix compared in C.
        keep = len(seen) if seen.prefix_of(messages) else seen.common(messages)
        # The execution replaces its base by this call's (or drops it), so the lists are
        # extended in place when all of them are kept: copying would cost the transcript.
        hashes = previous.hashes if keep == len(previous.hashes) else previous.hashes[:keep]
        chain = previous.chain if keep == len(previous.chain) else previous.chain[:keep]
    texts: list[str] = []
    # A kept prefix holds media only if the previous request did (it is a prefix of that one).
    media = previous is not None and keep > 0 and previous.media
    walked = keep  # messages from here on are new objects (or changed since): tracked afresh
    same_prefix = previous is not None
    known = previous.hashes if previous is not None else []
    known_count = len(known)  # before ``hashes`` (maybe the same list) grows
    for index in range(keep, len(messages)):
        text = canonical_json(messages[index])
        if not media and _MEDIA_KEY in text:  # every media part's JSON has it (a test checks)
            media = True
        digest = _sha(text)
        if same_prefix and index < known_count and known[index] == digest:
            keep = index + 1  # equal content in a new object: still shared
        else:
            same_prefix = False
            texts.append(text)
        hashes.append(digest)
        chain.append(_sha((chain[-1] if chain else _EMPTY_CHAIN) + digest))
    # The rest of the request (tools, system, settings, schema) as JSON values: one dump that
    # leaves the messages out (the same values a dump of the request with no messages gives),
    # or the previous request's when it was made of the very same, unchanged, objects.
    rest_key = _rest_key(request, capabilities)
    if (
        previous is not None
        and previous.rest is not None
        and _same_rest(previous.rest_key, rest_key)
    ):
        rest, declared = previous.rest, previous.declared
    else:
        rest = request.model_dump(mode="json", exclude={"messages"})
        declared = (
            capabilities.model_dump(mode="json") if hasattr(capabilities, "model_dump") else None
        )
    if (
        previous is not None
        and (previous.rest is rest or previous.rest == rest)
        and (previous.declared is declared or previous.declared == declared)
    ):
        tail, around, plain = previous.tail, previous.around, previous.plain  # the same fields
    else:
        tail = _CANONICAL.encode({"capabilities": declared, "request": rest})
        around = _around({key: _CANONICAL.encode(value) for key, value in rest.items()})
        plain = not any("NaN" in text or "Infinity" in text for text in around)
    input_hash = _sha((chain[-1] if chain else _EMPTY_CHAIN) + tail)
    base = ModelBase(
        position=position,
        seen=seen.grown(messages, walked),
        hashes=hashes,
        chain=chain,
        rest=rest,
        declared=declared,
        tail=tail,
        around=around,
        plain=plain,
        rest_key=rest_key,
        media=media,
    )
    return ModelInput(input_hash, base, previous, rest, texts, keep)


def model_output(value: Any, *, step_id: str, what: str = "output") -> tuple[str, Any]:
    """A live model call's response as journaled, and the value the call returns.

    The response's own JSON (``model_dump_json``: pydantic's serializer, field order, a tool
    call's input and ``provider_data`` in the order the vendor sent them) is journaled, and the
    call returns what a replay of the step builds from that text, so a live answer equals its
    replay, key order included. A response made only of values that JSON carries exactly
    (``_reads_back``: exact ``str``, ``int``, ``bool``, ``None``, finite ``float``, lists and
    ``str``-keyed dicts of those, in the fields' own types) is returned as it is: validating its
    text again would build an equal copy (about a tenth of a scripted turn). Any other is validated
    from the text and kept when it reads back equal. Anything else takes ``encode_value``'s
    canonical JSON, as every pydantic output of a step does (the same JSON values; a lone
    surrogate escaped, which pydantic's serializer refuses): a non-finite float or a datetime,
    which that JSON writes as null or as text, and a structured ``output``, which is never
    serialized.
    """
    if type(value) is LlmResponse and value.output is None:
        try:
            text = value.model_dump_json()
            if _reads_back(value):
                return text, value
            served = LlmResponse.model_validate_json(text)
        except ValueError:  # pydantic's serialization and validation errors
            pass
        else:
            if served == value:
                return text, served
    return encode_value(value, step_id=step_id, what=what)


_STOP_REASONS: frozenset[str] = frozenset(get_args(StopReason))
_LEAVES: frozenset[type] = frozenset({str, int, bool, type(None)})


def _reads_back(response: LlmResponse) -> bool:
    """Whether validating ``response``'s JSON builds an equal response, told from its values alone.

    True only when every field holds its declared type exactly (a model made with
    ``model_construct`` may hold anything) and every free-form value (``provider_data``, a tool
    call's ``input``) is plain JSON that reads back as itself (``_plain``). Reasoning parts are
    not looked into: a response with any is validated instead. ``LlmResponse``'s fields are
    listed here, so a test fails when one is added without this check learning it.
    """
    usage = response.usage
    calls = response.tool_calls
    reasoning: object = response.reasoning
    stop: object = response.stop_reason
    return (
        type(reasoning) is list
        and not reasoning
        and type(response.content) is str
        and type(stop) is str
        and stop in _STOP_REASONS
        and type(usage) is Usage
        and all(type(count) is int for count in usage.__dict__.values())
        and _str_or_none(response.model)
        and _str_or_none(response.provider)
        and type(response.provider_data) is dict
        and _plain(response.provider_data)
        and type(calls) is list
        and all(map(_call_reads_back, calls))
    )


def _call_reads_back(call: object) -> bool:
    if type(call) is not ToolCall:  # checked first: nothing of another class is read
        return False
    data: object = call.provider_data
    return (
        type(call.id) is str
        and type(call.name) is str
        and type(call.input) is dict
        and _plain(call.input)
        and (data is None or (type(data) is dict and all(map(_str_pair, data.items()))))
    )


def _str_pair(item: tuple[object, object]) -> bool:
    return type(item[0]) is str and type(item[1]) is str


def _str_or_none(value: object) -> bool:
    return value is None or type(value) is str


def _plain(value: object) -> bool:
    """Whether ``value`` is JSON that reads back as itself: exact ``str``, ``int``, ``bool`` and
    ``None``, finite floats, lists of those and dicts of ``str`` keys to those (a tuple, an
    ``int`` key, a subclass or a NaN would come back as something else)."""
    kind = type(value)
    if kind in _LEAVES:
        return True
    if kind is dict:
        return all(type(key) is str for key in value) and all(  # type: ignore[attr-defined]
            map(_plain, value.values())  # type: ignore[attr-defined]
        )
    if kind is list:
        return all(map(_plain, value))  # type: ignore[call-overload]
    return kind is float and value - value == 0.0  # type: ignore[operator]


def _around(fields: dict[str, str]) -> tuple[str, str]:
    """The input's canonical JSON before and after the messages' value, from the canonical
    JSON of each other field (sorted keys, compact separators)."""
    keys = sorted([*fields, "messages"])
    at = keys.index("messages")
    before = "".join(_key(k) + ":" + fields[k] + "," for k in keys[:at])
    after = "".join("," + _key(k) + ":" + fields[k] for k in keys[at + 1 :])
    return "{" + before + _key("messages") + ":", after + "}"


_RestKey = tuple[Any, bytes]

_CAPABILITY_FIELDS = tuple(Capabilities.model_fields)


def _rest_key(request: LlmRequest, capabilities: object) -> _RestKey | None:
    """The request's fields other than messages and the provider's declared patterns as
    ``marshal`` bytes (the tools' names, descriptions and schemas, the system prompt, the output
    schema, the lists of exactly a ``Capabilities``, or None for none) with its settings object
    (frozen, of immutable fields), or None when a field is of a kind whose bytes say nothing (a
    subclass, an untrusted system prompt, a value that is not plain JSON, capabilities of another
    class, whose dump is its own code). The bytes are taken every call (a schema or a pattern
    list can be changed in place) and compared by bytes and identity only (``_same_rest``), never
    by a value's ``__eq__``, as the guard's walk caches are; a menu rebuilt each turn from equal
    tools still matches."""
    tools, settings = request.tools, request.settings
    if not (settings is None or type(settings) is ModelSettings):
        return None
    if not all(type(tool) is ToolSpec for tool in tools):  # frozen; only the schema is mutable
        return None
    if capabilities is None:
        patterns = None
    elif type(capabilities) is Capabilities:  # frozen; only its lists are mutable
        patterns = [getattr(capabilities, name) for name in _CAPABILITY_FIELDS]
    else:
        return None
    menu = [(t.name, t.description, t.input_schema) for t in tools]
    try:  # exact built-in types only: a str subclass or an Untrusted prompt raises
        data = marshal.dumps([menu, request.system, request.output_schema, patterns], 2)
    except ValueError:
        return None
    return settings, data


def _same_rest(old: _RestKey | None, new: _RestKey | None) -> bool:
    """Whether two rest keys are the same settings object and the same bytes."""
    return old is not None and new is not None and old[0] is new[0] and old[1] == new[1]


def expand_messages(value: Any, earlier: dict[int, list[Any]], *, where: str) -> list[Any] | None:
    """The whole message list a journaled model input stands for (None: not a model input).

    ``earlier`` maps positions to the message lists expanded so far (in log order).
    """
    if not isinstance(value, dict):
        return None
    messages = value.get("messages")
    if isinstance(messages, list):
        return messages
    if not (isinstance(messages, dict) and isinstance(messages.get(DELTA_MARKER), dict)):
        return None
    delta = messages[DELTA_MARKER]
    base, keep, append = delta.get("base"), delta.get("keep"), delta.get("append")
    if not (
        isinstance(base, int)
        and isinstance(keep, int)
        and isinstance(append, list)
        and base in earlier
        and 0 <= keep <= len(earlier[base])
    ):
        raise JournalError(
            f"{where}: the model input is a delta of position {base!r} keeping {keep!r} messages, "
            "but no such earlier request is in the log; the journal is damaged.",
            code="journal_corrupt",
        )
    return earlier[base][:keep] + append


def expanded_events(
    events: list[Event], earlier: dict[int, list[Any]] | None = None
) -> list[Event]:
    """``events`` with each model step's delta-journaled messages expanded to the whole list.

    ``earlier`` carries the expansions of events already seen (a watch passes its own, so the
    events it delivers one batch at a time read whole too).
    """
    if earlier is None:
        earlier = {}
    out: list[Event] = []
    for event in events:
        payload = event.payload
        if (
            event.kind in ("step_completed", "step_failed")
            and event.position is not None
            and isinstance(payload, dict)
        ):
            step_input = payload.get("input")
            where = f"execution {event.execution_id!r}, event {event.seq}"
            messages = expand_messages(step_input, earlier, where=where)
            if messages is not None and isinstance(step_input, dict):
                earlier[event.position] = messages
                if messages is not step_input.get("messages"):
                    full = {**payload, "input": {**step_input, "messages": messages}}
                    event = dataclasses.replace(event, payload=full)
        out.append(event)
    return out
