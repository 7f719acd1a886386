"""A dry run: what a run would fetch, listed, selected and split as a run does, and printed."""

from __future__ import annotations

import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from initializers.plan import dryrun
from initializers.plan.index import FILE_NAME, PlanIndex
from initializers.steps.context import RunContext
from initializers.steps.opening import open_source, plan_share, planned, selection_for
from initializers.steps.outcome import Outcome
from initializers.steps.signing import signing_for


def dry_run(context: RunContext) -> Outcome:
    """The plan index lives in a temporary folder elsewhere, so nothing is written under OUTPUT_PATH, not even a folder.
    The main thread lists itself, through the source's library, so a stop interrupts the listing wherever it is."""
    config, kind, log = context.config, context.kind, context.log
    started_at = datetime.now(UTC)
    output_path = str(Path(config.output_dir(kind)).absolute())
    with tempfile.TemporaryDirectory(prefix="initializer-dry-run-") as scratch:
        source = open_source(config, kind, context.stop)
        index = PlanIndex(Path(scratch) / FILE_NAME)
        try:
            uri = source.describe()["uri"]
            log.info("listing", source=uri, output_path=output_path, dry_run=True)
            context.waiting.step = f"the listing of {uri}"
            signing = signing_for(config, kind)
            selection = selection_for(config, kind, log, signing)
            with context.stop.interruptible():
                files, size = dryrun.print_plan(planned(source, selection, index, plan_share(config, kind), log),
                                                sys.stdout)  # fmt: skip
        finally:
            index.close()
            source.close()
    seconds = (datetime.now(UTC) - started_at).total_seconds()
    return Outcome(files, size, 0, 0, seconds, output_path, dry_run=True)
