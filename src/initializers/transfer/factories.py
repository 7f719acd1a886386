"""The engine for a source: its task factory picked by what the source is (`store.contract`), its pace set."""

from __future__ import annotations

from initializers.destination.journal import Journal
from initializers.destination.temporaries import Temporaries
from initializers.store.contract import Maker, Source, Storage
from initializers.transfer.bandwidth import TokenBucket
from initializers.transfer.concurrency import Ramp
from initializers.transfer.engine import Engine, TaskFactory
from initializers.transfer.making import MakeTasks
from initializers.transfer.progress import Progress
from initializers.transfer.ranges import RangeTasks


def engine_for(
    source: Source,
    max_workers: int | None,
    max_bandwidth: int | None,
    temps: Temporaries,
    journal: Journal,
    progress: Progress,
) -> tuple[Engine, Ramp]:
    """The engine that moves `source`'s files, and the ramp that paces it: MAX_WORKERS (else what the source advises)
    and MAX_BANDWIDTH, if set. A `Storage`'s tasks are ranges under the cap, small files through its lane if it
    offers one; a `Maker`'s are groups of made files (the cap does not apply: the cache source refuses it)."""
    advice = source.advice()
    ramp = Ramp(
        advice.workers,
        max_workers or advice.max_workers,
        max_workers or advice.max_requests or advice.max_workers,
        throttle=advice.throttle,
        round_trips=advice.round_trips,
    )
    bandwidth = TokenBucket(max_bandwidth) if max_bandwidth else None
    tasks: TaskFactory
    if isinstance(source, Storage):
        tasks = RangeTasks(source, ramp, bandwidth, advice.lane)
    elif isinstance(source, Maker):
        tasks = MakeTasks(source)
    else:
        raise TypeError(f"{type(source).__name__} is neither a Storage nor a Maker: the engine cannot move its files")
    return Engine(tasks, temps, journal, ramp, progress, type(source)), ramp
