"""A loopback HTTP forward proxy, as corporate networks put between a pod and the internet: plain requests in
absolute form, TLS through CONNECT tunnels, optional Basic credentials. It records what it was asked for.

One request per client connection: it asks the origin to close after the answer and tells the client so,
which keeps the proxy small while clients still see well-formed keep-alive endings.
"""

from __future__ import annotations

import base64
import contextlib
import socket
import socketserver
import threading
from dataclasses import dataclass, field
from urllib.parse import urlsplit
from xml.sax.saxutils import escape

from devkit.serving import QuietDisconnects, ServedInThread

_HEAD_LIMIT = 64 * 1024


@dataclass
class ProxyLog:
    requests: list[tuple[str, str]] = field(default_factory=list)  # (method, target) as the client sent them
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, method: str, target: str) -> None:
        with self.lock:
            self.requests.append((method, target))

    def targets(self, method: str) -> list[str]:
        with self.lock:
            return [target for m, target in self.requests if m == method]


class Proxy:
    """With `echo`, a careless proxy: it answers every request with a 502 whose S3-style error quotes the request's
    head back (Proxy-Authorization and all) in its Code and Message."""

    def __init__(self, credentials: tuple[str, str] | None = None, echo: bool = False) -> None:
        self.log = ProxyLog()
        expected = None
        if credentials:
            expected = "Basic " + base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode()).decode()
        self._server = _Server(("127.0.0.1", 0), _handler(self.log, expected, echo))
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._serving = ServedInThread(self._server, "proxy")

    def __enter__(self) -> Proxy:
        self._serving.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._serving.stop()


class _Server(QuietDisconnects, socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def _handler(log: ProxyLog, expected_authorization: str | None, echo: bool) -> type[socketserver.BaseRequestHandler]:
    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            client: socket.socket = self.request
            head, rest = _read_head(client)
            if head is None:
                return
            request_line, *header_lines = head.split("\r\n")
            method, target, _version = request_line.split(" ", 2)
            log.add(method, target)
            headers = [line for line in header_lines if line]
            if echo:
                client.sendall(_echoed(head))
                return
            if expected_authorization and _header(headers, "proxy-authorization") != expected_authorization:
                client.sendall(
                    b'HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="test"\r\n'
                    b"Content-Length: 0\r\nConnection: close\r\n\r\n"
                )
                return
            if method == "CONNECT":
                host, _, port = target.rpartition(":")
                upstream = socket.create_connection((host.strip("[]"), int(port)))
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                _pipe_both(client, upstream, rest)
                return
            url = urlsplit(target)
            upstream = socket.create_connection((url.hostname or "", url.port or 80))
            kept = [h for h in headers if h.partition(":")[0].strip().lower() not in _HOP_BY_HOP]
            origin_form = (url.path or "/") + (f"?{url.query}" if url.query else "")
            forwarded = "\r\n".join([f"{method} {origin_form} HTTP/1.1", *kept, "Connection: close", "", ""])
            upstream.sendall(forwarded.encode("latin-1") + rest)
            answer, body_start = _read_head(upstream)
            if answer is None:
                return
            status, *answer_headers = answer.split("\r\n")
            answer_kept = [h for h in answer_headers if h and h.partition(":")[0].strip().lower() != "connection"]
            client.sendall("\r\n".join([status, *answer_kept, "Connection: close", "", ""]).encode("latin-1"))
            client.sendall(body_start)
            _copy(upstream, client)
            upstream.close()

    return Handler


def _echoed(head: str) -> bytes:
    """A 502 quoting a request's head back, in an S3 error's Code and Message."""
    said = escape(f"you sent: {head}")
    body = f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{said}</Code><Message>{said}</Message></Error>'.encode()
    return (
        b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: application/xml\r\nConnection: close\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )


_HOP_BY_HOP = {"connection", "proxy-connection", "proxy-authorization", "keep-alive"}


def _header(lines: list[str], name: str) -> str | None:
    for line in lines:
        key, _, value = line.partition(":")
        if key.strip().lower() == name:
            return value.strip()
    return None


def _read_head(sock: socket.socket) -> tuple[str | None, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk or len(data) > _HEAD_LIMIT:
            return None, b""
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head.decode("latin-1"), rest


def _copy(source: socket.socket, destination: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while chunk := source.recv(65536):
            destination.sendall(chunk)
    with contextlib.suppress(OSError):
        destination.shutdown(socket.SHUT_WR)


def _pipe_both(client: socket.socket, upstream: socket.socket, early: bytes) -> None:
    if early:
        upstream.sendall(early)
    back = threading.Thread(target=_copy, args=(upstream, client), daemon=True)
    back.start()
    _copy(client, upstream)
    back.join()
    upstream.close()
