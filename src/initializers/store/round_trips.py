"""The round trips a store's requests have shown: the store's HTTP client adds them, the engine's concurrency ramp
reads them (a long round trip calls for more small-file requests in flight)."""

from __future__ import annotations

import threading


class RoundTrips:
    """The shortest round trip a source's requests have shown so far (each request's wait for its answer): the
    network's share of a request's time, which no number of requests in flight shortens. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._shortest: float | None = None

    def add(self, seconds: float) -> None:
        shortest = self._shortest
        if shortest is not None and seconds >= shortest:  # most requests: nothing to change, and no lock taken
            return  # (the value only ever falls, so one read that says "not shorter" stays true)
        with self._lock:
            if self._shortest is None or seconds < self._shortest:
                self._shortest = seconds

    @property
    def shortest(self) -> float | None:
        """Seconds; None before any request was answered."""
        return self._shortest
