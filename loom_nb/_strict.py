"""Bad input to a model is a ``ContentValidationError``, however the model is built (issue 17).

``Message.model_validate(bad_dict)`` is the documented way to validate a dict, and ``TextPart(text=5)``
the obvious way to build a part; both used to let pydantic's ``ValidationError`` escape, which is not
a ``LoomError``. ``StrictModel`` (the base of every content value and of the other public models)
converts it at the three public entry points: the constructor, ``model_validate`` and
``model_validate_json``.

The error raised is ``ContentModelError``: a ``ContentValidationError`` (so a ``LoomError`` with
code ``invalid_content`` and the failing field in ``details["field"]``, and a ``ValueError`` /
``TypeError``) that is ALSO a pydantic ``ValidationError`` carrying the same ``errors()``, so code
written against pydantic (``except ValidationError``, ``exc.errors()``) keeps working unchanged.

The constructor override is marked as pydantic's base ``__init__``: pydantic then keeps building
nested models and validating dicts in its core without calling it, so the hook costs nothing on
the hot path (only a direct ``Model(...)`` call goes through it).
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ValidationError

from loom_nb.errors import ContentValidationError

__all__ = ["ContentModelError", "StrictModel", "content_error"]


class ContentModelError(ContentValidationError, ValidationError):
    """A ``ContentValidationError`` that is also pydantic's ``ValidationError`` (same ``errors()``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """State comes from ``from_exception_data``; the LoomError fields are set by ``content_error``."""

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


def _is_branch_label(loc: int | str) -> bool:
    """Pydantic names union branches in error paths ('str', 'list[...]'); they are not fields."""
    return isinstance(loc, str) and (
        loc in {"str", "Untrusted", "dict[str,any]", "dict", "untrusted"}
        or loc.startswith(("list[", "function-", "tagged-union["))
    )


def content_error(exc: ValidationError, what: str) -> ContentValidationError:
    """pydantic's error as a ``ContentValidationError`` naming the first bad field (also a ``ValidationError``)."""
    errors = exc.errors(include_url=False)
    # Unions report one error per branch; the deepest one is about the field the caller meant.
    first = max(errors, key=lambda e: len(e["loc"])) if errors else {"loc": (), "msg": str(exc)}
    where = ".".join(str(p) for p in first["loc"] if not _is_branch_label(p)) or "(root)"
    count = exc.error_count()
    more = f" (and {count - 1} more problem{'s' if count > 2 else ''})" if count > 1 else ""
    message = (
        f"invalid {what}: field '{where}': {first['msg']}{more}. "
        "Parts are dicts with a 'type' of text, image, audio, file, tool_use, tool_result or "
        "reasoning; roles are 'user' or 'assistant'; a media source is "
        "{'kind': 'ref', 'ref': {'address': ...}} or {'kind': 'data', 'data': <base64>}."
    )
    details: dict[str, Any] = {
        "field": where,
        "errors": exc.errors(include_url=False, include_context=False, include_input=False),
    }
    try:
        error: ContentValidationError = ContentModelError.from_exception_data(
            exc.title,
            exc.errors(include_url=False),  # type: ignore[arg-type]  # the same dicts rebuild it
        )
    except Exception:  # an error pydantic cannot rebuild (a custom type): the LoomError alone
        return ContentValidationError(message, field=where, errors=details["errors"])
    error.message = message
    error.code = ContentValidationError.default_code
    error.details = details
    error.args = (message,)
    return error


class StrictModel(BaseModel):
    """A pydantic model whose public validation raises ``ContentValidationError`` (see the module)."""

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise content_error(exc, type(self).__name__) from exc

    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> Self:
        """Validate ``obj`` (a dict, or an instance); bad input raises ``ContentValidationError``."""
        try:
            return super().model_validate(obj, **kwargs)
        except ValidationError as exc:
            raise content_error(exc, cls.__name__) from exc

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, **kwargs: Any) -> Self:
        """Validate JSON text; bad input raises ``ContentValidationError``."""
        try:
            return super().model_validate_json(json_data, **kwargs)
        except ValidationError as exc:
            raise content_error(exc, cls.__name__) from exc
