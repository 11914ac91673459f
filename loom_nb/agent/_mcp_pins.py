"""Pinned MCP menus: trust on first use, as SSH's known hosts (issue 28).

An MCP server's tool names, descriptions and input schemas reach the model as instructions, so a
server that changes them after it was trusted (a "rug pull") changes what the model is told to
do. The first time a journal sees a server, identified by its name and its command or URL
(never its environment, headers, or the URL's password and query values, which may hold
secrets: ``_mcp_url``), the definitions the model would see
are recorded with their hash. When the same server later offers other definitions to any chat on
that journal, the run is refused with a diff (``MCPToolsChangedError``, code
``mcp_tools_changed``) until the user accepts the change, which records the new definitions as
the next version of the pin.

The pins live in the journal itself, so they travel with it (SQLite file or PostgreSQL) and need
no schema of their own: version ``n`` of a server's pin is the execution
``mcp-pin:<name>:<key>:<n>`` holding one step ``pin`` whose output is the record, completed at
once. Executions are append-only, so the history of what was accepted stays readable.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from typing import TYPE_CHECKING, Any

from loom_nb.content import canonical_json

if TYPE_CHECKING:
    from loom_nb.journal import Journal

__all__ = [
    "PIN_PREFIX",
    "accept_pin",
    "definitions_hash",
    "diff_listings",
    "identity_key",
    "latest_pin",
]

PIN_PREFIX = "mcp-pin:"
"""The execution ids of pins start with this."""

_MAX_VERSIONS = 10_000


def identity_key(identity: dict[str, Any]) -> str:
    """The ``sha256:`` of a server identity (name, transport, command or URL)."""
    return "sha256:" + hashlib.sha256(canonical_json(identity).encode("utf-8")).hexdigest()


def definitions_hash(tools: list[dict[str, Any]]) -> str:
    """The ``sha256:`` of what the model sees of a server's tools (names, descriptions, schemas)."""
    shown = sorted(
        ({k: t[k] for k in ("name", "description", "input_schema")} for t in tools),
        key=lambda t: str(t["name"]),
    )
    return "sha256:" + hashlib.sha256(canonical_json(shown).encode("utf-8")).hexdigest()


def _pin_id(name: str, key: str, version: int) -> str:
    return f"{PIN_PREFIX}{name}:{key.removeprefix('sha256:')[:16]}:{version}"


def _recorded(journal: Journal, execution_id: str) -> dict[str, Any] | None:
    """The pin record of one version (the ``pin`` step's output), or None when there is none."""
    for event in journal.events(execution_id):
        if event.kind == "step_completed" and isinstance(event.payload, dict):
            output = event.payload.get("output")
            if isinstance(output, dict) and isinstance(output.get("hash"), str):
                return output
    return None


def latest_pin(journal: Journal, name: str, key: str) -> tuple[int, dict[str, Any] | None]:
    """The number of recorded versions and the newest record (None when never seen)."""
    found: dict[str, Any] | None = None
    for version in range(_MAX_VERSIONS):
        record = _recorded(journal, _pin_id(name, key, version))
        if record is None:
            return version, found
        found = record
    return _MAX_VERSIONS, found


async def accept_pin(
    journal: Journal, name: str, key: str, identity: dict[str, Any], listing: dict[str, Any]
) -> dict[str, Any]:
    """Record ``listing`` as the newest version of the server's pin; return the record."""
    version, current = latest_pin(journal, name, key)
    if current is not None and current.get("hash") == listing["hash"]:
        return current
    record = {
        "server": identity,
        "hash": listing["hash"],
        "tools": listing["tools"],
        "version": version,
    }
    execution = journal.execution(_pin_id(name, key, version))

    def keep(_input: Any) -> dict[str, Any]:
        return record

    stored = await execution.execute("pin", keep, {"server": identity})
    await execution.complete({"hash": listing["hash"]})
    return stored if isinstance(stored, dict) else record


def diff_listings(old: dict[str, Any], new: dict[str, Any]) -> tuple[str, dict[str, list[str]]]:
    """A readable diff of two listings and the names added, removed and changed."""
    before = {str(t["name"]): t for t in old.get("tools", [])}
    after = {str(t["name"]): t for t in new.get("tools", [])}
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    changed = sorted(n for n in set(before) & set(after) if _shown(before[n]) != _shown(after[n]))
    lines: list[str] = []
    for name in added:
        lines.append(f"+ tool {name!r} added")
        lines.extend("+   " + line for line in _pretty(after[name]))
    for name in removed:
        lines.append(f"- tool {name!r} removed")
    for name in changed:
        lines.append(f"~ tool {name!r} changed:")
        lines.extend(
            "    " + line.rstrip("\n")
            for line in difflib.unified_diff(
                _pretty(before[name]),
                _pretty(after[name]),
                fromfile="pinned",
                tofile="offered now",
                lineterm="",
                n=1,
            )
        )
    return "\n".join(lines), {"added": added, "removed": removed, "changed": changed}


def _shown(tool: dict[str, Any]) -> str:
    return canonical_json({k: tool.get(k) for k in ("description", "input_schema")})


def _pretty(tool: dict[str, Any]) -> list[str]:
    body = {"description": tool.get("description"), "input_schema": tool.get("input_schema")}
    return json.dumps(body, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
