"""The content model: parts, messages, requests, readers, and errors that name the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from loom_nb.content import (
    AudioPart,
    ContentRef,
    DataSource,
    FilePart,
    ImagePart,
    LlmRequest,
    LlmResponse,
    Message,
    ReasoningPart,
    RefSource,
    TextPart,
    ToolCall,
    ToolResultPart,
    ToolUsePart,
    Usage,
    assistant_message_of,
    canonical_json,
    has_structured_parts,
    parse_request,
    text_of,
    to_parts,
)
from loom_nb.errors import ContentValidationError
from loom_nb.taint import UNTRUSTED_MARKER, Untrusted
from tests import strategies as s

GOLDEN = Path(__file__).parent / "golden"
ADDR = "sha256:" + "ab" * 32

PART_STRATEGIES = {
    "text": s.text_parts,
    "image": s.image_parts,
    "audio": s.audio_parts,
    "file": s.file_parts,
    "tool_use": s.tool_use_parts,
    "tool_result": s.tool_result_parts,
    "reasoning": s.reasoning_parts,
}


@pytest.mark.parametrize("kind", sorted(PART_STRATEGIES))
@given(data=st.data())
def test_every_part_round_trips_through_dict_and_json(kind: str, data: st.DataObject) -> None:
    """model → dict → model and model → JSON → model are identities for every part type."""
    part: BaseModel = data.draw(PART_STRATEGIES[kind])
    cls = type(part)
    assert cls.model_validate(part.model_dump()) == part
    assert cls.model_validate(part.model_dump(mode="json")) == part
    assert cls.model_validate_json(part.model_dump_json()) == part
    # Through the discriminated union too, as a message holds it.
    role = "assistant" if kind == "tool_use" else "user"
    message = Message(role=role, content=[part])  # type: ignore[list-item]
    assert Message.model_validate_json(message.model_dump_json()) == message


@given(s.requests)
def test_requests_round_trip(request: LlmRequest) -> None:
    """Whole requests survive dict and JSON round trips, untrusted marks included."""
    assert LlmRequest.model_validate(request.model_dump(mode="json")) == request
    assert LlmRequest.model_validate_json(request.model_dump_json()) == request


def _golden_request() -> LlmRequest:
    return LlmRequest(
        messages=[
            Message(role="user", content="What is the capital of France?"),
            Message(role="assistant", content="Paris."),
            Message(
                role="user",
                content='And of Italy? Answer in one word, "quoted", with no trailing period — please.',
            ),
        ],
        tools=[
            {  # type: ignore[list-item]
                "name": "lookup_capital",
                "description": "Look up a country's capital.",
                "input_schema": {
                    "type": "object",
                    "properties": {"country": {"type": "string"}},
                    "required": ["country"],
                },
            }
        ],
        system="You are terse.",
    )


def test_string_content_request_is_byte_identical_to_the_pre_parts_golden() -> None:
    """A string-only request serializes exactly as the golden written before parts existed."""
    golden = (GOLDEN / "string_request.json").read_bytes()
    assert _golden_request().model_dump_json().encode() == golden
    # And it parses back to the same request, string content untouched.
    parsed = LlmRequest.model_validate_json(golden)
    assert parsed == _golden_request()
    assert all(isinstance(m.content, str) for m in parsed.messages)


def test_unset_optional_fields_stay_out_of_the_wire_form() -> None:
    """origin, name and size are omitted while unset, so old payload bytes do not change."""
    part = FilePart(media_type="application/pdf", source=RefSource(ref=ContentRef(address=ADDR)))
    assert part.model_dump() == {
        "type": "file",
        "media_type": "application/pdf",
        "source": {"kind": "ref", "ref": {"address": ADDR}},
    }
    named = part.model_copy(update={"name": "a.pdf", "origin": "upload"})
    assert named.model_dump()["name"] == "a.pdf"
    assert named.model_dump()["origin"] == "upload"


def test_plain_dicts_validate_in_the_snake_case_shape() -> None:
    """The documented dict shape validates into parts."""
    message = Message.model_validate(
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "hi"},
                {
                    "type": "image",
                    "media_type": "image/png",
                    "source": {"kind": "data", "data": "AAAA"},
                },
            ],
        }
    )
    assert isinstance(message.content, list)
    assert isinstance(message.content[1], ImagePart)
    assert isinstance(message.content[1].source, DataSource)


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"messages": [{"role": "system", "content": "x"}]}, "messages.0.role"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages.0.role"),
        ({"messages": [{"role": "user", "content": [{"type": "video"}]}]}, "messages.0.content.0"),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "image",
                                "media_type": "image/png",
                                "source": {"kind": "url", "url": "x"},
                            }
                        ],
                    }
                ]
            },
            "messages.0.content.0.image.source",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "image",
                                "media_type": "image/png",
                                "source": {"kind": "ref", "ref": {"address": "md5:abc"}},
                            }
                        ],
                    }
                ]
            },
            "messages.0.content.0.image.source.ref.ref.address",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "text"}]}]},
            "messages.0.content.0.text.text",
        ),
        ({"messages": [{"role": "user", "content": "x", "extra": 1}]}, "messages.0.extra"),
    ],
)
def test_bad_content_is_an_error_naming_the_field(payload: dict[str, Any], field: str) -> None:
    """An unknown part type, role or source kind raises ContentValidationError naming the field."""
    with pytest.raises(ContentValidationError) as info:
        parse_request(payload)
    assert info.value.code == "invalid_content"
    assert info.value.details["field"] == field
    assert field in info.value.message


@pytest.mark.parametrize("size", [True, 1.5, -1, "10"])
def test_ref_size_must_be_a_non_negative_int_or_absent(size: object) -> None:
    """bool, float, negative and str sizes are refused; None and ints are fine."""
    with pytest.raises(ContentValidationError):
        parse_request(
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "image",
                                "media_type": "image/png",
                                "source": {"kind": "ref", "ref": {"address": ADDR, "size": size}},
                            }
                        ],
                    }
                ]
            }
        )
    assert ContentRef(address=ADDR, size=0).size == 0
    assert ContentRef(address=ADDR).size is None


@pytest.mark.parametrize("suffix", ["\n", "\r\n", " ", "0"])
def test_an_address_with_anything_after_the_digest_is_refused(suffix: str) -> None:
    """The whole address must match (fullmatch): ``sha256:<hex>\\n`` is not an address."""
    with pytest.raises(ContentValidationError):
        parse_request(
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "image",
                                "media_type": "image/png",
                                "source": {"kind": "ref", "ref": {"address": ADDR + suffix}},
                            }
                        ],
                    }
                ]
            }
        )


def test_text_of_reads_both_forms() -> None:
    """text_of returns a string as is and joins text parts, skipping media and tools."""
    image = ImagePart(media_type="image/png", source=DataSource(data="AAAA"))
    assert text_of("plain") == "plain"
    assert text_of([TextPart(text="a"), image, TextPart(text=Untrusted("b", "web"))]) == "ab"
    assert text_of(Untrusted("c", "web")) == "c"
    assert text_of([]) == ""


def test_to_parts_and_has_structured_parts() -> None:
    """to_parts wraps a string; has_structured_parts is true only when non-text parts exist."""
    assert to_parts("hi") == [TextPart(text="hi")]
    assert to_parts("") == []
    image = ImagePart(media_type="image/png", source=DataSource(data="AAAA"))
    assert to_parts([image]) == [image]
    assert not has_structured_parts("hi")
    assert not has_structured_parts([TextPart(text="x")])
    assert has_structured_parts([TextPart(text="x"), image])
    assert has_structured_parts([ToolResultPart(tool_use_id="t", content="ok")])


def test_assistant_message_puts_text_first_then_one_tool_use_per_call() -> None:
    """assistant_message_of emits text then tool_use parts in call order; no calls keeps a string."""
    response = LlmResponse(
        content="Checking.",
        tool_calls=[ToolCall(id="t1", name="a", input={"x": 1}), ToolCall(id="t2", name="b")],
        stop_reason="tool_use",
    )
    message = assistant_message_of(response)
    assert message.role == "assistant"
    assert isinstance(message.content, list)
    assert [p.type for p in message.content] == ["text", "tool_use", "tool_use"]
    assert [p.id for p in message.content if isinstance(p, ToolUsePart)] == ["t1", "t2"]
    assert assistant_message_of(LlmResponse(content="done")).content == "done"
    calls_only = assistant_message_of(LlmResponse(tool_calls=[ToolCall(id="t", name="a")]))
    assert isinstance(calls_only.content, list)
    assert [p.type for p in calls_only.content] == ["tool_use"]


def test_response_without_reasoning_serializes_exactly_as_before_the_field_existed() -> None:
    """An empty ``reasoning`` is left out, so old journal rows and recordings keep their bytes and hashes."""
    response = LlmResponse(
        content="hi",
        tool_calls=[ToolCall(id="t", name="f", input={"a": 1})],
        stop_reason="tool_use",
        usage=Usage(input_tokens=3, output_tokens=4),
        model="m",
        provider_data={"id": "x"},
    )
    # Both strings were produced by the content model before ReasoningPart existed.
    assert response.model_dump_json() == (
        '{"content":"hi","tool_calls":[{"id":"t","name":"f","input":{"a":1}}],'
        '"stop_reason":"tool_use","usage":{"input_tokens":3,"output_tokens":4},"model":"m",'
        '"provider_data":{"id":"x"}}'
    )
    assert canonical_json(response) == (
        '{"content":"hi","model":"m","provider_data":{"id":"x"},"stop_reason":"tool_use",'
        '"tool_calls":[{"id":"t","input":{"a":1},"name":"f"}],'
        '"usage":{"input_tokens":3,"output_tokens":4}}'
    )
    assert LlmResponse.model_validate_json(response.model_dump_json()) == response


def test_response_reasoning_round_trips_and_leaves_unset_fields_out() -> None:
    """A response's reasoning serializes with only the fields set, and validates back equal."""
    response = LlmResponse(
        content="4",
        reasoning=[
            ReasoningPart(text="2+2", signature="c2ln", provider_data={"vendor": "anthropic"}),
            ReasoningPart(redacted=True, data="b3BhcXVl"),
        ],
    )
    dumped = json.loads(canonical_json(response))
    assert dumped["reasoning"] == [
        {
            "provider_data": {"vendor": "anthropic"},
            "redacted": False,
            "signature": "c2ln",
            "text": "2+2",
            "type": "reasoning",
        },
        {"data": "b3BhcXVl", "redacted": True, "text": "", "type": "reasoning"},
    ]
    assert LlmResponse.model_validate(dumped) == response


def test_assistant_message_puts_reasoning_first_then_text_then_calls() -> None:
    """Thinking leads the assistant turn (Anthropic requires it there), even without tool calls."""
    thinking = ReasoningPart(text="hmm", signature="s")
    response = LlmResponse(
        content="Checking.",
        tool_calls=[ToolCall(id="t1", name="a")],
        reasoning=[thinking, ReasoningPart(redacted=True, data="d")],
        stop_reason="tool_use",
    )
    content = assistant_message_of(response).content
    assert isinstance(content, list)
    assert [p.type for p in content] == ["reasoning", "reasoning", "text", "tool_use"]
    assert content[0] is thinking
    text_only = assistant_message_of(LlmResponse(content="4", reasoning=[thinking])).content
    assert isinstance(text_only, list)
    assert [p.type for p in text_only] == ["reasoning", "text"]
    assert text_of(text_only) == "4"  # reasoning is not part of the answer's text
    assert has_structured_parts(text_only)


def test_untrusted_mark_survives_serialization_at_any_depth() -> None:
    """An Untrusted value deep in a tool input serializes as a marker and validates back."""
    part = ToolUsePart(id="t", name="f", input={"a": [{"b": Untrusted({"c": 1}, "web")}]})
    dumped = json.loads(part.model_dump_json())
    assert dumped["input"]["a"][0]["b"] == {UNTRUSTED_MARKER: {"origin": "web", "value": {"c": 1}}}
    again = ToolUsePart.model_validate(dumped)
    assert again == part
    assert isinstance(again.input, dict)
    assert isinstance(again.input["a"][0]["b"], Untrusted)


@given(
    st.dictionaries(
        st.text(max_size=8),
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
        max_size=6,
    )
)
def test_a_flat_tool_input_is_kept_as_given(flat: dict[str, Any]) -> None:
    """A tool input of plain scalars validates to an equal dict of the same values (no marks)."""
    validated = ToolUsePart.model_validate({"id": "t", "name": "f", "input": flat}).input
    assert isinstance(validated, dict)
    assert validated == flat
    assert [type(v) for v in validated.values()] == [type(v) for v in flat.values()]


def test_a_marker_one_level_down_is_restored() -> None:
    """A marker object as the value of a flat input's key still becomes an Untrusted."""
    raw = {"a": 1, "b": {UNTRUSTED_MARKER: {"origin": "web", "value": "v"}}}
    part = ToolUsePart.model_validate({"id": "t", "name": "f", "input": raw})
    assert isinstance(part.input, dict)
    assert part.input["a"] == 1
    assert part.input["b"] == Untrusted("v", "web")


def test_canonical_json_is_order_independent() -> None:
    """canonical_json sorts keys and is compact, so equal values give equal strings."""
    assert canonical_json({"b": 1, "a": [1, {"d": 2, "c": 3}]}) == '{"a":[1,{"c":3,"d":2}],"b":1}'
    request = _golden_request()
    assert canonical_json(request) == canonical_json(json.loads(request.model_dump_json()))


@given(
    text=st.text(alphabet=st.characters(codec=None)), role=st.sampled_from(["user", "assistant"])
)
def test_a_plain_string_message_has_the_canonical_json_of_its_dump(text: str, role: str) -> None:
    """A message with a string content is written without the dump (the commonest case, hashed
    twice a chat turn): the text is exactly what dumping and encoding it gives, for any text
    (quotes, control characters, line separators, lone surrogates)."""
    message = Message(role=role, content=text)  # type: ignore[arg-type]
    general = json.dumps(
        message.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    assert canonical_json(message) == general
    assert canonical_json(Message(role=role, content=[TextPart(text=text)])) == json.dumps(  # type: ignore[arg-type]
        {"content": [{"text": text, "type": "text"}], "role": role},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )


def test_parts_are_frozen_and_forbid_unknown_fields() -> None:
    """Parts are immutable values; an unknown field is an error, not silently dropped."""
    part = TextPart(text="x")
    with pytest.raises(Exception, match="frozen"):
        part.text = "y"  # type: ignore[misc]
    with pytest.raises(ContentValidationError) as info:
        parse_request(
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "x", "bold": 1}]}]}
        )
    assert "bold" in info.value.details["field"]


def test_media_parts_accept_both_sources() -> None:
    """Image, audio and file parts take a ref source or a data source."""
    ref = RefSource(ref=ContentRef(address=ADDR, size=3))
    data = DataSource(data="AAAA")
    for cls in (ImagePart, AudioPart, FilePart):
        assert cls(media_type="x/y", source=ref).source == ref
        assert cls(media_type="x/y", source=data).source == data


def test_provider_data_is_omitted_while_none_and_kept_when_set() -> None:
    """A tool call without provider_data serializes exactly as before; a set one round-trips."""
    plain = ToolUsePart(id="t1", name="f", input={"x": 1})
    assert canonical_json(plain) == '{"id":"t1","input":{"x":1},"name":"f","type":"tool_use"}'
    assert plain.model_dump_json() == '{"type":"tool_use","id":"t1","name":"f","input":{"x":1}}'
    assert canonical_json(ToolCall(id="t1", name="f")) == '{"id":"t1","input":{},"name":"f"}'
    signed = plain.model_copy(update={"provider_data": {"thought_signature": "U0lH"}})
    assert json.loads(signed.model_dump_json())["provider_data"] == {"thought_signature": "U0lH"}
    assert ToolUsePart.model_validate_json(signed.model_dump_json()) == signed


def test_assistant_message_of_copies_provider_data_onto_the_tool_use() -> None:
    """Each call's provider_data (e.g. a thought signature) rides on its tool_use, and None stays None."""
    response = LlmResponse(
        tool_calls=[
            ToolCall(id="a", name="f", provider_data={"thought_signature": "c2ln"}),
            ToolCall(id="b", name="g"),
        ],
        stop_reason="tool_use",
    )
    content = assistant_message_of(response).content
    assert isinstance(content, list)
    assert [p.provider_data for p in content if isinstance(p, ToolUsePart)] == [
        {"thought_signature": "c2ln"},
        None,
    ]


@pytest.mark.parametrize(
    "provider_data",
    [
        {"thought_signature": {UNTRUSTED_MARKER: {"origin": "web", "value": "x"}}},
        {"thought_signature": 7},
        "c2ln",
    ],
)
def test_provider_data_accepts_only_a_dict_of_strings(provider_data: object) -> None:
    """A marker dict, a number or a bare string in provider_data is a ContentValidationError."""
    payload = {
        "messages": [
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "t", "name": "f", "provider_data": provider_data}
                ],
            }
        ]
    }
    with pytest.raises(ContentValidationError) as info:
        parse_request(payload)
    assert info.value.details["field"].startswith("messages.0.content.0.tool_use.provider_data")
    with pytest.raises(ValidationError):
        ToolUsePart(id="t", name="f", provider_data={"k": Untrusted("x", "web")})


def test_optional_fields_are_left_out_inside_pydantic_without_a_python_serializer() -> None:
    """Fields left out while unset (None, 0, empty) are dropped by pydantic's own serializer: no
    content model serializes through a Python callback, which cost every dumped part a call back
    into Python (a response's dump took twice as long)."""
    import loom_nb.content as content

    models = [
        value
        for value in vars(content).values()
        if isinstance(value, type) and issubclass(value, BaseModel)
    ]
    assert {m.__name__ for m in models} >= {"LlmResponse", "Usage", "TextPart", "ToolCall"}
    for model in models:
        assert not model.__pydantic_decorators__.model_serializers, model.__name__
    usage = Usage(input_tokens=5, output_tokens=1)
    assert usage.model_dump() == {"input_tokens": 5, "output_tokens": 1}
    cached = Usage(input_tokens=5, output_tokens=1, cache_read_tokens=3)
    assert cached.model_dump_json() == (
        '{"input_tokens":5,"output_tokens":1,"cache_read_tokens":3}'
    )
    plain = LlmResponse(content="hi", usage=usage)
    assert "reasoning" not in plain.model_dump(mode="json")
    assert "provider" not in plain.model_dump(mode="json")
    shown = LlmResponse(content="hi", reasoning=[ReasoningPart(text="t")], provider="anthropic")
    dumped = shown.model_dump(mode="json")
    assert dumped["provider"] == "anthropic"
    assert dumped["reasoning"] == [{"type": "reasoning", "text": "t", "redacted": False}]
    assert TextPart(text="a").model_dump() == {"type": "text", "text": "a"}
    assert TextPart(text="a", origin="web").model_dump()["origin"] == "web"
    assert LlmResponse.model_validate(dumped) == shown


def test_a_constructed_message_with_an_odd_role_takes_the_general_path() -> None:
    """A role that is not an exact str (a subclass that says it equals anything, slipped past
    validation with model_construct) is never written into the canonical JSON as is: the
    general encoder escapes it, so the text stays one valid JSON object."""

    class Sly(str):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = str.__hash__

    message = Message.model_construct(role=Sly('user","evil":"x'), content="hi")
    text = canonical_json(message)
    assert json.loads(text) == {"content": "hi", "role": 'user","evil":"x'}
