"""One run from configuration to manifest, its steps in order (`initializers.steps`); a dry run lists and prints."""

from __future__ import annotations

from typing import Any

from initializers.config.contract import Config, Kind
from initializers.destination.state import StateDir
from initializers.process.stopping import StoppingClock, stoppable
from initializers.steps.context import RunContext, Waiting
from initializers.steps.dry_run import dry_run
from initializers.steps.fetching import list_and_fetch
from initializers.steps.held import settle_another_source
from initializers.steps.opening import open_source, plan_share
from initializers.steps.outcome import Outcome
from initializers.steps.signing import signing_for
from initializers.transfer.live_view import reporters
from initializers.transfer.progress import Progress


def perform(config: Config, kind: Kind, log: Any) -> Outcome:
    """One run; SIGTERM, SIGINT and TIMEOUT stop it cleanly, naming what it was waiting for. A stop that comes once
    the manifest is being written lets the run end as it is: complete."""
    waiting = Waiting()
    with stoppable(config.timeout, waiting.current) as stop:
        context = RunContext(config, kind, log, stop, waiting)
        return dry_run(context) if config.dry_run else _fetch(context)


def _fetch(context: RunContext) -> Outcome:
    """Progress shows from before the source opens (a library import, a revision to resolve), so a terminal's live view
    is up within a second. The run holds the destination (one at a time), waiting for another initializer writing it."""
    config, kind, log = context.config, context.kind, context.log
    signing = signing_for(config, kind)
    state = StateDir(config.output_dir(kind), plan_share(config, kind), StoppingClock(context.stop))
    with Progress(reporters(config.log_format, config.progress_interval, log)) as progress:
        source = open_source(config, kind, context.stop)
        try:
            uri = source.describe()["uri"]
            log.info("listing", source=uri, output_path=str(state.root))

            def wait_for_holder(holder: str, seconds: float) -> None:
                context.waiting.step = f"another initializer ({holder}) writing OUTPUT_PATH to finish"
                log.info("waiting for another initializer", holder=holder, waited_s=round(seconds),
                         output_path=str(state.root))  # fmt: skip

            with state.session(wait_for_holder):
                settle_another_source(config, kind, log, uri, state)
                context.waiting.step = f"the listing of {uri}"
                return list_and_fetch(context, source, state, progress, signing)
        finally:
            source.close()
