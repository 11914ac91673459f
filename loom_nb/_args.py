"""Argument checks for public entry points: a wrong-typed argument is a typed error (issue 17).

Python would otherwise fail somewhere inside with an ``AttributeError`` or a ``TypeError`` that
names neither the argument nor the remedy. ``check_type`` refuses it up front as the
``LoomError`` the caller asked for (``ConfigurationError`` for settings and collaborators,
``ContentValidationError`` for content), with code ``invalid_argument``.
"""

from __future__ import annotations

from typing import Any

from loom_nb.errors import LoomError

__all__ = ["check_type"]


def check_type(
    value: Any,
    expected: type | tuple[type, ...],
    *,
    name: str,
    where: str,
    error: type[LoomError],
    optional: bool = False,
    hint: str = "",
) -> None:
    """Raise ``error`` (code ``invalid_argument``) unless ``value`` is an ``expected`` (or None if ``optional``)."""
    if value is None and optional:
        return
    kinds = expected if isinstance(expected, tuple) else (expected,)
    if isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds):
        return
    wanted = " or ".join(k.__name__ for k in kinds) + (" or None" if optional else "")
    raise error(
        f"{where}: {name} must be {wanted}, not {type(value).__name__} ({value!r:.60}). "
        + (hint or "Pass a value of that type."),
        code="invalid_argument",
        argument=name,
    )
