"""Completion: once every planned file is done, the manifest that claims it (or, for a manifest that still stands,
nothing at all), written after the stale files go and the publisher's signature is checked."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, NamedTuple

from initializers.config.signing import SigningOptions
from initializers.destination import manifest
from initializers.destination.state import StateDir
from initializers.plan import shares
from initializers.plan.index import PlanIndex
from initializers.plan.selection import Selected
from initializers.plan.todo import Listed
from initializers.steps.context import RunContext
from initializers.steps.outcome import Outcome, finished, outcome_of, up_to_date
from initializers.steps.signing import check_landed
from initializers.store.contract import Source
from initializers.transfer.progress import Progress


class Listing(NamedTuple):
    """What the listing found, once it ended; `previous`: the manifest found before the run."""

    listed: Listed
    selected: Selected
    allow_patterns: tuple[str, ...]
    previous: dict[str, Any] | None
    started_at: datetime


def complete(
    context: RunContext,
    source: Source,
    state: StateDir,
    progress: Progress,
    signing: SigningOptions | None,
    index: PlanIndex,
    listing: Listing,
) -> Outcome:
    """The run's end once every file is done: `up to date` when the manifest found stands, else the manifest written
    anew (by the last share of a split plan), after the stale files of folders the source owns go."""
    root = str(state.root)
    described = source.describe()  # after listing: it now names the resolved version
    files = listing.listed.planned  # this share's, when the plan is split
    total = files if state.share is None else index.totals()[0]
    context.log.info("listed", files=files, already_done=listing.listed.done, fetched=progress.files_done,
                     ignored=listing.selected.listed - total)  # fmt: skip
    if state.share is not None:
        described = {**described, **shares.described(index, state.share)}
    if signing is None and up_to_date(progress.files_done, listing.listed, total, listing.previous, described):
        state.journal.remove()
        standing = outcome_of(index, progress, listing.started_at, root)  # it fetched nothing
        context.log.info("up to date", files=standing.files, bytes=standing.bytes, manifest=str(state.manifest_path))
        return standing
    if source.owned_folders:  # files in the folders it owns (the cache source's shards) that the plan no longer lists
        stale = state.destination.remove_stale(source.owned_folders, index.planned_paths(f"{source.owned_folders}/*"))
        if stale:
            context.log.info("removed stale files", files=len(stale), first=stale[:5])
    context.waiting.step = "the manifest to be written"
    context.stop.check()  # the last point a stop is taken at (but for re-hashing under SIGNATURE): the run completes
    index.add_finished(state.journal.files(), in_manifest=False)  # what this run finished, as it finished it
    with shares.completing(state, index, described, context.log) as complete:
        if not complete:  # other shares of the split plan are still due: the last one writes the manifest
            return outcome_of(index, progress, listing.started_at, root)
        verdict = check_landed(signing, state, index, listing.selected, context) if signing else None
        entries = ((file, finished(file, done)) for file, done in index.planned())
        state.write_manifest(
            manifest.lines(
                context.kind,
                described,
                listing.selected.ignored_patterns,
                listing.started_at,
                datetime.now(UTC),
                index.totals(),
                entries,
                listing.allow_patterns,
                verdict.record() if verdict else None,
                progress.fetched()._asdict(),
            )
        )
    state.journal.remove()
    return outcome_of(index, progress, listing.started_at, root)
