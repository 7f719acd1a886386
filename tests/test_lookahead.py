"""Lookahead: iterators run in threads of their own, a bounded number of items ahead of the consumer."""

from __future__ import annotations

import itertools
import sys
import threading
import time
from collections.abc import Generator, Iterator
from types import FrameType

import pytest

from initializers.common.lookahead import Lookahead


def test_one_iterator_keeps_its_order():
    ahead = Lookahead([iter(range(1000))], depth=128, name="test")
    assert list(ahead) == list(range(1000))


def test_what_each_producer_returned_is_handed_over_once_all_have_ended():
    def counted(items: list[str]) -> Generator[str, None, int]:
        yield from items
        return len(items)

    ahead = Lookahead([counted(["a", "b"]), iter(["c"]), counted([])], depth=128, name="test")
    assert sorted(ahead) == ["a", "b", "c"]
    assert ahead.returned() == [2, None, 0]


def test_several_iterators_run_at_once_and_none_waits_for_another_to_be_consumed():
    second_consumed = threading.Event()

    def first() -> Iterator[str]:
        yield "first-0"
        # Were the iterators consumed one after the other, the second's items would not come before this one ends.
        if not second_consumed.wait(10):
            raise AssertionError("the second iterator's items were held back behind the first")
        yield "first-1"

    ahead = Lookahead([first(), iter([f"second-{i}" for i in range(300)])], depth=128, name="test", batch=16)
    got = []
    try:
        for item in ahead:
            got.append(item)
            if item == "second-299":
                second_consumed.set()
    finally:
        ahead.close()
    assert sorted(got) == sorted(["first-0", "first-1", *(f"second-{i}" for i in range(300))])
    assert got.index("second-299") < got.index("first-1")


def test_a_failing_iterator_fails_the_consumer_while_the_others_still_run():
    def failing() -> Iterator[int]:
        yield 1
        raise ValueError("page 2 is not XML")

    ahead = Lookahead([itertools.count(), failing()], depth=128, name="test")
    try:
        with pytest.raises(ValueError, match="page 2 is not XML"):
            for _ in ahead:
                pass
    finally:
        ahead.close()


def held(ahead: Lookahead[int], name: str) -> bool:
    """Whether the queue is full and every producer thread of `ahead` (named after `name`) waits in it for room."""
    threads = [thread for thread in threading.enumerate() if thread.name.startswith(f"{name}-")]
    frames = sys._current_frames()

    def waiting(frame: FrameType | None) -> bool:
        return frame is not None and (frame.f_code is Lookahead._put.__code__ or waiting(frame.f_back))

    return ahead._queue.full() and bool(threads) and all(waiting(frames.get(thread.ident)) for thread in threads)


def test_endless_iterators_stay_a_bounded_number_of_items_ahead():
    produced = [0, 0]

    def counting(index: int) -> Iterator[int]:
        for value in itertools.count():
            produced[index] += 1
            yield value

    ahead = Lookahead([counting(0), counting(1)], depth=128, name="test-held", batch=16)
    try:
        deadline = time.monotonic() + 30
        while not held(ahead, "test-held"):  # as far ahead as they may go, were they not held back they would go on
            assert time.monotonic() < deadline, "the producers were not held back within 30 s"
            time.sleep(0.01)
        # the queue (128 // 16 batches of 16), plus one batch each producer holds while it waits for room, plus the
        # item it was adding
        assert sum(produced) <= 128 + 2 * (16 + 1)
        assert next(ahead) == 0
    finally:
        ahead.close()


def test_a_consumer_waiting_on_a_producer_that_yields_nothing_returns_once_the_stop_is_set():
    """A stopped run's transfer thread must not stay blocked on a listing that never answers."""
    stop, release = threading.Event(), threading.Event()

    def silent() -> Iterator[int]:
        release.wait(60)
        yield 1

    ahead = Lookahead([silent()], depth=128, name="test", stop=stop)
    outcome: list[object] = []
    consumer = threading.Thread(target=lambda: outcome.append(next(ahead, "ended")))
    consumer.start()
    stop.set()
    consumer.join(10)  # a generous ceiling: the consumer polls the stop a few times a second
    release.set()
    assert outcome == ["ended"]


def test_a_consumer_waiting_for_items_ends_its_wait_with_what_the_stop_check_raises():
    """The main thread waiting for the first file is a stop point: a stopped run's check raises there."""
    release = threading.Event()

    def silent() -> Iterator[int]:
        release.wait(60)
        yield 1

    class Halted(Exception):
        pass

    def check() -> None:
        raise Halted

    ahead = Lookahead([silent()], depth=128, name="test", check_stop=check)
    with pytest.raises(Halted):
        next(ahead)
    release.set()
    assert ahead.close(grace=10)  # a generous ceiling: the producer ends at its next item


def test_close_says_whether_the_producers_ended_so_that_what_they_use_may_be_closed():
    release = threading.Event()

    def stuck() -> Iterator[int]:
        release.wait(60)  # a listing that does not answer
        yield 1

    ahead = Lookahead([stuck()], depth=128, name="test")
    assert not ahead.close(grace=0.05)
    release.set()
    assert ahead.close(grace=10)
