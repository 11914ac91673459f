"""A small real HTTP server on 127.0.0.1 for provider tests that need a socket, not a MockTransport.

Each test programs it with ``server.route(path, answer)``: ``answer(body)`` returns the status,
the headers and the body (bytes, or an iterator of bytes sent as they come, chunked). It behaves
the way the OpenAI- and Anthropic-compatible servers we met do (a gateway answering a streamed
request with one JSON message, an error body in SSE form), and counts what it received, so a test
can say how many times a call was sent. Standard library only; one thread per connection.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = tuple[int, dict[str, str], bytes | Iterable[bytes]]
Route = Callable[[dict[str, Any]], Answer]


@dataclass
class Received:
    """One request the server read: its path, headers and JSON body."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class LiveServer:
    """The running server: its base URL, its routes and every request it received."""

    url: str = ""
    routes: dict[str, Route] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)

    def route(self, path: str, answer: Route) -> None:
        """Answer POSTs to ``path`` (query string ignored) with ``answer(json_body)``."""
        self.routes[path] = answer

    def count(self, path: str) -> int:
        """How many requests reached ``path``."""
        return sum(1 for r in self.received if r.path == path)


def json_answer(body: Any, status: int = 200) -> Answer:
    """A whole ``application/json`` answer."""
    return status, {"content-type": "application/json"}, json.dumps(body).encode()


def sse_answer(events: list[tuple[str | None, Any]], status: int = 200) -> Answer:
    """A ``text/event-stream`` answer of these (event name, data) pairs."""
    out = b"".join(
        (f"event: {name}\n" if name else "").encode() + f"data: {json.dumps(data)}\n\n".encode()
        for name, data in events
    )
    return status, {"content-type": "text/event-stream"}, out


def serve(server: LiveServer) -> tuple[ThreadingHTTPServer, threading.Thread]:
    """Start ``server`` on a free loopback port; the caller shuts it down."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return  # keep the test output clean

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            path = self.path.split("?", 1)[0]
            body = json.loads(raw) if raw else {}
            server.received.append(Received(path, dict(self.headers.items()), body))
            answer = server.routes.get(path)
            if answer is None:
                status, headers, payload = json_answer({"error": {"message": "no route"}}, 404)
            else:
                status, headers, payload = answer(body)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            if isinstance(payload, bytes):
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            try:
                for piece in _pieces(payload):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client stopped reading, as it may

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    server.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="live-server", daemon=True
    )
    thread.start()
    return httpd, thread


def _pieces(payload: Iterable[bytes]) -> Iterator[bytes]:
    for piece in payload:
        if piece:
            yield piece
