"""MAX_BANDWIDTH: one token bucket that every transfer of a run draws from, so the cap holds for all connections
together (as rclone's --bwlimit).

A transfer takes tokens for the bytes just received before passing them on; short of them, it goes into debt and
sleeps it off, not reading its connection meanwhile (TCP then slows the sender). Later takers queue behind the debt,
so the rate over any stretch stays at the cap, give or take one burst. Waits go through a `Clock`, for tests.
"""

from __future__ import annotations

import threading

from initializers.common.clock import Clock, SystemClock
from initializers.common.remote_file import Checksum
from initializers.store.sink import Sink

#: Credit an idle bucket may save up, in seconds of the rate: a burst after a pause stays short.
BURST_SECONDS = 0.1


class TokenBucket:
    """At most `rate` bytes per second, over all threads taking from it; thread-safe."""

    def __init__(self, rate: int, clock: Clock | None = None) -> None:
        self.rate = rate
        self._clock = clock or SystemClock()
        self._burst = rate * BURST_SECONDS
        self._tokens = 0.0  # starts empty: the first bytes already count against the cap
        self._stamp = self._clock.monotonic()
        self._lock = threading.Lock()

    def take(self, count: int) -> None:
        """Account for `count` bytes; returns once the rate allows them."""
        with self._lock:
            now = self._clock.monotonic()
            self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self.rate) - count
            self._stamp = now
            debt = -self._tokens
        if debt > 0:
            self._clock.sleep(debt / self.rate)

    def metered(self, sink: Sink) -> Sink:
        """`sink`, with every write taken from this bucket first."""
        return _MeteredSink(sink, self)


class _MeteredSink:
    def __init__(self, sink: Sink, bucket: TokenBucket) -> None:
        self._sink = sink
        self._bucket = bucket

    @property
    def written(self) -> int:
        return self._sink.written

    def write(self, data: memoryview) -> None:
        self._bucket.take(len(data))
        self._sink.write(data)

    def expect(self, checksum: Checksum) -> None:
        self._sink.expect(checksum)

    def rewind(self) -> None:
        self._sink.rewind()
