"""``@tool``: a ``ToolDefinition`` from a Python function's signature, type hints and docstring.

The schema the model is shown and the validation of what it sends are the same pydantic model,
built with ``create_model`` from the parameters (one field per parameter, its type hint, its
default, its description from the docstring's ``Args:`` section). Fields are named ``p0, p1 ...``
and aliased to the parameter names, so a parameter called ``json`` or ``schema`` cannot collide
with pydantic's own attributes; the schema and validation use the aliases. Unknown keys are
refused (``extra="forbid"``): a model that invents an argument gets an error result naming it.

A parameter with no annotation, a ``*args`` / ``**kwargs`` parameter, or a type pydantic cannot
describe as JSON Schema is refused when the tool is defined (``ConfigurationError``, code
``untyped_tool_parameter`` / ``unsupported_tool_parameter``, naming the parameter), not when the
model first calls it.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable
from typing import Any, overload

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model
from pydantic.errors import PydanticSchemaGenerationError, PydanticUserError

from loom_nb.agent._tools import ToolDefinition
from loom_nb.errors import ConfigurationError

__all__ = ["parse_docstring", "tool"]

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Returns?|Yields?|Raises|Examples?|Notes?|See Also|"
    r"Attributes|Keyword Args|Keyword Arguments|Other Parameters|Warnings?|References)\s*:?\s*$"
)
_ARG_SECTIONS = {"Args", "Arguments", "Parameters", "Params", "Keyword Args", "Keyword Arguments"}
_GOOGLE_ARG = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_ARG = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """The description (text before the first section) and ``{param: description}``.

    Reads Google style (``Args:`` then ``name (type): text`` with indented continuation lines),
    NumPy style (``Parameters`` underlined, ``name : type`` then indented text) and Sphinx
    (``:param name: text``).
    """
    lines = inspect.cleandoc(doc or "").splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    index = 0
    while index < len(lines):
        raw = lines[index]
        line = raw.strip()
        index += 1
        sphinx = _SPHINX_ARG.match(line)
        if sphinx:
            current, section = sphinx.group(1), "Args"
            params[current] = sphinx.group(2).strip()
            continue
        if line.startswith(":"):
            section, current = "other", None  # :returns:, :raises: ...
            continue
        header = _SECTION.match(line)
        if header and not raw.startswith((" ", "\t")):
            section, current = header.group(1), None
            if index < len(lines) and set(lines[index].strip()) == {"-"}:
                index += 1  # NumPy underline
            continue
        if section is None:
            summary.append(raw)
            continue
        if section not in _ARG_SECTIONS:
            continue
        indented = raw.startswith((" ", "\t"))
        numpy_name = re.match(r"^(\w+)\s*(?::.*)?$", line) if not indented else None
        google = _GOOGLE_ARG.match(line)
        if google and (indented or ":" in line) and not numpy_name:
            current = google.group(1).lstrip("*")
            params[current] = google.group(2).strip()
        elif numpy_name and not indented:
            current = numpy_name.group(1)
            params[current] = ""
        elif current is not None and line:
            params[current] = (params[current] + " " + line).strip()
    description = "\n".join(summary).strip()
    return description, params


@overload
def tool(fn: Callable[..., Any], /) -> ToolDefinition: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    returns_media: bool = False,
    untrusted: bool = False,
    requires_approval: bool = False,
) -> Callable[[Callable[..., Any]], ToolDefinition]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    returns_media: bool = False,
    untrusted: bool = False,
    requires_approval: bool = False,
) -> ToolDefinition | Callable[[Callable[..., Any]], ToolDefinition]:
    """Turn a function (sync or async) into a ``ToolDefinition``: ``@tool`` or ``@tool(...)``.

    The name is the function's (or ``name``), the description its docstring's text before the
    ``Args:`` section (or ``description``), the input schema its parameters: type hints, defaults,
    and each parameter's description from the docstring. The model's input is validated against
    the same pydantic model, and the function is called with the parameters as keywords.
    ``returns_media``, ``untrusted`` and ``requires_approval`` mean what they do on
    ``ToolDefinition``.
    """
    for flag, value in (
        ("returns_media", returns_media),
        ("untrusted", untrusted),
        ("requires_approval", requires_approval),
    ):
        if not isinstance(value, bool):
            raise ConfigurationError(
                f"@tool({flag}=...) takes True or False, not {value!r}.",
                code="invalid_tool_definition",
            )

    def build(function: Callable[..., Any]) -> ToolDefinition:
        return _definition(
            function,
            name=name,
            description=description,
            returns_media=returns_media,
            untrusted=untrusted,
            requires_approval=requires_approval,
        )

    if fn is None:
        return build
    return build(fn)


def _definition(
    fn: Callable[..., Any],
    *,
    name: str | None,
    description: str | None,
    returns_media: bool,
    untrusted: bool,
    requires_approval: bool,
) -> ToolDefinition:
    if not callable(fn) or isinstance(fn, type | ToolDefinition):
        raise ConfigurationError(
            f"@tool decorates a function (def or async def), not {type(fn).__name__}.",
            code="invalid_tool_definition",
        )
    tool_name = name if name is not None else getattr(fn, "__name__", "")
    summary, documented = parse_docstring(inspect.getdoc(fn))
    if description is not None and not isinstance(description, str):
        raise ConfigurationError(
            f"tool {tool_name!r}: description must be a string.", code="invalid_tool_definition"
        )
    model = _input_model(fn, str(tool_name), documented)
    names = {field: info.alias or field for field, info in model.model_fields.items()}

    def call(value: BaseModel) -> Any:
        return fn(**{names[field]: getattr(value, field) for field in names})

    return _FunctionTool(
        fn,
        str(tool_name),
        description if description is not None else summary,
        fn=call,
        input_model=model,
        returns_media=returns_media,
        untrusted=untrusted,
        requires_approval=requires_approval,
    )


class _FunctionTool(ToolDefinition):
    """A ``ToolDefinition`` made by ``@tool`` that is still the function: ``f(...)`` calls it."""

    def __init__(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.function = function
        """The decorated function, unchanged."""
        self.__doc__ = inspect.getdoc(function)
        self.__wrapped__ = function

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function directly (no validation: the model's calls go through ``call``)."""
        return self.function(*args, **kwargs)


def _input_model(fn: Callable[..., Any], name: str, documented: dict[str, str]) -> type[BaseModel]:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(
            f"tool {name!r}: cannot read the function's signature ({exc}); decorate a plain "
            "def or async def.",
            code="invalid_tool_definition",
        ) from exc
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # a forward reference that does not resolve, in user code
        bad = _unresolved_parameter(fn, signature)
        where = f"parameter {bad!r}'s type hint" if bad else "its type hints"
        raise ConfigurationError(
            f"tool {name!r}: {where} does not resolve ({type(exc).__name__}: {exc}); define or "
            "import the names the annotations use at module level.",
            code="untyped_tool_parameter",
            **({"parameter": bad} if bad else {}),
        ) from exc
    fields: dict[str, Any] = {}
    for index, (param_name, param) in enumerate(signature.parameters.items()):
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ConfigurationError(
                f"tool {name!r}: parameter {param_name!r} is *args/**kwargs, which has no schema; "
                "list each argument as its own typed parameter.",
                code="unsupported_tool_parameter",
                parameter=param_name,
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise ConfigurationError(
                f"tool {name!r}: parameter {param_name!r} is positional-only; the model passes "
                "arguments by name, so drop the '/'.",
                code="unsupported_tool_parameter",
                parameter=param_name,
            )
        if param_name not in hints:
            raise ConfigurationError(
                f"tool {name!r}: parameter {param_name!r} has no type hint, so there is no schema "
                f"to show the model; annotate it (e.g. '{param_name}: str').",
                code="untyped_tool_parameter",
                parameter=param_name,
            )
        annotation = hints[param_name]
        _check_schema_of(name, param_name, annotation)
        default = ... if param.default is param.empty else param.default
        fields[f"p{index}"] = (
            annotation,
            Field(default, alias=param_name, description=documented.get(param_name) or None),
        )
    try:
        return create_model(
            f"{name}_input",
            __config__=ConfigDict(extra="forbid", populate_by_name=False),
            **fields,
        )
    except (PydanticUserError, PydanticSchemaGenerationError, TypeError) as exc:
        raise ConfigurationError(
            f"tool {name!r}: its parameters do not make an input model ({exc}).",
            code="unsupported_tool_parameter",
        ) from exc


def _unresolved_parameter(fn: Callable[..., Any], signature: inspect.Signature) -> str | None:
    """The first parameter whose (string) annotation does not resolve in the function's module."""
    namespace = getattr(inspect.unwrap(fn), "__globals__", {})
    for param_name, param in signature.parameters.items():
        holder = type("_Hint", (), {"__annotations__": {param_name: param.annotation}})
        try:
            typing.get_type_hints(holder, globalns=dict(namespace))
        except Exception:  # this is the one that does not resolve
            return param_name
    return None


def _check_schema_of(tool_name: str, param_name: str, annotation: Any) -> None:
    """Refuse, naming the parameter, a type pydantic cannot validate or describe as JSON Schema."""
    try:
        TypeAdapter(annotation).json_schema()
    except Exception as exc:  # pydantic raises several kinds here; each means "no usable type"
        raise ConfigurationError(
            f"tool {tool_name!r}: parameter {param_name!r} has type {annotation!r}, which has no "
            "JSON Schema the model could fill in; use str, int, float, bool, lists, dicts, "
            "Literal, enums or pydantic models.",
            code="untyped_tool_parameter",
            parameter=param_name,
        ) from exc
