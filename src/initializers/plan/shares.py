"""A plan split over several initializers writing one OUTPUT_PATH (the pods of an Indexed Job, say).

Every share lists the whole source and splits the plan the same way (balanced by bytes, `PlanIndex.assign_shares`),
then fetches only its own files, with its own temporaries, journal and lock. A share that completes records so,
with a fingerprint of the plan it listed; whichever share finds every record present writes the set's manifest,
after checking that all shares listed the same plan (a moved branch or a rewritten object between two listings is
an error, never a mixed copy) and that every file they claim is on disk as claimed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterable, Iterator
from typing import Any

from initializers.common.errors import FetchError
from initializers.common.remote_file import RemoteFile
from initializers.common.streams import KeepsReturnValue
from initializers.destination.state import StateDir
from initializers.plan.index import PlanIndex


def own_share(
    planned: Iterable[list[RemoteFile]], index: PlanIndex, share: tuple[int, int], log: Any
) -> Generator[list[RemoteFile], None, Any]:
    """This run's files, once the whole listing is indexed: shares balance over all of it. Returns `planned`'s value."""
    whole = KeepsReturnValue(planned)
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
