"""Stopping on request: SIGTERM and SIGINT (pod deletion, a runtime's timeout) and the optional TIMEOUT deadline.

Each becomes an exception in the main thread, so the run unwinds through its normal cleanup: transfers
are cancelled, temporaries removed, no manifest written, and the last log line says what happened.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from types import FrameType

from initializers.common.errors import Stopped


@contextlib.contextmanager
def stoppable(timeout: float | None, pending: Callable[[], str]) -> Iterator[None]:
    """Within this block, SIGTERM, SIGINT and (with `timeout`) the deadline raise Stopped once."""
    raised = False

    def stop(signum: int, _frame: FrameType | None) -> None:
        nonlocal raised
        if raised:  # a second signal during cleanup must not interrupt the cleanup itself
            return
        raised = True
        if signum == signal.SIGALRM:
            raise Stopped(f"TIMEOUT of {timeout:g} s passed while still waiting for {pending()}")
        raise Stopped(f"stopped by {signal.Signals(signum).name} while waiting for {pending()}")

    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM)}
    if timeout:
        signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
