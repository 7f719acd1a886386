"""Who hears of a run's progress: the live view when stderr is a terminal that redraws (unless LOG_FORMAT=json),
else the structured `progress` events. Never both: the logs go to that terminal too, where the view says it all."""

from __future__ import annotations

from typing import Any

from initializers.transfer import live_view
from initializers.transfer.progress import ProgressEvents, Reporter

#: Seconds between `progress` events unless PROGRESS_INTERVAL says otherwise.
PROGRESS_INTERVAL_SECONDS = 5.0


def reporters(log_format: str | None, interval: float | None, log: Any) -> list[Reporter]:
    """The reporters for a run logging in `log_format` (None: chosen by the terminal), events every `interval`."""
    if live_view.wanted(log_format):
        return [live_view.LiveView()]
    return [ProgressEvents(log, interval or PROGRESS_INTERVAL_SECONDS)]
