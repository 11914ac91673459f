"""@tool: schema from the signature and docstring, validation through it, typed refusals."""

from __future__ import annotations

import asyncio
from enum import Enum
from typing import Literal

import pytest
from pydantic import BaseModel

from loom_nb import ConfigurationError, ScriptedProvider, ToolDefinition, agent_loop, tool
from loom_nb.agent._decorator import parse_docstring
from loom_nb.journal import Journal


class Unit(Enum):
    """Temperature units."""

    C = "celsius"
    F = "fahrenheit"


class Place(BaseModel):
    """A place on earth."""

    city: str
    country: str = "NL"


@tool
def weather(place: Place, unit: Unit = Unit.C, days: int = 1) -> str:
    """Tell the weather.

    Args:
        place: Where to look.
        unit (Unit): The unit of the
            temperatures.
        days: How many days ahead.
    """
    return f"{place.city}/{place.country}: sunny in {unit.value} for {days}"


def test_schema_comes_from_hints_defaults_and_docstring() -> None:
    """Types, defaults, required names and per-parameter descriptions reach the schema."""
    assert isinstance(weather, ToolDefinition)
    assert weather.name == "weather"
    assert weather.description == "Tell the weather."
    schema = weather.input_schema
    assert schema["type"] == "object"
    assert schema["required"] == ["place"]
    assert schema["additionalProperties"] is False
    props = schema["properties"]
    assert props["days"]["type"] == "integer"
    assert props["days"]["default"] == 1
    assert props["unit"]["description"] == "The unit of the temperatures."
    assert props["place"]["description"] == "Where to look."
    assert "Place" in schema["$defs"]


def test_the_decorated_function_is_still_callable() -> None:
    """weather(...) still calls the function in a notebook; its docstring is kept."""
    assert weather(Place(city="Lyon"), days=2) == "Lyon/NL: sunny in celsius for 2"
    assert "Tell the weather." in (weather.__doc__ or "")


def test_model_input_is_validated_and_the_function_gets_keywords() -> None:
    """A valid input is coerced into the hinted types; a bad one names the field."""
    value, problem = weather.validate_input({"place": {"city": "Delft"}, "unit": "fahrenheit"})
    assert problem is None
    assert asyncio.run(weather.call(value)) == "Delft/NL: sunny in fahrenheit for 1"
    _, problem = weather.validate_input({"place": {"city": "Delft"}, "days": "many"})
    assert problem is not None
    assert "days" in problem
    _, problem = weather.validate_input({"place": {"city": "x"}, "invented": 1})
    assert problem is not None
    assert "invented" in problem


def test_parameter_names_that_shadow_pydantic_attributes_work() -> None:
    """Parameters called json or schema are aliases, not clashes with BaseModel attributes."""

    @tool
    def dump(json: bool, schema: str = "s") -> str:
        """Dump."""
        return f"{json}-{schema}"

    value, problem = dump.validate_input({"json": True})
    assert problem is None
    assert asyncio.run(dump.call(value)) == "True-s"
    assert set(dump.input_schema["properties"]) == {"json", "schema"}


def test_keyword_options_and_overrides() -> None:
    """returns_media, untrusted, requires_approval, name and description are passed through."""

    @tool(untrusted=True, requires_approval=True, name="fetch_page", description="Fetch a URL.")
    async def fetch(url: str) -> str:
        return url

    assert (fetch.name, fetch.description) == ("fetch_page", "Fetch a URL.")
    assert fetch.untrusted
    assert fetch.requires_approval
    assert not fetch.returns_media
    assert asyncio.run(fetch.call(fetch.validate_input({"url": "u"})[0])) == "u"


@pytest.mark.parametrize(
    ("style", "doc"),
    [
        ("google", "Do it.\n\nArgs:\n    a (int): First.\n    b: Second\n        continued.\n"),
        (
            "numpy",
            "Do it.\n\nParameters\n----------\na : int\n    First.\nb : str\n    Second\n    continued.\n",
        ),
        ("sphinx", "Do it.\n\n:param a: First.\n:param str b: Second continued.\n:returns: x\n"),
    ],
)
def test_docstring_styles(style: str, doc: str) -> None:
    """Google, NumPy and Sphinx parameter sections all give the descriptions."""
    description, params = parse_docstring(doc)
    assert description == "Do it."
    assert params == {"a": "First.", "b": "Second continued."}


def test_a_parameter_without_a_type_is_refused_by_name() -> None:
    """No annotation: untyped_tool_parameter naming the parameter and how to fix it."""
    with pytest.raises(ConfigurationError) as caught:

        @tool
        def bad(query, limit: int = 3):  # type: ignore[no-untyped-def]
            """Search."""

    assert caught.value.code == "untyped_tool_parameter"
    assert caught.value.details["parameter"] == "query"
    assert "'query: str'" in caught.value.message


class Opaque:
    """A class pydantic has no schema for."""


def test_a_type_without_a_schema_is_refused_by_name() -> None:
    """A class pydantic cannot describe is refused when the tool is defined, naming the parameter."""
    with pytest.raises(ConfigurationError) as caught:

        @tool
        def bad(thing: Opaque) -> None:
            """Nope."""

    assert caught.value.code == "untyped_tool_parameter"
    assert caught.value.details["parameter"] == "thing"


def test_an_annotation_that_does_not_resolve_is_refused_by_name() -> None:
    """A hint naming a class the module cannot see is refused, naming the parameter."""

    class Local:
        pass

    with pytest.raises(ConfigurationError) as caught:

        @tool
        def bad(ok: int, thing: Local) -> None:
            """Nope."""

    assert caught.value.code == "untyped_tool_parameter"
    assert caught.value.details["parameter"] == "thing"


def test_variadic_and_positional_only_parameters_are_refused() -> None:
    """*args / **kwargs and positional-only parameters have no by-name schema."""
    with pytest.raises(ConfigurationError) as caught:

        @tool
        def many(*items: str) -> None:
            """Nope."""

    assert caught.value.code == "unsupported_tool_parameter"
    with pytest.raises(ConfigurationError):

        @tool
        def positional(a: int, /) -> None:
            """Nope."""


def test_wrong_option_types_and_targets_are_refused() -> None:
    """A non-bool flag or decorating a class is a ConfigurationError."""
    with pytest.raises(ConfigurationError):
        tool(untrusted="yes")  # type: ignore[call-overload]
    with pytest.raises(ConfigurationError):
        tool(Place)


async def test_decorated_tools_run_in_the_agent_loop() -> None:
    """The agent loop calls a @tool (sync and async) with the model's validated arguments."""

    @tool
    async def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @tool
    def shout(text: Literal["hi", "bye"]) -> str:
        """Shout a word."""
        return text.upper()

    provider = ScriptedProvider(
        [
            {
                "tool_calls": [
                    {"id": "c1", "name": "add", "input": {"a": 2, "b": "3"}},
                    {"id": "c2", "name": "shout", "input": {"text": "nope"}},
                ]
            },
            {"text": "5"},
        ]
    )
    journal = Journal()
    result = await agent_loop(
        journal.execution("r"), provider, [add, shout], [{"role": "user", "content": "go"}]
    )
    assert result.status == "completed"
    statuses = {c.name: c.status for c in result.tool_calls}
    assert statuses == {"add": "ok", "shout": "invalid_input"}
    results = provider.requests[1].messages[-1].content
    assert isinstance(results, list)
    assert '"result":5' in str(results[0].content)
