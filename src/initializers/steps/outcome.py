"""What a run did, as the programs report it (the `done` line, the termination message) and the manifest records it;
and whether a manifest found already stands for what was listed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from initializers.common.remote_file import RemoteFile
from initializers.destination import manifest
from initializers.destination.done import DoneFile
from initializers.plan.index import PlanIndex
from initializers.plan.todo import Listed
from initializers.transfer.progress import Fetched, Progress


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


def outcome(
    totals: tuple[int, int], fetched: Fetched, started_at: datetime, ended_at: datetime, output_path: str
) -> Outcome:
    """A run's outcome: `totals` as (files, bytes), and what this run `fetched`."""
    seconds = (ended_at - started_at).total_seconds()
    return Outcome(*totals, seconds=seconds, output_path=output_path, **fetched._asdict())


def outcome_of(index: PlanIndex, progress: Progress, started_at: datetime, output_path: str) -> Outcome:
    """Sizes as written (a produced file's is known once there), and what this run fetched by `progress`."""
    return outcome(index.totals(), progress.fetched(), started_at, datetime.now(UTC), output_path)


def up_to_date(
    fetched: int, listed: Listed, total: int, previous: dict[str, Any] | None, described: dict[str, Any]
) -> bool:
    """Nothing was fetched, and the manifest already lists every planned file, for this source: it stands."""
    return not fetched and listed.in_manifest == listed.planned and manifest.describes(previous, described, total)


def finished(file: RemoteFile, done: DoneFile | None) -> DoneFile:
    """A planned file's record of being done, which every planned file has by the time the manifest is written."""
    assert done is not None, f"{file.path} was planned, and neither fetched nor found done"
    return done
