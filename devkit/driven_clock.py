"""A `Clock` for tests: time passes only when the code under test sleeps, and every sleep is recorded."""

from __future__ import annotations


class DrivenClock:
    """Time that passes only when someone sleeps; the sleeps are recorded and return at once."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
