"""Stops that arrive before the run's own handler is in: from the program's first line until `stopping.stoppable`.

Without a handler of ours, SIGTERM kills the process silently and SIGINT raises KeyboardInterrupt wherever the imports
happen to be (a traceback) or inside click (`Aborted!`). So each program's first line catches both, before its heavy
imports, and records the first; the command line reads it before the run (`stopped by SIGINT before the run began`) and
`stoppable` takes it over, so a stop reads as a stop from the first milliseconds. Imports only `_signal`, the C module
under `signal`: `signal` itself imports `enum`, which would cost most of this module's time before the handler is in.
"""

from __future__ import annotations

import _signal
from types import FrameType

_received: list[int] = []  # the first stop's signal number, once one came


def catch() -> None:
    """From now on SIGTERM and SIGINT are recorded, not acted on, until a handler of the run replaces this one."""
    for signum in (_signal.SIGTERM, _signal.SIGINT):
        _signal.signal(signum, _record)


def _record(signum: int, _frame: FrameType | None) -> None:
    if not _received:
        _received.append(signum)


def received() -> int | None:
    """The number of the first stop that came while only this module was listening; None if none did."""
    return _received[0] if _received else None
