"""How the engine moves a source's files, picked by what the source is (`store.contract`): a `Storage`'s in ranges of
its stored files (`ranges`), a `Maker`'s in groups of files it makes together (`making`); and the engine itself, paced
by the ramp and the bandwidth cap."""

from __future__ import annotations

from initializers.destination.journal import Journal
from initializers.destination.temporaries import Temporaries
from initializers.store.contract import Maker, Source, Storage
from initializers.store.lane import LaneReads
from initializers.transfer.bandwidth import TokenBucket
from initializers.transfer.concurrency import Ramp
from initializers.transfer.engine import Engine, TaskFactory
from initializers.transfer.making import MakeTasks
from initializers.transfer.progress import Progress
from initializers.transfer.ranges import RangeTasks


def task_factory(source: Source, ramp: Ramp, bandwidth: TokenBucket | None, lane: LaneReads | None) -> TaskFactory:
    """The engine's tasks for `source`: ranges under the MAX_BANDWIDTH cap, small files through `lane` if it offers
    one, or groups of made files (the cap does not apply: the cache source refuses MAX_BANDWIDTH)."""
    if isinstance(source, Storage):
        return RangeTasks(source, ramp, bandwidth, lane)
    if isinstance(source, Maker):
        return MakeTasks(source)
    raise TypeError(f"{type(source).__name__} is neither a Storage nor a Maker: the engine cannot move its files")


def engine_for(
    source: Source,
    max_workers: int | None,
    max_bandwidth: int | None,
    temps: Temporaries,
    journal: Journal,
    progress: Progress,
) -> tuple[Engine, Ramp]:
    """The engine that moves `source`'s files, and the ramp that paces it: MAX_WORKERS (else what the source advises)
    and MAX_BANDWIDTH, if set."""
    advice = source.advice()
    ramp = Ramp(
        advice.workers,
        max_workers or advice.max_workers,
        max_workers or advice.max_requests or advice.max_workers,
        throttle=advice.throttle,
        round_trips=advice.round_trips,
    )
    bandwidth = TokenBucket(max_bandwidth) if max_bandwidth else None
    tasks = task_factory(source, ramp, bandwidth, advice.lane)
    return Engine(tasks, temps, journal, ramp, progress, type(source)), ramp
