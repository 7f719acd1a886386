"""A socketserver served from a daemon thread, for the small servers the tests stand up on loopback, and the one
socket option they all need."""

from __future__ import annotations

import socket
import socketserver
import threading
from typing import Any


class NoDelay(socketserver.TCPServer):
    """A server whose connections send what is written at once (TCP_NODELAY), as real servers do. http.server writes
    a reply's head and its body apart: without this, the body waits for the client's delayed acknowledgement of the
    head, 40 ms a request on a kept-alive connection (Nagle's algorithm), which made every relayed request take 44 ms
    instead of 1.5 and a 5000-file test through the relay run for minutes."""

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
