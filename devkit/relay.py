"""A loopback HTTP relay in front of a real server: counts what passes, can slow it, can add crafted S3 keys.

Requests go through unchanged (the Host header too, so SigV4 signatures still verify). Tests use it to
count requests and body bytes (a re-run must fetch nothing), to slow bodies down (so a kill lands
mid-transfer), and to list keys SeaweedFS itself refuses to store (`../escape`), as AWS S3 would.
"""

from __future__ import annotations

import hashlib
import http.client
import ssl
import subprocess
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, quote_plus, urlsplit

from devkit.ports import free_port

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "trailer", "upgrade"}


@dataclass
class Traffic:
    requests: list[tuple[str, str]] = field(default_factory=list)  # (method, path)
    body_bytes: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def object_gets(self) -> list[str]:
        """Paths of GETs that fetched object bytes (listings excluded)."""
        return [path for method, path in self.requests if method == "GET" and "list-type=" not in path]


class Relay:
    """`tls`: (certificate, key) files to serve HTTPS with, as a TLS-terminating proxy in front of S3 would."""

    def __init__(self, upstream: str, tls: tuple[Path, Path] | None = None) -> None:
        parts = urlsplit(upstream)
        self.upstream_host, self.upstream_port = parts.hostname or "127.0.0.1", parts.port or 80
        self.traffic = Traffic()
        self.bytes_per_second: float | None = None
        self.injected: dict[str, dict[str, bytes]] = {}  # bucket -> key -> body
        port = free_port()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler_for(self))
        self._server.daemon_threads = True
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.endpoint = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Relay:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def reset(self) -> None:
        with self.traffic.lock:
            self.traffic.requests.clear()
            self.traffic.body_bytes = 0


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made with the openssl command line; the certificate is its own CA."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def _handler_for(relay: Relay) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args: object) -> None:
            pass

        def do_GET(self) -> None:
            self._relay()

        def do_HEAD(self) -> None:
            self._relay()

        def do_PUT(self) -> None:
            self._relay()

        def do_POST(self) -> None:
            self._relay()

        def do_DELETE(self) -> None:
            self._relay()

        def _relay(self) -> None:
            with relay.traffic.lock:
                relay.traffic.requests.append((self.command, self.path))
            if self._serve_injected():
                return
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            upstream = http.client.HTTPConnection(relay.upstream_host, relay.upstream_port, timeout=60)
            try:
                upstream.request(self.command, self.path, body=body, headers=dict(self.headers.items()))
                reply = upstream.getresponse()
                headers = [(k, v) for k, v in reply.getheaders() if k.lower() not in _HOP_BY_HOP]
                if self._is_listing() and self.command == "GET":
                    self._send_whole(reply.status, headers, self._with_injected(reply.read()))
                elif reply.getheader("Content-Length") is None and self.command != "HEAD":
                    self._send_whole(reply.status, headers, reply.read())
                else:
                    self.send_response(reply.status)
                    for name, value in headers:
                        self.send_header(name, value)
                    self.end_headers()
                    if self.command != "HEAD":
                        self._stream(reply)
            finally:
                upstream.close()

        def _stream(self, reply: http.client.HTTPResponse) -> None:
            while chunk := reply.read(64 * 1024):
                self.wfile.write(chunk)
                with relay.traffic.lock:
                    relay.traffic.body_bytes += len(chunk)
                if relay.bytes_per_second:
                    time.sleep(len(chunk) / relay.bytes_per_second)

        def _send_whole(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
            self.send_response(status)
            for name, value in headers:
                if name.lower() != "content-length":
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _bucket(self) -> str:
            return urlsplit(self.path).path.lstrip("/").split("/", 1)[0]

        def _is_listing(self) -> bool:
            parts = urlsplit(self.path)
            return parts.path.strip("/") == self._bucket() and "list-type" in parse_qs(parts.query)

        def _with_injected(self, xml: bytes) -> bytes:
            crafted = relay.injected.get(self._bucket(), {})
            entries = "".join(
                f"<Contents><Key>{quote_plus(key, safe='/')}</Key><Size>{len(body)}</Size>"
                f'<ETag>"{hashlib.md5(body).hexdigest()}"</ETag><StorageClass>STANDARD</StorageClass></Contents>'
                for key, body in crafted.items()
            )
            return xml.replace(b"</ListBucketResult>", entries.encode() + b"</ListBucketResult>")

        def _serve_injected(self) -> bool:
            path = urlsplit(self.path).path
            for key, body in relay.injected.get(self._bucket(), {}).items():
                if path == f"/{self._bucket()}/{quote(key, safe='/~')}":
                    etag = hashlib.md5(body).hexdigest()
                    self._send_whole(200, [("ETag", f'"{etag}"')], body)
                    return True
            return False

    return Handler
