"""Throttling as a fleet: what the requests of one source share when its server asks them to slow down.

S3's `503 SlowDown` and the Hub's `429` are about the whole client, not one request: a bucket prefix past its request
rate answers every request the same way. So one throttled answer holds every request of the source (none starts
while the hold lasts), and the ramp halves the transfers in flight (`take_events`).

The hold ends only when the server takes a request again. While it lasts, one request at a time goes ahead as a
probe, backing off as the constants below say, not before the time a `Retry-After` named; a probe answered ends the
hold for every request. So a storm costs one probe at a time however many requests wait, and the fleet is back within
two probe intervals of its end; answers to requests sent before the hold began say nothing of either. Waits go
through a `Clock`. Thread-safe.
"""

from __future__ import annotations

import math
import random
import threading

from initializers.common.clock import Clock, SystemClock

#: The first wait for a probe, doubled for each probe throttled again (with up to `JITTER` more).
FIRST_PAUSE_SECONDS = 0.2
#: The longest wait between two probes without a Retry-After: the fleet is back within twice this (and its jitter)
#: of a storm's end, at the cost to the server of one request this often while the storm lasts.
MOST_BETWEEN_PROBES_SECONDS = 0.5
#: The spread added to a wait, as a share of it: fleets throttled together probe at different instants.
JITTER = 0.5
#: Doublings of the pause counted at most: far beyond its reaching MOST_BETWEEN_PROBES_SECONDS.
_MOST_DOUBLINGS = 32


class Throttle:
    """One source's requests, held together while its server throttles them."""

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._held_since: float | None = None  # when the hold began (clock.monotonic); None: no hold
        self._probe_at = 0.0  # when the next probe may go, while held
        self._rounds = 0  # probes throttled in a row, plus one: the backoff's exponent
        self._events = 0  # throttled answers since the ramp last asked
        #: The wait the server last named (Retry-After) during this hold, for messages; None: it named none.
        self.asked: float | None = None

    def wait_turn(self, most: float = math.inf) -> float | None:
        """Hold a request back while the throttling lasts, unless it goes as the probe: the seconds it waited; None,
        without waiting, once its turn would come more than `most` seconds after it began to wait (the server asked
        for longer than the request may wait, and no thread sleeps through that while the run fails)."""
        waited = 0.0
        while True:
            with self._lock:
                if self._held_since is None:
                    return waited
                now = self._clock.monotonic()
                if now >= self._probe_at:  # this request is the probe; the next waits its turn
                    self._probe_at = now + self._pause()
                    return waited
                nap = self._probe_at - now
                if waited + nap > most:
                    return None
            self._clock.sleep(nap)
            waited += nap

    def throttled(self, retry_after: float | None, sent_at: float | None = None) -> float:
        """A request sent at `sent_at` (by this clock; None: unknown, as if before the hold) was asked to slow down: the
        hold begins, or, for a probe, the next waits twice as long, not before `retry_after`; returns that wait."""
        with self._lock:
            now = self._clock.monotonic()
            self._events += 1
            if self._held_since is None:
                self._held_since, self._rounds = now, 1
                self._probe_at = now + self._pause()
            elif sent_at is not None and sent_at >= self._held_since:  # a probe: the throttling goes on
                self._rounds += 1
                self._probe_at = max(self._probe_at, now + self._pause())
            if retry_after is not None:
                self.asked = retry_after
                self._probe_at = max(self._probe_at, now + retry_after + random.uniform(0, JITTER))
            return self._probe_at - now

    def answered(self, sent_at: float | None = None) -> None:
        """A request sent at `sent_at` got its answer: sent during the hold (a probe), it ends the hold for every
        request. One sent before it began, or at an unknown time, says nothing of the throttling now."""
        with self._lock:
            if self._held_since is not None and sent_at is not None and sent_at >= self._held_since:
                self._held_since, self._rounds, self.asked = None, 0, None

    def take_events(self) -> int:
        """Throttled answers since the last call: what the ramp halves the transfers in flight for."""
        with self._lock:
            events, self._events = self._events, 0
        return events

    def _pause(self) -> float:
        """The wait before the next probe, for the rounds so far; under the lock."""
        doublings = min(self._rounds - 1, _MOST_DOUBLINGS)  # past it, 2 ** n as a float would overflow
        pause = min(FIRST_PAUSE_SECONDS * 2**doublings, MOST_BETWEEN_PROBES_SECONDS)
        return pause * (1 + random.uniform(0, JITTER))
