"""A plan split over several initializers writing one OUTPUT_PATH (the pods of an Indexed Job, say).

Every share lists the whole source and splits the plan the same way (balanced by bytes, `PlanIndex.assign_shares`),
then fetches only its own files, with its own temporaries, journal and lock. A share that completes records so,
with a fingerprint of the plan it listed; whichever share finds every record present writes the set's manifest,
after checking that all shares listed the same plan (a moved branch or a rewritten object between two listings is
an error, never a mixed copy) and that every file they claim is on disk as claimed.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Generator, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from initializers.destination import Destination
from initializers.errors import FetchError
from initializers.index import PlanIndex
from initializers.journal import JOURNAL, DoneFile, journal_entries
from initializers.locking import exclusively
from initializers.plan import RemoteFile
from initializers.streams import Returning

if TYPE_CHECKING:
    from initializers.state import StateDir

#: The folder under `.initializer/` holding each share's folder and record (named before the word "share" was).
SHARES = "shards"


def share_path(shared: Path, share: tuple[int, int], suffix: str = "") -> Path:
    """Share `share` (index, count) of a split plan in the state folder `shared`: its folder, or with `suffix` its
    record beside it."""
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


def own_share(
    planned: Iterable[list[RemoteFile]], index: PlanIndex, share: tuple[int, int], log: Any
) -> Generator[list[RemoteFile], None, Any]:
    """This run's files: the whole listing goes into the index first, since the shares are balanced over all of it.
    Returns what `planned` returned."""
    whole = Returning(planned)
    for _ in whole:
        pass
    number, count = share
    index.assign_shares(count)
    files, size = index.shares(count)[number]
    log.info("share", shard=number, shards=count, files=files, bytes=size)
    yield from index.share(number)
    return whole.value


def described(index: PlanIndex, share: tuple[int, int]) -> dict[str, Any]:
    """What the set's manifest adds to the source's description: the plan every share fetched a part of."""
    return {"plan": index.fingerprint(), "shards": share[1]}


@contextlib.contextmanager
def completing(state: StateDir, index: PlanIndex, source: dict[str, Any], log: Any) -> Iterator[bool]:
    """Around writing the manifest: True when it may be written (an unsplit plan, or the last share of a split one
    to complete, which then has every share's finished files in `index`); False when other shares are still due."""
    shares = state.share_records
    if shares is None:
        yield True
        return
    number, count = shares.share
    with shares.completing_set():
        shares.record_complete({"plan": source["plan"]})
        records = shares.read()
        changed = sorted(other for other, record in records.items() if record.get("plan") != source["plan"])
        if changed:
            raise FetchError(
                f"the source changed between the shares' listings: share(s) {changed} of {count} fetched a different "
                f"plan than share {number} (a moved revision, objects rewritten or added); run every share again"
            )
        missing = [other for other in range(count) if other not in records]
        if missing:
            log.info("share complete", shard=number, shards=count, waiting_for=missing)
            yield False
            return
        for other in range(count):
            if other != number:
                index.add_finished_in(other, shares.journal(other))
        for file, done in index.planned():
            if done is None or not state.destination.unchanged(done):
                raise FetchError(
                    f"every share says it is complete, but {file.path} is not on disk as one of them left it; "
                    "run every share again"
                )
        log.info("set complete", shard=number, shards=count)
        yield True
        shares.remove()
