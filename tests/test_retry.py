"""The retry policy's waits on a recording clock: the backoff schedule, Retry-After honoured, the throttling budget,
without sleeping them; then the same policy inside the Hub getter against a real server behind a faulting relay."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest

from devkit.driven_clock import DrivenClock
from devkit.hubserver import HubServer
from devkit.relay import Relay, StatusFault
from initializers.common.errors import FetchError
from initializers.common.remote_file import Checksum
from initializers.sources.http.objects import ObjectRead
from initializers.sources.hub.get import HubGetter
from initializers.store.retry import ATTEMPTS, THROTTLE_BUDGET_SECONDS, Retriable, retrying
from initializers.store.throttle import FIRST_PAUSE_SECONDS, JITTER, MOST_BETWEEN_PROBES_SECONDS, Throttle


def failing(times: int | None, error: Callable[[], Exception]) -> tuple[Callable[[], str], list[int]]:
    """An attempt that raises `error()` its first `times` calls (None: always), then answers "done"; and its calls."""
    calls: list[int] = []

    def attempt() -> str:
        calls.append(len(calls))
        if times is None or len(calls) <= times:
            raise error()
        return "done"

    return attempt, calls


def test_transient_failures_back_off_exponentially_then_give_up_after_the_attempts() -> None:
    clock = DrivenClock()
    attempt, calls = failing(None, lambda: ConnectionResetError("reset by peer"))
    with pytest.raises(FetchError, match=f"^cannot get x after {ATTEMPTS} attempts: reset by peer$"):
        retrying("get", "x", attempt, clock=clock)
    assert len(calls) == ATTEMPTS and len(clock.sleeps) == ATTEMPTS - 1
    # 0.2 s doubled per failure, each with up to half of it as jitter either way.
    for failures, wait in enumerate(clock.sleeps, 1):
        assert 0.5 * 0.2 * 2**failures <= wait <= 1.5 * 0.2 * 2**failures


def test_a_failure_that_clears_returns_the_answer_after_as_many_waits() -> None:
    clock = DrivenClock()
    attempt, calls = failing(2, lambda: Retriable("500 Internal Server Error"))
    assert retrying("get", "x", attempt, clock=clock) == "done"
    assert len(calls) == 3 and len(clock.sleeps) == 2


def test_throttling_honours_retry_after_beyond_the_attempts_for_errors() -> None:
    clock = DrivenClock()
    attempt, _ = failing(ATTEMPTS + 3, lambda: Retriable("503 SlowDown", throttled=True, retry_after=7.0))
    assert retrying("get", "x", attempt, clock=clock) == "done"
    assert len(clock.sleeps) == ATTEMPTS + 3
    assert all(7.0 <= wait <= 7.5 for wait in clock.sleeps)  # as asked, plus a little jitter


def test_throttling_gives_up_once_the_budget_would_be_exceeded_saying_what_was_asked() -> None:
    clock = DrivenClock()
    attempt, calls = failing(None, lambda: Retriable("429 Too Many Requests", throttled=True, retry_after=100.0))
    with pytest.raises(FetchError, match=r"asked to wait 100 s more after 30[0-9] s of waiting, beyond the 330 s"):
        retrying("get", "x", attempt, clock=clock)
    assert len(clock.sleeps) == 3 and sum(clock.sleeps) <= THROTTLE_BUDGET_SECONDS < sum(clock.sleeps) + 100
    assert len(calls) == 4


def test_a_request_that_finds_its_source_held_beyond_its_budget_gives_up_at_once_without_waiting() -> None:
    """Another request of the source was asked to wait an hour: this one neither waits it out (its thread would
    keep a failing run alive for that hour) nor is sent; it says what the server asked."""
    clock = DrivenClock()
    throttle = Throttle(clock)
    throttle.throttled(retry_after=3600)
    attempt, calls = failing(0, lambda: AssertionError("never raised"))
    with pytest.raises(FetchError, match=r"asked to wait 3600 s more after 0 s of waiting, beyond the 330 s"):
        retrying("get", "x", attempt, clock=clock, throttle=throttle)
    assert calls == [] and clock.sleeps == []


def test_throttling_without_retry_after_backs_off_and_is_budgeted_too() -> None:
    """A request throttled again and again goes as its own probe: after a wait that doubles, with up to half again
    of jitter, up to MOST_BETWEEN_PROBES_SECONDS, until the budget is spent."""
    clock = DrivenClock()
    attempt, calls = failing(None, lambda: Retriable("503 Slow Down", throttled=True))
    with pytest.raises(FetchError, match="the server throttled after"):
        retrying("get", "x", attempt, clock=clock)
    for round_, wait in enumerate(clock.sleeps, 1):
        base = min(FIRST_PAUSE_SECONDS * 2 ** (round_ - 1), MOST_BETWEEN_PROBES_SECONDS)
        assert base <= wait <= base * (1 + JITTER)
    waited = sum(clock.sleeps)
    assert THROTTLE_BUDGET_SECONDS - MOST_BETWEEN_PROBES_SECONDS * (1 + JITTER) <= waited <= THROTTLE_BUDGET_SECONDS
    assert len(calls) == len(clock.sleeps) + 1


def test_an_interruption_stops_before_the_next_attempt_without_waiting() -> None:
    clock = DrivenClock()
    stopped: list[bool] = []
    attempt, calls = failing(None, lambda: TimeoutError("timed out"))
    with pytest.raises(FetchError, match="x: interrupted"):
        retrying("get", "x", attempt, before_retry=lambda: stopped.append(True), interrupted=lambda: bool(stopped),
                 clock=clock)  # fmt: skip
    assert len(calls) == 1 and clock.sleeps == []


# -- the policy inside a getter, against a real server ---------------------------------------------------------------


class Collected:
    """A sink keeping what it is given."""

    def __init__(self) -> None:
        self.data = bytearray()

    @property
    def written(self) -> int:
        return len(self.data)

    def write(self, data: memoryview) -> None:
        self.data += data

    def expect(self, checksum: Checksum) -> None:
        pass

    def rewind(self) -> None:
        self.data.clear()


BODY = os.urandom(64 * 1024)


@pytest.fixture
def hub_relay() -> Iterator[tuple[HubServer, Relay]]:
    with HubServer() as hub, Relay(hub.endpoint) as relay:
        hub.add_repo("org/m", {"config.json": BODY})
        yield hub, relay


def hub_get(relay: Relay, clock: DrivenClock) -> Collected:
    getter = HubGetter(relay.endpoint, None, "model org/m", timeout=10, clock=clock)
    sink = Collected()
    try:
        url = f"{relay.endpoint}/org/m/resolve/main/config.json"
        getter.objects.get(ObjectRead(url, None, 0, len(BODY), len(BODY), "config.json", "download"), sink)
    finally:
        getter.objects.close()
    return sink


def test_a_persistent_server_error_is_given_up_after_the_attempts_with_backoff(
    hub_relay: tuple[HubServer, Relay],
) -> None:
    _, relay = hub_relay
    errors = relay.add_fault(StatusFault(status=500, times=None, body=b"{}", content_type="application/json"))
    clock = DrivenClock()
    with pytest.raises(FetchError, match=f"config.json after {ATTEMPTS} attempts: 500 "):
        hub_get(relay, clock)
    assert errors.hits == ATTEMPTS and len(clock.sleeps) == ATTEMPTS - 1
    assert clock.sleeps[-1] >= 0.5 * 0.2 * 2 ** (ATTEMPTS - 1)


def test_a_rate_limit_is_waited_out_as_the_server_asks(hub_relay: tuple[HubServer, Relay]) -> None:
    _, relay = hub_relay
    limited = relay.add_fault(
        StatusFault(status=429, times=ATTEMPTS + 2, headers={"Retry-After": "42"}, body=b'{"error": "rate limited"}',
                    content_type="application/json")
    )  # fmt: skip
    clock = DrivenClock()
    assert hub_get(relay, clock).data == BODY
    assert limited.hits == ATTEMPTS + 2 and len(clock.sleeps) == ATTEMPTS + 2
    assert all(42 <= wait <= 42.5 for wait in clock.sleeps)
