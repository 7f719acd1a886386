"""Streaming GETs on our HTTP/1.1 connections, for every HTTP store: a keep-alive connection per origin and thread (the
Hub redirects to a CDN, a bucket has one), bodies into the engine's sink through a reused per-thread buffer, transient
failures retried under the one retry policy (`retry.py`); reads resume from the bytes their sink holds (`objects`).
"""

from __future__ import annotations

import mmap
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TypeVar

from initializers import __version__
from initializers.common.clock import Clock, SystemClock
from initializers.common.errors import FetchError
from initializers.sources.http.http1 import NOT_YET, Connection, Proxy, Response, proxy_url
from initializers.store.retry import Retriable, retry_after, retrying
from initializers.store.round_trips import RoundTrips
from initializers.store.sink import Sink
from initializers.store.throttle import Throttle

_T = TypeVar("_T")
#: Per thread; a loopback recv rarely returns more. Mapped rather than allocated, so that only the pages bodies
#: reach are resident: hundreds of threads fetching small files hold a few KiB each, not the whole buffer.
_BUFFER_SIZE = 256 * 1024
USER_AGENT = f"initializers/{__version__}"
RETRIABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
THROTTLING_STATUS = frozenset({429, 503})


@dataclass(frozen=True)
class Request:
    """A GET: its origin, target and headers."""

    scheme: str
    netloc: str
    target: str
    headers: dict[str, str]

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.netloc}{self.target}"


def retriable(status: int, reason: str, retry_after_header: str | None, throttled: bool = False) -> Retriable:
    """What a transient HTTP answer means for the retry policy: throttling honours the server's Retry-After."""
    return Retriable(
        f"{status} {reason}",
        throttled=throttled or status in THROTTLING_STATUS,
        retry_after=retry_after(retry_after_header),
    )


class HttpGetter:
    """Per-thread connections, buffers, retries; thread-safe. `trust`: the CA variable a certificate failure names."""

    def __init__(
        self, ssl_context: Callable[[], ssl.SSLContext], timeout: float, trust: str, clock: Clock | None = None
    ) -> None:
        self._clock = clock or SystemClock()
        self._ssl_context = cache(ssl_context)  # loading a trust store is slow: only once https is used
        self._trust = trust
        #: Seconds a connection waits for a byte (READ_TIMEOUT).
        self.timeout = timeout
        self._local = threading.local()
        self._connections: set[Connection] = set()
        self._lane_idle: list[Connection] = []  # the lane's connections between requests (`begin`)
        self._lock = threading.Lock()
        self._interrupted = False
        #: The hold every request through this getter keeps while its server throttles them.
        self.throttle = Throttle(self._clock)
        #: The shortest round trip its requests have shown: what the concurrency ramp starts small-file requests from.
        self.round_trips = RoundTrips()

    def send(self, request: Request) -> Response:
        """`request` on this thread's connection to its origin; the response head, its body still to read. The wait
        for the head, per round trip it took (opening the connection included), is a round trip's sample."""
        connection = self._connection(request.scheme, request.netloc)
        round_trips = 1 + connection.round_trips_to_open
        started = self._clock.monotonic()
        response = connection.get(request.target, request.headers)
        self.round_trips.add((self._clock.monotonic() - started) / round_trips)
        return response

    def begin(
        self, request: Request, accept: Callable[[Response], None], sink: Sink, wanted: int, where: str
    ) -> HttpRequestInFlight:
        """Send `request` on an idle lane connection (opened if need be), returned in flight (`HttpRequestInFlight`):
        `accept` judges its head (raising for a failure), and up to `wanted` bytes of its body go into `sink`."""
        with self._lock:
            connection = self._lane_idle.pop() if self._lane_idle else None
        if connection is None:
            connection = self._new_connection(request.scheme, request.netloc)
        in_flight = HttpRequestInFlight(self, connection, accept, sink, wanted, where)
        try:
            connection.send_get(request.target, request.headers)
            connection.set_blocking(False)
        except BaseException:
            in_flight.abandon()
            raise
        return in_flight

    def lane_done(self, connection: Connection) -> None:
        """A lane's request is answered (or abandoned, its connection closed): the connection serves another."""
        with self._lock:
            self._lane_idle.append(connection)

    def retrying(self, verb: str, where: str, attempt: Callable[[], _T]) -> _T:
        """`attempt()` under the retry policy on fresh connections; a bad certificate fails at once, naming `trust`."""
        return retrying(
            verb,
            where,
            attempt,
            self.close_thread_connections,
            lambda: self._interrupted,
            self._clock,
            self._trust,
            throttle=self.throttle,
        )

    def stream_body(self, response: Response, sink: Sink, wanted: int, where: str, room: int | None = None) -> None:
        """The rest of the body into `sink`, at most `wanted` bytes (`room` still to come): a longer one (endless, a
        range longer than asked) is refused once it shows, unwritten and not retried, since asking again would only
        fill the disk again; a shorter one is the caller's to judge. Non-blocking: `NOT_YET` once nothing more came."""
        buffer = self._buffer()
        room = wanted if room is None else room
        while count := response.readinto(buffer[: min(len(buffer), room + 1)]):
            if count > room:
                self.close_thread_connections()
                raise FetchError(
                    f"{where}: the server sent more than the {wanted} bytes asked for (the listed size or the "
                    "range); refused"
                )
            sink.write(buffer[:count])
            room -= count

    def interrupt(self) -> None:
        """Abort every open connection, from another thread: blocked reads fail now instead of at their timeout."""
        self._interrupted = True
        with self._lock:
            for connection in self._connections:
                connection.abort()

    def close(self) -> None:
        with self._lock:
            for connection in self._connections:
                connection.close()

    def _connection(self, scheme: str, netloc: str) -> Connection:
        mine: dict[tuple[str, str], Connection] = self._local.__dict__.setdefault("connections", {})
        connection = mine.get((scheme, netloc))
        if connection is None:
            connection = mine[(scheme, netloc)] = self._new_connection(scheme, netloc)
        return connection

    def _new_connection(self, scheme: str, netloc: str) -> Connection:
        """A connection (opened on first use) through the environment's proxy, known to `interrupt` and `close`."""
        tls = self._ssl_context() if scheme == "https" else None
        proxy = proxy_url(scheme, netloc)  # the one the environment names for the origin; None: a direct connection
        connection = Connection(scheme, netloc, self.timeout, tls, Proxy.parse(*proxy) if proxy else None)
        with self._lock:
            self._connections.add(connection)
        return connection

    def close_thread_connections(self) -> None:
        """After a failure, or a body not worth reading, the connections' state is unknown: each reconnects."""
        for connection in self._local.__dict__.get("connections", {}).values():
            connection.close()

    def _buffer(self) -> memoryview:
        buffer = getattr(self._local, "buffer", None)
        if buffer is None:
            buffer = self._local.buffer = memoryview(mmap.mmap(-1, _BUFFER_SIZE))
        return buffer


class HttpRequestInFlight:
    """A GET in flight on a lane's connection, its answer read as it comes without waiting (`lane.RequestInFlight`)."""

    def __init__(
        self,
        getter: HttpGetter,
        connection: Connection,
        accept: Callable[[Response], None],
        sink: Sink,
        wanted: int,
        where: str,
    ) -> None:
        self._getter = getter
        self._connection = connection
        self._accept = accept
        self._sink = sink
        self._wanted = wanted
        self._where = where
        self._base = sink.written  # what the sink held before this request
        self._response: Response | None = None
        self._released = False

    def fileno(self) -> int:
        return self._connection.fileno()

    def advance(self) -> bool:
        if self._response is None:
            try:
                response = self._connection.read_head()
            except NOT_YET:
                return False
            self._accept(response)
            self._response = response
            if response.length is None:  # chunked, or ended by the server closing: rare for an object; wait for it
                self._connection.set_blocking(True)
        room = self._wanted - (self._sink.written - self._base)
        try:
            self._getter.stream_body(self._response, self._sink, self._wanted, self._where, room)
        except NOT_YET:
            return False
        self._release()
        return True

    def abandon(self) -> None:
        self._connection.close()
        self._release()

    def _release(self) -> None:
        if not self._released:
            self._released = True
            self._getter.lane_done(self._connection)
