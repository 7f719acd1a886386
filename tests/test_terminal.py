"""What a person at a terminal sees, and what a log collector gets: the structured progress events."""

from __future__ import annotations

from typing import Any

from initializers.transfer.progress import ProgressEvents, Snapshot

MIB = 1 << 20


class Events:
    """A log that keeps each event's fields."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def info(self, event: str, **fields: Any) -> None:
        self.seen.append({"event": event, **fields})


def snapshot(**fields: Any) -> Snapshot:
    defaults: dict[str, Any] = {"files_done": 0, "files": 0, "bytes_done": 0, "bytes": 0, "listing_done": False,
                                "seconds": 2.0}  # fmt: skip
    return Snapshot(**{**defaults, **fields})


def test_progress_events_while_listing_carry_no_percentage_nor_eta():
    """Against a refused connection the listing never ends: no `0/0, 100.0%`; nor 85% of what is listed so far."""
    log = Events()
    events = ProgressEvents(log, 5.0)
    events.report(snapshot())  # nothing listed yet: a refused connection being retried
    events.report(snapshot(files_done=2, files=11891, bytes_done=MIB, bytes=2 * MIB))
    events.report(snapshot(files_done=2, files=3, bytes_done=MIB, bytes=4 * MIB, listing_done=True))
    refused, partial, listed = log.seen
    assert refused == {"event": "progress", "files_done": 0, "listed_so_far": 0, "bytes": 0, "rate_mb_s": 0.0,
                       "listing": "in progress"}  # fmt: skip
    assert partial["listed_so_far"] == 11891 and not {"percent", "eta_s", "files", "total_bytes"} & set(partial)
    assert listed["files"] == "2/3" and listed["percent"] == 25.0 and listed["eta_s"] == 6.0
