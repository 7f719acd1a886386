"""One run from configuration to manifest: list, plan, skip what is done, fetch the rest, claim completion."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from initializers import manifest
from initializers.concurrency import Ramp
from initializers.contract import Config, Kind
from initializers.engine import TransferEngine
from initializers.patterns import IgnorePatterns
from initializers.plan import RemoteFile, build_plan
from initializers.progress import Progress
from initializers.sources import open_source
from initializers.sources.base import Source
from initializers.state import DoneFile, StateDir
from initializers.stopping import stoppable

PROGRESS_INTERVAL_SECONDS = 5.0


@dataclass(frozen=True)
class Outcome:
    files: int
    bytes: int
    fetched_files: int
    fetched_bytes: int
    seconds: float
    output_path: str


def run(config: Config, kind: Kind, log: Any) -> Outcome:
    """One run; SIGTERM, SIGINT and TIMEOUT stop it cleanly, naming what it was waiting for."""
    phase: dict[str, Any] = {"waiting for": "the source to answer"}

    def pending() -> str:
        engine = phase.get("engine")
        if engine is None:
            return phase["waiting for"]
        files = engine.in_flight()
        return f"{len(files)} files: {', '.join(files[:5])}{' ...' if len(files) > 5 else ''}"

    with stoppable(config.timeout, pending):
        return _run(config, kind, log, phase)


def _run(config: Config, kind: Kind, log: Any, phase: dict[str, Any]) -> Outcome:
    state = StateDir(config.output_dir(kind))
    source = open_source(config, kind, str(state.staging))
    try:
        uri = source.describe()["uri"]
        log.info("listing", source=uri, output_path=str(state.root))
        with state.session():
            phase["waiting for"] = f"the listing of {uri}"
            return _list_and_fetch(config, kind, log, phase, source, state)
    finally:
        source.close()


def _list_and_fetch(
    config: Config, kind: Kind, log: Any, phase: dict[str, Any], source: Source, state: StateDir
) -> Outcome:
    started_at = datetime.now(UTC)
    listed = list(source.list_files())
    described = source.describe()  # after listing: it now names the resolved version
    patterns = _ignore_patterns(config, kind, listed, log)
    plan = build_plan(listed, IgnorePatterns(patterns), described["uri"])
    previous = state.read_manifest()
    done = _still_current(state.done_files(previous), plan)
    todo = [file for file in plan if file.path not in done]
    if not todo and manifest.describes(previous, described, plan):
        outcome = _outcome(plan, [], done, started_at, state)
        log.info("up to date", files=outcome.files, bytes=outcome.bytes, manifest=str(state.manifest_path))
        return outcome
    todo_bytes = sum(f.size for f in todo)
    state.check_free_space(todo_bytes)
    state.restart_journal(done)
    state.remove_manifest()
    state.clear_temps()
    ramp = Ramp(source.default_workers, config.max_workers or source.max_workers)
    log.info(
        "fetching",
        files=len(todo),
        bytes=todo_bytes,
        already_done=len(done),
        ignored=len(listed) - len(plan),
        workers=ramp.limit,
        max_workers=ramp.cap,
        part_size=source.part_size,
    )
    interval = config.progress_interval or PROGRESS_INTERVAL_SECONDS
    with Progress(log, len(todo), todo_bytes, interval) as progress:
        engine = phase["engine"] = TransferEngine(source, state, ramp, progress)
        engine.fetch(todo)
    phase.pop("engine")
    if source.owned_folders:
        stale = state.remove_stale(source.owned_folders, {f.path for f in plan})
        if stale:
            log.info("removed stale files", files=len(stale), first=stale[:5])
    phase["waiting for"] = "the manifest to be written"
    finished = {**done, **{d.path: d for d in engine.finished}}
    state.write_manifest(manifest.build(kind, described, plan, finished, patterns, started_at, datetime.now(UTC)))
    state.remove_journal()
    return _outcome(plan, todo, finished, started_at, state)


def _ignore_patterns(config: Config, kind: Kind, listed: list[RemoteFile], log: Any) -> tuple[str, ...]:
    """The patterns in effect; the kind's default list gives up its weight patterns when they are all there is."""
    patterns = config.effective_ignore_patterns(kind)
    if not kind.weight_fallback or patterns != kind.default_ignore_patterns:
        return patterns
    if any(file.path.endswith(".safetensors") for file in listed):
        return patterns
    kept = tuple(p for p in patterns if p not in kind.weight_fallback)
    if any(IgnorePatterns(kind.weight_fallback).ignores(file.path) for file in listed):
        log.info(
            "keeping .bin/.pt/.pth weights",
            reason="the source has no *.safetensors weights, and the default IGNORE_PATTERNS would leave the "
            "model without any; set IGNORE_PATTERNS explicitly to override",
            ignore_patterns=",".join(kept),
        )
    return kept


def _still_current(done: dict[str, DoneFile], plan: list[RemoteFile]) -> dict[str, DoneFile]:
    """Finished files whose recorded size and version are still what the source offers."""
    offered = {f.path: f for f in plan}
    return {path: d for path, d in done.items() if path in offered and offered[path].matches(d.size, d.version)}


def _outcome(
    plan: list[RemoteFile],
    fetched: list[RemoteFile],
    finished: dict[str, DoneFile],
    started_at: datetime,
    state: StateDir,
) -> Outcome:
    """Sizes as written: a file the source produced has its size only once it is there."""
    return Outcome(
        files=len(plan),
        bytes=sum(finished[f.path].size for f in plan),
        fetched_files=len(fetched),
        fetched_bytes=sum(finished[f.path].size for f in fetched),
        seconds=(datetime.now(UTC) - started_at).total_seconds(),
        output_path=str(state.root),
    )
