"""The content parts: text, media (image, audio, file) by ref or inline, tool calls and results, reasoning.

One pydantic union discriminated on ``type`` (ADR 0120 decision 3). Parts are frozen and refuse
unknown fields; optional fields left unset (``origin``, a file's ``name``, a ref's ``size``, a
tool call's ``provider_data``) are left out of the serialized form. Media parts are built from
files, bytes and PIL images by ``ImagePart.from_path`` and friends, which sniff the bytes
(``_media``) and build the part here (``media_part``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

from pydantic import (
    Discriminator,
    Field,
    Tag,
    field_validator,
)

from loom_nb.taint import UNTRUSTED_MARKER, Untrusted, mark_untrusted_values

if TYPE_CHECKING:
    from loom_nb.store import ContentStore

__all__ = [
    "ADDRESS_PATTERN",
    "AudioPart",
    "ContentRef",
    "DataSource",
    "FilePart",
    "ImagePart",
    "MediaPart",
    "MediaSource",
    "Part",
    "ReasoningPart",
    "RefSource",
    "ResultPart",
    "TextPart",
    "ToolInput",
    "ToolResultContent",
    "ToolResultPart",
    "ToolUsePart",
    "media_part",
]

from loom_nb.content._media import (
    DEFAULT_TENANT,
    Modality,
    checked_media,
    encode_pil,
    media_source,
    read_path,
)
from loom_nb.content._sources import (
    ADDRESS_PATTERN,
    ContentRef,
    DataSource,
    MediaSource,
    RefSource,
    _Model,
    omitted_when_none,
)


class TextPart(_Model):
    """Text. Untrusted when ``origin`` is set or ``text`` is an ``Untrusted`` value."""

    type: Literal["text"] = "text"
    """Discriminator: always ``"text"``."""
    text: str | Untrusted
    """The text itself."""
    origin: str | None = omitted_when_none()
    """Where untrusted text came from (``"tool:web_fetch"``); None for the application's own text."""


class ImagePart(_Model):
    """An image (``image/png``, ``image/jpeg``, ...)."""

    type: Literal["image"] = "image"
    """Discriminator: always ``"image"``."""
    media_type: str
    """The image's media type; the guard requires ``image/*``."""
    source: MediaSource
    """Where the bytes are: a store ref or inline base64."""
    origin: str | None = omitted_when_none()
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
        data, name = read_path(path)
        part = media_part(data, "image", store=store, tenant=tenant, origin=origin, what=repr(name))
        assert isinstance(part, ImagePart)
        return part

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
        part = media_part(
            data,
            "image",
            media_type=media_type,
            store=store,
            tenant=tenant,
            origin=origin,
            what="the image bytes",
        )
        assert isinstance(part, ImagePart)
        return part

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
        data = encode_pil(image, format)
        return cls.from_bytes(data, store=store, tenant=tenant, origin=origin)


class AudioPart(_Model):
    """An audio clip (``audio/wav``, ``audio/mpeg``, ...)."""

    type: Literal["audio"] = "audio"
    """Discriminator: always ``"audio"``."""
    media_type: str
    """The clip's media type; the guard requires ``audio/*``."""
    source: MediaSource
    """Where the bytes are: a store ref or inline base64."""
    origin: str | None = omitted_when_none()
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
        data, name = read_path(path)
        part = media_part(data, "audio", store=store, tenant=tenant, origin=origin, what=repr(name))
        assert isinstance(part, AudioPart)
        return part


class FilePart(_Model):
    """A document such as a PDF (``application/pdf``) or plain text."""

    type: Literal["file"] = "file"
    """Discriminator: always ``"file"``."""
    media_type: str
    """The document's media type (any well-formed type)."""
    source: MediaSource
    """Where the bytes are: a store ref or inline base64."""
    name: str | None = omitted_when_none()
    """A file name shown to the model (dropped by the guard when the part is untrusted)."""
    origin: str | None = omitted_when_none()
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
        data, file_name = read_path(path)
        part = media_part(
            data,
            "file",
            store=store,
            tenant=tenant,
            origin=origin,
            name=name or file_name,
            what=repr(file_name),
        )
        assert isinstance(part, FilePart)
        return part


MediaPart: TypeAlias = ImagePart | AudioPart | FilePart
"""The parts that carry bytes."""


def media_part(
    data: bytes,
    modality: Modality,
    *,
    media_type: str | None = None,
    store: ContentStore | None = None,
    tenant: str = DEFAULT_TENANT,
    origin: str | None = None,
    name: str | None = None,
    what: str = "the media",
) -> ImagePart | AudioPart | FilePart:
    """A part of ``modality`` for ``data``: the type sniffed (and a declared one checked).

    Bytes up to ``MAX_INLINE_BYTES`` travel inline; larger ones go into ``store`` and travel by
    ref (refused without one). ``modality`` ``"file"`` takes any sniffed type. Raises
    ``MediaError`` with code ``unknown_media_type``, ``wrong_modality`` or ``media_type_mismatch``.
    """
    data, sniffed = checked_media(
        data, modality, media_type=media_type, tenant=tenant, origin=origin, what=what
    )
    source, _ = media_source(data, store=store, tenant=tenant, what=what)
    if modality == "image":
        return ImagePart(media_type=sniffed, source=source, origin=origin)
    if modality == "audio":
        return AudioPart(media_type=sniffed, source=source, origin=origin)
    return FilePart(media_type=sniffed, source=source, name=name, origin=origin)


ResultPart: TypeAlias = Annotated[
    TextPart | ImagePart | AudioPart | FilePart, Field(discriminator="type")
]

ToolResultContent: TypeAlias = str | Untrusted | list[ResultPart]
"""What a tool result holds: text, an untrusted value, or text and media parts."""


def _input_kind(value: Any) -> str:
    """Which branch of ``ToolInput`` a value takes: an ``Untrusted`` (or its marker) or a plain dict."""
    if type(value) is dict:  # the common input: never an Untrusted, so no isinstance against it
        return "untrusted" if len(value) == 1 and UNTRUSTED_MARKER in value else "dict"
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


class ToolUsePart(_Model):
    """A tool call the model made; appears only in assistant messages."""

    type: Literal["tool_use"] = "tool_use"
    """Discriminator: always ``"tool_use"``."""
    id: str | Untrusted
    """The call's id, echoed by the matching ``tool_result``."""
    name: str | Untrusted
    """The tool's name."""
    input: ToolInput = Field(default_factory=dict)
    """The call's arguments (a JSON object)."""
    provider_data: dict[str, str] | None = omitted_when_none()
    """Opaque vendor data that must travel with the call (e.g. Gemini's thought signature).

    Only the mapper of the vendor that wrote it reads it; it is never shown to the model as text,
    and it is left out of the serialized form while None.
    """

    @field_validator("input", mode="after")
    @classmethod
    def _restore_marks(cls, value: Any) -> Any:
        # Most inputs are one flat object of plain scalars: nothing in it can be a marker. A
        # plain loop, not all() over a generator: this runs for every tool call validated.
        if type(value) is dict and UNTRUSTED_MARKER not in value:
            for item in value.values():
                if type(item) not in _SCALARS:
                    return mark_untrusted_values(value)
            return value
        return mark_untrusted_values(value)


_SCALARS = frozenset({str, int, float, bool, type(None)})
"""Exact types that are never an ``Untrusted`` or its marker object."""


class ToolResultPart(_Model):
    """The answer to one tool call; appears only in user messages, after the call's assistant turn."""

    type: Literal["tool_result"] = "tool_result"
    """Discriminator: always ``"tool_result"``."""
    tool_use_id: str
    """The ``id`` of the ``tool_use`` this answers."""
    content: ToolResultContent
    """The result: text, an untrusted value, or a list of text and media parts."""
    is_error: bool = False
    """True when the tool failed or the call was refused; the model sees it as an error."""
    origin: str | None = omitted_when_none()
    """Set when the whole result is untrusted (e.g. a tool declared untrusted)."""


class ReasoningPart(_Model):
    """The model's thinking (or its summary); appears only in assistant messages, before the answer.

    Vendors that sign their reasoning (Anthropic, Gemini, OpenAI Responses) require the part back
    byte for byte on the next turn; only the mapper of the vendor that wrote it reads it. Unset
    optional fields are left out of the serialized form.
    """

    type: Literal["reasoning"] = "reasoning"
    """Discriminator: always ``"reasoning"``."""
    text: str = ""
    """The visible thinking or its summary ("" when the vendor shows none, e.g. redacted)."""
    signature: str | None = omitted_when_none()
    """The vendor's signature over the thinking (Anthropic ``signature``, Gemini ``thoughtSignature``)."""
    redacted: bool = False
    """True when the vendor withheld the thinking and sent only an opaque ``data`` payload."""
    data: str | None = omitted_when_none()
    """An opaque payload sent back unchanged (Anthropic ``redacted_thinking.data``, OpenAI
    Responses ``encrypted_content``)."""
    provider_data: dict[str, Any] | None = omitted_when_none()
    """Other vendor metadata, plain JSON: ``vendor`` (who produced it: ``"anthropic"``,
    ``"openai"``, ``"gemini"``), item ids, the wire field it came in."""


Part: TypeAlias = Annotated[
    TextPart | ImagePart | AudioPart | FilePart | ToolUsePart | ToolResultPart | ReasoningPart,
    Field(discriminator="type"),
]
"""Any content part, discriminated by ``type``."""
