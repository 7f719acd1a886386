"""What each share of a split plan says of itself under `.initializer/`: its folder, its completion record, its
journal, and the lock the shares take turns at when completing the set (the plan-level logic is `plan.shares`)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

from initializers.destination.done import DoneFile
from initializers.destination.journal import JOURNAL, journal_entries
from initializers.destination.locking import exclusively
from initializers.destination.output_path import Destination

#: The folder under `.initializer/` holding each share's folder and record (named before the word "share" was).
SHARES = "shards"


def share_path(shared: Path, share: tuple[int, int], suffix: str = "") -> Path:
    """A split plan's share (index, count) in the state folder `shared`: its folder, or with `suffix` its record."""
    index, count = share
    return shared / SHARES / f"{index}-of-{count}{suffix}"


class ShareRecords:
    """What the shares of this run's split (`share`: this run's index, and the count) say of themselves."""

    def __init__(self, destination: Destination, shared: Path, share: tuple[int, int]) -> None:
        self._destination = destination
        self._shared = shared
        self.share = share

    def record_complete(self, record: dict[str, object]) -> None:
        """Say that this run's share is complete (on stable storage), and of which plan."""
        self._destination.write_atomically(self._path(self.share[0], ".json"), [json.dumps(record).encode()])

    def read(self) -> dict[int, dict[str, object]]:
        """The records of this split's complete shares, by share number."""
        records = {}
        for index in range(self.share[1]):
            with contextlib.suppress(OSError, ValueError):
                records[index] = json.loads(self._path(index, ".json").read_text())
        return records

    def remove(self) -> None:
        """The set is complete and its manifest written: the next round of shares starts from nothing."""
        for index in range(self.share[1]):
            self._destination.unlink(self._path(index, ".json"))

    def journal(self, index: int) -> Iterator[DoneFile]:
        """What share `index` of this split has claimed as finished."""
        return journal_entries(self._path(index) / JOURNAL)

    def completing_set(self) -> contextlib.AbstractContextManager[None]:
        """Shares finishing at once take turns at checking whether the set is complete and writing its manifest."""
        return exclusively(self._destination, self._shared / SHARES / "set.lock")

    def _path(self, index: int, suffix: str = "") -> Path:
        return share_path(self._shared, (index, self.share[1]), suffix)
