"""Throttling as a fleet, on a driven clock: one throttled answer pauses every request of the source, the pause grows
while the throttling goes on and starts short again once answers come, and the ramp halves what runs at once."""

from __future__ import annotations

from devkit.driven_clock import DrivenClock
from initializers.store.throttle import FIRST_PAUSE_SECONDS, JITTER, MOST_BETWEEN_PROBES_SECONDS, Throttle
from initializers.transfer.concurrency import Latency, Ramp


def test_a_throttled_answer_holds_every_request_of_the_source_until_a_probe_is_answered() -> None:
    clock = DrivenClock()
    throttle = Throttle(clock)
    assert throttle.wait_turn() == 0 and clock.sleeps == []  # nothing throttled yet: no request waits
    wait = throttle.throttled(retry_after=10)
    assert 10 <= wait <= 10 + JITTER
    assert throttle.wait_turn() == wait and clock.sleeps == [wait]  # another request waits: it goes as the probe
    probe_sent = clock.monotonic()
    assert FIRST_PAUSE_SECONDS <= throttle.wait_turn() <= FIRST_PAUSE_SECONDS * (1 + JITTER)  # the next probe's turn
    throttle.answered(probe_sent)  # the first probe's answer: the hold is over for every request
    assert throttle.wait_turn() == 0


def probe(clock: DrivenClock, throttle: Throttle) -> float:
    """A request that waits its turn, goes as the probe and is throttled again: its wait, and the next probe's."""
    throttle.wait_turn()
    return throttle.throttled(None, sent_at=clock.monotonic())


def test_the_wait_for_a_probe_doubles_while_probes_are_throttled_and_starts_short_once_one_is_answered() -> None:
    clock = DrivenClock()
    throttle = Throttle(clock)
    first = throttle.throttled(None)
    joined = throttle.throttled(None, sent_at=clock.monotonic() - 1)  # sent before the hold began: it only joins
    assert FIRST_PAUSE_SECONDS <= first == joined <= FIRST_PAUSE_SECONDS * (1 + JITTER)
    second = probe(clock, throttle)
    assert 2 * FIRST_PAUSE_SECONDS <= second <= 2 * FIRST_PAUSE_SECONDS * (1 + JITTER)
    for _ in range(5):  # never more than MOST_BETWEEN_PROBES_SECONDS apart, however long the throttling lasts
        assert MOST_BETWEEN_PROBES_SECONDS <= probe(clock, throttle) <= MOST_BETWEEN_PROBES_SECONDS * (1 + JITTER)
    throttle.wait_turn()
    throttle.answered(clock.monotonic())
    assert throttle.wait_turn() == 0
    assert throttle.throttled(None) <= FIRST_PAUSE_SECONDS * (1 + JITTER)  # a new hold starts short again
    assert throttle.take_events() == 9 and throttle.take_events() == 0


def test_a_throttling_that_outlasts_a_thousand_probes_keeps_them_at_most_between_probes_apart() -> None:
    """Past 1024 probes throttled in a row (eight and a half minutes of them), the doubling's power of two no longer
    fits a float: the pause stays at its ceiling, never an OverflowError (an internal error)."""
    clock = DrivenClock()
    throttle = Throttle(clock)
    throttle.throttled(None)
    waits = [probe(clock, throttle) for _ in range(1100)]
    assert all(MOST_BETWEEN_PROBES_SECONDS <= wait <= MOST_BETWEEN_PROBES_SECONDS * (1 + JITTER) for wait in waits[5:])


def test_answers_to_requests_sent_before_the_hold_do_not_end_it() -> None:
    clock = DrivenClock()
    throttle = Throttle(clock)
    sent_before = clock.monotonic()
    clock.sleep(0.01)
    wait = throttle.throttled(None)
    throttle.answered(sent_before)  # under way when the throttling began: it says nothing of its end
    throttle.answered()  # nor does an answer sent at a time unknown
    assert throttle.wait_turn() == wait  # the probe still waits its turn


def test_a_turn_further_off_than_a_request_may_wait_is_not_waited_for() -> None:
    clock = DrivenClock()
    throttle = Throttle(clock)
    wait = throttle.throttled(retry_after=3600)
    assert throttle.wait_turn(most=330) is None and clock.sleeps == []  # told at once, nothing slept
    assert throttle.asked == 3600
    assert throttle.wait_turn(most=wait) == wait  # within reach: waited for as before


def test_no_probe_goes_before_the_time_the_server_named() -> None:
    clock = DrivenClock()
    throttle = Throttle(clock)
    throttle.throttled(None)
    wait = probe(clock, throttle)
    named = throttle.throttled(retry_after=10, sent_at=clock.monotonic())  # the probe's answer names a time
    assert wait < 10 <= named <= 10 + JITTER
    assert throttle.wait_turn() == named


def test_the_ramp_halves_on_throttling_then_doubles_back_to_its_level_then_grows_one_step_per_calm_window() -> None:
    throttle = Throttle(DrivenClock())
    ramp = Ramp(16, 64, 256, throttle=throttle)
    busy = Latency(0.9, 0.2)  # latency-bound small files: the ramp would double its requests if not throttled
    throttle.throttled(None)
    assert ramp.observe(100e6, 0.1, busy) == 8 and ramp.requests == 32
    throttle.throttled(None)
    assert ramp.observe(100e6, 0.1, busy) == 4 and ramp.requests == 16
    assert ramp.observe(100e6, 0.9, busy) == 8 and ramp.requests == 32  # back toward 16 and 64, the CPU busy or not
    assert ramp.observe(100e6, 0.9, busy) == 16 and ramp.requests == 64
    assert ramp.observe(100e6, 0.9, busy) == 16  # back where it was; past it, growth needs the CPU to spare
    for step in range(1, 4):  # calm windows: one more stream and request each, never a doubling
        assert ramp.observe(100e6, 0.1, busy) == 16 + step and ramp.requests == 64 + step
    throttle.throttled(None)
    assert ramp.observe(100e6, 0.1, busy) == 9 and ramp.requests == 33


def test_throttled_again_on_the_way_back_the_ramp_stops_short_of_where_it_was_struck() -> None:
    throttle = Throttle(DrivenClock())
    ramp = Ramp(16, 64, 256, throttle=throttle)
    throttle.throttled(None)
    assert ramp.observe(100e6, 0.1) == 8 and ramp.requests == 32
    throttle.throttled(None)  # the storm goes on, nothing grew in between: still on the way back to 16 and 64
    assert ramp.observe(100e6, 0.1) == 4 and ramp.requests == 16
    assert ramp.observe(100e6, 0.1) == 8 and ramp.requests == 32
    throttle.throttled(None)  # struck at 8 and 32: the server's pace is below them
    assert ramp.observe(100e6, 0.1) == 4 and ramp.requests == 16
    assert ramp.observe(100e6, 0.1) == 6 and ramp.requests == 24  # three quarters of 8 and 32
    assert ramp.observe(100e6, 0.1) == 7 and ramp.requests == 25


def test_windows_paused_by_the_throttling_add_nothing_back() -> None:
    """A Retry-After of seconds pauses the fleet for many windows: none delivers, none is calm; growth resumes once
    answers come again."""
    throttle = Throttle(DrivenClock())
    ramp = Ramp(16, 64, throttle=throttle)
    throttle.throttled(30.0)
    assert ramp.observe(100e6, 0.1) == 8 and ramp.requests == 32
    for _ in range(120):  # 30 s of windows in the pause: nothing delivered
        assert ramp.observe(0.0, 0.0) == 8 and ramp.requests == 32
    assert ramp.observe(100e6, 0.1) == 16 and ramp.requests == 64
