"""Request bodies checked against the official SDK's request types (test-only dependency).

The SDKs' TypedDicts are the vendors' own description of a valid body, so a body they refuse is
one the API may refuse. pydantic validates a TypedDict; wrapping it in a list lets the adapter
take a config, and ``extra="forbid"`` then reaches every nested TypedDict, so an unknown key is
refused as well as a missing required one.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import ConfigDict, TypeAdapter, ValidationError

__all__ = ["responses_body_errors"]

_STRICT = ConfigDict(extra="forbid", strict=True)


@cache
def _responses(stream: bool) -> TypeAdapter[Any]:
    from openai.types.responses.response_create_params import (
        ResponseCreateParamsNonStreaming,
        ResponseCreateParamsStreaming,
    )

    params = ResponseCreateParamsStreaming if stream else ResponseCreateParamsNonStreaming
    return TypeAdapter(list[params], config=_STRICT)  # type: ignore[valid-type]


def responses_body_errors(body: dict[str, Any]) -> str | None:
    """None when ``body`` is a valid Responses API body for the ``openai`` SDK, else the errors.

    Unions report one error per member they tried; the errors naming the deepest location are
    the ones that say what is wrong, so only those are kept.
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
