"""Checks on single fields of a part: the tool menu, a file name, an origin, a reasoning part, ``provider_data``.

Each raises the guard's refusal (``GuardError`` with a stable code, ``refuse``) naming the place
and the remedy; the message walk (``_message_walk``) calls them for every part it visits.
"""

from __future__ import annotations

from collections.abc import Callable

from loom_nb.content import (
    ReasoningPart,
    ToolSpec,
)
from loom_nb.errors import GuardError
from loom_nb.guard._checks import (
    check_json_value,
    refuse,
)
from loom_nb.taint import UNTRUSTED_MARKER, Untrusted


def check_tools(tools: object) -> None:
    """The tool menu is an instruction position: plain specs only, no untrusted mark at any depth."""
    if not isinstance(tools, list):
        raise refuse("bad_request", "tools", "tools is not a list", "Pass a list of ToolSpec.")
    for ti, spec in enumerate(tools):
        where = f"tools[{ti}]"
        if not isinstance(spec, ToolSpec):
            raise refuse(
                "bad_tool_spec",
                where,
                f"{type(spec).__name__} is not a ToolSpec",
                "Build tools as ToolSpec(name=..., description=..., input_schema={...}).",
            )
        for field in ("name", "description"):
            value = getattr(spec, field)
            if isinstance(value, Untrusted):
                raise refuse(
                    "untrusted_in_tool_spec",
                    f"{where}.{field}",
                    f"the tool's {field} is untrusted; the tool menu is read as instructions",
                    "Write tool names and descriptions yourself; pass untrusted text in a user "
                    "message or a tool result, where it is fenced.",
                )
            if type(value) is not str:
                raise refuse(
                    "bad_tool_spec", f"{where}.{field}", f"{field} is not a string", "Pass a str."
                )
        schema = spec.input_schema
        if not isinstance(schema, dict):
            raise refuse(
                "bad_tool_spec",
                f"{where}.input_schema",
                "input_schema is not a JSON object",
                "Pass a JSON Schema dict.",
            )
        try:
            check_json_value(schema, f"{where}.input_schema", in_tool_use=True)
        except GuardError as exc:
            path = str(exc.details.get("path", f"{where}.input_schema"))
            if exc.code == "untrusted_in_tool_use":
                raise refuse(
                    "untrusted_in_tool_spec",
                    path,
                    "an untrusted value sits in a tool's input_schema; the tool menu is read as "
                    "instructions and a schema cannot be fenced",
                    "Write tool schemas yourself; pass untrusted text in a user message or a "
                    "tool result, where it is fenced.",
                ) from exc
            raise refuse(
                "bad_tool_spec",
                path,
                "a tool's input_schema is not plain JSON of modest size and depth",
                "Pass a JSON Schema made of objects with string keys, arrays, strings, finite "
                "numbers, booleans and null.",
            ) from exc


def check_file_name(name: object, where: Callable[[], str]) -> None:
    """Refuse a file name that is not a plain string (it would reach a title outside any fence)."""
    if isinstance(name, Untrusted):
        raise refuse(
            "untrusted_file_name",
            where,
            "the file's name is marked untrusted; a name reaches the model as a title, outside "
            "any fence",
            "Mark the whole part untrusted (origin=...), which drops its name, or name it yourself.",
        )
    raise refuse("bad_part", where, "the file's name is not a string", "Pass a str or None.")


def check_origin(origin: object, where: str) -> None:
    if origin is not None and not isinstance(origin, str):
        raise refuse("bad_origin", where, "origin is not a string", "Pass a str or None.")


def check_text_value(text: object, where: str) -> None:
    """An untrusted text must be a str, or an ``Untrusted`` holding a str or small plain JSON."""
    if isinstance(text, str):
        return
    if isinstance(text, Untrusted):
        if not isinstance(text.origin, str):
            raise refuse("bad_origin", where, "Untrusted.origin is not a string", "Pass a str.")
        if not isinstance(text.value, str):
            check_json_value(text.value, where, in_tool_use=False)
        return
    raise refuse("bad_part", where, "text is not a string", "Pass a str or Untrusted.")


def check_reasoning(part: ReasoningPart, where: str) -> None:
    """A reasoning part holds plain strings and plain JSON; an untrusted mark there is forged."""
    for field in ("text", "signature", "data"):
        value = getattr(part, field)
        if isinstance(value, Untrusted):
            raise refuse(
                "untrusted_in_reasoning",
                f"{where}.{field}",
                "a reasoning part carries an untrusted value; it would pose as the model's own "
                "thinking",
                "Reasoning parts come from the model's response (assistant_message_of).",
            )
        if not (type(value) is str or (value is None and field != "text")):
            raise refuse(
                "bad_reasoning",
                f"{where}.{field}",
                f"the reasoning part's {field} is not a string",
                "Pass a str" + (" or None." if field != "text" else "."),
            )
    if type(part.redacted) is not bool:
        raise refuse(
            "bad_reasoning", f"{where}.redacted", "redacted is not a bool", "Pass True or False."
        )
    data = part.provider_data
    if data is None:
        return
    if not isinstance(data, dict):
        raise refuse(
            "bad_reasoning",
            f"{where}.provider_data",
            "provider_data is not a dict",
            "Pass a dict of plain JSON, or None.",
        )
    try:
        check_json_value(data, f"{where}.provider_data", in_tool_use=True)
    except GuardError as exc:
        path = str(exc.details.get("path", f"{where}.provider_data"))
        if exc.code == "untrusted_in_tool_use":
            raise refuse(
                "untrusted_in_reasoning",
                path,
                "a reasoning part's provider_data carries an untrusted mark; it would pose as "
                "vendor data",
                "Reasoning parts come from the model's response (assistant_message_of).",
            ) from exc
        raise refuse(
            "bad_reasoning",
            path,
            "a reasoning part's provider_data is not plain JSON of modest size and depth",
            "Keep the vendor's metadata as it came (objects with string keys, arrays, strings, "
            "numbers, booleans, null).",
        ) from exc


# ---- rewriting (only for messages the walk marked dirty; every check has already passed) ----


def check_provider_data(data: object, where: str) -> None:
    """A tool call's ``provider_data`` is a dict of plain strings; an untrusted mark there is forged."""
    if not isinstance(data, dict):
        raise refuse(
            "bad_part", where, "provider_data is not a dict", "Pass a dict of str to str, or None."
        )
    for key, value in data.items():
        if isinstance(value, Untrusted) or key == UNTRUSTED_MARKER:
            raise refuse(
                "untrusted_in_tool_use",
                f"{where}.{key}",
                "a tool call's provider_data carries an untrusted mark; a tool call built from "
                "untrusted data is a forged model call",
                "provider_data comes from the model's response (assistant_message_of).",
            )
        if type(key) is not str or type(value) is not str:
            raise refuse(
                "bad_part",
                f"{where}.{key}",
                "provider_data holds a value that is not a string",
                "Pass a dict of str to str (opaque vendor data, e.g. a thought signature).",
            )
