"""Tool definitions: the derived menu, input validation, calling, and the media_result marker."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from loom_nb.agent import MediaResult, ToolDefinition, media_result
from loom_nb.agent._tools import MEDIA_RESULT_MARKER, menu_of
from loom_nb.content import ContentRef, ImagePart, RefSource, TextPart, ToolSpec
from loom_nb.errors import ConfigurationError, ContentValidationError

ADDR = "sha256:" + "cd" * 32


class Weather(BaseModel):
    city: str
    days: int = 1


def _echo(value: Any) -> Any:
    return value


def test_spec_is_derived_from_the_input_model() -> None:
    """The menu entry's schema is the pydantic model's JSON schema, so model and menu cannot disagree."""
    tool = ToolDefinition("weather", "Forecast", input_model=Weather, fn=_echo)
    spec = tool.spec
    assert isinstance(spec, ToolSpec)
    assert spec.name == "weather"
    assert spec.description == "Forecast"
    assert spec.input_schema == Weather.model_json_schema()
    assert spec.input_schema["required"] == ["city"]


def test_spec_uses_the_given_schema_or_an_empty_object() -> None:
    """A raw JSON schema is sent as given; a tool with no input contract takes an empty object."""
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    assert ToolDefinition("search", "S", input_schema=schema, fn=_echo).spec.input_schema == schema
    assert ToolDefinition("now", "Clock", fn=_echo).spec.input_schema == {
        "type": "object",
        "properties": {},
    }


def test_model_input_validates_to_an_instance() -> None:
    """With an input model the tool function receives the validated instance."""
    tool = ToolDefinition("weather", "Forecast", input_model=Weather, fn=_echo)
    value, problem = tool.validate_input({"city": "Paris", "days": "3"})
    assert problem is None
    assert value == Weather(city="Paris", days=3)


def test_model_input_failure_names_the_field() -> None:
    """A schema failure reports the field and pydantic's reason, for the model to fix its call."""
    tool = ToolDefinition("weather", "Forecast", input_model=Weather, fn=_echo)
    value, problem = tool.validate_input({"days": "many"})
    assert value is None
    assert problem is not None
    assert "city: Field required" in problem
    assert "days:" in problem


def test_schema_input_failure_names_the_field() -> None:
    """A JSON-schema tool validates with jsonschema and reports the path of the bad value."""
    schema = {
        "type": "object",
        "properties": {"q": {"type": "string"}, "n": {"type": "integer", "minimum": 1}},
        "required": ["q"],
        "additionalProperties": False,
    }
    tool = ToolDefinition("search", "S", input_schema=schema, fn=_echo)
    assert tool.validate_input({"q": "x", "n": 2}) == ({"q": "x", "n": 2}, None)
    _, problem = tool.validate_input({"q": 3, "n": 0})
    assert problem is not None
    assert "n: 0 is less than the minimum of 1" in problem
    assert "q: 3 is not of type 'string'" in problem


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"name": "bad name"}, "letters, digits"),
        ({"name": "x" * 65}, "letters, digits"),
        ({"input_model": Weather, "input_schema": {"type": "object"}}, "not both"),
        ({"input_schema": {"type": "array"}}, '"type": "object"'),
        ({"input_schema": {"type": "object", "properties": 3}}, "not valid JSON Schema"),
        ({"input_model": dict}, "BaseModel subclass"),
        ({"fn": "not callable"}, "must be a function"),
    ],
)
def test_bad_definitions_are_refused(kwargs: dict[str, Any], needle: str) -> None:
    """A definition the providers or the validator could not use is a ConfigurationError naming the fix."""
    args: dict[str, Any] = {"name": "tool", "description": "d", "fn": _echo} | kwargs
    name = args.pop("name")
    description = args.pop("description")
    with pytest.raises(ConfigurationError, match=needle) as info:
        ToolDefinition(name, description, **args)
    assert info.value.code == "invalid_tool_definition"


def test_menu_refuses_duplicate_names() -> None:
    """Two tools with one name would make calls ambiguous, so the menu is refused."""
    tool = ToolDefinition("a", "d", fn=_echo)
    with pytest.raises(ConfigurationError, match="two tools are named 'a'"):
        menu_of([tool, ToolDefinition("a", "other", fn=_echo)])
    specs, table = menu_of([tool])
    assert [s.name for s in specs] == ["a"]
    assert table == {"a": tool}


async def test_call_awaits_async_functions() -> None:
    """``call`` runs sync and async tool functions alike."""

    async def double(value: dict[str, Any]) -> int:
        return int(value["n"]) * 2

    assert await ToolDefinition("d", "d", fn=double).call({"n": 2}) == 4
    assert await ToolDefinition("e", "e", fn=_echo).call({"n": 2}) == {"n": 2}


def test_media_result_validates_parts_and_serializes_to_its_marker() -> None:
    """media_result accepts parts or dicts and journals as the one-key marker object."""
    image = ImagePart(media_type="image/png", source=RefSource(ref=ContentRef(address=ADDR)))
    result = media_result([TextPart(text="chart"), image.model_dump(mode="json")])
    assert isinstance(result, MediaResult)
    assert result.parts[1] == image
    dumped = result.model_dump(mode="json")
    assert list(dumped) == [MEDIA_RESULT_MARKER]
    assert dumped[MEDIA_RESULT_MARKER]["parts"][0] == {"type": "text", "text": "chart"}


def test_media_result_refuses_non_parts() -> None:
    """Tool parts or a bare string are not media results."""
    with pytest.raises(ContentValidationError):
        media_result([{"type": "tool_use", "id": "x", "name": "y", "input": {}}])
    with pytest.raises(ConfigurationError):
        media_result("an image")  # type: ignore[arg-type]


def test_public_names_are_exported() -> None:
    """The agent package's __all__ is sorted and the top-level loom_nb names are the same objects."""
    import loom_nb
    import loom_nb.agent as agent

    assert agent.__all__ == sorted(agent.__all__)
    for name in ("AgentResult", "Compaction", "ToolDefinition", "agent_loop", "media_result"):
        assert getattr(loom_nb, name) is getattr(agent, name)
