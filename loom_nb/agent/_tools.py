"""Tool definitions: the menu the model sees, input validation, and the media-result marker (ADR 0120 decision 9).

A ``ToolDefinition`` is the one place a tool is described. The menu sent to the provider
(``ToolSpec``) is derived from it, never written by hand, so the schema the model is shown is the
schema its input is validated against. ``returns_media`` is the one declaration that lets a tool's
``media_result(parts)`` reach the transcript as media; for every other tool the same shape is data
(see ``_results``).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, model_serializer

from loom_nb.agent._jsonschema import import_jsonschema
from loom_nb.content import ResultPart, ToolResultPart, ToolSpec, content_error
from loom_nb.errors import ConfigurationError

if TYPE_CHECKING:
    from loom_nb.capabilities import Capabilities
    from loom_nb.journal import Execution

__all__ = ["MEDIA_RESULT_MARKER", "MediaResult", "ToolDefinition", "Toolset", "media_result"]

MEDIA_RESULT_MARKER = "__loomMediaResult"
"""Key of the JSON object a ``MediaResult`` serializes to (the form the tool step journals)."""

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_EMPTY_OBJECT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
_PARTS = TypeAdapter(list[ResultPart])


class MediaResult(BaseModel):
    """A tool output that asks to be sent to the model as text and media parts.

    Build it with ``media_result(parts)``. Honoured only for a tool declared ``returns_media=True``
    whose output is not untrusted; otherwise it is ordinary data and takes the text path.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    parts: list[ResultPart]
    """The text, image, audio and file parts of the result, in order."""

    @model_serializer(mode="plain")
    def _to_marker(self) -> dict[str, Any]:
        return {MEDIA_RESULT_MARKER: {"parts": [p.model_dump(mode="json") for p in self.parts]}}


def media_result(parts: Sequence[Any]) -> MediaResult:
    """Wrap text and media parts (models or plain dicts) as a tool's media output.

    Media should travel by ref (``RefSource``): inline data over ``MAX_INLINE_BYTES`` becomes an
    error result the model sees. Raises ``ContentValidationError`` when a part does not fit.
    """
    if isinstance(parts, str | bytes) or not isinstance(parts, Sequence):
        raise ConfigurationError(
            f"media_result() takes a list of parts, got {type(parts).__name__}; "
            "pass e.g. [ImagePart(media_type='image/png', source=RefSource(ref=...))].",
            code="invalid_media_result",
        )
    try:
        return MediaResult(parts=_PARTS.validate_python(list(parts)))
    except ValidationError as exc:
        raise content_error(exc, "media_result parts") from exc


ToolFn = Callable[[Any], Any]


class ToolDefinition:
    """A tool the agent may call: its menu entry, its input contract, its function and its flags.

    ``input_model`` (a pydantic model) or ``input_schema`` (a JSON Schema object) describe the
    input; with neither the tool takes an empty object. ``fn`` (sync or async) receives the
    validated input: the model instance when ``input_model`` is given, else the dict.
    ``returns_media`` lets ``media_result`` reach the model as media; ``untrusted`` marks every
    output (and error) of the tool as untrusted, so it is fenced; ``requires_approval`` gates each
    call on a decision (the run parks until one is given).
    """

    _fields: ClassVar[tuple[str, ...]] = ("name", "returns_media", "untrusted", "requires_approval")

    refusals: ClassVar[tuple[type[BaseException], ...]] = ()
    """Exceptions of ``fn`` that refuse the run instead of becoming an error result the model sees
    (an MCP server whose tool definitions changed, or that cannot be started)."""

    def __init__(
        self,
        name: str,
        description: str,
        *,
        fn: ToolFn,
        input_model: type[BaseModel] | None = None,
        input_schema: dict[str, Any] | None = None,
        returns_media: bool = False,
        untrusted: bool = False,
        requires_approval: bool = False,
    ) -> None:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ConfigurationError(
                f"tool name {name!r} is not accepted by the providers; use 1-64 letters, digits, "
                "'_' or '-'.",
                code="invalid_tool_definition",
            )
        if not isinstance(description, str):
            raise ConfigurationError(
                f"tool {name!r}: description must be a string.", code="invalid_tool_definition"
            )
        if not callable(fn):
            raise ConfigurationError(
                f"tool {name!r}: fn must be a function (sync or async) taking the validated input.",
                code="invalid_tool_definition",
            )
        if input_model is not None and input_schema is not None:
            raise ConfigurationError(
                f"tool {name!r}: give input_model or input_schema, not both.",
                code="invalid_tool_definition",
            )
        if input_model is not None and not (
            isinstance(input_model, type) and issubclass(input_model, BaseModel)
        ):
            raise ConfigurationError(
                f"tool {name!r}: input_model must be a pydantic BaseModel subclass.",
                code="invalid_tool_definition",
            )
        schema = _EMPTY_OBJECT_SCHEMA if input_schema is None else input_schema
        if input_model is not None:
            schema = input_model.model_json_schema()
        _check_schema(name, schema)
        self.name = name
        self.description = description
        self.fn = fn
        self.input_model = input_model
        self.input_schema: dict[str, Any] = schema
        self.returns_media = bool(returns_media)
        self.untrusted = bool(untrusted)
        self.requires_approval = bool(requires_approval)
        self._validator = import_jsonschema().Draft202012Validator(schema)  # see _check_schema

    def __repr__(self) -> str:
        flags = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"ToolDefinition({flags})"

    @property
    def spec(self) -> ToolSpec:
        """The menu entry sent to the provider: name, description and input JSON Schema."""
        return ToolSpec(
            name=self.name, description=self.description, input_schema=self.input_schema
        )

    def validate_input(self, data: dict[str, Any]) -> tuple[Any, str | None]:
        """Validate a call's input: ``(value, None)`` on success, ``(None, message)`` on failure.

        The message names the field and the rule, for the model to correct its call.
        """
        if self.input_model is not None:
            try:
                return self.input_model.model_validate(data), None
            except ValidationError as exc:
                problems = [
                    f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
                    for e in exc.errors(include_url=False)
                ]
                return None, "; ".join(problems)
        errors = sorted(self._validator.iter_errors(data), key=lambda e: list(e.absolute_path))
        if not errors:
            return data, None
        problems = [
            f"{'.'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}" for e in errors
        ]
        return None, "; ".join(problems)

    def result_part(
        self, call_id: str, outcome: Any, *, capabilities: Capabilities
    ) -> ToolResultPart | None:
        """This tool's own result part for a journaled outcome, or None for the standard one.

        The standard result is the ``{"tool", "result"}`` text envelope (or a ``media_result``);
        a tool with rules of its own (an MCP tool: marked text, media by ref) builds it here,
        from the journaled outcome only, so a replay builds the same part.
        """
        return None

    async def call(self, value: Any) -> Any:
        """Run ``fn`` on a validated input, awaiting it when it is async."""
        result = self.fn(value)
        if inspect.isawaitable(result):
            result = await result
        return result


def _check_schema(name: str, schema: Any) -> None:
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ConfigurationError(
            f'tool {name!r}: input_schema must be a JSON Schema object with "type": "object" '
            "(the providers take only object inputs).",
            code="invalid_tool_definition",
        )
    # jsonschema is imported by the first tool defined (about 25 ms: a chat with no tool never
    # pays it; later calls find it in sys.modules), its format grammars later still.
    jsonschema = import_jsonschema()
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ConfigurationError(
            f"tool {name!r}: input_schema is not valid JSON Schema: {exc.message}.",
            code="invalid_tool_definition",
        ) from exc


@runtime_checkable
class Toolset(Protocol):
    """Something that lends a run tools it lists at run time (``MCPToolset``).

    ``agent_loop`` and ``Chat`` accept one wherever they accept a ``ToolDefinition``; the loop
    asks it for its tools once per run, before the first model turn. The listing must be a
    journaled step of ``execution``, so a replay gets the same menu without the tools' source.
    """

    async def tools_for(self, execution: Execution, *, store: Any = None) -> list[ToolDefinition]:
        """The tools for a run on ``execution``; ``store`` keeps media results (may be None)."""
        ...


async def lend_tools(
    execution: Execution,
    tools: Sequence[ToolDefinition | Toolset],
    resolver: object,
) -> list[ToolDefinition]:
    """The run's tools with each toolset replaced by the tools it lends (in order)."""
    store = getattr(resolver, "store", None)
    out: list[ToolDefinition] = []
    for item in tools:
        if isinstance(item, Toolset):
            out.extend(await item.tools_for(execution, store=store))
        else:
            out.append(item)
    return out


def menu_of(tools: Sequence[ToolDefinition]) -> tuple[list[ToolSpec], dict[str, ToolDefinition]]:
    """The provider menu and the name → tool table; duplicate names are refused."""
    table: dict[str, ToolDefinition] = {}
    for tool in tools:
        if not isinstance(tool, ToolDefinition):
            raise ConfigurationError(
                f"tools must be ToolDefinition instances, got {type(tool).__name__}.",
                code="invalid_tool_definition",
            )
        if tool.name in table:
            raise ConfigurationError(
                f"two tools are named {tool.name!r}; tool names must be unique on a menu.",
                code="invalid_tool_definition",
            )
        table[tool.name] = tool
    return [t.spec for t in tools], table
