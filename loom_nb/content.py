"""The content model: messages whose content is a string or a list of typed parts (ADR 0120 decisions 1, 3, 8).

Decision 1: content is ``str | list[Part]``, not always-parts. A text-only caller keeps sending
strings and they are passed through untouched, so a string request serializes exactly as it did
before parts existed (``tests/golden/string_request.json`` pins it) and old recordings keep
matching. Code that needs text reads content through ``text_of`` / ``to_parts`` /
``has_structured_parts``, never by coercing ``.content`` to ``str`` (a test walks the source to
enforce this; see "Guard against raw reads" in the ADR).

Decision 3: parts are ``text``, ``image``, ``audio``, ``file``, ``tool_use``, ``tool_result`` and
(issue 14) ``reasoning``, one pydantic union discriminated on ``type``. Media carries a
``source``: a ``RefSource`` naming a blob in the content store by address (the claim-check,
decision 4) or a ``DataSource`` with base64 bytes. Decision 8: the response keeps ``content``
(text) and ``tool_calls``; ``assistant_message_of`` builds the assistant turn, text first and then
one ``tool_use`` per call.

Reasoning (issue 14). A model's thinking comes back as ``LlmResponse.reasoning``: one
``ReasoningPart`` per vendor block (Anthropic ``thinking`` / ``redacted_thinking``, an
OpenAI-compatible ``reasoning_content``, Gemini ``thought`` parts, an OpenAI Responses reasoning
item). Vendors that sign their thinking require it back unchanged, first in the assistant turn,
or the next call is a 400; so ``assistant_message_of`` puts the reasoning parts first and the
mappers send them back as they came. A reasoning part belongs to the model's turn only (the
guard refuses it elsewhere), and it is read only by the mapper of the vendor that wrote it
(``provider_data["vendor"]``): another vendor's mapper leaves it out of the wire body, since a
signature means nothing to anyone else.

Optional fields that are unset (``origin``, a file's ``name``, a ref's ``size``, a tool call's
``provider_data``) are left out of the serialized form, so adding such a field never changes the
bytes (and hashes) of requests that do not use it.
"""

from __future__ import annotations

import json
import os
import re
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SerializerFunctionWrapHandler,
    StrictInt,
    Tag,
    ValidationError,
    field_validator,
    model_serializer,
)

from loom_nb._strict import StrictModel
from loom_nb._strict import content_error as content_error
from loom_nb.errors import ContentValidationError
from loom_nb.settings import ModelSettings
from loom_nb.taint import UNTRUSTED_MARKER, Untrusted, mark_untrusted_values

if TYPE_CHECKING:
    from loom_nb.store import ContentStore

__all__ = [
    "AudioPart",
    "ContentRef",
    "DataSource",
    "FilePart",
    "ImagePart",
    "LlmRequest",
    "LlmResponse",
    "MediaPart",
    "MediaSource",
    "Message",
    "MessageContent",
    "Part",
    "ReasoningPart",
    "RefSource",
    "StopReason",
    "TextPart",
    "ToolCall",
    "ToolResultContent",
    "ToolResultPart",
    "ToolSpec",
    "ToolUsePart",
    "Usage",
    "assistant_message_of",
    "canonical_json",
    "has_structured_parts",
    "parse_request",
    "text_of",
    "to_parts",
]

ADDRESS_PATTERN = re.compile(r"sha256:[0-9a-f]{64}")
"""A content address: the algorithm tag and the lowercase hex digest of the bytes."""


class _Model(StrictModel):
    """Frozen, strict about unknown fields; the base of every content value (bad input: ContentValidationError)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class _OmitNone(_Model):
    """Leaves optional fields out of the serialized form while they are None."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _drop_unset(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for key in type(self)._omit_when_none:
                if data.get(key, 0) is None:
                    del data[key]
        return data


class ContentRef(_OmitNone):
    """A claim-check for bytes in the content store."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset({"size"})

    address: str
    """``sha256:<64 lowercase hex>`` of the bytes."""
    size: Annotated[StrictInt, Field(ge=0)] | None = None
    """Declared size in bytes, checked against the blob when it is resolved; absent if unknown."""

    @field_validator("address")
    @classmethod
    def _check_address(cls, value: str) -> str:
        if not ADDRESS_PATTERN.fullmatch(value):
            raise ValueError("an address looks like 'sha256:' followed by 64 lowercase hex digits")
        return value


class RefSource(_Model):
    """Media held in the content store, named by address (resolved just before the provider call)."""

    kind: Literal["ref"] = "ref"
    """Discriminator: always ``"ref"``."""
    ref: ContentRef
    """The address (and optionally the size) of the blob."""


class DataSource(_Model):
    """Media carried inline as base64 (capped by the guard: MAX_INLINE_BYTES per part)."""

    kind: Literal["data"] = "data"
    """Discriminator: always ``"data"``."""
    data: str
    """The bytes, base64-encoded (standard alphabet, padded)."""


MediaSource: TypeAlias = Annotated[RefSource | DataSource, Field(discriminator="kind")]


class TextPart(_OmitNone):
    """Text. Untrusted when ``origin`` is set or ``text`` is an ``Untrusted`` value."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset({"origin"})

    type: Literal["text"] = "text"
    """Discriminator: always ``"text"``."""
    text: str | Untrusted
    """The text itself."""
    origin: str | None = None
    """Where untrusted text came from (``"tool:web_fetch"``); None for the application's own text."""


class ImagePart(_OmitNone):
    """An image (``image/png``, ``image/jpeg``, ...)."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset({"origin"})

    type: Literal["image"] = "image"
    """Discriminator: always ``"image"``."""
    media_type: str
    """The image's media type; the guard requires ``image/*``."""
    source: MediaSource
    """Where the bytes are: a store ref or inline base64."""
    origin: str | None = None
    """Set when an untrusted party supplied the image; providers then fence it."""

    @classmethod
    def from_path(
        cls,
        path: str | os.PathLike[str],
        *,
        store: ContentStore | None = None,
        tenant: str = "notebook",
        origin: str | None = None,
    ) -> ImagePart:
        """The image at ``path``, typed from its bytes (Pillow); inline to the cap, by ref above it."""
        from loom_nb.media import image_from_path

        return image_from_path(path, store=store, tenant=tenant, origin=origin)

    @classmethod
    def from_bytes(
        cls,
        data: bytes,
        media_type: str | None = None,
        *,
        store: ContentStore | None = None,
        tenant: str = "notebook",
        origin: str | None = None,
    ) -> ImagePart:
        """Image bytes as a part; a ``media_type`` given must agree with what the bytes are."""
        from loom_nb.media import image_from_bytes

        return image_from_bytes(data, media_type, store=store, tenant=tenant, origin=origin)

    @classmethod
    def from_pil(
        cls,
        image: Any,
        *,
        format: str = "PNG",
        store: ContentStore | None = None,
        tenant: str = "notebook",
        origin: str | None = None,
    ) -> ImagePart:
        """A ``PIL.Image.Image`` encoded as ``format`` (PNG by default) and made a part."""
        from loom_nb.media import image_from_pil

        return image_from_pil(image, format=format, store=store, tenant=tenant, origin=origin)


class AudioPart(_OmitNone):
    """An audio clip (``audio/wav``, ``audio/mpeg``, ...)."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset({"origin"})

    type: Literal["audio"] = "audio"
    """Discriminator: always ``"audio"``."""
    media_type: str
    """The clip's media type; the guard requires ``audio/*``."""
    source: MediaSource
    """Where the bytes are: a store ref or inline base64."""
    origin: str | None = None
    """Set when an untrusted party supplied the clip; providers then fence it."""

    @classmethod
    def from_path(
        cls,
        path: str | os.PathLike[str],
        *,
        store: ContentStore | None = None,
        tenant: str = "notebook",
        origin: str | None = None,
    ) -> AudioPart:
        """The audio at ``path`` (WAV, MP3, AAC, OGG, FLAC, M4A, WebM), typed from its bytes."""
        from loom_nb.media import audio_from_path

        return audio_from_path(path, store=store, tenant=tenant, origin=origin)


class FilePart(_OmitNone):
    """A document such as a PDF (``application/pdf``) or plain text."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset({"origin", "name"})

    type: Literal["file"] = "file"
    """Discriminator: always ``"file"``."""
    media_type: str
    """The document's media type (any well-formed type)."""
    source: MediaSource
    """Where the bytes are: a store ref or inline base64."""
    name: str | None = None
    """A file name shown to the model (dropped by the guard when the part is untrusted)."""
    origin: str | None = None
    """Set when an untrusted party supplied the file; providers then fence it."""

    @classmethod
    def from_path(
        cls,
        path: str | os.PathLike[str],
        *,
        store: ContentStore | None = None,
        tenant: str = "notebook",
        origin: str | None = None,
        name: str | None = None,
    ) -> FilePart:
        """The document at ``path`` (PDF, UTF-8 text ...), typed from its bytes, named after it."""
        from loom_nb.media import file_from_path

        return file_from_path(path, store=store, tenant=tenant, origin=origin, name=name)


MediaPart: TypeAlias = ImagePart | AudioPart | FilePart
"""The parts that carry bytes."""

ResultPart: TypeAlias = Annotated[
    TextPart | ImagePart | AudioPart | FilePart, Field(discriminator="type")
]

ToolResultContent: TypeAlias = str | Untrusted | list[ResultPart]
"""What a tool result holds: text, an untrusted value, or text and media parts."""


def _input_kind(value: Any) -> str:
    """Which branch of ``ToolInput`` a value takes: an ``Untrusted`` (or its marker) or a plain dict."""
    if isinstance(value, Untrusted):
        return "untrusted"
    if isinstance(value, dict) and len(value) == 1 and UNTRUSTED_MARKER in value:
        return "untrusted"
    return "dict"


ToolInput: TypeAlias = Annotated[
    Annotated[dict[str, Any], Tag("dict")] | Annotated[Untrusted, Tag("untrusted")],
    Discriminator(_input_kind),
]
"""A tool call's input: a JSON object, or an ``Untrusted`` wrapping one.

Tagged, so a plain dict is validated as a dict alone: a plain union would also try every dict
as an ``Untrusted`` (a model with its own ``__init__``) and build a refusal for it, which cost a
tool call more than the rest of its validation."""


class ToolUsePart(_OmitNone):
    """A tool call the model made; appears only in assistant messages."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset({"provider_data"})

    type: Literal["tool_use"] = "tool_use"
    """Discriminator: always ``"tool_use"``."""
    id: str | Untrusted
    """The call's id, echoed by the matching ``tool_result``."""
    name: str | Untrusted
    """The tool's name."""
    input: ToolInput = Field(default_factory=dict)
    """The call's arguments (a JSON object)."""
    provider_data: dict[str, str] | None = None
    """Opaque vendor data that must travel with the call (e.g. Gemini's thought signature).

    Only the mapper of the vendor that wrote it reads it; it is never shown to the model as text,
    and it is left out of the serialized form while None.
    """

    @field_validator("input", mode="after")
    @classmethod
    def _restore_marks(cls, value: Any) -> Any:
        return mark_untrusted_values(value)


class ToolResultPart(_OmitNone):
    """The answer to one tool call; appears only in user messages, after the call's assistant turn."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset({"origin"})

    type: Literal["tool_result"] = "tool_result"
    """Discriminator: always ``"tool_result"``."""
    tool_use_id: str
    """The ``id`` of the ``tool_use`` this answers."""
    content: ToolResultContent
    """The result: text, an untrusted value, or a list of text and media parts."""
    is_error: bool = False
    """True when the tool failed or the call was refused; the model sees it as an error."""
    origin: str | None = None
    """Set when the whole result is untrusted (e.g. a tool declared untrusted)."""


class ReasoningPart(_OmitNone):
    """The model's thinking (or its summary); appears only in assistant messages, before the answer.

    Vendors that sign their reasoning (Anthropic, Gemini, OpenAI Responses) require the part back
    byte for byte on the next turn; only the mapper of the vendor that wrote it reads it. Unset
    optional fields are left out of the serialized form.
    """

    _omit_when_none: ClassVar[frozenset[str]] = frozenset({"signature", "data", "provider_data"})

    type: Literal["reasoning"] = "reasoning"
    """Discriminator: always ``"reasoning"``."""
    text: str = ""
    """The visible thinking or its summary ("" when the vendor shows none, e.g. redacted)."""
    signature: str | None = None
    """The vendor's signature over the thinking (Anthropic ``signature``, Gemini ``thoughtSignature``)."""
    redacted: bool = False
    """True when the vendor withheld the thinking and sent only an opaque ``data`` payload."""
    data: str | None = None
    """An opaque payload sent back unchanged (Anthropic ``redacted_thinking.data``, OpenAI
    Responses ``encrypted_content``)."""
    provider_data: dict[str, Any] | None = None
    """Other vendor metadata, plain JSON: ``vendor`` (who produced it: ``"anthropic"``,
    ``"openai"``, ``"gemini"``), item ids, the wire field it came in."""


Part: TypeAlias = Annotated[
    TextPart | ImagePart | AudioPart | FilePart | ToolUsePart | ToolResultPart | ReasoningPart,
    Field(discriminator="type"),
]
"""Any content part, discriminated by ``type``."""

MessageContent: TypeAlias = str | list[Part]
"""A message's content: a plain string (first-class) or a list of parts."""


class Message(_Model):
    """One turn of a conversation. There is no tool role: results are parts of a user message."""

    role: Literal["user", "assistant"]
    """Who speaks: ``"user"`` (the application, tool results) or ``"assistant"`` (the model)."""
    content: MessageContent
    """A string, or a list of parts."""


class ToolSpec(_Model):
    """A tool on the menu sent to the model."""

    name: str
    """The tool's name, as the model will call it."""
    description: str
    """What the tool does, for the model."""
    input_schema: dict[str, Any]
    """JSON Schema of the tool's input object."""


class LlmRequest(_OmitNone):
    """What is sent to a model: messages, the tool menu, the system prompt, settings, output schema.

    ``settings`` and ``output_schema`` are left out of the serialized form while None, so a
    request that uses neither serializes (and hashes) exactly as before they existed.
    """

    _omit_when_none: ClassVar[frozenset[str]] = frozenset({"settings", "output_schema"})

    messages: list[Message]
    """The conversation so far."""
    tools: list[ToolSpec] = Field(default_factory=list)
    """The tools the model may call."""
    system: str | Untrusted | None = None
    """The system prompt (never untrusted: the guard refuses an untrusted one)."""
    settings: ModelSettings | None = None
    """Generation settings (max tokens, temperature ...); providers merge their own defaults
    under these and a call's ``settings=`` over them. An empty ``ModelSettings()`` becomes None."""
    output_schema: dict[str, Any] | None = None
    """The JSON Schema the answer must match (set from ``output_type=``); providers send it in
    the vendor's native structured-output mode. Part of the journaled request, so replay is
    exact and a changed schema diverges."""

    @field_validator("settings", mode="after")
    @classmethod
    def _empty_settings_are_none(cls, value: ModelSettings | None) -> ModelSettings | None:
        return None if value is not None and value.is_empty() else value


class ToolCall(_OmitNone):
    """A tool call in a model's response."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset({"provider_data"})

    id: str
    """The call's id (providers synthesize one when the vendor gives none)."""
    name: str
    """The tool called."""
    input: dict[str, Any] = Field(default_factory=dict)
    """The arguments, parsed from the vendor's JSON."""
    provider_data: dict[str, str] | None = None
    """Opaque vendor data that must travel with the call (e.g. Gemini's thought signature).

    ``assistant_message_of`` copies it onto the ``tool_use``; it is never shown to the model as
    text, and it is left out of the serialized form while None.
    """


class Usage(_Model):
    """Token counts reported by the vendor (zero when it reported none)."""

    input_tokens: int = 0
    """Tokens read, including cached ones."""
    output_tokens: int = 0
    """Tokens generated."""


StopReason: TypeAlias = Literal[
    "end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", "pause_turn", "other"
]
"""Why the model stopped, in one vocabulary across vendors (``"other"`` keeps the raw one in ``provider_data``)."""


class LlmResponse(_Model):
    """A model's answer: its text, its tool calls and its reasoning (decision 8: no derived parts field).

    ``reasoning`` is left out of the serialized form while empty, so responses without thinking
    keep the bytes (and hashes) they had before the field existed.
    """

    content: str = ""
    """The text the model produced."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """The tool calls it made, in order."""
    stop_reason: StopReason = "end_turn"
    """Why it stopped."""
    usage: Usage = Field(default_factory=Usage)
    """Token counts."""
    model: str | None = None
    """The model id the vendor reported."""
    provider_data: dict[str, Any] = Field(default_factory=dict)
    """Vendor fields loom_nb does not model (raw stop reason, ids, thought signatures ...), kept rather than lost."""
    output: Any = Field(default=None, exclude=True)
    """The validated structured output (an instance of the ``output_type`` asked for), or None.

    Never serialized: the journal keeps the raw text in ``content`` and a replay validates it
    again, so the recorded response is the same with or without structured output."""
    reasoning: list[ReasoningPart] = Field(default_factory=list)
    """The model's thinking, one part per vendor block, in order (empty when it showed none)."""

    @model_serializer(mode="wrap")
    def _drop_empty_reasoning(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and not data.get("reasoning", True):
            del data["reasoning"]
        return data


def text_of(content: MessageContent | ToolResultContent) -> str:
    """The text of a message's (or tool result's) content: the string itself, or its text parts joined.

    Media and tool parts contribute nothing; an ``Untrusted`` text contributes its value.
    """
    if isinstance(content, str):
        return content
    if isinstance(content, Untrusted):
        return str(content.value)
    _check_parts(content, "text_of")
    chunks: list[str] = []
    for part in content:
        if isinstance(part, TextPart):
            chunks.append(part.text if isinstance(part.text, str) else str(part.text.value))
    return "".join(chunks)


def to_parts(content: MessageContent) -> list[Part]:
    """The content as a list of parts: a non-empty string becomes one ``TextPart``, "" none."""
    if isinstance(content, str):
        return [TextPart(text=content)] if content else []
    _check_parts(content, "to_parts")
    return list(content)


def has_structured_parts(content: MessageContent | ToolResultContent) -> bool:
    """Whether the content holds anything but text (media, tool calls or tool results)."""
    if isinstance(content, str | Untrusted):
        return False
    _check_parts(content, "has_structured_parts")
    return any(not isinstance(part, TextPart) for part in content)


def _check_parts(content: object, where: str) -> None:
    """Refuse content that is neither a string nor a list of parts (ContentValidationError)."""
    if isinstance(content, list) and all(isinstance(p, _Model) for p in content):
        return
    raise ContentValidationError(
        f"{where}() takes a message's content: a string or a list of parts, not "
        f"{type(content).__name__} ({content!r:.60}). Pass message.content, or build parts with "
        "TextPart / ImagePart / ...",
        code="invalid_content",
        field="content",
    )


def assistant_message_of(response: LlmResponse) -> Message:
    """The assistant turn for a response: its reasoning, then its text, then one ``tool_use`` per call.

    Reasoning comes first because Anthropic requires thinking blocks at the start of the turn
    (unchanged, with their signatures); text precedes the calls because Anthropic refuses text
    after a ``tool_use`` in the same turn. A response with neither calls nor reasoning keeps the
    plain string form.
    """
    if not isinstance(response, LlmResponse):
        raise ContentValidationError(
            f"assistant_message_of() takes an LlmResponse, not {type(response).__name__}. Pass "
            "what a provider's complete() returned (or LlmResponse.model_validate(a_dict)).",
            code="invalid_content",
            field="response",
        )
    if not response.tool_calls and not response.reasoning:
        return Message(role="assistant", content=response.content)
    parts: list[Part] = list(response.reasoning)
    if response.content:
        parts.append(TextPart(text=response.content))  # raw-content: LlmResponse.content is str
    parts.extend(
        ToolUsePart(id=c.id, name=c.name, input=c.input, provider_data=c.provider_data)
        for c in response.tool_calls
    )
    return Message(role="assistant", content=parts)


def canonical_json(value: Any) -> str:
    """Canonical JSON: sorted keys, compact separators, UTF-8 kept (for hashing and recordings).

    Models are dumped in JSON mode first, so the same request always gives the same string.
    """
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def parse_request(data: Any) -> LlmRequest:
    """Validate a plain dict (or an ``LlmRequest``) as a request.

    A field that does not fit raises ``ContentValidationError`` naming its path
    (``messages.0.content.1.source.kind``), never pydantic's own exception.
    """
    if isinstance(data, LlmRequest):
        return data
    try:
        return LlmRequest.model_validate(data)
    except ValidationError as exc:
        raise content_error(exc, "request") from exc
