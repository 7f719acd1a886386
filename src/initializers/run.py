"""One run from configuration to manifest: list, plan, skip what is done, fetch the rest, claim completion."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from initializers.common.errors import ConfigError, FetchError
from initializers.common.lookahead import Lookahead
from initializers.common.remote_file import RemoteFile
from initializers.common.streams import Returning
from initializers.config import registry
from initializers.config.contract import Config, Kind
from initializers.config.signing import SigningOptions
from initializers.config.uris import scheme_of
from initializers.destination import manifest
from initializers.destination.done import DoneFile
from initializers.destination.state import StateDir
from initializers.plan import dryrun, shares, signature
from initializers.plan.index import PlanIndex
from initializers.plan.safe_paths import plan_files
from initializers.plan.selection import Selected, Selection
from initializers.plan.todo import Fetching, Listed, todo_pass
from initializers.process.stopping import Stop, StoppingClock, stoppable
from initializers.sources.http.http1 import Proxy  # the package's face registers every source
from initializers.store.contract import Source
from initializers.transfer import live_view
from initializers.transfer.bandwidth import TokenBucket
from initializers.transfer.concurrency import Ramp
from initializers.transfer.engine import Engine
from initializers.transfer.factories import task_factory
from initializers.transfer.progress import Fetched, Progress, ProgressEvents, Reporter

PROGRESS_INTERVAL_SECONDS = 5.0
#: Files the listing may run ahead of the transfers: enough to keep them busy, few enough to keep memory flat.
LISTING_LOOKAHEAD = 2000
INDEX = "index.sqlite"


@dataclass(frozen=True)
class Outcome:
    files: int
    bytes: int
    fetched_files: int
    fetched_bytes: int  # what came over the network: a resumed file's kept bytes are not among them
    seconds: float
    output_path: str
    dry_run: bool = False
    resumed_files: int = 0  # of the files fetched, those an earlier run had started
    kept_bytes: int = 0  # what that run had fetched of them, kept rather than fetched again


class _Waiting:
    """What the run is waiting for, named when it is stopped: a step, or the files being transferred."""

    def __init__(self) -> None:
        self.step = "the source to answer"
        self.transfers: Engine | None = None

    def current(self) -> str:
        files = [file.path for file in self.transfers.in_flight()] if self.transfers is not None else []
        if not files:
            return self.step
        return f"{len(files)} files: {', '.join(files[:5])}{' ...' if len(files) > 5 else ''}"


def run(config: Config, kind: Kind, log: Any) -> Outcome:
    """One run; SIGTERM, SIGINT and TIMEOUT stop it cleanly, naming what it was waiting for. A stop that comes once
    the manifest is being written lets the run end as it is: complete."""
    waiting = _Waiting()
    with stoppable(config.timeout, waiting.current) as stop:
        return (_dry_run if config.dry_run else _run)(config, kind, log, waiting, stop)


def _dry_run(config: Config, kind: Kind, log: Any, waiting: _Waiting, stop: Stop) -> Outcome:
    """What a run would fetch, listed, selected and split as a run does, printed; the plan index lives in a
    temporary folder elsewhere, so nothing is written under OUTPUT_PATH, not even a folder.

    The main thread lists itself, through the source's library, so a stop interrupts the listing wherever it is."""
    started_at = datetime.now(UTC)
    output_path = str(Path(config.output_dir(kind)).absolute())
    with tempfile.TemporaryDirectory(prefix="initializer-dry-run-") as scratch:
        source = _open_source(config, kind, stop)
        index = PlanIndex(Path(scratch) / INDEX)
        try:
            uri = source.describe()["uri"]
            log.info("listing", source=uri, output_path=output_path, dry_run=True)
            waiting.step = f"the listing of {uri}"
            signing = _signing(config, kind)
            selection = Selection(config, kind, log, keep=signing.relative_path() if signing else None)
            with stop.interruptible():
                planned = _planned(source, selection, index, _plan_share(config, kind), log)
                files, size = dryrun.print_plan(planned, sys.stdout)
        finally:
            index.close()
            source.close()
    seconds = (datetime.now(UTC) - started_at).total_seconds()
    return Outcome(files, size, 0, 0, seconds, output_path, dry_run=True)


def _open_source(config: Config, kind: Kind, stop: Stop) -> Source:
    """The registered source for STORAGE_URI, given only its own options. A stop interrupts the opening: the
    source's library may wait on the network (credentials, a region, a revision)."""
    uri = config.require_storage_uri(kind)
    plugin = registry.plugin(scheme_of(uri, kind))
    Proxy.check_environment()  # one rule for every source, before any client library reads the variables
    with stop.interruptible():
        return cast(Source, plugin.open(uri, config.for_source(plugin), kind))


def _plan_share(config: Config, kind: Kind) -> tuple[int, int] | None:
    """The share (index, count) of a plan split over several initializers that this run fetches; None when not
    split, or when the source shards by itself (the cache source's SHARD_INDEX)."""
    plugin = registry.plugin(scheme_of(config.require_storage_uri(kind), kind))
    return config.shard() if plugin.splits_plan else None


def _planned(
    source: Source, selection: Selection, index: PlanIndex, share: tuple[int, int] | None, log: Any
) -> Generator[list[RemoteFile], None, Selected]:
    """This run's files, in batches: the listing selected, checked and registered in `index`; of a split plan,
    this share's part. Returns what the selection found."""
    planned = plan_files(selection.filter(source.list_files()), source.describe()["uri"], index.plan)
    return planned if share is None else shares.own_share(planned, index, share, log)


def _run(config: Config, kind: Kind, log: Any, waiting: _Waiting, stop: Stop) -> Outcome:
    """The progress is shown from before the source opens (a library import, a revision to resolve): a terminal's
    live view is up within a second of the start."""
    signing = _signing(config, kind)
    state = StateDir(config.output_dir(kind), _plan_share(config, kind), StoppingClock(stop))
    with Progress(_progress_reporters(config, log)) as progress:
        source = _open_source(config, kind, stop)
        try:
            uri = source.describe()["uri"]
            log.info("listing", source=uri, output_path=str(state.root))

            def wait_for_holder(holder: str, seconds: float) -> None:
                waiting.step = f"another initializer ({holder}) writing OUTPUT_PATH to finish"
                log.info(
                    "waiting for another initializer",
                    holder=holder,
                    waited_s=round(seconds),
                    output_path=str(state.root),
                )

            with state.session(wait_for_holder):
                waiting.step = f"the listing of {uri}"
                return _list_and_fetch(config, kind, log, waiting, stop, source, state, progress, signing)
        finally:
            source.close()


def _list_and_fetch(
    config: Config,
    kind: Kind,
    log: Any,
    waiting: _Waiting,
    stop: Stop,
    source: Source,
    state: StateDir,
    progress: Progress,
    signing: SigningOptions | None,
) -> Outcome:
    """The listing thread plans into the index, and it is closed only once that thread has ended: one that outlives
    its grace (a listing that does not answer) leaves it to the process's exit, which comes next. With `signing`,
    the publisher's signature is checked before the manifest is written, and every run writes it anew."""
    started_at = datetime.now(UTC)
    _replace_another_source(config, kind, log, source, state)
    previous = manifest.read_head(state.manifest_path)
    index = PlanIndex(state.dir / INDEX)
    listing_ended = True
    try:
        index.add_finished(manifest.read_files(state.withdrawn_manifest_path), in_manifest=False)
        index.add_finished(manifest.read_files(state.manifest_path), in_manifest=True)
        index.add_finished(state.journal.files(), in_manifest=False)
        state.journal.restart(state.journal.files())  # the manifests stay where they are: no need to copy them
        partials = state.temps.keep_partials()  # the others go
        if partials:
            log.info("resuming", files=len(partials), already_here=sum(partial.kept_bytes for partial in partials))
        selection = Selection(config, kind, log, keep=signing.relative_path() if signing else None)
        planned: Returning[list[RemoteFile], Selected] = Returning(_planned(source, selection, index, state.share, log))
        ramp = Ramp(
            source.default_workers,
            config.max_workers or source.max_workers,
            config.max_workers or source.max_requests or source.max_workers,
            throttle=source.throttle,
            round_trips=source.round_trips,
        )
        bandwidth = TokenBucket(config.max_bandwidth) if config.max_bandwidth else None
        factory = task_factory(source, ramp, bandwidth)
        engine = waiting.transfers = Engine(factory, state.temps, state.journal, ramp, progress)
        todo = todo_pass(iter(planned), index, state, progress, log, config.verify)
        listing = Lookahead([todo], LISTING_LOOKAHEAD, "listing", stop=engine.cancel, check_stop=stop.check)
        try:
            first = next(listing, None)  # `Fetching`, once a file needs fetching; None: none does
            if isinstance(first, Fetching):
                state.remove_manifest()  # before the first transfer: a changed file must not look complete
                log.info("fetching", already_done=first.already_done, workers=ramp.workers, max_workers=ramp.cap,
                     max_requests=ramp.request_cap)  # fmt: skip
            engine.fetch(cast(Iterator[RemoteFile], listing), stop.check)  # files only, after the one `Fetching`
        finally:
            listing_ended = listing.close()
        listed: Listed = listing.returned()[0]
        selected = planned.value
        waiting.transfers = None
        described = source.describe()  # after listing: it now names the resolved version
        files = listed.planned  # this share's, when the plan is split
        total = files if state.share is None else index.totals()[0]
        log.info(
            "listed",
            files=files,
            already_done=listed.done,
            fetched=progress.files_done,
            ignored=selected.listed - total,
        )
        if state.share is not None:
            described = {**described, **shares.described(index, state.share)}
        if signing is None and _up_to_date(progress.files_done, listed, total, previous, described):
            state.journal.remove()
            standing = _outcome(index, None, started_at, state)
            log.info("up to date", files=standing.files, bytes=standing.bytes, manifest=str(state.manifest_path))
            return standing
        if source.owned_folders:
            stale = state.destination.remove_stale(
                source.owned_folders, index.planned_paths(f"{source.owned_folders}/*")
            )
            if stale:
                log.info("removed stale files", files=len(stale), first=stale[:5])
        waiting.step = "the manifest to be written"
        stop.check()  # the last point a stop is taken at (but for re-hashing under SIGNATURE): the run completes
        index.add_finished(state.journal.files(), in_manifest=False)  # what this run finished, as it finished it
        with shares.completing(state, index, described, log) as complete:
            if not complete:  # other shares of the split plan are still due: the last one writes the manifest
                return _outcome(index, progress, started_at, state)
            waiting.step = "the publisher's signature to be checked" if signing else waiting.step
            verdict = _check_signature(signing, state, index, selected, log, stop) if signing else None
            totals = index.totals()
            entries = ((file, _finished(file, done)) for file, done in index.planned())
            state.write_manifest(
                manifest.lines(
                    kind,
                    described,
                    selected.ignored_patterns,
                    started_at,
                    datetime.now(UTC),
                    totals,
                    entries,
                    selection.allow.patterns,
                    verdict.record() if verdict else None,
                    _this_run(progress.fetched()),
                )
            )
        state.journal.remove()
        return _outcome(index, progress, started_at, state)
    finally:
        if listing_ended:
            index.close()


def _signing(config: Config, kind: Kind) -> SigningOptions | None:
    """The signature check this run makes, its settings checked before anything is fetched; None when SIGNATURE is
    off. A source that does not read the options (cache://) refuses them rather than skip a check asked for."""
    plugin = registry.plugin(scheme_of(config.require_storage_uri(kind), kind))
    signing = config.options(SigningOptions)
    if not signing.enabled:
        return None
    if SigningOptions not in plugin.options:
        raise ConfigError(f"SIGNATURE does not apply to {plugin.scheme}:// sources: they publish no model signature")
    signing.trust()
    signing.relative_path()
    return signing


def _check_signature(
    signing: SigningOptions, state: StateDir, index: PlanIndex, selected: Selected, log: Any, stop: Stop
) -> signature.Verdict:
    """The verdict on what landed, before the manifest is written; under enforce, a failure takes the download back
    (`StateDir.discard`: no manifest, no file at a final path) and ends the run with the reason. A stop is still
    taken while files are hashed again: the run then ends as stopped, without a manifest, as before the last step."""
    planned = [(file, _finished(file, done)) for file, done in index.planned()]
    landed = ((file.path, done.verified_against(file)) for file, done in planned)
    verdict = signature.check(signing, state.root, landed, selected.left_out, stop.check)
    if verdict.verified:
        log.info("signature verified", signer=verdict.signer, not_fetched=len(verdict.not_fetched))
        if verdict.not_fetched:
            log.info("signed files not fetched", files=len(verdict.not_fetched), first=verdict.not_fetched[:5])
        return verdict
    if verdict.fails_the_run:
        state.discard(file.path for file, _ in planned)
        raise FetchError(f"SIGNATURE=enforce: {verdict.reason}; nothing was kept")
    log.warning("signature did not verify", reason=verdict.reason, signer=verdict.signer)
    return verdict


def _progress_reporters(config: Config, log: Any) -> list[Reporter]:
    """The live view when stderr is a terminal (unless LOG_FORMAT=json), and the structured progress events unless
    they would go to that terminal too: there the view says it all."""
    events = ProgressEvents(log, config.progress_interval or PROGRESS_INTERVAL_SECONDS)
    if not live_view.wanted(config.log_format):
        return [events]
    return [live_view.LiveView()] if sys.stdout.isatty() else [live_view.LiveView(), events]


def _replace_another_source(config: Config, kind: Kind, log: Any, source: Source, state: StateDir) -> None:
    """Refuse to fetch into an OUTPUT_PATH that holds another source (its manifest says so: another program, or
    another place, whatever the version), as the two would mix; with REPLACE_EXISTING, remove that source's files
    first."""
    held = state.held_source()
    uri = source.describe()["uri"]
    if held is None or (held[0] == kind.program and _place(held[1].get("uri"), kind) == _place(uri, kind)):
        return
    if not config.replace_existing:
        held_uri, root = held[1].get("uri"), str(state.root)
        if held[0] == kind.program:  # another place
            mixed = (
                f"holds {held_uri} (fetched by the {held[0]}), as its manifest says; fetching {uri} into it would "
                "mix the two"
            )
        else:  # another program, whatever the place
            mixed = (
                f"holds {held_uri} as fetched by the {held[0]} (its manifest says so); the {kind.program} would mix "
                "its files with those"
            )
        raise ConfigError(
            f"OUTPUT_PATH {root!r} {mixed}: choose another OUTPUT_PATH, or set REPLACE_EXISTING=true to replace those "
            "files with these"
        )
    removed = state.remove_held_source()
    log.info("replaced another source", source=held[1].get("uri"), removed_files=removed)


def _place(uri: Any, kind: Kind) -> str | None:
    """What `uri` fetches, whatever its version (`SourcePlugin.locate`); None when it is not one of this program's."""
    if not isinstance(uri, str):
        return None
    try:
        return str(registry.plugin(scheme_of(uri, kind)).locate(uri, kind).place)
    except ConfigError:
        return None


def _up_to_date(
    fetched: int, listed: Listed, total: int, previous: dict[str, Any] | None, described: dict[str, Any]
) -> bool:
    """Nothing was fetched, and the manifest already lists every planned file, for this source: it stands."""
    return not fetched and listed.in_manifest == listed.planned and manifest.describes(previous, described, total)


def _finished(file: RemoteFile, done: DoneFile | None) -> DoneFile:
    assert done is not None, f"{file.path} was planned, and neither fetched nor found done"
    return done


def _this_run(fetched: Fetched) -> dict[str, int]:
    """What this run fetched and what a resume kept, as the manifest records it."""
    return {"fetched_files": fetched.files, "fetched_bytes": fetched.bytes, "resumed_files": fetched.resumed_files,
            "kept_bytes": fetched.kept_bytes}  # fmt: skip


def _outcome(index: PlanIndex, progress: Progress | None, started_at: datetime, state: StateDir) -> Outcome:
    """Sizes as written (a file the source produced has its size only once it is there); `progress`: what this run
    fetched, None for nothing."""
    fetched = progress.fetched() if progress is not None else Fetched()
    return outcome(index.totals(), fetched, started_at, datetime.now(UTC), str(state.root))


def outcome(
    totals: tuple[int, int], fetched: Fetched, started_at: datetime, ended_at: datetime, output_path: str
) -> Outcome:
    """A run's outcome: `totals` as (files, bytes), and what this run `fetched`."""
    return Outcome(
        files=totals[0],
        bytes=totals[1],
        fetched_files=fetched.files,
        fetched_bytes=fetched.bytes,
        seconds=(ended_at - started_at).total_seconds(),
        output_path=output_path,
        resumed_files=fetched.resumed_files,
        kept_bytes=fetched.kept_bytes,
    )
