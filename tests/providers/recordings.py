"""Load the recorded provider traffic in ``tests/fixtures/provider-traffic`` and replay it.

The recordings come in three storage formats (``SOURCES.md`` in that folder describes them):

1. pydantic-ai YAML: bodies stored *parsed* under ``parsed_body`` (re-serialised here with
   ``json.dumps``), SSE bodies verbatim under ``body.string``;
2. llm-anthropic YAML (plain vcrpy): ``request.body`` is the raw JSON string, the response body is
   ``!!binary`` gzip bytes with ``Content-Encoding: gzip``;
3. opencode JSON: ``{"version": 1, "interactions": [{"request": {...}, "response": {...}}]}``
   with the request body a JSON string and the response body raw text.

``load_recording(path)`` turns any of them into one ``Recording`` of ``Interaction``s. Response
bodies keep their stored encoding (``raw_body`` + headers), so replaying a gzip recording through
``httpx.MockTransport`` exercises httpx's own decoding; ``body`` is always the decoded bytes.
``ReplayTransport`` serves the interactions in order and keeps the ``httpx.Request``s it saw.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

__all__ = [
    "TRAFFIC_DIR",
    "Interaction",
    "RecordedRequest",
    "RecordedResponse",
    "Recording",
    "ReplayTransport",
    "load_recording",
    "recording_paths",
]

TRAFFIC_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "provider-traffic"
"""Folder holding ``anthropic/``, ``openai/`` and ``gemini/`` recordings."""


@dataclass(frozen=True)
class RecordedRequest:
    """One recorded HTTP request."""

    method: str
    url: str
    headers: dict[str, str]
    """Header names lowercased; a multi-valued vcrpy header keeps its first value."""
    body: bytes | None
    """The body bytes (re-serialised JSON for the pydantic-ai format), None when absent."""

    def json(self) -> Any:
        """The body parsed as JSON."""
        assert self.body is not None, f"recorded request to {self.url} has no body"
        return json.loads(self.body)


@dataclass(frozen=True)
class RecordedResponse:
    """One recorded HTTP response."""

    status: int
    headers: dict[str, str]
    """Header names lowercased, as stored (``content-encoding: gzip`` kept with ``raw_body``)."""
    raw_body: bytes
    """The body exactly as it would come off the wire (still gzip-compressed if it was)."""

    @property
    def body(self) -> bytes:
        """The decoded body (gzip undone)."""
        if self.headers.get("content-encoding", "").lower() == "gzip":
            return gzip.decompress(self.raw_body)
        return self.raw_body

    @property
    def is_sse(self) -> bool:
        """Whether the body is a server-sent-event stream."""
        return "text/event-stream" in self.headers.get(
            "content-type", ""
        ) or self.body.lstrip().startswith((b"event:", b"data:"))

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)

    def to_httpx(self, request: httpx.Request | None = None) -> httpx.Response:
        """An ``httpx.Response`` carrying the stored bytes and headers (httpx decodes gzip)."""
        headers = {k: v for k, v in self.headers.items() if k not in _HOP_HEADERS}
        return httpx.Response(self.status, headers=headers, content=self.raw_body, request=request)


# Stored lengths/chunking describe the original transfer, not the bytes we replay.
_HOP_HEADERS = frozenset({"content-length", "transfer-encoding", "connection"})


@dataclass(frozen=True)
class Interaction:
    """A request and the response it got."""

    request: RecordedRequest
    response: RecordedResponse


@dataclass(frozen=True)
class Recording:
    """A recorded file: its interactions in order."""

    path: Path
    interactions: list[Interaction]
    storage_format: str
    """``"pydantic-ai"``, ``"vcrpy"`` or ``"opencode"``."""

    @property
    def name(self) -> str:
        """``<provider>/<file name>``."""
        return f"{self.path.parent.name}/{self.path.name}"


def recording_paths(provider: str) -> list[Path]:
    """Every recording of one provider folder (``anthropic``, ``openai``, ``gemini``), sorted."""
    folder = TRAFFIC_DIR / provider
    return sorted(p for p in folder.iterdir() if p.suffix in {".yaml", ".json"})


def load_recording(path: Path | str) -> Recording:
    """Load a recording in any of the three storage formats."""
    path = Path(path)
    if not path.is_absolute() and not path.exists():
        path = TRAFFIC_DIR / path
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return Recording(
            path, [_opencode_interaction(i) for i in json.loads(text)["interactions"]], "opencode"
        )
    data = yaml.safe_load(text)
    interactions = [_vcr_interaction(i) for i in data["interactions"]]
    uses_parsed = any(
        "parsed_body" in i["request"] or "parsed_body" in i["response"]
        for i in data["interactions"]
    )
    return Recording(path, interactions, "pydantic-ai" if uses_parsed else "vcrpy")


def _first_values(headers: dict[str, Any] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in (headers or {}).items():
        out[name.lower()] = str(value[0]) if isinstance(value, list) else str(value)
    return out


def _to_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(value).encode("utf-8")


def _vcr_interaction(raw: dict[str, Any]) -> Interaction:
    req = raw["request"]
    if "parsed_body" in req:
        req_body: bytes | None = _to_bytes(req["parsed_body"])
    elif req.get("body") is not None:
        body = req["body"]
        req_body = _to_bytes(body["string"] if isinstance(body, dict) else body)
    else:
        req_body = None
    res = raw["response"]
    headers = _first_values(res.get("headers"))
    if "parsed_body" in res:
        res_body = _to_bytes(res["parsed_body"])
        # The stored body is already decoded; drop an encoding header so nothing decodes it twice.
        headers.pop("content-encoding", None)
        headers.setdefault("content-type", "application/json")
    else:
        body = res.get("body") or {}
        res_body = _to_bytes(body.get("string", b"") if isinstance(body, dict) else body)
    status = res["status"]["code"] if isinstance(res["status"], dict) else int(res["status"])
    return Interaction(
        RecordedRequest(req["method"], req["uri"], _first_values(req.get("headers")), req_body),
        RecordedResponse(int(status), headers, res_body),
    )


def _opencode_interaction(raw: dict[str, Any]) -> Interaction:
    req, res = raw["request"], raw["response"]
    body = req.get("body")
    return Interaction(
        RecordedRequest(
            req["method"],
            req["url"],
            _first_values(req.get("headers")),
            None if body is None else _to_bytes(body),
        ),
        RecordedResponse(
            int(res["status"]), _first_values(res.get("headers")), _to_bytes(res.get("body", ""))
        ),
    )


@dataclass
class ReplayTransport:
    """An ``httpx.MockTransport`` handler serving a recording's responses in order.

    Every request it receives is kept in ``requests``; asking for more responses than the
    recording holds fails the test loudly.
    """

    recording: Recording
    requests: list[httpx.Request] = field(default_factory=list)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        """Serve the next recorded response."""
        index = len(self.requests)
        self.requests.append(request)
        assert index < len(self.recording.interactions), (
            f"{self.recording.name}: request #{index + 1} but only "
            f"{len(self.recording.interactions)} interactions were recorded"
        )
        return self.recording.interactions[index].response.to_httpx(request)

    def transport(self) -> httpx.MockTransport:
        """The transport to build an ``httpx.AsyncClient`` on."""
        return httpx.MockTransport(self)

    def client(self) -> httpx.AsyncClient:
        """A client whose every request goes to this replay."""
        return httpx.AsyncClient(transport=self.transport())

    def sent_json(self) -> Iterator[Any]:
        """The JSON bodies of the requests received so far."""
        for request in self.requests:
            yield json.loads(request.content)


MEDIA_HEADER_PREFIX = "[media returned by tool call "


def without_media_headers(body: Any) -> Any:
    """``body`` without the per-call headers put before moved tool media (issue 14 item 7).

    The recordings predate the headers; the rest of the body must still match them exactly.
    """
    if isinstance(body, dict):
        return {k: without_media_headers(v) for k, v in body.items()}
    if isinstance(body, list):
        return [
            without_media_headers(item)
            for item in body
            if not (
                isinstance(item, dict)
                and isinstance(item.get("text"), str)
                and item["text"].startswith(MEDIA_HEADER_PREFIX)
            )
        ]
    return body


def media_headers(body: Any) -> list[str]:
    """The per-call media headers in ``body``, in order."""
    found: list[str] = []
    text = json.dumps(body)
    start = text.find(MEDIA_HEADER_PREFIX)
    while start != -1:
        found.append(text[start : text.index("]", start) + 1])
        start = text.find(MEDIA_HEADER_PREFIX, start + 1)
    return found
