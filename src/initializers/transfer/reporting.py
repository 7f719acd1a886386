"""Who hears of a run's progress: the live view when stderr is a terminal that redraws (unless LOG_FORMAT=json), and
the structured `progress` events unless they would go to that terminal too: there the view says it all."""

from __future__ import annotations

import sys
from typing import Any

from initializers.transfer import live_view
from initializers.transfer.progress import ProgressEvents, Reporter

#: Seconds between `progress` events unless PROGRESS_INTERVAL says otherwise.
PROGRESS_INTERVAL_SECONDS = 5.0


def reporters(log_format: str | None, interval: float | None, log: Any) -> list[Reporter]:
    """The reporters for a run logging in `log_format` (None: chosen by the terminal), events every `interval`."""
    events = ProgressEvents(log, interval or PROGRESS_INTERVAL_SECONDS)
    if not live_view.wanted(log_format):
        return [events]
    return [live_view.LiveView()] if sys.stdout.isatty() else [live_view.LiveView(), events]
