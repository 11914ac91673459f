"""Structured output: the schema of an ``output_type``, its per-vendor forms, and validating the answer.

``complete(request, output_type=Model)`` puts ``Model.model_json_schema()`` on the request as
``output_schema`` (so the journal records it and a changed schema diverges on replay) and each
provider sends it in the vendor's native JSON-schema mode:

- OpenAI Chat Completions: ``response_format: {type: json_schema, json_schema: {name, schema,
  strict}}``; Responses: ``text.format: {type: json_schema, name, schema, strict}``. Strict mode
  needs every object closed (``additionalProperties: false``) with all its properties required,
  so ``strict_openai_schema`` rewrites the schema that way (as the OpenAI SDK does: a field with a
  default must then be sent, which still validates) and falls back to ``strict: false`` for a
  schema strict mode cannot express (a free-form ``dict`` field).
- Anthropic: the Messages API's native structured outputs, ``output_config: {format: {type:
  json_schema, schema}}`` (generally available since the 4.5 models; no forced tool needed, so
  the answer arrives as text like on the other vendors). It needs closed objects and takes no
  numeric or length constraints, so ``anthropic_schema`` closes objects and moves those
  constraints into the description; pydantic still enforces them on the answer.
- Gemini: ``generationConfig.responseMimeType: application/json`` with
  ``responseJsonSchema`` (the JSON Schema as is, ``$defs`` included).

Whatever the vendor enforced, the answer is validated by pydantic here: a mismatch is
``StructuredOutputError(code="output_invalid")`` carrying the raw text, never a half-filled model.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from loom_nb.content import LlmRequest, LlmResponse, parse_request
from loom_nb.errors import ConfigurationError, StructuredOutputError
from loom_nb.settings import ModelSettings, merge_settings

__all__ = [
    "anthropic_schema",
    "check_output_type",
    "check_vendor_output",
    "effective_request",
    "openai_json_schema",
    "output_schema_of",
    "schema_name",
    "strict_openai_schema",
    "validate_output",
]

_ANTHROPIC_UNSUPPORTED = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
)


_ANTHROPIC_STRUCTURED = re.compile(r"^claude-(?:opus|sonnet|haiku)-(?:4-[1-9](?!\d{7})|[5-9])")
_GEMINI_JSON_WITH_TOOLS = re.compile(r"^gemini-[3-9]")


def check_vendor_output(vendor: str, model: str, request: LlmRequest) -> None:
    """Refuse, before any I/O, structured output the vendor's model cannot do.

    Anthropic's structured outputs exist from the 4.5 models (and Opus 4.1) on; Gemini before 3
    refuses a JSON response schema together with function calling.
    """
    if vendor == "Anthropic" and not _ANTHROPIC_STRUCTURED.match(model):
        why = "Anthropic's structured outputs need Claude Opus 4.1, Sonnet 4.5, Haiku 4.5 or later."
    elif vendor == "Gemini" and request.tools and not _GEMINI_JSON_WITH_TOOLS.match(model):
        why = "Gemini before 3 refuses a JSON response schema together with tools."
    else:
        return
    raise ConfigurationError(
        f"{vendor} model {model!r} cannot take output_type here: {why} Nothing was sent. Use a "
        "newer model, or drop output_type (for Gemini: or the tools) for this call.",
        code="unsupported_output_type",
        provider=vendor,
        model=model,
    )


def check_output_type(output_type: Any) -> type[BaseModel] | None:
    """``output_type`` itself when it is a pydantic model class (or None); anything else is refused."""
    if output_type is None:
        return None
    if isinstance(output_type, type) and issubclass(output_type, BaseModel):
        return output_type
    raise ConfigurationError(
        f"output_type must be a pydantic BaseModel subclass, not {output_type!r}. Declare the "
        "answer's shape as `class Answer(BaseModel): ...` and pass output_type=Answer.",
        code="invalid_output_type",
    )


def output_schema_of(output_type: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema of ``output_type`` as pydantic writes it (validation mode)."""
    return output_type.model_json_schema()


def schema_name(schema: dict[str, Any]) -> str:
    """A name for the schema (its ``title``) that fits OpenAI's ``^[a-zA-Z0-9_-]{1,64}$``."""
    title = schema.get("title")
    name = re.sub(r"[^a-zA-Z0-9_-]", "_", title) if isinstance(title, str) else ""
    return name[:64] or "output"


def _walk(node: Any, visit: Any) -> None:
    """Call ``visit`` on every subschema dict of ``node`` (properties, items, unions, $defs)."""
    if not isinstance(node, dict):
        return
    visit(node)
    for key in ("properties", "$defs", "definitions", "patternProperties"):
        children = node.get(key)
        if isinstance(children, dict):
            for child in children.values():
                _walk(child, visit)
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        children = node.get(key)
        if isinstance(children, list):
            for child in children:
                _walk(child, visit)
    for key in ("items", "additionalProperties", "not"):
        _walk(node.get(key), visit)


def strict_openai_schema(schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The schema rewritten for OpenAI strict mode, and whether strict mode can take it.

    Every object gets ``additionalProperties: false`` and all its properties required; a
    ``default: null`` is dropped. An object with open ``additionalProperties`` (a ``dict`` field)
    cannot be strict: the original schema is returned with ``False``.
    """
    result = copy.deepcopy(schema)
    strict = True

    def visit(node: dict[str, Any]) -> None:
        nonlocal strict
        if node.get("default", 0) is None:
            del node["default"]
        ref = node.get("$ref")
        if isinstance(ref, str) and len(node) > 1:
            # Strict mode takes a $ref only on its own: inline the definition under its siblings.
            target = _resolve(result, ref)
            if target is None:
                strict = False
            else:
                del node["$ref"]
                for key, value in copy.deepcopy(target).items():
                    node.setdefault(key, value)
        if node.get("type") == "object" or "properties" in node:
            extra = node.get("additionalProperties")
            if extra not in (None, False):
                strict = False
            node["additionalProperties"] = False
            node["required"] = list(node.get("properties", {}))

    _walk(result, visit)
    return (result, True) if strict else (schema, False)


def openai_json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``{"name", "schema", "strict"}``: the json_schema format both OpenAI APIs take."""
    strict_schema, strict = strict_openai_schema(schema)
    return {"name": schema_name(schema), "schema": strict_schema, "strict": strict}


def _resolve(root: dict[str, Any], ref: str) -> dict[str, Any] | None:
    """The local definition ``#/...`` names, or None for anything else."""
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for step in ref[2:].split("/"):
        node = node.get(step) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


def anthropic_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema for Anthropic structured outputs: objects closed, numeric/length limits in the description."""
    result = copy.deepcopy(schema)

    def visit(node: dict[str, Any]) -> None:
        if node.get("type") == "object" or "properties" in node:
            node.setdefault("additionalProperties", False)
        moved = {key: node.pop(key) for key in _ANTHROPIC_UNSUPPORTED if key in node}
        if moved:
            note = ", ".join(f"{key}: {value}" for key, value in moved.items())
            described = node.get("description")
            node["description"] = f"{described} ({note})" if described else f"({note})"

    _walk(result, visit)
    return result


def validate_output(
    response: LlmResponse, output_type: type[BaseModel] | None, *, vendor: str
) -> LlmResponse:
    """``response`` with ``output`` set to the validated answer (the model, or the JSON value).

    The answer is the response's text parsed as JSON. Text that is not JSON, or JSON that does not
    fit ``output_type``, raises ``StructuredOutputError`` (code ``output_invalid``) carrying the
    raw text in ``raw_text``; so does an empty answer (a refusal, or output cut at max tokens).
    A response that calls tools is not the answer yet (the model asks for data first): it comes
    back as it is, ``output`` None, and the turn after the tool results is validated.
    """
    if response.tool_calls:
        return response
    raw = response.content  # raw-content: LlmResponse.content is str
    where = f"{vendor} answered"
    if not raw.strip():
        raise StructuredOutputError(
            f"{where} with no text where structured output was asked for (stop reason "
            f"{response.stop_reason!r}). If it stopped at max_tokens, raise max_tokens; if it "
            "refused, rephrase the request.",
            raw_text=raw,
            stop_reason=response.stop_reason,
        )
    try:
        if output_type is None:
            value: Any = json.loads(raw)
        else:
            value = output_type.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        field = ".".join(str(p) for p in first["loc"]) or "(root)"
        raise StructuredOutputError(
            f"{where} with output that does not match {_name(output_type)}: field '{field}': "
            f"{first['msg']} (stop reason {response.stop_reason!r}). The raw text is in "
            "error.raw_text; retry, or loosen the model.",
            raw_text=raw,
            field=field,
            stop_reason=response.stop_reason,
        ) from exc
    except (ValueError, RecursionError) as exc:
        raise StructuredOutputError(
            f"{where} with text that is not JSON where {_name(output_type)} was asked for "
            f"(stop reason {response.stop_reason!r}). The raw text is in error.raw_text.",
            raw_text=raw,
            stop_reason=response.stop_reason,
        ) from exc
    return response.model_copy(update={"output": value})


def _name(output_type: type[BaseModel] | None) -> str:
    return output_type.__name__ if output_type is not None else "the output schema"


def effective_request(
    request: LlmRequest | Mapping[str, Any],
    defaults: ModelSettings | None,
    settings: ModelSettings | None,
    output_type: type[BaseModel] | None,
) -> LlmRequest:
    """The request a provider sends: settings merged field by field (call > request > defaults)
    and ``output_schema`` set from ``output_type`` when one is given."""
    if (
        defaults is None
        and settings is None
        and output_type is None
        and type(request) is LlmRequest
        and request.settings is None
    ):
        return request  # nothing to merge or set (a plain turn): the request as it is
    parsed = parse_request(request)
    merged = merge_settings(defaults, parsed.settings, settings)
    schema = output_schema_of(output_type) if output_type is not None else parsed.output_schema
    update: dict[str, Any] = {}
    if merged != parsed.settings:
        update["settings"] = merged
    if schema != parsed.output_schema:
        update["output_schema"] = schema
    return parsed.model_copy(update=update) if update else parsed
