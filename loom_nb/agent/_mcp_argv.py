"""A stdio MCP server's command line split into what may be written down and what may not.

A server's pin (``_mcp_pins``) records its command line in the journal, and ``repr`` and errors
show it. Server instructions often put the key on it (``npx -y @upstash/context7-mcp --api-key
KEY``), although ``env=`` is the place for it. So what is written keeps every argument but these,
each written ``…``:

- the value of a flag whose name says it is a secret (``key``, ``token``, ``secret``,
  ``password``, ``pwd``, ``auth``, ``credential``, ``bearer``, ``cookie`` in it): the next
  argument (``--api-key KEY``), or what follows ``=`` (``--api-key=KEY`` is written
  ``--api-key=…``);
- an argument that looks generated: a UUID, or 20 characters or more of letters, digits, ``_``
  and ``-`` holding both letters and digits (``ghp_...``, ``sk-...``).

The command itself (the first argument) is kept, and a negated flag (``--no-auth``) takes no
value. A switch such as ``--use-auth`` makes the next argument ``…`` too: nothing secret is
written by mistake, and two servers differing only there are one server to the pin, as two
tokens are. The values are also taken out of messages (a
server's stderr may echo its command line). A command line with none of these is written as
before this rule, so existing pins keep their key; for the others ``legacy`` is the command line
as given, whose pin is looked up once and recorded again (``MCPToolset._pin``), only in memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from loom_nb.agent._mcp_url import REDACTED, SHORTEST_SECRET, UUID, Redacting, spellings

__all__ = ["CommandLine", "parse_command"]

_SECRET_FLAG = re.compile(
    r"-{1,2}[a-z0-9_.-]*(?:key|token|secret|passw(?:or)?d|pwd|auth|credential|bearer|cookie)"
    r"[a-z0-9_.-]*",
    re.IGNORECASE,
)
_NEGATED = re.compile(r"--no-", re.IGNORECASE)
"""A negated flag (``--no-auth``) is a switch: it takes no value."""
_GENERATED = re.compile(
    UUID + r"|(?=.*[0-9])(?=.*[a-z])[a-z0-9_-]{20,}",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class CommandLine(Redacting):
    """A stdio server's command line: its public form, the form as given, what never to quote."""

    public: tuple[str, ...]
    """What the pin, ``repr`` and errors show: secret values written ``…``."""
    legacy: tuple[str, ...] | None
    """The command line as given (what versions before this rule pinned), when it differs."""
    secrets: tuple[str, ...]
    """The secret values in every spelling a message may hold, longest first (``redact``)."""


def parse_command(argv: list[str]) -> CommandLine:
    """Split ``argv`` (the command first) into its public form and its secret values."""
    public = argv[:1]
    values: list[str] = []
    secret_next = False
    for arg in argv[1:]:
        flag, equals, value = arg.partition("=")
        if secret_next and not arg.startswith("-"):
            values.append(arg)
            public.append(REDACTED)
        elif arg.startswith("-") and _SECRET_FLAG.fullmatch(flag) and not _NEGATED.match(flag):
            if equals and value:
                values.append(value)
                arg = flag + "=" + REDACTED
            public.append(arg)
            secret_next = not equals
            continue
        elif _GENERATED.fullmatch(arg):
            values.append(arg)
            public.append(REDACTED)
        else:
            public.append(arg)
        secret_next = False
    return CommandLine(
        public=tuple(public),
        legacy=tuple(argv) if public != argv else None,
        secrets=spellings(values, shortest=SHORTEST_SECRET),
    )
