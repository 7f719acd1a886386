"""A socketserver served from a daemon thread, for the small servers the tests and the playground stand up on
loopback, and what they all need: the one socket option, quiet when a client goes away, a JSON answer."""

from __future__ import annotations

import json
import socket
import socketserver
import sys
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

#: What a client hanging up mid-answer, or resetting a kept-alive connection between requests, raises in a handler.
CLIENT_GONE = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class QuietDisconnects(socketserver.BaseServer):
    """A server that prints no traceback when a client goes away: a program stopped or killed mid-file, or closing
    its pooled connections, is normal, and `make serve`'s terminal filled with ConnectionResetError tracebacks. Any
    other error in a handler is still printed (socketserver's `handle_error`)."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exception(), CLIENT_GONE):
            super().handle_error(request, client_address)


class NoDelay(QuietDisconnects, socketserver.TCPServer):
    """A server whose connections send what is written at once (TCP_NODELAY), as real servers do. http.server writes
    a reply's head and its body apart: without this, the body waits for the client's delayed acknowledgement of the
    head, 40 ms a request on a kept-alive connection (Nagle's algorithm), which made every relayed request take 44 ms
    instead of 1.5 and a 5000-file test through the relay run for minutes. Quiet about clients that go away, as
    every server built on it (the Hub's origins, the relay, the stalling server) should be."""

    def get_request(self) -> tuple[Any, Any]:
        connection, address = super().get_request()
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection, address


class ServedInThread:
    """Serves `server` from a daemon thread once started; `stop` shuts it down and closes its socket."""

    def __init__(self, server: socketserver.BaseServer, name: str, poll_interval: float = 0.5) -> None:
        self.server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": poll_interval}, name=name, daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def send_json(handler: BaseHTTPRequestHandler, status: int, answer: object) -> None:
    """Answer `handler`'s request with `answer` as JSON."""
    data = json.dumps(answer).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
