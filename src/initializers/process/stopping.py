"""Stopping on request: SIGTERM and SIGINT (pod deletion, a runtime's timeout) and the optional TIMEOUT deadline.

The signal handler only records the stop; the main thread raises `Stopped` itself at its waits and between its steps
(`Stop.check`), so a stop never lands inside a thread's start, a close or a library's bookkeeping, and the run unwinds
through its normal cleanup: transfers cancelled, temporaries removed, no manifest written, the last log line saying what
happened. Where the main thread blocks in a library's call no thread of ours shares state with (opening the source, a
dry run's listing), `Stop.interruptible` lets the handler raise at once: nothing else would end that wait.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from types import FrameType

from initializers.common.clock import SystemClock
from initializers.common.errors import Stopped
from initializers.process import early_stops

_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGALRM)  # SIGALRM: the deadline's timer


class Stop:
    """A stop requested by a signal or the deadline, raised as `Stopped` where the main thread can take it."""

    def __init__(self, timeout: float | None, pending: Callable[[], str]) -> None:
        """`pending`: what the run is waiting for, named in the message."""
        self._timeout = timeout
        self._pending = pending
        self._cause: str | None = None  # the message's start, once a stop is requested
        self._interruptible = False

    def check(self) -> None:
        """Raise Stopped once a stop has been requested: the main thread's waits and steps call this."""
        if self._cause is not None:
            raise Stopped(f"{self._cause} {self._pending()}")

    @contextlib.contextmanager
    def interruptible(self) -> Iterator[None]:
        """In this block a stop raises Stopped at once, wherever the main thread is (for which waits: the module's)."""
        self.check()
        self._interruptible = True
        try:
            yield
        finally:
            self._interruptible = False

    def on_signal(self, signum: int, _frame: FrameType | None) -> None:
        """The handler: records the first stop (a second must not interrupt the cleanup of the first), and raises
        it only within `interruptible`. Takes no lock: it runs between any two bytecodes of the main thread."""
        if self._cause is not None:
            return
        if signum == signal.SIGALRM:
            self._cause = f"TIMEOUT of {self._timeout:g} s passed while still waiting for"
        else:
            self._cause = f"stopped by {signal.Signals(signum).name} while waiting for"
        if self._interruptible:
            self._interruptible = False
            self.check()


class StoppingClock(SystemClock):
    """System time whose sleeps are stop points: a wait on it (another run's lock) ends within one sleep of a stop."""

    def __init__(self, stop: Stop) -> None:
        self._stop = stop

    def sleep(self, seconds: float) -> None:
        self._stop.check()
        super().sleep(seconds)
        self._stop.check()


@contextlib.contextmanager
def stoppable(timeout: float | None, pending: Callable[[], str]) -> Iterator[Stop]:
    """Within this block, SIGTERM, SIGINT and (with `timeout`) the deadline request the stop it yields; one that came
    before, while only `early_stops` listened, is requested already."""
    stop = Stop(timeout, pending)
    previous = {signum: signal.signal(signum, stop.on_signal) for signum in _SIGNALS}
    if (early := early_stops.received()) is not None:
        stop.on_signal(early, None)
    if timeout:
        signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        yield stop
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
