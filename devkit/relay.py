"""A loopback HTTP relay in front of a real server: counts what passes, can slow it, add crafted S3 keys, inject faults.

Requests go through unchanged (the Host header too, so SigV4 signatures still verify). Tests use it to
count requests and body bytes (a re-run must fetch nothing), to slow bodies down (so a kill lands
mid-transfer), and to list keys SeaweedFS itself refuses to store (`../escape`), as AWS S3 would.

Reliability tests script faults on it: error replies (`StatusFault`, and `EchoFault`, which quotes the request
back), connections reset mid-body (`ResetFault`), silent connections (`StallFault`), bodies altered in flight
(`CorruptFault`), and refused connections (`Relay.refuse`), transient or persistent.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import http.client
import json
import re
import socket
import ssl
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, quote, quote_plus, unquote_plus, urlsplit

from devkit.serving import NoDelay, ServedInThread

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "trailer", "upgrade"}
_CHUNK_SIZE = 64 * 1024
_ACK_WAIT_SECONDS = 10.0  # how long a reset waits for the client to take the bytes sent before it
_CONTENTS = re.compile(r"(<Contents>.*?<Key>(.*?)</Key>.*?</Contents>)", re.DOTALL)  # an entry of a listing, its key
_SIGNED_BY = re.compile(r"Credential=([^/,\s]+)/")  # the access key id in a SigV4 Authorization header
_EXPIRED = (
    b"<?xml version='1.0'?><Error><Code>ExpiredToken</Code><Message>The provided token has expired.</Message></Error>"
)
_S3_ERRORS = {  # status -> (Code, Message) of the error S3 answers with
    500: ("InternalError", "We encountered an internal error. Please try again."),
    503: ("SlowDown", "Please reduce your request rate."),
}


@dataclass
class Traffic:
    """What reached the relay.

    `body_bytes` counts upstream bodies streamed to the client, as handed to its socket: only the part sent before a
    fault struck, but a chunk a vanished client failed to take all the same. Bodies the relay builds itself (rewritten
    listings, injected objects, fault replies) and upstream bodies without a Content-Length are not counted.
    `requests` includes faulted requests; `refused` counts connections and requests reset because of `Relay.refuse`,
    which `requests` leaves out. `object_gets_at_once` is the most object GETs (listings excluded) under way at once,
    each from its request's arrival until its answer was sent; `object_gets_on_arrival` says how many were under way
    as each arrived, and `object_gets_arrived_at` when (seconds after the first object GET arrived).
    """

    requests: list[tuple[str, str]] = field(default_factory=list)  # (method, path)
    headers: list[dict[str, str]] = field(default_factory=list)  # each request's headers, names in lower case
    body_bytes: int = 0
    refused: int = 0
    object_gets_now: int = 0
    object_gets_at_once: int = 0
    #: How many object GETs were under way as each one arrived (itself included), in arrival order.
    object_gets_on_arrival: list[int] = field(default_factory=list)
    object_gets_arrived_at: list[float] = field(default_factory=list)
    first_object_get_at: float = 0.0  # time.monotonic() of the first object GET's arrival (0: none yet)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def object_gets_at_once_among_first(self, count: int) -> int:
        """The most object GETs under way at once as one of the first `count` to arrive did (0: none arrived)."""
        with self.lock:
            return max(self.object_gets_on_arrival[:count], default=0)

    def object_gets(self) -> list[str]:
        """Paths of GETs that fetched object bytes (listings excluded)."""
        return [path for method, path in self.requests if _is_object_get(method, path)]

    @contextlib.contextmanager
    def under_way(self, method: str, path: str) -> Iterator[None]:
        """Count the request among those under way while it is served, if it is an object GET."""
        if not _is_object_get(method, path):
            yield
            return
        with self.lock:
            self.object_gets_now += 1
            self.object_gets_at_once = max(self.object_gets_at_once, self.object_gets_now)
            self.object_gets_on_arrival.append(self.object_gets_now)
            now = time.monotonic()
            self.first_object_get_at = self.first_object_get_at or now
            self.object_gets_arrived_at.append(now - self.first_object_get_at)
        try:
            yield
        finally:
            with self.lock:
                self.object_gets_now -= 1


def _is_object_get(method: str, path: str) -> bool:
    return method == "GET" and "list-type=" not in path


@dataclass(kw_only=True)
class Fault:
    """Which requests a fault strikes: those whose path (query included) contains `match`, whose method is `method`
    (None: any) and, with `range_from`, that ask for a byte range starting there, for the first `times` of them
    (None: all, a persistent fault); with `every`, only one in `every` of the requests it matches (the last of each
    run of `every`), as a server shedding part of its load answers. A storm: `after` requests it matches go through
    first, then it strikes for `lasting` seconds from its first strike (None: for as long as `times` says).

    `hits` counts the requests struck so far, `struck_at` when (time.monotonic()), `began_at` the first of them. When
    several faults match a request, the first added with hits left strikes, so faults on the same requests queue up
    in the order added.
    """

    match: str | None = None
    method: str | None = None
    times: int | None = 1
    range_from: int | None = None
    every: int = 1
    after: int = 0
    lasting: float | None = None
    hits: int = field(default=0, init=False)
    matched: int = field(default=0, init=False)  # requests it matched, struck or spared by `every` or `after`
    struck_at: list[float] = field(default_factory=list, init=False)
    began_at: float | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if type(self) in (Fault, _ConnectionFault):
            raise TypeError("make a StatusFault, a ResetFault, a StallFault or a CorruptFault")
        if self.times is not None and self.times < 1:
            raise ValueError(f"times must be at least 1 (or None for every request), not {self.times}")

    def applies_to(self, method: str, path: str, byte_range: str | None) -> bool:
        return (
            (self.times is None or self.hits < self.times)
            and (self.lasting is None or self.began_at is None or time.monotonic() < self.began_at + self.lasting)
            and (self.match is None or self.match in path)
            and (self.method is None or self.method.upper() == method)
            and (self.range_from is None or (byte_range or "").startswith(f"bytes={self.range_from}-"))
        )


@dataclass(kw_only=True)
class StatusFault(Fault):
    """Answer in the server's place with an error status; the request never reaches it and the connection stays open.

    Without a `body`, 500 and 503 get the XML error S3 sends (InternalError, SlowDown); other statuses need one (for
    the Hub, a JSON `{"error": ...}` with `content_type="application/json"`). `headers` are added (`Retry-After`...).
    """

    status: int = 503
    body: bytes | None = None
    content_type: str = "application/xml"
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.body is None:
            if self.status not in _S3_ERRORS:
                raise ValueError(f"no default error body for status {self.status}: give one")
            code, message = _S3_ERRORS[self.status]
            self.body = (
                f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code><Message>{message}</Message></Error>'
            ).encode()


@dataclass(kw_only=True)
class EchoFault(StatusFault):
    """A `StatusFault` whose error quotes the request back, as careless servers do: its method, target, every header
    and its body, as they came, JSON-escaped and URL-encoded, in the body `render` makes of that text (the store's
    error format; default: the text alone), in an `X-Error-Message` header (the Hub's) and in `echo_header`.
    `echoed` holds each request quoted (method, target, headers, body), for a test to find every credential the
    program sent.
    """

    body: bytes | None = b""
    render: Callable[[str], bytes] = field(default=lambda text: text.encode())
    #: Another header the quote goes in (a store's error code: Azure's `x-ms-error-code`, the Hub's `X-Error-Code`).
    echo_header: str | None = None
    echoed: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list, init=False)

    def answer(self, method: str, target: str, headers: dict[str, str], body: bytes) -> tuple[bytes, dict[str, str]]:
        """The error body and headers quoting this request."""
        self.echoed.append((method, target, headers, body))
        said = "\n".join(
            [f"{method} {target}", *(f"{name}: {value}" for name, value in headers.items()), body.decode("latin-1")]
        )
        text = f"you sent: {said} (escaped: {json.dumps(said)}; encoded: {quote(said, safe='')})"
        quoted = {name: json.dumps(said) for name in ("X-Error-Message", self.echo_header) if name}
        return self.render(text), {**self.headers, **quoted}


@dataclass(kw_only=True)
class _ConnectionFault(Fault):
    """A fault that breaks the connection: after the server's status line, headers (its Content-Length included) and
    `after_bytes` body bytes (all of a shorter body); or, with `before_headers`, right after the request is read,
    without asking the server.
    """

    after_bytes: int = 0
    before_headers: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.after_bytes < 0:
            raise ValueError(f"after_bytes must not be negative, not {self.after_bytes}")
        if self.before_headers and self.after_bytes:
            raise ValueError("before_headers sends no body bytes: drop after_bytes")


@dataclass(kw_only=True)
class ResetFault(_ConnectionFault):
    """Reset the connection (a TCP RST, as a crashed server or a dropping middlebox): the client reads a reset."""


@dataclass(kw_only=True)
class StallFault(_ConnectionFault):
    """Go silent for `seconds` (less if the relay stops), then close the connection: the client's read timeout fires,
    or, if it waits longer, it reads an early end of the response."""

    seconds: float = 30.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.seconds < 0:
            raise ValueError(f"seconds must not be negative, not {self.seconds}")


@dataclass(kw_only=True)
class CorruptFault(Fault):
    """Relay the server's answer with the first byte of its body inverted: same length, same headers, wrong bytes,
    as a faulty middlebox or disk would hand them over."""


AnyFault = StatusFault | ResetFault | StallFault | CorruptFault
F = TypeVar("F", StatusFault, ResetFault, StallFault, CorruptFault)


class Relay:
    """`tls`: (certificate, key) files to serve HTTPS with, as a TLS-terminating proxy in front of S3 would.

    Hooks, all safe to change while serving: `bytes_per_second` (throttle of each streamed body; with `slow_paths`,
    only of paths containing it), `injected` (S3 keys added to listings and served; `storage_classes` may list them
    as GLACIER ..., `kms_encrypted` names those served as SSE-KMS objects, whose ETags are not their MD5), faults
    (`add_fault`, `clear_faults`), `refuse`: while true, new connections are reset as soon as accepted (after the
    TLS handshake with `tls`) and requests on open ones are reset unanswered; and
    `session_lifetime`: STS sessions (AssumeRole replies passing through) expire that many seconds after they are
    issued, their Expiration says so, and a request signed with an expired session's key gets S3's 400 ExpiredToken.
    """

    def __init__(self, upstream: str, tls: tuple[Path, Path] | None = None) -> None:
        parts = urlsplit(upstream)
        self.upstream_host, self.upstream_port = parts.hostname or "127.0.0.1", parts.port or 80
        self.traffic = Traffic()
        self.bytes_per_second: float | None = None
        self.slow_paths: str | None = None
        self.session_lifetime: float | None = None
        self.sessions_issued: dict[str, float] = {}  # access key id of an STS session -> when it expires (time.time)
        self.injected: dict[str, dict[str, bytes]] = {}  # bucket -> key -> body
        self.storage_classes: dict[str, str] = {}  # injected key -> the storage class its listing entry shows
        self.kms_encrypted: set[str] = set()  # injected keys served as SSE-KMS objects
        self.refuse = False
        self._faults: list[AnyFault] = []
        self._faults_lock = threading.Lock()
        self._stopping = threading.Event()  # ends stalls when the relay stops
        self._server = _Server(self, 0)  # any free port: the kernel's choice, bound at once
        port = self._server.server_address[1]
        if tls is not None:
            self._server.socket = serving_context(*tls).wrap_socket(self._server.socket, server_side=True)
        self.endpoint = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
        # A short poll interval: stopping waits for the serving loop to look, 0.5 s by default.
        self._serving = ServedInThread(self._server, "relay", poll_interval=0.05)

    def __enter__(self) -> Relay:
        self._serving.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stopping.set()
        self._serving.stop()

    def reset(self) -> None:
        with self.traffic.lock:
            self.traffic.requests.clear()
            self.traffic.headers.clear()
            self.traffic.body_bytes = 0
            self.traffic.refused = 0
            self.traffic.object_gets_at_once = self.traffic.object_gets_now
            self.traffic.object_gets_on_arrival.clear()
            self.traffic.object_gets_arrived_at.clear()
            self.traffic.first_object_get_at = 0.0

    def add_fault(self, fault: F) -> F:
        """Strike matching requests from now on; returns the fault, whose `hits` tests can assert on."""
        with self._faults_lock:
            self._faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        """Let every request through again (stalls already under way still run out)."""
        with self._faults_lock:
            self._faults.clear()

    def _take_fault(self, method: str, path: str, byte_range: str | None) -> AnyFault | None:
        """The fault striking this request (`byte_range`: its Range header), its hit counted; checked and counted at
        once, as requests race."""
        with self._faults_lock:
            for fault in self._faults:
                if fault.applies_to(method, path, byte_range):
                    fault.matched += 1
                    if fault.matched > fault.after and (fault.matched - fault.after) % fault.every == 0:
                        now = time.monotonic()
                        fault.hits += 1
                        fault.struck_at.append(now)
                        fault.began_at = fault.began_at or now
                        return fault
        return None

    def _count_refused(self) -> None:
        with self.traffic.lock:
            self.traffic.refused += 1


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made with the openssl command line; clients trust the certificate
    itself. It says it is no CA: rustls (obstore's TLS) refuses a CA's certificate as a server's (CaUsedAsEndEntity),
    while OpenSSL, Go and s2n take a self-signed one either way."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-addext", "basicConstraints=critical,CA:FALSE",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def serving_context(certificate: Path, key: Path) -> ssl.SSLContext:
    """What a test server serves HTTPS with: `certificate` (`self_signed_certificate`'s) and its key."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    return context


def _first_byte_inverted(chunks: Iterable[bytes]) -> Iterator[bytes]:
    first = True
    for chunk in chunks:
        if first and chunk:
            chunk, first = bytes([chunk[0] ^ 0xFF]) + chunk[1:], False
        yield chunk


def _reset(connection: socket.socket) -> None:
    """Close with a TCP RST instead of a FIN: SO_LINGER on, with a zero timeout."""
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    connection.close()


def _unacknowledged(connection: socket.socket) -> int:
    """Bytes sent on the connection that the peer has not acknowledged yet (Linux's SIOCOUTQ)."""
    return struct.unpack("i", fcntl.ioctl(connection.fileno(), termios.TIOCOUTQ, bytes(4)))[0]


class _Server(NoDelay, ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # hundreds of clients' connections may arrive at once

    def __init__(self, relay: Relay, port: int) -> None:
        self.relay = relay
        super().__init__(("127.0.0.1", port), _handler_for(relay))

    def verify_request(self, request: Any, client_address: Any) -> bool:
        """Refused connections are reset at once, before a byte of HTTP is read or written."""
        if not self.relay.refuse:
            return True
        self.relay._count_refused()
        _reset(request)
        return False


def _handler_for(relay: Relay) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args: object) -> None:
            pass

        def do_GET(self) -> None:
            with relay.traffic.under_way(self.command, self.path):
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
            if relay.refuse:  # a request on a connection kept alive from before
                relay._count_refused()
                self._abort()
                return
            with relay.traffic.lock:
                relay.traffic.requests.append((self.command, self.path))
                relay.traffic.headers.append({name.lower(): value for name, value in self.headers.items()})
            fault = relay._take_fault(self.command, self.path, self.headers.get("Range"))
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            if self._session_expired():
                self._send_whole(400, [*self._own_headers(), ("Content-Type", "application/xml")], _EXPIRED, None)
            elif isinstance(fault, EchoFault):
                said, extra = fault.answer(self.command, self.path, dict(self.headers.items()), body or b"")
                headers = [*self._own_headers(), ("Content-Type", fault.content_type), *extra.items()]
                self._send_whole(fault.status, headers, said, None)
            elif isinstance(fault, StatusFault):
                headers = [*self._own_headers(), ("Content-Type", fault.content_type), *fault.headers.items()]
                self._send_whole(fault.status, headers, fault.body or b"", None)
            elif isinstance(fault, CorruptFault):
                self._forward(body, None, corrupt=True)
            elif fault is not None and fault.before_headers:
                self._strike(fault)
            elif not self._serve_injected(fault):
                self._forward(body, fault)

        def _forward(self, body: bytes | None, fault: _ConnectionFault | None, corrupt: bool = False) -> None:
            upstream = http.client.HTTPConnection(relay.upstream_host, relay.upstream_port, timeout=60)
            try:
                upstream.request(self.command, self.path, body=body, headers=dict(self.headers.items()))
                reply = upstream.getresponse()
                headers = [(k, v) for k, v in reply.getheaders() if k.lower() not in _HOP_BY_HOP]
                if (rewrite := self._rewriting(body)) is not None:
                    self._send_whole(reply.status, headers, rewrite(reply.read()), fault)
                elif reply.getheader("Content-Length") is None and self.command != "HEAD":
                    self._send_whole(reply.status, headers, reply.read(), fault)
                else:  # HEAD replies and bodies of a known length (none for redirects) pass as they are
                    chunks: Iterable[bytes] = iter(partial(reply.read, _CHUNK_SIZE), b"")
                    self._respond(
                        reply.status, headers, _first_byte_inverted(chunks) if corrupt else chunks, fault, True
                    )
            finally:
                upstream.close()

        def _session_expired(self) -> bool:
            found = _SIGNED_BY.search(self.headers.get("Authorization") or "")
            expires = relay.sessions_issued.get(found.group(1)) if found else None
            return expires is not None and time.time() >= expires

        def _rewriting(self, body: bytes | None) -> Callable[[bytes], bytes] | None:
            """How the relay changes the server's answer to this request, if it does: listings get the injected
            keys, AssumeRole replies a short session."""
            if self._is_listing() and self.command == "GET":
                return self._with_injected
            if relay.session_lifetime is not None and body and b"Action=AssumeRole" in body:
                return self._shortened_session
            return None

        def _shortened_session(self, answer: bytes) -> bytes:
            """An AssumeRole reply with the session's Expiration moved to `session_lifetime` from now."""
            assert relay.session_lifetime is not None
            expires = time.time() + relay.session_lifetime
            if key := re.search(rb"<AccessKeyId>([^<]+)</AccessKeyId>", answer):
                relay.sessions_issued[key.group(1).decode()] = expires
                stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires))
                answer = re.sub(
                    rb"<Expiration>[^<]*</Expiration>", f"<Expiration>{stamp}</Expiration>".encode(), answer
                )
            return answer

        def _send_whole(
            self, status: int, headers: list[tuple[str, str]], body: bytes, fault: _ConnectionFault | None
        ) -> None:
            """A body the relay holds whole, sent with its own Content-Length."""
            headers = [(name, value) for name, value in headers if name.lower() != "content-length"]
            self._respond(status, [*headers, ("Content-Length", str(len(body)))], [body], fault, False)

        def _respond(
            self,
            status: int,
            headers: list[tuple[str, str]],
            chunks: Iterable[bytes],
            fault: _ConnectionFault | None,
            counted: bool,
        ) -> None:
            """Send the reply; with a fault, only up to `after_bytes` of its body, then the fault strikes.

            The headers are sent as given: a relayed reply keeps the server's own Server and Date, not twice.
            """
            self.send_response_only(status)
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self._send_body(chunks, None if fault is None else fault.after_bytes, counted)
            if fault is not None:
                self._strike(fault)

        def _own_headers(self) -> list[tuple[str, str]]:
            """Server and Date, for the replies the relay makes itself."""
            return [("Server", self.version_string()), ("Date", self.date_time_string())]

        def _send_body(self, chunks: Iterable[bytes], limit: int | None, counted: bool) -> None:
            sent = 0
            for whole in chunks:
                chunk = whole if limit is None else whole[: limit - sent]
                if chunk:
                    if counted:  # before the write: once the client has the bytes, the count must show them
                        with relay.traffic.lock:
                            relay.traffic.body_bytes += len(chunk)
                    self.wfile.write(chunk)
                    sent += len(chunk)
                    if relay.bytes_per_second and (relay.slow_paths is None or relay.slow_paths in self.path):
                        time.sleep(len(chunk) / relay.bytes_per_second)
                if sent == limit:
                    return

        def _strike(self, fault: _ConnectionFault) -> None:
            if isinstance(fault, StallFault):
                relay._stopping.wait(fault.seconds)
                self.close_connection = True
            else:
                self._wait_acknowledged()
                self._abort()

        def _wait_acknowledged(self) -> None:
            """Let the client receive what was sent (bounded): a reset discards the bytes still in flight."""
            deadline = time.monotonic() + _ACK_WAIT_SECONDS
            while _unacknowledged(self.connection) and time.monotonic() < deadline:
                if relay._stopping.wait(0.005):
                    return

        def _abort(self) -> None:
            """Reset the connection; the server's own close after this handler finds it closed and lets it be."""
            self.close_connection = True
            self.rfile.close()  # its reference to the socket would keep the socket open past close()
            _reset(self.connection)

        def _bucket(self) -> str:
            return urlsplit(self.path).path.lstrip("/").split("/", 1)[0]

        def _is_listing(self) -> bool:
            parts = urlsplit(self.path)
            return parts.path.strip("/") == self._bucket() and "list-type" in parse_qs(parts.query)

        def _with_injected(self, xml: bytes) -> bytes:
            """The page with the injected keys that belong on it, as S3 would list them: under the prefix, after
            start-after, rolled up into a folder with a delimiter, and in key order among the real ones (listing
            readers rely on that order). For pages of one request each: a truncated listing's later pages get
            nothing."""
            query = {name: values[0] for name, values in parse_qs(urlsplit(self.path).query).items()}
            if "continuation-token" in query:
                return xml
            prefix, delimiter, after = query.get("prefix", ""), query.get("delimiter"), query.get("start-after")
            text = xml.decode()
            contents = {unquote_plus(key): entry for entry, key in _CONTENTS.findall(text)}
            for key, body in relay.injected.get(self._bucket(), {}).items():
                rest = key[len(prefix) :]
                if not key.startswith(prefix) or (after is not None and key <= after):
                    continue
                if delimiter and delimiter in rest:
                    folder = quote_plus(prefix + rest.split(delimiter, 1)[0] + delimiter, safe="/")
                    if f"<Prefix>{folder}</Prefix></CommonPrefixes>" not in text:
                        common = f"<CommonPrefixes><Prefix>{folder}</Prefix></CommonPrefixes>"
                        text = text.replace("</ListBucketResult>", common + "</ListBucketResult>")
                    continue
                contents[key] = (
                    f"<Contents><Key>{quote_plus(key, safe='/')}</Key><Size>{len(body)}</Size>"
                    f'<ETag>"{self._injected_etag(key, body)}"</ETag>'
                    f"<StorageClass>{relay.storage_classes.get(key, 'STANDARD')}</StorageClass></Contents>"
                )
            text = _CONTENTS.sub("", text)
            ordered = "".join(contents[key] for key in sorted(contents))
            return text.replace("</ListBucketResult>", ordered + "</ListBucketResult>", 1).encode()

        def _serve_injected(self, fault: _ConnectionFault | None) -> bool:
            path = urlsplit(self.path).path
            for key, body in relay.injected.get(self._bucket(), {}).items():
                if path == f"/{self._bucket()}/{quote(key, safe='/~')}":
                    headers = [*self._own_headers(), ("ETag", f'"{self._injected_etag(key, body)}"')]
                    if key in relay.kms_encrypted:
                        headers.append(("x-amz-server-side-encryption", "aws:kms"))
                    self._send_whole(200, headers, body, fault)
                    return True
            return False

        def _injected_etag(self, key: str, body: bytes) -> str:
            """The body's MD5, as S3 gives a plain object; for an SSE-KMS one, 32 hex digits that are not."""
            return hashlib.md5((b"sse-kms:" if key in relay.kms_encrypted else b"") + body).hexdigest()

    return Handler
