"""The lane: small whole files, many requests in flight from one thread, its answers read as they arrive.

A thread per request costs more CPU than the request: every answer wakes its thread, which waits for the interpreter
lock, and scheduling those hand-offs took most of the kernel's share of a run's CPU on small files. One thread that
sends on many connections and reads whichever answers (a selector) spends far less per file (bench/results.md). One
of the threads handing files in (`take`) drives the lane while it has work; the others return for more tasks, or
wait while it holds its fill (`_MOST_WAITING` files).

Opening a connection blocks the lane: it is for short round trips only (`lane_files.LANE_ROUND_TRIP_SECONDS`).
"""

from __future__ import annotations

import selectors
import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, NamedTuple, Protocol, TypeVar

from initializers.common import logs
from initializers.common.clock import Clock
from initializers.store.lane import RequestInFlight
from initializers.transfer.file_transfer import Cancelled

#: Files waiting for the lane at most: a thread handing in more waits until the lane takes some.
_MOST_WAITING = 256
#: How often the lane looks whether the run is being stopped, and for answers past their deadline.
_POLL_SECONDS = 0.25
_log = logs.get_logger("initializers.transfer.lane")


_Item = TypeVar("_Item")


class LaneWork(Protocol[_Item]):
    """What the lane does with each item: start its request, and finish or retry it."""

    def start(self, item: _Item) -> RequestInFlight:
        """Send the item's request."""

    def done(self, item: _Item, request: RequestInFlight) -> None:
        """The whole answer is in: finish the item."""

    def failed(self, item: _Item, error: Exception) -> bool:
        """The request failed (and was abandoned): fetch the item another way (False), have the lane ask for it
        again (True: it goes back among the items waiting), or raise to fail the run."""


class Lane(Generic[_Item]):
    """Items taken from any thread, their requests kept in flight by one at a time, `width()` of them at most."""

    def __init__(
        self, work: LaneWork[_Item], width: Callable[[], int], timeout: float, cancel: threading.Event, clock: Clock
    ) -> None:
        """`timeout`: seconds an answer may go without a byte arriving; `cancel`: set when the run fails or stops."""
        self._work = work
        self._width = width
        self._timeout = timeout
        self._cancel = cancel
        self._clock = clock
        self._waiting: deque[_Item] = deque()
        self._changes = threading.Condition()  # guards `_waiting` and `_driven`
        self._driven = False

    def take(self, items: list[_Item]) -> None:
        """Hand `items` to the lane, waiting while it holds its fill; drive it here, till empty, if no thread does."""
        with self._changes:
            while self._driven and len(self._waiting) >= _MOST_WAITING:
                if self._cancel.is_set():
                    raise Cancelled
                self._changes.wait(_POLL_SECONDS)
            self._waiting.extend(items)
            if self._driven:
                return
            self._driven = True
        try:
            self._drive()
        except BaseException:
            with self._changes:
                self._driven = False
                self._changes.notify_all()
            raise

    def _drive(self) -> None:
        """Keep up to `width()` requests in flight until none is left to start or answer; then let the lane go."""
        in_flight: dict[int, _InFlight[_Item]] = {}  # by the descriptor its answer arrives on
        selector = selectors.DefaultSelector()
        started = 0
        next_check = self._clock.monotonic() + _POLL_SECONDS  # when deadlines are next looked at
        try:
            while True:
                if self._cancel.is_set():
                    raise Cancelled
                while len(in_flight) < self._width() and (item := self._next()) is not None:
                    self._start(item, in_flight, selector)
                    started += 1
                if not in_flight:
                    with self._changes:  # the same lock `take` adds under: no item is left behind
                        if not self._waiting:
                            self._driven = False
                            self._changes.notify_all()
                            _log.debug("lane", files=started)
                            return
                    continue
                for key, _events in selector.select(_POLL_SECONDS):
                    self._advance(in_flight.pop(key.fd), in_flight, selector)
                if (now := self._clock.monotonic()) >= next_check:
                    next_check = now + _POLL_SECONDS
                    self._expire(in_flight, selector, now)
        finally:
            for flight in in_flight.values():
                flight.request.abandon()
            selector.close()

    def _next(self) -> _Item | None:
        with self._changes:
            if not self._waiting:
                return None
            if len(self._waiting) == _MOST_WAITING // 2:
                self._changes.notify_all()  # room for the threads waiting to hand in more
            return self._waiting.popleft()

    def _start(self, item: _Item, in_flight: dict[int, _InFlight[_Item]], selector: selectors.BaseSelector) -> None:
        try:
            request = self._work.start(item)
        except Exception as exc:
            self._failed(item, exc)
            return
        fd = request.fileno()
        in_flight[fd] = _InFlight(item, request, self._clock.monotonic() + self._timeout)
        selector.register(fd, selectors.EVENT_READ)

    def _advance(
        self, flight: _InFlight[_Item], in_flight: dict[int, _InFlight[_Item]], selector: selectors.BaseSelector
    ) -> None:
        """Read what arrived for `flight` (taken out of `in_flight`): put it back unless its answer is complete."""
        fd = flight.request.fileno()
        try:
            complete = flight.request.advance()
        except Exception as exc:
            self._give_up(fd, flight, selector, exc)
            return
        if complete:
            selector.unregister(fd)
            self._work.done(flight.item, flight.request)
        else:
            in_flight[fd] = _InFlight(flight.item, flight.request, self._clock.monotonic() + self._timeout)

    def _expire(self, in_flight: dict[int, _InFlight[_Item]], selector: selectors.BaseSelector, now: float) -> None:
        """Fail the requests past their deadline, but for those whose bytes are waiting (the lane was busy)."""
        late = [fd for fd, flight in in_flight.items() if flight.deadline <= now]
        if not late:
            return
        waiting = {key.fd for key, _events in selector.select(0)}
        for fd in late:
            if fd not in waiting:
                self._give_up(fd, in_flight.pop(fd), selector, TimeoutError(f"no answer in {self._timeout:g} s"))

    def _give_up(self, fd: int, flight: _InFlight[_Item], selector: selectors.BaseSelector, error: Exception) -> None:
        """Stop watching a failed request, drop its connection, and let the work decide what becomes of its item."""
        selector.unregister(fd)
        flight.request.abandon()
        self._failed(flight.item, error)

    def _failed(self, item: _Item, error: Exception) -> None:
        """The item back among those waiting, first, if the work would have the lane ask for it again."""
        if self._work.failed(item, error):
            with self._changes:
                self._waiting.appendleft(item)


class _InFlight(NamedTuple, Generic[_Item]):
    item: _Item
    request: RequestInFlight
    deadline: float  # when it fails unless a byte arrives (clock.monotonic)
