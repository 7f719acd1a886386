"""How many transfers run at once: start modest, double while doubling pays, never above the cap.

On a real network each connection is capped (S3 and the Hub's CDN serve tens of MB/s per request) and every request
pays a round trip, so throughput grows with connections until the link, the server or our CPU is the limit (on
loopback, our CPU from the start). Neither is known in advance: every window the engine reports the bytes delivered,
the CPU used and how long requests waited for their first byte, and the ramp answers with the streams (and small-file
requests) for the next; where our CPU is the limit it halves them instead, while half deliver as much (`_double`).

A stream is a part's worth of bytes. Smaller tasks (small files) are bound by round trips, not bytes: as many more
run at once as would move a part's bytes together, up to `requests`. That ceiling starts at `BASE_REQUESTS`, or as
high as measured round trips call for (`follow_round_trip`), then doubles toward the cap while requests are
latency-bound and the CPU has room: over a long round trip only more requests in flight raise throughput. A busy
server makes requests wait too, where more would only queue (costing us threads): they then take longer (over a round
trip, as long as before). More threads can also cost more CPU than the waits they hide: throughput falls. Either
undoes the doubling and the ceiling stays; neither needs a new request to have finished, which over a long round trip
takes longer than a window (a throughput rise would).

Ranges of large files are sized from one connection's rate: `PART_SIZE` over capped connections, so a file spreads
over many; up to `MAX_PART_SIZE` over fast ones, so fewer requests carry the bytes (less CPU for us and the server).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import NamedTuple

from initializers.store.contract import PART_SIZE
from initializers.store.round_trips import RoundTrips
from initializers.store.throttle import Throttle

#: The largest range a fast connection gets: a file of a few hundred MB still spreads over several streams.
MAX_PART_SIZE = 32 << 20
#: Seconds between decisions: long enough to average many requests, short enough to ramp within a second.
WINDOW_SECONDS = 0.25
#: A doubling is kept only if throughput rose this much: less is noise, or a limit elsewhere (fewer do as well).
_WORTH_KEEPING = 1.15
#: Share of one core above which the process is the limit: more threads would only contend for it.
_BUSY_CPU = 0.5
#: After settling, another doubling is tried every this many windows, in case the regime changed (small files
#: following large ones, a listing that caught up).
_PROBE_EVERY = 8
#: Small-file requests in flight before any latency is measured: as many as a CPU-bound run does well with.
BASE_REQUESTS = 64
#: Small-file requests one process completes per second where its CPU is the limit: the rate `follow_round_trip`
#: keeps going over a round trip. At 64 KiB objects a request costs us about a millisecond of CPU; more requests in
#: flight than this rate calls for only cost CPU (the measurements: bench/results.md, "Figures once quoted in src").
REQUESTS_PER_SECOND = 1000
#: Round trips of a connection's first request (opening it, then the request): the start is sized for the first wave.
_FIRST_REQUEST_ROUND_TRIPS = 2
#: Share of a request's time spent waiting for its first byte above which requests are latency-bound.
_LATENCY_BOUND = 0.5
#: A doubling of the small-file requests is undone when a request then takes this much longer: they queue somewhere.
_QUEUEING = 1.5
#: Tasks the running mean of task sizes mostly reflects: enough to smooth a mix, few enough to follow a change
#: (small files listed first, a large file's ranges next).
_TASK_HORIZON = 16
#: A range lasts about this long at the rate one connection achieved: long against a request's round trip and its
#: fixed cost, short enough that a file's last ranges keep few streams waiting.
_PART_SECONDS = 0.25


def _short_of(level: int) -> int:
    """Three quarters of a level the server throttled: where the way back stops, the next time."""
    return max(1, level * 3 // 4)


class Latency(NamedTuple):
    """The requests finished in a window: the share of their time spent waiting for a first byte, their mean seconds."""

    waiting_share: float
    request_seconds: float


#: A window in which no request finished.
NO_REQUESTS = Latency(0.0, 0.0)


class RequestTimes:
    """Seconds the requests finished in a window spent waiting for their first byte, and in all: the ramp grows
    small-file concurrency while waiting dominates; the engine adds every request it completes. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting = self._total = 0.0
        self._count = 0

    def add(self, waiting: float, total: float) -> None:
        with self._lock:
            self._waiting += waiting
            self._total += total
            self._count += 1

    def window(self) -> Latency:
        """The window's latency (zeros when no request finished); starts the next window."""
        with self._lock:
            latency = Latency(self._waiting / self._total, self._total / self._count) if self._total > 0 else None
            self._waiting = self._total = 0.0
            self._count = 0
        return latency or NO_REQUESTS


@dataclass
class Ramp:
    """The limit for each window, from the throughput, CPU share and latency measured in the one before."""

    limit: int  # streams
    cap: int  # streams at once, and small-file requests unless `request_cap` says otherwise
    request_cap: int = 0  # the most small-file requests at once (0: `cap`)
    _trial: tuple[int, float] | None = None  # (limit, throughput) before the doubling or halving being tried
    _windows_to_probe: int = 1
    #: Half the streams once delivered less while the CPU was busy: their bytes, not the streams, keep it busy (capped
    #: connections, each network-bound), so halving is not tried again; growth is judged by throughput alone.
    _fewer_lost: bool = False
    _draining: bool = False  # the transfers above a halved limit were still finishing their tasks (see `observe`)
    _task_bytes: float = 0.0  # running mean of the sizes of the tasks started, from the first one's (0: none yet)
    #: Tasks per stream: as many as move a part's bytes together, by `_task_bytes` (one before any started, as if each
    #: were a part); kept as the mean moves, since `workers` is read for every task.
    _per_stream: int = 1
    part_size: int = PART_SIZE  # the range size a connection's measured rate calls for, in whole MiB
    requests: int = BASE_REQUESTS  # the most small-file requests at once: grows while they are latency-bound
    _requests_trial: tuple[int, float, float] | None = None  # (requests, request seconds, throughput) before it
    _requests_settled: bool = False  # a doubling of `requests` did not pay: the waiting is not the round trip's
    #: The source's fleet hold: its throttled answers halve what runs at once.
    throttle: Throttle | None = None
    _throttled_once: bool = False  # since then the server sets the pace (`_grow_back`)
    #: The level (streams, small-file requests) before throttling struck, doubled back to once answers are clean: a
    #: storm passes (a prefix being scaled up), and the fleet is back within a few windows. None: not recovering.
    _recovering_to: tuple[int, int] | None = None
    _grew_since_halving: bool = False  # a calm window doubled toward `_recovering_to` since the last halving
    #: The source's round trips as measured so far (None: the source measures none), which `requests` starts from.
    round_trips: RoundTrips | None = None
    _requests_from_round_trip: bool = False  # `requests` is what the round trip last called for, unchanged since

    def __post_init__(self) -> None:
        self.limit = max(1, min(self.limit, self.cap))
        self.request_cap = self.request_cap or self.cap
        self.requests = min(self.requests, self.request_cap)

    @property
    def workers(self) -> int:
        """Transfers to run at once: `limit` streams, each as many tasks as move a part's bytes together, small
        ones up to `requests` in all."""
        return max(self.limit, min(self.limit * self._per_stream, self.requests))

    def follow_round_trip(self) -> int:
        """Raise `requests` (within the cap) to as many as keep `REQUESTS_PER_SECOND` going over the shortest round trip
        so far, each on a new connection (Little's law). Called before the first request and every window: the
        listing's round trips size the first wave, the first GETs' correct it, down too while nothing else changed it
        (a listing page's answer includes the server's work, which a loaded loopback server makes look like a round
        trip). Never after throttling, or once a doubling showed requests queueing: the server set the pace."""
        shortest = self.round_trips.shortest if self.round_trips is not None else None
        if shortest is None or self._throttled_once or self._requests_settled:
            return self.requests
        wanted = min(self.request_cap, math.ceil(REQUESTS_PER_SECOND * shortest * _FIRST_REQUEST_ROUND_TRIPS))
        without = min(BASE_REQUESTS, self.request_cap) if self._requests_from_round_trip else self.requests
        self.requests, self._requests_from_round_trip = max(without, wanted), wanted > without
        return self.requests

    def task_started(self, size: int) -> None:
        """A task of `size` bytes was handed to a transfer: it moves the running mean that sizes `workers`. The first
        sets it, so that a listing of small files calls for all its requests from the first task on."""
        self._task_bytes += (size - self._task_bytes) / (_TASK_HORIZON if self._task_bytes else 1)
        self._per_stream = max(1, round(PART_SIZE / max(self._task_bytes or PART_SIZE, 1.0)))

    def observe(self, throughput: float, cpu_share: float, latency: Latency = NO_REQUESTS, running: int = 0) -> int:
        """The window just ended (throughput in bytes/s, CPU in cores, `running`: transfers at its end); the new limit.
        A halving is judged by the first window without the transfers above it: each finishes its task, and a range
        over a capped connection lasts seconds, in which half the streams would seem to deliver as much as all.
        Throttled answers halve streams and small-file requests (`_halve`); from then on the server sets the pace
        (`_grow_back`: additive increase, multiplicative decrease)."""
        if throughput > 0:  # a window with nothing delivered (a listing, the first bytes) says nothing of the rate
            self.part_size = min(MAX_PART_SIZE, max(PART_SIZE, int(self._range_bytes(throughput)) >> 20 << 20))
        if self.throttle is not None and self.throttle.take_events():
            return self._halve()
        if self._throttled_once:
            return self._grow_back(throughput, cpu_share)
        self.follow_round_trip()
        self._follow_latency(throughput, cpu_share, latency)
        if self._trial is not None:
            limit_before, throughput_before = self._trial
            if self.limit < limit_before and (running > self.workers or self._draining):
                self._draining = running > self.workers
                return self.limit
            self._trial = None
            if self.limit > limit_before and throughput >= throughput_before * _WORTH_KEEPING:
                return self._double(throughput, cpu_share)
            if self.limit < limit_before:
                # Half kept when they deliver at least as much as all did, for less CPU: over TLS on loopback 1-2
                # streams moved more than 8, for half the CPU per GB (bench/results.md, issue 66).
                if throughput >= throughput_before:
                    return self._double(throughput, cpu_share)  # fewer did as well: fewer still, while the CPU is busy
                # Half delivered less: the connections, not the CPU, are the limit, and more of them are tried next.
                self._fewer_lost, self.limit, self._windows_to_probe = True, limit_before, 1
                return self.limit
            self.limit = limit_before
            self._windows_to_probe = _PROBE_EVERY
            return self.limit
        self._windows_to_probe -= 1
        if self._windows_to_probe <= 0:
            return self._double(throughput, cpu_share)
        return self.limit

    def _follow_latency(self, throughput: float, cpu_share: float, latency: Latency) -> None:
        """Double `requests` while small files are latency-bound, the CPU has room and the last doubling neither made
        requests queue nor lowered throughput."""
        if self._requests_trial is not None:
            if not latency.request_seconds:  # none finished: nothing to judge the doubling by yet
                return
            requests_before, seconds_before, throughput_before = self._requests_trial
            self._requests_trial = None
            if latency.request_seconds >= seconds_before * _QUEUEING or throughput * _WORTH_KEEPING < throughput_before:
                self.requests, self._requests_settled = requests_before, True
        bound_by_requests = self.limit * self._per_stream > self.requests < self.request_cap
        if (
            bound_by_requests
            and not self._requests_settled
            and throughput > 0
            and latency.waiting_share >= _LATENCY_BOUND
            and cpu_share < _BUSY_CPU
        ):
            self._requests_trial = (self.requests, latency.request_seconds, throughput)
            self.requests, self._requests_from_round_trip = min(self.request_cap, self.requests * 2), False

    def _halve(self) -> int:
        self._throttled_once = True
        self._trial = self._requests_trial = None
        if self._recovering_to is None:  # the storm's first halving: what ran until now is the level to return to
            self._recovering_to = (self.limit, self.requests)
        elif self._grew_since_halving:  # struck again on the way back: stop short of where it struck this time
            self._recovering_to = (_short_of(self.limit), _short_of(self.requests))
        self._grew_since_halving = False
        self.limit, self.requests = max(1, self.limit // 2), max(1, self.requests // 2)
        return self.limit

    def _grow_back(self, throughput: float, cpu_share: float) -> int:
        """After a calm window that delivered (one the fleet's hold kept idle, a Retry-After of seconds, shows nothing
        of the server's pace): double back toward the level before the throttling, which ran with the CPU it took;
        past it, one more stream and request, with CPU to spare, as `_double` needs."""
        if throughput <= 0:
            return self.limit
        if self._recovering_to is not None:
            limit, requests = self._recovering_to
            self.limit, self.requests = min(limit, self.limit * 2), min(requests, self.requests * 2)
            self._grew_since_halving = True
            if (self.limit, self.requests) == (limit, requests):
                self._recovering_to = None
        elif cpu_share < _BUSY_CPU:
            self.limit, self.requests = min(self.cap, self.limit + 1), min(self.request_cap, self.requests + 1)
        return self.limit

    def _range_bytes(self, throughput: float) -> float:
        """The bytes one transfer moves in `_PART_SECONDS` at `throughput`: the range its connection calls for."""
        return throughput / self.workers * _PART_SECONDS

    def _double(self, throughput: float, cpu_share: float) -> int:
        """Try twice the streams while the CPU has room; where it is the limit, try half until half delivers less:
        threads contending for it (the interpreter's lock, passed between cores each read) cost more than they add.
        Halving is tried only where a range takes about a window at the rate measured (fast connections, whose bytes
        keep the CPU busy). Over capped ones a range lasts seconds: a halving would cost that long at half the rate
        before it could be judged, and the network, not the CPU, is their limit."""
        busy = cpu_share >= _BUSY_CPU and not self._fewer_lost and self._range_bytes(throughput) >= PART_SIZE
        if throughput <= 0 or self.limit == (1 if busy else self.cap):
            self._windows_to_probe = _PROBE_EVERY
            return self.limit
        self._trial = (self.limit, throughput)
        self.limit = self.limit // 2 if busy else min(self.limit * 2, self.cap)
        return self.limit
