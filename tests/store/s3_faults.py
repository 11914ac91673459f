"""A faulty S3 endpoint for the store's failure tests: a loopback proxy in front of the test server.

``FaultyEndpoint(upstream, rule)`` listens on 127.0.0.1 and forwards each request to the
S3-compatible server at ``upstream``, unless ``rule(method, path)`` names a fault for it:

- ``"hang"``: the request is read and never answered (the connection stays open), as a server
  that accepted and then stalls;
- ``"cut"``: half of the request's body is read, then the connection is reset, as an upload cut
  off by the network;
- ``"truncate"``: the request is forwarded, and its answer's headers (with the full
  ``Content-Length``) and half of its body are sent before the connection is reset, as a download
  cut off by the network.

``HangingServer`` is a socket that accepts connections and never answers anything. Both are for
``with`` blocks, and let hung requests go when they end.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import httpx

Fault = Literal["hang", "cut", "truncate"] | None
Rule = Callable[[str, str], Fault]

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding"}


class FaultyEndpoint:
    """A loopback proxy to ``upstream`` that hangs or cuts the requests ``rule`` picks."""

    def __init__(self, upstream: str, rule: Rule) -> None:
        self.rule = rule
        self.faults: list[tuple[str, str, str]] = []
        """(fault, method, path) of every request a fault was applied to."""
        self.release = threading.Event()
        self._client = httpx.Client(base_url=upstream, timeout=30)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The proxy's ``http://127.0.0.1:port``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> FaultyEndpoint:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()
        self._client.close()


def _handler(endpoint: FaultyEndpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _body(self) -> bytes:
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                chunks = []
                while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
                self.rfile.readline()
                return b"".join(chunks)
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _any(self) -> None:
            fault = endpoint.rule(self.command, self.path)
            if fault is not None and fault != "truncate":
                endpoint.faults.append((fault, self.command, self.path))
                self.close_connection = True
                if fault == "hang":
                    endpoint.release.wait(120)
                    return
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length // 2)
                # SO_LINGER 0: close() resets the connection instead of ending it cleanly.
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                return
            body = self._body()
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
            answer = endpoint._client.request(
                self.command, self.path, headers=headers, content=body
            )
            self.send_response(answer.status_code)
            for key, value in answer.headers.items():
                if key.lower() not in _HOP:
                    self.send_header(key, value)
            if self.command == "HEAD":
                length = answer.headers.get("Content-Length")
                if length is not None:
                    self.send_header("Content-Length", length)
                self.end_headers()
                return
            self.send_header("Content-Length", str(len(answer.content)))
            self.end_headers()
            if fault == "truncate":
                endpoint.faults.append((fault, self.command, self.path))
                self.close_connection = True
                self.wfile.write(answer.content[: len(answer.content) // 2])
                self.wfile.flush()
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                return
            self.wfile.write(answer.content)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

    return Handler


class HangingServer:
    """A loopback socket that accepts every connection and never answers (nor closes) it."""

    def __init__(self) -> None:
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(64)
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        """The server's ``http://127.0.0.1:port``."""
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}"

    @property
    def accepted(self) -> int:
        """How many connections it accepted."""
        return len(self._held)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._socket.accept()
            except OSError:
                return
            self._held.append(conn)  # held open, never read, never answered

    def __enter__(self) -> HangingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)
        self._socket.close()
        for conn in self._held:
            conn.close()
        self._thread.join(5)
