"""An ``MCPToolset``'s arguments checked, and the default names of servers (issue 28)."""

from __future__ import annotations

import os
import re
from collections.abc import Collection

from loom_nb.errors import ConfigurationError

__all__ = ["TOOL_NAME_BAD", "check_options", "default_name", "safe_name"]

NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
TOOL_NAME_BAD = re.compile(r"[^A-Za-z0-9_-]")
"""Characters a provider does not take in a tool name (replaced by ``_`` on the menu)."""


def check_options(
    name: object,
    trusted: object,
    requires_approval: object,
    call_timeout: object,
    startup_timeout: object,
    prefix: object,
) -> None:
    problem: str | None = None
    if not isinstance(name, str) or not NAME.fullmatch(name):
        problem = f"name {name!r} must be 1-64 letters, digits, '_', '-' or '.'"
    elif not isinstance(trusted, bool):
        problem = f"trusted is True or False, not {trusted!r}"
    elif not isinstance(requires_approval, bool) and not (
        isinstance(requires_approval, Collection)
        and not isinstance(requires_approval, str)
        and all(isinstance(n, str) for n in requires_approval)
    ):
        problem = "requires_approval is True, False or a collection of tool names"
    elif any(
        isinstance(t, bool) or not isinstance(t, int | float) or not t > 0
        for t in (call_timeout, startup_timeout)
    ):
        problem = "call_timeout and startup_timeout are positive numbers of seconds"
    elif not isinstance(prefix, str) or TOOL_NAME_BAD.search(prefix) or len(prefix) > 32:
        problem = "prefix is at most 32 letters, digits, '_' or '-'"
    if problem is not None:
        raise ConfigurationError(f"MCPToolset: {problem}.", code="invalid_argument")


def default_name(argv: list[str]) -> str:
    script = next(
        (a for a in reversed(argv[1:]) if a.endswith((".py", ".js", ".mjs", ".ts"))), None
    )
    base = os.path.basename(script or argv[0])
    return safe_name(base.rsplit(".", 1)[0] if "." in base else base)


def safe_name(text: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:64]
    return cleaned or "mcp"
