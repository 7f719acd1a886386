"""A minimal HTTP/1.1 keep-alive client for bodiless GETs streamed into a caller's buffer. Why not http.client: its
header parsing (the email package) costs as much CPU per small object as all else together, and with many small objects
the client's CPU is the limit. It speaks what a GET needs: Content-Length, chunked or close-delimited bodies;
keep-alive; TLS; the proxies HTTP_PROXY, HTTPS_PROXY, NO_PROXY name, as boto3 and huggingface_hub honour them.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import socket
import ssl
import time
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from initializers.common.errors import ConfigError, FetchError
from initializers.sources.http.tls import TlsSocket

_MAX_HEAD = 64 * 1024
#: Seconds a connection may take to open (the read timeout bounds every wait after that), for every source.
CONNECT_TIMEOUT = 10.0
#: The fewest bytes a server must send within each read timeout once a request is sent (or the rest of its answer, if
#: less): a server trickling slower is abandoned as one gone silent is, instead of holding a transfer for ever.
MIN_BYTES_PER_TIMEOUT = 64 * 1024


#: A character that would end or split a request line or header: a control character but for the tab.
_UNSENDABLE = re.compile("[\x00-\x08\x0a-\x1f\x7f]")


#: What a read of a non-blocking connection raises when nothing more has arrived yet (TLS says it its own way).
NOT_YET = (BlockingIOError, ssl.SSLWantReadError)


class ProtocolError(ConnectionError):
    """The server broke HTTP/1.1 framing; the connection is unusable and the request may be retried."""


class Unsendable(FetchError):
    """A request that cannot be sent as asked (a header or target holding a control character, a header value
    outside Latin-1): no retry can fix it, and its text is never shown, since it may hold a secret."""


class ProxyError(ConnectionError):
    """The proxy would not connect us (CONNECT refused, proxy unreachable): retried like any connection error."""


@dataclass(frozen=True)
class Proxy:
    """An HTTP proxy: plain requests in absolute form through it, TLS through a CONNECT tunnel."""

    host: str
    port: int
    authorization: str | None  # a Proxy-Authorization value, from user:password in the proxy URL

    @classmethod
    def check_environment(cls) -> None:
        """Refuse proxy settings this client cannot follow before anything starts (exit 2, not a failed run)."""
        for scheme, url in _environment_proxies().items():
            if scheme in ("http", "https", "all"):
                cls.parse(url, f"{scheme.upper()}_PROXY")

    @classmethod
    def parse(cls, url: str, variable: str) -> Proxy:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme != "http" or not parts.hostname:
            raise ConfigError(f"{variable}: only http:// proxies are supported, got {parts.scheme}://")
        authorization = None
        if parts.username is not None:
            credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            authorization = "Basic " + base64.b64encode(credentials.encode()).decode()
        return cls(parts.hostname, parts.port or 80, authorization)


def proxy_url(scheme: str, netloc: str) -> tuple[str, str] | None:
    """The proxy URL the environment names for an origin, with the variable it came from, as urllib, requests and
    httpx read them; None for a direct connection (no proxy variable, or the host is in NO_PROXY)."""
    proxies = _environment_proxies()
    url = proxies.get(scheme) or proxies.get("all")
    if not url:
        return None
    import urllib.request

    host = netloc.rpartition(":")[0] if netloc.rsplit(":", 1)[-1].isdigit() else netloc
    if urllib.request.proxy_bypass_environment(host.strip("[]"), proxies):
        return None
    return url, f"{scheme.upper()}_PROXY" if proxies.get(scheme) else "ALL_PROXY"


def _environment_proxies() -> dict[str, str]:
    """The *_proxy variables as urllib reads them; urllib.request (slow to import) only when one is set."""
    if not any(name.lower().endswith("_proxy") for name in os.environ):
        return {}
    import urllib.request

    return urllib.request.getproxies_environment()


class Response:
    """A response head, and its body read on demand in any HTTP/1.1 framing: Content-Length, chunked, or until
    the server closes. The connection closes itself once a body ends that the server will not follow."""

    def __init__(self, connection: Connection, status: int, reason: str, headers: dict[str, str]) -> None:
        self._connection = connection
        self.status = status
        self.reason = reason
        self.headers = headers
        self._chunked = headers.get("transfer-encoding", "").lower() == "chunked"
        length = headers.get("content-length")
        if status in (204, 304) or status < 200:  # no body, whatever the headers say
            length = "0"
        #: The body's length when the server declared it (a chunked body's is known only at its end).
        self.length: int | None = None
        if length is not None and length.isdigit() and not self._chunked:
            self.length = int(length)
        self.will_close = headers.get("connection", "").lower() == "close" or (
            self.length is None and not self._chunked  # the body ends when the server closes
        )
        self._remaining = self.length  # Content-Length bodies: bytes left; chunked: bytes left in this chunk
        self._ended = False
        if self._remaining == 0:
            self._end()

    def header(self, name: str) -> str | None:
        return self.headers.get(name)

    def readinto(self, buffer: memoryview) -> int:
        """Read the next bytes of the body; 0 at its end. Raises ProtocolError when the connection drops early."""
        if self._ended:
            return 0
        if self._chunked and not self._remaining:
            self._remaining = self._connection.read_chunk_size()
            if self._remaining == 0:
                while self._connection.read_line():  # the trailers, up to the empty line that ends them
                    pass
                self._end()
                return 0
        if self._remaining is None:  # delimited by the server closing the connection
            count = self._connection.read_into(buffer)
            if count == 0:
                self._end()
            return count
        count = self._consumed(self._connection.read_into(buffer[: min(len(buffer), self._remaining)]))
        if self._chunked and self._remaining == 0:
            self._connection.read_line()  # the CRLF after the chunk's data
        return count

    def read_all(self, limit: int = _MAX_HEAD) -> bytes:
        """The whole (small) body, for error replies and listings; past `limit` the rest is dropped."""
        body = bytearray()
        view = memoryview(bytearray(65536))
        while len(body) < limit and (count := self.readinto(view)):
            body += view[:count]
        if not self._ended:  # the rest is not worth reading; the connection cannot be reused
            self.will_close = True
            self._connection.close()
        return bytes(body[:limit])

    def _consumed(self, count: int) -> int:
        assert self._remaining is not None
        if count == 0:
            raise ProtocolError(f"connection closed with {self._remaining} bytes of the body missing")
        self._remaining -= count
        if self._remaining == 0 and not self._chunked:
            self._end()
        return count

    def _end(self) -> None:
        self._ended = True
        if self.will_close:
            self._connection.close()  # the server said so; the next request reconnects


class Connection:
    """One keep-alive connection to one origin; not thread-safe (use one per thread)."""

    def __init__(
        self,
        scheme: str,
        netloc: str,
        timeout: float,
        ssl_context: ssl.SSLContext | None,
        proxy: Proxy | None = None,
    ) -> None:
        host, _, port = netloc.rpartition(":") if netloc.rsplit(":", 1)[-1].isdigit() else (netloc, "", "")
        self._netloc = netloc
        self._host = host.strip("[]")
        self._port = int(port) if port else (443 if scheme == "https" else 80)
        self._tls = ssl_context if scheme == "https" else None
        self._timeout = timeout
        self._proxy = proxy
        self._sock: socket.socket | TlsSocket | None = None
        self._blocking = True
        self._pending = b""
        #: Seconds spent waiting on the socket for the current MIN_BYTES_PER_TIMEOUT window, and its bytes so far:
        #: only the server's time counts, not our own pauses between reads (MAX_BANDWIDTH, a slow disk).
        self._window_waited = 0.0
        self._window_bytes = 0

    @property
    def round_trips_to_open(self) -> int:
        """Round trips the next request spends opening this connection: none when it is open; else the TCP
        handshake, a proxy's CONNECT under TLS, and the TLS handshake (one, as TLS 1.3 takes)."""
        if self._sock is not None:
            return 0
        return 1 + (self._tls is not None) * (1 + (self._proxy is not None))

    def get(self, target: str, headers: dict[str, str]) -> Response:
        self.send_get(target, headers)
        return self.read_head()

    def send_get(self, target: str, headers: dict[str, str]) -> None:
        """Send `GET target`, connecting first if need be; its answer is `read_head`'s."""
        if self._sock is None:
            self._connect()
        if self._proxy is not None and self._tls is None:  # plain HTTP through a proxy: the absolute URL
            target = f"http://{self._netloc}{target}"
            if self._proxy.authorization:
                headers = {**headers, "proxy-authorization": self._proxy.authorization}
        self._send("GET", target, headers)

    def fileno(self) -> int:
        """The socket's, for a selector to say when an answer arrives (-1: not connected)."""
        return self._sock.fileno() if self._sock is not None else -1

    def set_blocking(self, blocking: bool) -> None:
        """Non-blocking, reads raise `NOT_YET` when nothing has arrived yet (what did arrive is kept for the next
        read); blocking (as connected), they wait up to the timeout."""
        if self._sock is not None and blocking != self._blocking:
            self._sock.settimeout(self._timeout if blocking else 0.0)
            self._blocking = blocking

    def _send(self, method: str, target: str, headers: dict[str, str]) -> None:
        assert self._sock is not None
        if " " in target or _UNSENDABLE.search(target):
            raise Unsendable(f"cannot send a request to {self._netloc}: its target holds a space or control character")
        for name, value in headers.items():
            if _UNSENDABLE.search(value):
                raise Unsendable(
                    f"cannot send a request to {self._netloc}: its {name} header holds a control character"
                )
        lines = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        try:
            request = f"{method} {target} HTTP/1.1\r\n{lines}\r\n".encode("latin-1")
        except UnicodeEncodeError:
            raise Unsendable(
                f"cannot send a request to {self._netloc}: a header holds a character outside Latin-1"
            ) from None
        self._window_waited, self._window_bytes = 0.0, 0
        self._sock.sendall(request)

    def abort(self) -> None:
        """From another thread: make a blocked read on this connection return at once."""
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._pending = b""

    def _connect(self) -> None:
        address = (self._proxy.host, self._proxy.port) if self._proxy else (self._host, self._port)
        sock = self._sock = socket.create_connection(address, timeout=min(CONNECT_TIMEOUT, self._timeout))
        self._blocking = True
        sock.settimeout(self._timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._tls is not None:
            try:
                if self._proxy is not None:
                    self._tunnel()
                self._sock = TlsSocket(sock, self._tls, self._host)
            except BaseException:  # not connected: the next request opens the connection again
                self.close()
                raise

    def _tunnel(self) -> None:
        """CONNECT through the proxy to the origin; TLS then runs inside the tunnel, end to end."""
        assert self._proxy is not None
        authority = f"{self._host}:{self._port}" if ":" not in self._host else f"[{self._host}]:{self._port}"
        headers = {"host": authority}
        if self._proxy.authorization:
            headers["proxy-authorization"] = self._proxy.authorization
        self._send("CONNECT", authority, headers)
        response = self.read_head()
        if response.status != 200:
            self.close()
            raise ProxyError(
                f"the proxy {self._proxy.host}:{self._proxy.port} refused to connect to {authority}: "
                f"{response.status} {response.reason}"
            )

    def _read_until(self, delimiter: bytes, what: str) -> bytes:
        """The bytes up to `delimiter` (consumed, not returned); what follows stays pending, as does all that arrived
        when a non-blocking read finds nothing more yet."""
        while (end := self._pending.find(delimiter)) < 0:
            if len(self._pending) > _MAX_HEAD:
                raise ProtocolError(f"{what} longer than 64 KiB")
            chunk = self._recv(65536)
            if not chunk:
                raise ProtocolError(f"connection closed inside {what}")
            self._pending += chunk
        data = self._pending
        self._pending = data[end + len(delimiter) :]
        return data[:end]

    def read_head(self) -> Response:
        """The answer's head, its body still to read."""
        head = self._read_until(b"\r\n\r\n", "a response head")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise ProtocolError(f"malformed status line {lines[0][:100]!r}")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if parts[0] == "HTTP/1.0" and headers.get("connection", "").lower() != "keep-alive":
            headers["connection"] = "close"
        return Response(self, int(parts[1]), parts[2] if len(parts) > 2 else "", headers)

    def read_into(self, view: memoryview) -> int:
        if self._pending:
            count = min(len(view), len(self._pending))
            view[:count] = self._pending[:count]
            self._pending = self._pending[count:]
            return count
        assert self._sock is not None
        started = time.monotonic()
        return self._received(self._sock.recv_into(view), started)

    def read_line(self) -> bytes:
        """One CRLF-terminated line of chunk framing, without its CRLF."""
        return self._read_until(b"\r\n", "a chunked body's framing")

    def read_chunk_size(self) -> int:
        line = self.read_line().split(b";")[0].strip()
        try:
            return int(line, 16)
        except ValueError:
            raise ProtocolError(f"malformed chunk size {line[:20]!r}") from None

    def _recv(self, size: int) -> bytes:
        assert self._sock is not None
        started = time.monotonic()
        data = self._sock.recv(size)
        self._received(len(data), started)
        return data

    def _received(self, count: int, waiting_since: float) -> int:
        """Count bytes against the minimum rate: TimeoutError (retried like a silent server) for a trickle."""
        self._window_bytes += count
        self._window_waited += time.monotonic() - waiting_since
        if self._window_bytes >= MIN_BYTES_PER_TIMEOUT:
            self._window_waited, self._window_bytes = 0.0, 0
        elif self._window_waited > self._timeout:
            raise TimeoutError(
                f"{self._netloc} sent {self._window_bytes} bytes in {self._window_waited:.0f} s of waiting: slower "
                f"than {MIN_BYTES_PER_TIMEOUT // 1024} KiB per read timeout ({self._timeout:g} s)"
            )
        return count
