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

The parts are in ``_parts``; messages, requests, responses and the functions that read content
in ``_messages``. This module only re-exports them.
"""

from loom_nb._strict import content_error as content_error
from loom_nb.content._messages import (
    LlmRequest,
    LlmResponse,
    Message,
    MessageContent,
    StopReason,
    ToolCall,
    ToolSpec,
    Usage,
    assistant_message_of,
    canonical_json,
    has_structured_parts,
    parse_request,
    text_of,
    to_parts,
)
from loom_nb.content._parts import (
    ADDRESS_PATTERN as ADDRESS_PATTERN,
)
from loom_nb.content._parts import (
    AudioPart,
    ContentRef,
    DataSource,
    FilePart,
    ImagePart,
    MediaPart,
    MediaSource,
    Part,
    ReasoningPart,
    RefSource,
    TextPart,
    ToolResultContent,
    ToolResultPart,
    ToolUsePart,
)
from loom_nb.content._parts import (
    ResultPart as ResultPart,
)

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
