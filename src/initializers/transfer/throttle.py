"""Throttling as a fleet: what the requests of one source share when its server asks them to slow down.

S3's `503 SlowDown` and the Hub's `429` are about the whole client, not one request: a bucket prefix past its request
rate answers every request the same way. So one throttled answer pauses every request of the source (none starts
until the pause ends), the pause grows while the throttling goes on (the server's `Retry-After` when it names one,
else exponential backoff with jitter, so the threads do not come back at one instant), and the concurrency ramp
reads how many answers were throttled to halve the transfers in flight (`concurrency.Ramp`, additive growth after).
Waits go through a `Clock`. Thread-safe.
"""

from __future__ import annotations

import random
import threading

from initializers.common.clock import Clock, SystemClock

#: The first pause without a Retry-After, doubled for each pause that ends in throttling again.
FIRST_PAUSE_SECONDS = 0.2
#: The longest pause without a Retry-After.
MAX_PAUSE_SECONDS = 30.0
#: The spread added to a pause, as a share of it: requests throttled together come back spread over that much more.
JITTER = 0.5


class Throttle:
    """One source's requests, paused together while its server throttles them."""

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._resume_at = 0.0  # no request starts before this (clock.monotonic)
        self._rounds = 0  # pauses in a row that ended in throttling again: the backoff's exponent
        self._events = 0  # throttled answers since the ramp last asked

    def wait_turn(self) -> float:
        """Hold a request back while the fleet's pause lasts; the seconds it waited."""
        with self._lock:
            remaining = self._resume_at - self._clock.monotonic()
        if remaining <= 0:
            return 0.0
        self._clock.sleep(remaining)
        return remaining

    def throttled(self, retry_after: float | None) -> float:
        """One request was asked to slow down: extend the pause every request keeps, and return the seconds this
        request waits. An answer that arrives after the last pause ended starts a longer one (the backoff doubles);
        answers to requests already under way when a pause began only join it."""
        with self._lock:
            now = self._clock.monotonic()
            self._events += 1
            if now >= self._resume_at:
                self._rounds += 1
            if retry_after is not None:
                pause = retry_after + random.uniform(0, JITTER)
            else:
                pause = min(FIRST_PAUSE_SECONDS * 2 ** (self._rounds - 1), MAX_PAUSE_SECONDS)
                pause *= 1 + random.uniform(0, JITTER)
            self._resume_at = max(self._resume_at, now + pause)
            return self._resume_at - now

    def answered(self) -> None:
        """A request got its answer: the throttling, if any, has eased, and the next pause starts short again."""
        with self._lock:
            self._rounds = 0

    def take_events(self) -> int:
        """Throttled answers since the last call: what the ramp halves the transfers in flight for."""
        with self._lock:
            events, self._events = self._events, 0
        return events
