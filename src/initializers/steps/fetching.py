"""Listing and fetching: what earlier runs finished taken into the plan, then the listing planned into the index
while the engine fetches what still needs it, the two running as one pipeline; then completion."""

from __future__ import annotations

from datetime import UTC, datetime

from initializers.common.lookahead import Lookahead
from initializers.common.streams import KeepsReturnValue
from initializers.config.signing import SigningOptions
from initializers.destination.state import StateDir
from initializers.plan.index import FILE_NAME, PlanIndex
from initializers.plan.todo import Fetching, files_only, still_to_fetch, take_stock
from initializers.steps import completing
from initializers.steps.context import RunContext
from initializers.steps.opening import planned, selection_for
from initializers.steps.outcome import Outcome
from initializers.store.contract import Source
from initializers.transfer.factories import engine_for
from initializers.transfer.progress import Progress

#: Files the listing may run ahead of the transfers: enough to keep them busy, few enough to keep memory flat.
LISTING_LOOKAHEAD = 2000


def list_and_fetch(
    context: RunContext, source: Source, state: StateDir, progress: Progress, signing: SigningOptions | None
) -> Outcome:
    """The listing thread plans into the index, whose connection is closed only once that thread has ended: one that
    outlives its grace (a listing that does not answer) leaves it to the process's exit, which comes next; its file goes
    either way, before the state folder is left as found. With `signing`, the publisher's signature is checked before
    the manifest is written, and every run writes it anew."""
    started_at = datetime.now(UTC)
    index = PlanIndex(state.dir / FILE_NAME)
    listing_ended = True
    try:
        previous = take_stock(index, state, context.log)
        selection = selection_for(context.config, context.kind, context.log, signing)
        plan = KeepsReturnValue(planned(source, selection, index, state.share, context.log))
        engine, ramp = engine_for(
            source, context.config.max_workers, context.config.max_bandwidth, state.temps, state.journal, progress
        )
        context.waiting.transfers = engine
        verify = source.checksum_kinds if context.config.verify else None
        todo = still_to_fetch(iter(plan), index, state, progress, context.log, verify)
        lookahead = Lookahead([todo], LISTING_LOOKAHEAD, "listing", stop=engine.cancel, check_stop=context.stop.check)
        try:
            first = next(lookahead, None)  # `Fetching`, once a file needs fetching; None: none does
            if isinstance(first, Fetching):
                state.remove_manifest()  # before the first transfer: a changed file must not look complete
                context.log.info("fetching", already_done=first.already_done, workers=ramp.workers,
                                 max_workers=ramp.cap, max_requests=ramp.request_cap)  # fmt: skip
            engine.fetch(files_only(lookahead), context.stop.check)
        finally:
            listing_ended = lookahead.close()
        context.waiting.transfers = None
        found = completing.Listing(lookahead.returned()[0], plan.value, selection.allow.patterns, previous, started_at)
        return completing.complete(context, source, state, progress, signing, index, found)
    finally:
        index.close(in_use=not listing_ended)
