"""The canonical JSON of a request, fast: the exact string ``content.canonical_json`` gives, for the fence nonce.

``canonical_json`` dumps the request through pydantic (each part runs a Python serializer that
drops unset optional fields) and then sorts the keys; on a 1,000-message transcript that costs
more than validating it. The nonce needs only the string, so this module writes it directly from
the known part shapes with the C JSON encoder's own string escaping.

It is an optimisation, never a second definition: anything outside the shapes it knows (a field
added to a part, a value that pydantic would convert, an ``Untrusted`` in an odd place) falls back
to ``canonical_json`` itself, an import-time check switches the fast path off if the models'
fields no longer match, and a property test compares both on random requests.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from json.encoder import encode_basestring
from typing import Any

from loom_nb.content import (
    AudioPart,
    DataSource,
    FilePart,
    ImagePart,
    LlmRequest,
    Message,
    ReasoningPart,
    RefSource,
    TextPart,
    ToolResultPart,
    ToolSpec,
    ToolUsePart,
    canonical_json,
)
from loom_nb.taint import Untrusted

__all__ = ["canonical_message_json", "canonical_request_json", "canonical_request_tail"]

_EXPECTED_FIELDS: dict[type, tuple[str, ...]] = {
    LlmRequest: ("messages", "tools", "system", "settings", "output_schema"),
    Message: ("role", "content"),
    TextPart: ("type", "text", "origin"),
    ImagePart: ("type", "media_type", "source", "origin"),
    AudioPart: ("type", "media_type", "source", "origin"),
    FilePart: ("type", "media_type", "source", "name", "origin"),
    ToolUsePart: ("type", "id", "name", "input", "provider_data"),
    ToolResultPart: ("type", "tool_use_id", "content", "is_error", "origin"),
    ReasoningPart: ("type", "text", "signature", "redacted", "data", "provider_data"),
    RefSource: ("kind", "ref"),
    DataSource: ("kind", "data"),
}


def _shapes_match() -> bool:
    """Whether the content models still have exactly the fields this encoder writes."""
    if any(tuple(cls.model_fields) != fields for cls, fields in _EXPECTED_FIELDS.items()):  # type: ignore[attr-defined]
        return False
    probe = TextPart(text=Untrusted("v", "o"))
    return (
        canonical_json(probe)
        == '{"text":{"__loomUntrusted":{"origin":"o","value":"v"}},"type":"text"}'
    )


_FAST = _shapes_match()


class _Unusual(Exception):
    """Raised inside the encoder for a value it does not handle; the caller falls back."""


def canonical_request_json(
    request: LlmRequest, *, known_inputs: Mapping[int, str] | None = None
) -> str:
    """``canonical_json(request)``, computed without pydantic's serializer when the request allows it.

    ``known_inputs`` maps ``id(tool_use_part)`` to the canonical JSON of its input when the caller
    (the guard, which has just checked every input) already has it.
    """
    if _FAST:
        try:
            return _request(request, known_inputs or {})
        except _Unusual:
            pass
    return canonical_json(request)


_s = encode_basestring
# Built once: json.dumps/json.loads with arguments construct a new coder on every call.
_encode = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode
_decode = json.JSONDecoder().decode


def _str(value: object) -> str:
    if type(value) is not str:
        raise _Unusual
    return _s(value)


def _json(value: Any) -> str:
    """Plain JSON with string keys, sorted; anything pydantic would convert differently is unusual."""
    try:
        text = _encode(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise _Unusual from exc
    if _decode(text) != value:  # tuples, non-str keys: leave them to pydantic
        raise _Unusual
    return text


def canonical_message_json(message: Message, known_inputs: Mapping[int, str]) -> str:
    """The canonical JSON of one message, exactly as it appears inside ``canonical_request_json``."""
    if _FAST:
        try:
            return _message(message, known_inputs)
        except _Unusual:
            pass
    return canonical_json(message)


_NO_MESSAGES = '{"messages":[],'


def canonical_request_tail(request: LlmRequest) -> str:
    """What follows the message list in ``canonical_request_json(request)``, after its ``],``.

    The request's JSON is ``'{"messages":[' + ",".join(messages) + "]," + tail``: the sorted
    keys after ``messages`` (``output_schema`` and ``settings`` when set, ``system``, ``tools``)
    and the closing brace.
    """
    if _FAST:
        try:
            return _tail(request)
        except _Unusual:
            pass
    whole = canonical_json(request.model_copy(update={"messages": []}))
    if not whole.startswith(_NO_MESSAGES):  # pragma: no cover - the keys are sorted, messages first
        raise ValueError("the canonical JSON of a request does not start with its messages")
    return whole[len(_NO_MESSAGES) :]


def _request(request: LlmRequest, known: Mapping[int, str]) -> str:
    messages = ",".join([_message(m, known) for m in request.messages])
    return f'{{"messages":[{messages}],{_tail(request)}'


def _tail(request: LlmRequest) -> str:
    system = request.system
    system_text = "null" if system is None else _str(system)
    tools = ",".join([_tool(t) for t in request.tools])
    # Sorted keys: messages, output_schema, settings, system, tools; the optional two only when set.
    schema = request.output_schema
    schema_text = "" if schema is None else f'"output_schema":{_json(schema)},'
    settings = request.settings
    settings_text = (
        "" if settings is None else f'"settings":{_json(settings.model_dump(mode="json"))},'
    )
    return f'{schema_text}{settings_text}"system":{system_text},"tools":[{tools}]}}'


def _tool(tool: ToolSpec) -> str:
    if type(tool) is not ToolSpec:
        raise _Unusual
    return (
        f'{{"description":{_str(tool.description)},"input_schema":{_json(tool.input_schema)},'
        f'"name":{_str(tool.name)}}}'
    )


def _message(message: Message, known: Mapping[int, str]) -> str:
    if type(message) is not Message:
        raise _Unusual
    content = message.content
    if type(content) is str:
        body = _s(content)
    elif type(content) is list:
        body = "[" + ",".join([_part(p, known) for p in content]) + "]"
    else:
        raise _Unusual
    return f'{{"content":{body},"role":{_str(message.role)}}}'


def _text_value(text: object) -> str:
    if type(text) is str:
        return _s(text)
    if type(text) is Untrusted and type(text.origin) is str:
        value = text.value
        value_text = _s(value) if type(value) is str else _json(value)
        return f'{{"__loomUntrusted":{{"origin":{_s(text.origin)},"value":{value_text}}}}}'
    raise _Unusual


def _origin(origin: object) -> str:
    return "" if origin is None else f'"origin":{_str(origin)},'


def _provider_data(data: object) -> str:
    """``"provider_data":{...},`` for a dict of str to str; "" while None."""
    if data is None:
        return ""
    if type(data) is not dict or any(
        type(k) is not str or type(v) is not str for k, v in data.items()
    ):
        raise _Unusual
    return f'"provider_data":{_json(data)},'


def _source(source: object) -> str:
    if type(source) is RefSource:
        ref = source.ref
        size = ref.size
        if size is None:
            return f'{{"kind":"ref","ref":{{"address":{_str(ref.address)}}}}}'
        if type(size) is not int:
            raise _Unusual
        return f'{{"kind":"ref","ref":{{"address":{_str(ref.address)},"size":{size}}}}}'
    if type(source) is DataSource:
        return f'{{"data":{_str(source.data)},"kind":"data"}}'
    raise _Unusual


def _part(part: object, known: Mapping[int, str]) -> str:
    kind = type(part)
    if kind is TextPart:
        assert isinstance(part, TextPart)
        return f'{{{_origin(part.origin)}"text":{_text_value(part.text)},"type":"text"}}'
    if kind is ImagePart or kind is AudioPart:
        assert isinstance(part, ImagePart | AudioPart)
        return (
            f'{{"media_type":{_str(part.media_type)},{_origin(part.origin)}'
            f'"source":{_source(part.source)},"type":"{part.type}"}}'
        )
    if kind is FilePart:
        assert isinstance(part, FilePart)
        name = "" if part.name is None else f'"name":{_str(part.name)},'
        return (
            f'{{"media_type":{_str(part.media_type)},{name}{_origin(part.origin)}'
            f'"source":{_source(part.source)},"type":"file"}}'
        )
    if kind is ToolUsePart:
        assert isinstance(part, ToolUsePart)
        if type(part.input) is not dict:
            raise _Unusual
        input_text = known.get(id(part)) or _json(part.input)
        return (
            f'{{"id":{_str(part.id)},"input":{input_text},'
            f'"name":{_str(part.name)},{_provider_data(part.provider_data)}"type":"tool_use"}}'
        )
    if kind is ToolResultPart:
        assert isinstance(part, ToolResultPart)
        content = part.content
        if type(content) is list:
            body = "[" + ",".join([_part(p, known) for p in content]) + "]"
        else:
            body = _text_value(content)
        if type(part.is_error) is not bool:
            raise _Unusual
        error = "true" if part.is_error else "false"
        return (
            f'{{"content":{body},"is_error":{error},{_origin(part.origin)}'
            f'"tool_use_id":{_str(part.tool_use_id)},"type":"tool_result"}}'
        )
    if kind is ReasoningPart:
        assert isinstance(part, ReasoningPart)
        return _reasoning(part)
    raise _Unusual


def _reasoning(part: ReasoningPart) -> str:
    """A reasoning part; its unset optional fields are left out, as pydantic's dump does."""
    data = "" if part.data is None else f'"data":{_str(part.data)},'
    extra = part.provider_data
    if extra is None:
        provider = ""
    elif type(extra) is dict:
        provider = f'"provider_data":{_json(extra)},'
    else:
        raise _Unusual
    if type(part.redacted) is not bool:
        raise _Unusual
    redacted = "true" if part.redacted else "false"
    signature = "" if part.signature is None else f'"signature":{_str(part.signature)},'
    return (
        f'{{{data}{provider}"redacted":{redacted},{signature}'
        f'"text":{_str(part.text)},"type":"reasoning"}}'
    )
