"""Throttling as a fleet, on a driven clock: one throttled answer pauses every request of the source, the pause grows
while the throttling goes on and starts short again once answers come, and the ramp halves what runs at once."""

from __future__ import annotations

from devkit.driven_clock import DrivenClock
from initializers.transfer.concurrency import Latency, Ramp
from initializers.transfer.throttle import FIRST_PAUSE_SECONDS, JITTER, Throttle


def test_a_throttled_answer_pauses_every_request_of_the_source() -> None:
    clock = DrivenClock()
    throttle = Throttle(clock)
    assert throttle.wait_turn() == 0 and clock.sleeps == []  # nothing throttled yet: no request waits
    wait = throttle.throttled(retry_after=10)
    assert 10 <= wait <= 10 + JITTER
    assert throttle.wait_turn() == wait and clock.sleeps == [wait]  # another request, not the throttled one, waits too
    assert throttle.wait_turn() == 0  # the pause is over


def test_the_pause_doubles_while_throttling_goes_on_and_starts_short_once_answers_come() -> None:
    clock = DrivenClock()
    throttle = Throttle(clock)
    first = throttle.throttled(None)
    joined = throttle.throttled(None)  # a request under way when the pause began: it joins, nothing doubles
    assert FIRST_PAUSE_SECONDS <= first <= joined <= FIRST_PAUSE_SECONDS * (1 + JITTER)  # the same round, not doubled
    throttle.wait_turn()
    second = throttle.throttled(None)  # throttled again after the pause ended: the next is twice as long
    assert 2 * FIRST_PAUSE_SECONDS <= second <= 2 * FIRST_PAUSE_SECONDS * (1 + JITTER)
    throttle.wait_turn()
    throttle.answered()
    assert throttle.throttled(None) <= FIRST_PAUSE_SECONDS * (1 + JITTER)
    assert throttle.take_events() == 4 and throttle.take_events() == 0


def test_the_ramp_halves_on_throttling_then_grows_one_step_per_calm_window() -> None:
    throttle = Throttle(DrivenClock())
    ramp = Ramp(16, 64, throttle=throttle)
    busy = Latency(0.9, 0.2)  # latency-bound small files: the ramp would double its requests if not throttled
    throttle.throttled(None)
    assert ramp.observe(100e6, 0.1, busy) == 8 and ramp.requests == 32
    throttle.throttled(None)
    assert ramp.observe(100e6, 0.1, busy) == 4 and ramp.requests == 16
    for step in range(1, 6):  # calm windows: one more stream and request each, never a doubling
        assert ramp.observe(100e6, 0.1, busy) == 4 + step and ramp.requests == 16 + step
    assert ramp.observe(100e6, 0.9, busy) == 9  # the CPU is the limit: no growth
    throttle.throttled(None)
    assert ramp.observe(100e6, 0.1, busy) == 4 and ramp.requests == 10


def test_windows_paused_by_the_throttling_add_nothing_back() -> None:
    """A Retry-After of seconds pauses the fleet for many windows: none delivers, none is calm; growth resumes one
    step per window once answers come again."""
    throttle = Throttle(DrivenClock())
    ramp = Ramp(16, 64, throttle=throttle)
    throttle.throttled(30.0)
    assert ramp.observe(100e6, 0.1) == 8 and ramp.requests == 32
    for _ in range(120):  # 30 s of windows in the pause: nothing delivered
        assert ramp.observe(0.0, 0.0) == 8 and ramp.requests == 32
    assert ramp.observe(100e6, 0.1) == 9 and ramp.requests == 33
