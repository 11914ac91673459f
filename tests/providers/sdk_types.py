"""Check a wire body against a vendor SDK's request ``TypedDict``, strictly.

The official SDKs (``anthropic``, ``openai``; test-only dependencies) describe every request field
as a ``TypedDict``. pydantic validates those leniently (an unknown key is ignored, so a misspelt
``cache_contol`` would pass), so ``check_typed`` walks the value itself: every key must be one the
type declares (by its wire name: ``PropertyInfo(alias=...)`` is honoured), every required key must
be there, literals must match, and a union must match one of its members.
"""

from __future__ import annotations

import collections.abc
import functools
import types
import typing
from typing import Any

import typing_extensions
from pydantic import ConfigDict, TypeAdapter, ValidationError

__all__ = ["SdkTypeError", "check_typed", "responses_body_errors"]


class SdkTypeError(AssertionError):
    """The value does not fit the SDK type; the message names the path."""


def _strip(tp: Any) -> tuple[Any, str | None]:
    """The type without ``Required``/``NotRequired``/``Annotated``, and an alias if any."""
    alias = None
    while True:
        origin = typing.get_origin(tp)
        if origin in (typing.Annotated, typing_extensions.Annotated):
            for meta in tp.__metadata__:
                alias = getattr(meta, "alias", None) or alias
            tp = tp.__origin__
        elif origin in (
            typing.Required,
            typing.NotRequired,
            typing_extensions.Required,
            typing_extensions.NotRequired,
        ):
            tp = typing.get_args(tp)[0]
        else:
            return tp, alias


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and typing_extensions.is_typeddict(tp)


def check_typed(value: Any, tp: Any, path: str = "body") -> None:
    """Raise ``SdkTypeError`` unless ``value`` fits ``tp`` exactly."""
    tp, _ = _strip(tp)
    if tp is Any or tp is object:
        return
    if _is_typeddict(tp):
        _check_dict(value, tp, path)
        return
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        problems = []
        for member in args:
            try:
                check_typed(value, member, path)
            except SdkTypeError as exc:
                problems.append(str(exc))
            else:
                return
        raise SdkTypeError(f"{path}: fits no member of {tp}: " + " | ".join(problems[:4]))
    if origin in (typing.Literal, typing_extensions.Literal):
        if value not in args:
            raise SdkTypeError(f"{path}: {value!r} is not one of {args}")
        return
    if tp is type(None):
        if value is not None:
            raise SdkTypeError(f"{path}: expected null, got {value!r}")
        return
    if tp in (str, int, float, bool):
        ok = isinstance(value, tp) and not (tp is int and isinstance(value, bool))
        if tp is float:
            ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok:
            raise SdkTypeError(f"{path}: expected {tp.__name__}, got {value!r:.60}")
        return
    name = getattr(origin, "__name__", "") or getattr(tp, "__name__", "")
    if origin in (dict, collections.abc.Mapping) or name in ("Dict", "Mapping"):
        if not isinstance(value, dict):
            raise SdkTypeError(f"{path}: expected an object, got {type(value).__name__}")
        if args:
            for key, item in value.items():
                check_typed(item, args[1], f"{path}.{key}")
        return
    if origin in (list, collections.abc.Iterable, collections.abc.Sequence) or name in (
        "SequenceNotStr",
        "Iterable",
        "Sequence",
        "List",
    ):
        if not isinstance(value, list):
            raise SdkTypeError(f"{path}: expected an array, got {type(value).__name__}")
        for index, item in enumerate(value):
            check_typed(item, args[0] if args else Any, f"{path}[{index}]")
        return
    raise SdkTypeError(f"{path}: the checker does not know type {tp!r}")


def _check_dict(value: Any, td: type, path: str) -> None:
    if not isinstance(value, dict):
        raise SdkTypeError(f"{path}: expected an object ({td.__name__}), got {value!r:.60}")
    hints = typing_extensions.get_type_hints(td, include_extras=True)
    fields: dict[str, tuple[str, Any]] = {}
    for name, hint in hints.items():
        _, alias = _strip(hint)
        fields[alias or name] = (name, hint)
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise SdkTypeError(f"{path}: {td.__name__} has no field {unknown}")
    required = {k for k, (name, _) in fields.items() if name in td.__required_keys__}  # type: ignore[attr-defined]
    missing = sorted(required - set(value))
    if missing:
        raise SdkTypeError(f"{path}: {td.__name__} needs {missing}")
    for key, item in value.items():
        check_typed(item, fields[key][1], f"{path}.{key}")


@functools.cache
def _responses(stream: bool) -> TypeAdapter[Any]:
    from openai.types.responses.response_create_params import (
        ResponseCreateParamsNonStreaming,
        ResponseCreateParamsStreaming,
    )

    params = ResponseCreateParamsStreaming if stream else ResponseCreateParamsNonStreaming
    return TypeAdapter(list[params], config=ConfigDict(extra="forbid", strict=True))  # type: ignore[valid-type]


def responses_body_errors(body: dict[str, Any]) -> str | None:
    """None when ``body`` is a valid Responses API body for the ``openai`` SDK, else the errors.

    Validated by pydantic against ``ResponseCreateParamsNonStreaming`` / ``...Streaming`` with
    unknown keys forbidden (wrapping the TypedDict in a list lets the adapter take that config,
    which then reaches every nested TypedDict). Here pydantic's union handling is the stricter one:
    ``check_typed`` accepts an ``input_image`` without ``detail`` through a union member where it
    is optional, pydantic does not. Unions report one error per member tried; only the errors
    naming the deepest location are kept, as they say what is wrong.
    """
    try:
        _responses(bool(body.get("stream"))).validate_python([body])
    except ValidationError as exc:
        errors = exc.errors()
        deepest = max(len(e["loc"]) for e in errors)
        return "\n".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
            for e in errors
            if len(e["loc"]) == deepest
        )
    return None
