"""A network emulator on loopback: a TCP proxy that gives every connection a round trip and a rate cap.

Loopback makes the client's CPU the limit; users meet round trips and per-connection caps (S3 serves tens of
MB/s per request, the Hub's CDN likewise). This kernel has no netem qdisc, so the proxy does it in user space:

- opening a connection costs one round trip before its first byte reaches the origin;
- every byte is held for half a round trip in each direction (bytes in flight are not serialised: a slow
  link still carries a whole window per round trip);
- the origin's bytes to the client are paced to `rate` bytes per second, per connection;
- it counts connections: all that were opened, and the most open at once.

Bytes move between sockets and pipes with `splice`, never through Python, so the proxy itself is not the
limit (the real-network benchmark measures its ceiling with curl): two threads per direction of each
connection, one stamping arrivals, one releasing them when they are due.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import os
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

_CHUNK = 64 * 1024
_PIPE_SIZE = 1 << 20


@dataclass
class Connections:
    """What the emulator saw: connections opened, the most open at once, bytes sent to clients."""

    opened: int = 0
    open_now: int = 0
    peak: int = 0
    bytes_to_clients: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self) -> None:
        with self.lock:
            self.opened, self.peak, self.bytes_to_clients = 0, self.open_now, 0

    def _opened(self) -> None:
        with self.lock:
            self.opened += 1
            self.open_now += 1
            self.peak = max(self.peak, self.open_now)

    def _closed(self) -> None:
        with self.lock:
            self.open_now -= 1

    def _sent(self, count: int) -> None:
        with self.lock:
            self.bytes_to_clients += count


class NetworkEmulator:
    """In front of `upstream` (a URL or host:port); clients connect to `url` (or `netloc`) instead.

    `rtt` is the round trip in seconds, `rate` the cap on each connection's bytes to the client (bytes per
    second; None: uncapped).
    """

    def __init__(self, upstream: str, rtt: float = 0.02, rate: float | None = 8e6) -> None:
        parts = urlsplit(upstream if "://" in upstream else f"tcp://{upstream}")
        assert parts.hostname and parts.port, f"upstream needs a host and a port: {upstream!r}"
        self._upstream = (parts.hostname, parts.port)
        self.rtt = rtt
        self.rate = rate
        self.connections = Connections()
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=1024)
        self.netloc = f"127.0.0.1:{self._listener.getsockname()[1]}"
        scheme = parts.scheme if parts.scheme in ("http", "https") else "http"
        self.url = f"{scheme}://{self.netloc}"
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closing = False
        self._thread = threading.Thread(target=self._accept, name="netem-accept", daemon=True)

    def __enter__(self) -> NetworkEmulator:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._closing = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(5)

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), name="netem-connection", daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        opened = time.monotonic()
        self.connections._opened()
        try:
            upstream = socket.create_connection(self._upstream)
        except OSError:
            client.close()
            self.connections._closed()
            return
        for sock in (client, upstream):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._sockets.update((client, upstream))
        half = self.rtt / 2
        # The handshake's round trip: the first request reaches the origin one and a half round trips after connect.
        outbound = _Direction(client, upstream, half, earliest=opened + self.rtt)
        inbound = _Direction(upstream, client, half, rate=self.rate, on_sent=self.connections._sent)
        threads = [*outbound.start(), *inbound.start()]
        for thread in threads:
            thread.join()
        with self._lock:
            self._sockets.difference_update((client, upstream))
        client.close()
        upstream.close()
        self.connections._closed()


class _Direction:
    """One direction of a connection: arrivals are stamped as they are read into a pipe, then released from it
    when due (the delay) and no faster than the rate allows."""

    def __init__(
        self,
        source: socket.socket,
        destination: socket.socket,
        delay: float,
        earliest: float = 0.0,
        rate: float | None = None,
        on_sent: collections.abc.Callable[[int], None] | None = None,
    ) -> None:
        self._source = source
        self._destination = destination
        self._delay = delay
        self._earliest = earliest
        self._rate = rate
        self._on_sent = on_sent
        self._read_fd, self._write_fd = os.pipe2(os.O_CLOEXEC)
        with contextlib.suppress(OSError):
            fcntl.fcntl(self._write_fd, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
        self._arrivals: collections.deque[tuple[float, int]] = collections.deque()
        self._ready = threading.Condition()

    def start(self) -> list[threading.Thread]:
        threads = [
            threading.Thread(target=self._stamp, name="netem-in", daemon=True),
            threading.Thread(target=self._release, name="netem-out", daemon=True),
        ]
        for thread in threads:
            thread.start()
        return threads

    def _stamp(self) -> None:
        readable, writable = select.poll(), select.poll()
        readable.register(self._source, select.POLLIN)
        writable.register(self._write_fd, select.POLLOUT)
        while True:
            # Wait outside splice: a blocking splice from a socket holds the pipe's lock while it waits for data,
            # and the releasing thread could then never drain the pipe.
            readable.poll()
            writable.poll()
            try:
                count = os.splice(self._source.fileno(), self._write_fd, _CHUNK, flags=os.SPLICE_F_NONBLOCK)
            except BlockingIOError:
                continue
            except OSError:
                count = 0
            with self._ready:
                self._arrivals.append((time.monotonic(), count))
                self._ready.notify()
            if count == 0:
                os.close(self._write_fd)  # each end of the pipe is closed by the one thread that uses it
                return

    def _release(self) -> None:
        free_at = 0.0  # when the paced link has sent what it was given
        try:
            while True:
                with self._ready:
                    while not self._arrivals:
                        self._ready.wait()
                    arrived, count = self._arrivals.popleft()
                due = max(arrived + self._delay, self._earliest, free_at)
                if (wait := due - time.monotonic()) > 0:
                    time.sleep(wait)
                if count == 0:
                    with contextlib.suppress(OSError):
                        self._destination.shutdown(socket.SHUT_WR)
                    return
                left = count
                while left:
                    left -= os.splice(self._read_fd, self._destination.fileno(), left)
                if self._rate:
                    free_at = due + count / self._rate  # from the schedule, so oversleeping is not cumulative
                if self._on_sent:
                    self._on_sent(count)
        except OSError:  # the other side went away: end both ways
            for sock in (self._source, self._destination):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        finally:
            os.close(self._read_fd)  # a reader blocked on a full pipe now fails, and ends
