"""An MCP server's URL split into what may be written down and what may not (issue 28).

A server's pin (``_mcp_pins``) is keyed by its URL and records it in the journal, and the URL is
shown by ``repr`` and in errors. A URL can carry credentials in two places: user and password
(``https://me:pw@host/mcp``) and the query string (many hosted MCP servers take their token as
``?api_key=...``). So what is written keeps the scheme, the host (an IPv6 host in its brackets),
the port and the path, and of the query only the parameter *names*, sorted and without repeats,
values dropped: ``https://x.example/mcp?region=eu&api_key=S`` is written
``https://x.example/mcp?api_key&region``. A value is not replaced by a digest: a short token's
digest is brute-forced in moments, and it would let anyone holding the journal test a guessed
token. So two URLs that differ only in a value are one server to the pin, as two
``Authorization`` headers are. A part of the query without ``=`` is all value and nothing of it
is kept.

Hosted servers also put the token in the path, as a capability URL: Zapier's
``https://actions.zapier.com/mcp/sk-ak-.../sse``, Pipedream's
``https://mcp.pipedream.net/<uuid>/gmail``. So a path segment that looks generated rather than named is taken for a secret and written
``…``: a UUID, or 16 characters or more of letters, digits and ``-_.~+=`` holding both letters
and digits (``https://actions.zapier.com/mcp/…/sse``). A long, named segment with a number in it
(``server-everything-2025``) is written ``…`` too: the pin then knows two such servers on one host
as one, as it does two tokens, and nothing secret is written by mistake. The segment is also
taken out of messages, as a query value is.

A URL with no query, no IPv6 host and no such segment is written as it was before these rules,
so the pins of existing journals keep their key. For the others ``legacy`` holds the forms
versions before wrote (the whole query and the IPv6 host without brackets; then, before the path
rule, the path as given): a pin recorded under one is looked up once and recorded again under the
new form (``MCPToolset._pin``). They are only ever held in memory.
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass
from urllib.parse import quote, quote_plus, unquote, unquote_plus, urlsplit, urlunsplit

from loom_nb.errors import ConfigurationError

__all__ = [
    "HTTPURL",
    "REDACTED",
    "SHORTEST_SECRET",
    "UUID",
    "Redacting",
    "parse_http_url",
    "spellings",
]

REDACTED = "…"
"""What a secret is written as."""
SHORTEST_SECRET = 4
"""Values shorter than this are not looked for in free text (every "1" would go), only in URLs."""
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
"""A UUID's spelling (to match without regard to case)."""
_GENERATED = re.compile(
    UUID + r"|(?=[^/]*[0-9])(?=[^/]*[a-z])[a-z0-9._~+=-]{16,}",
    re.IGNORECASE,
)
"""A path segment (decoded) that looks generated, a token or an id, not named: see the top."""


class Redacting:
    """What holds secrets that may not be quoted: ``redact`` takes them out of a text."""

    secrets: tuple[str, ...]
    """The secrets in every spelling a message may hold, longest first (so none is cut in two)."""

    def redact(self, text: str) -> str:
        """``text`` with every secret written ``…``."""
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        return text

    def quotes_a_secret(self, exc: BaseException) -> bool:
        """True when the traceback of ``exc`` (its causes included) would show a secret."""
        shown = "".join(traceback.format_exception(exc))
        return self.redact(shown) != shown


@dataclass(frozen=True)
class HTTPURL(Redacting):
    """An MCP server's URL: its public form, the form earlier versions wrote, what never to quote."""

    host: str
    """The host name, lower case and without brackets: the server's default name."""
    public: str
    """What the pin, ``repr`` and errors show: no user, password, query values or path token."""
    legacy: tuple[str, ...]
    """The forms versions before the query and path rules wrote that differ from ``public``."""
    secrets: tuple[str, ...]
    """Query values, path tokens, user and password in every spelling a message may hold,
    longest first."""
    queries: tuple[str, ...]
    """The whole query (``?...``) in the spellings a message may quote it in."""
    public_query: str
    """The query as ``public`` has it (``?`` and the names, or nothing)."""

    def redact(self, text: str) -> str:
        """``text`` with the URL's query values, path tokens, user and password taken out."""
        for query in self.queries:
            text = text.replace(query, self.public_query)
        return super().redact(text)


def parse_http_url(url: object) -> HTTPURL:
    """Check an http(s) URL and split it; ``ConfigurationError`` (``invalid_argument``) if not one."""
    try:
        parts = urlsplit(url) if isinstance(url, str) else None
        port = parts.port if parts is not None else None  # raises for a port out of range
    except ValueError:  # a malformed host or port
        parts = port = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"MCPToolset.http() needs an http(s) URL such as 'http://127.0.0.1:8000/mcp', "
            f"not {_shown(url)}.",
            code="invalid_argument",
        )
    host = parts.hostname
    at = f":{port}" if port else ""
    bracketed = f"[{host}]" if ":" in host else host
    names = sorted({p.split("=", 1)[0] for p in parts.query.split("&") if "=" in p} - {""})
    tokens = [s for s in parts.path.split("/") if _GENERATED.fullmatch(unquote(s))]
    path = "/".join(REDACTED if s in tokens else s for s in parts.path.split("/"))
    public = urlunsplit((parts.scheme, bracketed + at, path, "&".join(names), ""))
    before_path = urlunsplit((parts.scheme, bracketed + at, parts.path, "&".join(names), ""))
    before_query = urlunsplit((parts.scheme, host + at, parts.path, parts.query, ""))
    values = [p.split("=", 1)[-1] for p in parts.query.split("&")]
    values += [v for v in (parts.username, parts.password) if v]
    values += tokens
    return HTTPURL(
        host=host,
        public=public,
        legacy=tuple(dict.fromkeys(f for f in (before_query, before_path) if f != public)),
        secrets=spellings(values, shortest=SHORTEST_SECRET),
        queries=tuple("?" + q for q in spellings([parts.query], shortest=1)),
        public_query="?" + "&".join(names) if names else "",
    )


def spellings(values: list[str], *, shortest: int) -> tuple[str, ...]:
    """Each value as written, decoded and encoded again, longest first (so none is cut in two)."""
    found: set[str] = set()
    for value in values:
        for decoded in (value, unquote(value), unquote_plus(value)):
            found |= {decoded, quote(decoded, safe="=&"), quote_plus(decoded, safe="=&")}
    return tuple(sorted((v for v in found if len(v) >= shortest), key=lambda v: (-len(v), v)))


def _shown(url: object) -> str:
    """A refused URL for its error: without its query values, user or password."""
    if not isinstance(url, str):
        return repr(url)
    head, query, _ = url.partition("?")
    return repr(re.sub(r"//[^/@]*@", "//", head) + ("?…" if query else ""))
