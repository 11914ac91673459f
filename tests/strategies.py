"""Hypothesis strategies for loom_nb values, shared by every property test."""

from __future__ import annotations

import base64
import string
from typing import Any

from hypothesis import strategies as st

from loom_nb.content import (
    AudioPart,
    ContentRef,
    DataSource,
    FilePart,
    ImagePart,
    LlmRequest,
    Message,
    RefSource,
    TextPart,
    ToolResultPart,
    ToolSpec,
    ToolUsePart,
)
from loom_nb.taint import Untrusted

texts = st.text(max_size=40)
origins = st.sampled_from(["tool:web_fetch", "upload", "peer:agent-7", 'odd"origin<>'])
ids = st.text(alphabet=string.ascii_letters + string.digits + "_-", min_size=1, max_size=12)
addresses = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64).map(
    lambda h: f"sha256:{h}"
)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
json_values: st.SearchStrategy[Any] = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
    max_leaves=12,
)

content_refs = st.builds(ContentRef, address=addresses, size=st.none() | st.integers(0, 2**40))
ref_sources = st.builds(RefSource, ref=content_refs)
data_sources = st.binary(max_size=64).map(lambda b: DataSource(data=base64.b64encode(b).decode()))
sources = ref_sources | data_sources

untrusted_texts = st.builds(Untrusted, value=texts, origin=origins)
text_parts = st.builds(TextPart, text=texts | untrusted_texts, origin=st.none() | origins)
image_parts = st.builds(
    ImagePart,
    media_type=st.sampled_from(["image/png", "image/jpeg", "image/webp"]),
    source=sources,
    origin=st.none() | origins,
)
audio_parts = st.builds(
    AudioPart,
    media_type=st.sampled_from(["audio/wav", "audio/mpeg"]),
    source=sources,
    origin=st.none() | origins,
)
file_parts = st.builds(
    FilePart,
    media_type=st.sampled_from(["application/pdf", "text/plain"]),
    source=sources,
    name=st.none() | texts,
    origin=st.none() | origins,
)
media_parts = image_parts | audio_parts | file_parts

# Tool inputs may hold Untrusted values at any depth (the guard refuses them; the model must carry them).
tool_inputs = st.dictionaries(
    texts, json_values | st.builds(Untrusted, value=json_values, origin=origins), max_size=4
)
tool_use_parts = st.builds(
    ToolUsePart,
    id=ids | st.builds(Untrusted, value=ids, origin=origins),
    name=ids,
    input=tool_inputs,
)
tool_result_parts = st.builds(
    ToolResultPart,
    tool_use_id=ids,
    content=texts | untrusted_texts | st.lists(text_parts | media_parts, max_size=3),
    is_error=st.booleans(),
    origin=st.none() | origins,
)
parts = text_parts | media_parts | tool_use_parts | tool_result_parts

messages = st.builds(
    Message,
    role=st.sampled_from(["user", "assistant"]),
    content=texts | st.lists(parts, max_size=4),
)
tool_specs = st.builds(
    ToolSpec,
    name=ids,
    description=texts,
    input_schema=st.just({"type": "object", "properties": {}}),
)
requests = st.builds(
    LlmRequest,
    messages=st.lists(messages, max_size=4),
    tools=st.lists(tool_specs, max_size=2),
    system=st.none() | texts,
)
