"""The lane: many requests in flight from one thread at a time, over real sockets (socket pairs stand for
connections: the test is the server)."""

from __future__ import annotations

import socket
import threading
from collections import Counter

import pytest

from devkit.driven_clock import DrivenClock
from initializers.common.clock import SystemClock
from initializers.common.remote_file import RemoteFile
from initializers.store.round_trips import RoundTrips
from initializers.transfer.file_transfer import Cancelled
from initializers.transfer.lane import Lane
from initializers.transfer.lane_files import LANE_MOST_BYTES, LANE_ROUND_TRIP_SECONDS, for_lane

EVENT_CEILING_SECONDS = 30.0
ANSWER = b"x" * 3000


class PairRequest:
    """A request on a socket pair: complete once `ANSWER`'s bytes have been read from it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.client, self.server = socket.socketpair()
        self.client.setblocking(False)
        self.received = 0
        self.abandoned = False

    def fileno(self) -> int:
        return self.client.fileno()

    def advance(self) -> bool:
        while self.received < len(ANSWER):
            try:
                data = self.client.recv(65536)
            except BlockingIOError:
                return False
            if not data:
                raise ConnectionError(f"{self.name}: closed early")
            self.received += len(data)
        return True

    def abandon(self) -> None:
        self.abandoned = True
        self.client.close()


class Recorder:
    """The lane's work: a socket pair per item, answered at once (in two sends) unless told otherwise, or hung up
    on for the items `failing`; records what it saw."""

    def __init__(self, answer_at_once: bool = True, failing: frozenset[str] = frozenset()) -> None:
        self.answer_at_once = answer_at_once
        self.failing = failing
        self.lock = threading.Lock()
        self.in_flight = 0
        self.most_in_flight = 0
        self.finished: Counter[str] = Counter()
        self.failures: dict[str, Exception] = {}
        self.started: list[PairRequest] = []
        self.any_started = threading.Event()
        self.any_failed = threading.Event()

    def start(self, item: str) -> PairRequest:
        request = PairRequest(item)
        with self.lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            self.started.append(request)
        self.any_started.set()
        if item in self.failing:
            request.server.close()  # the server hangs up: the request fails
        elif self.answer_at_once:
            request.server.sendall(ANSWER[:1000])
            request.server.sendall(ANSWER[1000:])
        return request

    def done(self, item: str, request: object) -> None:
        with self.lock:
            self.in_flight -= 1
            self.finished[item] += 1

    def failed(self, item: str, error: Exception) -> bool:
        with self.lock:
            self.in_flight -= 1
            self.failures[item] = error
        self.any_failed.set()
        return False


def test_items_handed_in_from_many_threads_are_each_done_once_with_no_more_in_flight_than_the_width() -> None:
    work = Recorder(failing=frozenset({"t2-7"}))
    lane = Lane(work, lambda: 5, 60.0, threading.Event(), SystemClock())

    def hand_in(n: int) -> None:
        for first in range(0, 50, 10):
            lane.take([f"t{n}-{i}" for i in range(first, first + 10)])

    threads = [threading.Thread(target=hand_in, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(EVENT_CEILING_SECONDS)
    expected = {f"t{n}-{i}" for n in range(4) for i in range(50)} - {"t2-7"}
    assert set(work.finished) == expected and set(work.finished.values()) == {1}
    assert list(work.failures) == ["t2-7"] and isinstance(work.failures["t2-7"], ConnectionError)
    assert 1 < work.most_in_flight <= 5
    assert all(request.abandoned for request in work.started if request.name == "t2-7")


def test_an_item_the_work_wants_asked_again_goes_back_to_the_lane_first_and_is_done_once() -> None:
    """A throttled request is asked again by the lane itself, not in its thread the blocking way: the item goes back
    among those waiting, ahead of them, and the lane starts it again."""

    class AgainOnce(Recorder):
        def failed(self, item: str, error: Exception) -> bool:
            super().failed(item, error)
            self.failing = frozenset()  # answered the next time
            return True

    work = AgainOnce(failing=frozenset({"b"}))
    lane = Lane(work, lambda: 1, 60.0, threading.Event(), SystemClock())
    lane.take(["a", "b", "c"])
    assert [request.name for request in work.started] == ["a", "b", "b", "c"]
    assert work.finished == Counter({"a": 1, "b": 1, "c": 1}) and list(work.failures) == ["b"]


def test_an_answer_that_does_not_come_fails_its_request_once_the_timeout_has_passed() -> None:
    clock = DrivenClock()
    work = Recorder(answer_at_once=False)
    lane = Lane(work, lambda: 5, 30.0, threading.Event(), clock)
    taker = threading.Thread(target=lane.take, args=(["silent"],))
    taker.start()
    assert work.any_started.wait(EVENT_CEILING_SECONDS)
    clock.now += 29.0
    assert not work.any_failed.wait(0.6), "failed before its timeout"  # the lane looks at least every 0.25 s
    clock.now += 1.0
    assert work.any_failed.wait(EVENT_CEILING_SECONDS)
    taker.join(EVENT_CEILING_SECONDS)
    assert isinstance(work.failures["silent"], TimeoutError) and work.started[0].abandoned


def test_a_stop_ends_the_lane_with_what_was_in_flight_abandoned() -> None:
    cancel = threading.Event()
    work = Recorder(answer_at_once=False)
    lane = Lane(work, lambda: 5, 60.0, cancel, SystemClock())
    raised: list[BaseException] = []

    def take() -> None:
        try:
            lane.take(["a", "b", "c"])
        except BaseException as exc:
            raised.append(exc)

    taker = threading.Thread(target=take)
    taker.start()
    assert work.any_started.wait(EVENT_CEILING_SECONDS)
    cancel.set()
    taker.join(EVENT_CEILING_SECONDS)
    assert not taker.is_alive() and len(raised) == 1 and isinstance(raised[0], Cancelled)
    assert work.started and all(request.abandoned for request in work.started)
    assert not work.finished and not work.failures


def test_a_failure_the_work_raises_ends_the_lane_and_lets_another_thread_drive_it() -> None:
    class Failing(Recorder):
        def failed(self, item: str, error: Exception) -> bool:
            raise RuntimeError(f"{item}: permanent")

    work = Failing(failing=frozenset({"bad"}))
    lane = Lane(work, lambda: 1, 60.0, threading.Event(), SystemClock())
    with pytest.raises(RuntimeError, match="bad: permanent"):
        lane.take(["bad", "left"])
    lane.take(["next"])  # the lane is free again: this thread drives it, and the one left waiting goes too
    assert set(work.finished) == {"left", "next"}


def test_a_small_file_takes_the_lane_only_once_round_trips_are_measured_short() -> None:
    """The lane is for small whole files over short round trips, as measured: none measured yet, or the shortest one
    past LANE_ROUND_TRIP_SECONDS, and every file goes the threads' way; an empty file or one past LANE_MOST_BYTES
    always does."""
    small, empty, large = (RemoteFile(name, size, "v", name) for name, size in
                           (("s", 1000), ("e", 0), ("l", LANE_MOST_BYTES + 1)))  # fmt: skip
    round_trips = RoundTrips()
    assert not for_lane(small, None) and not for_lane(small, round_trips)
    round_trips.add(LANE_ROUND_TRIP_SECONDS * 3)
    assert not for_lane(small, round_trips)
    round_trips.add(LANE_ROUND_TRIP_SECONDS / 4)
    assert for_lane(small, round_trips) and for_lane(small._replace(size=LANE_MOST_BYTES), round_trips)
    assert not for_lane(empty, round_trips) and not for_lane(large, round_trips)
