"""How the engine moves a source's files, picked by what the source is (`store.contract`): a `Storage`'s in ranges of
its stored files (`ranges`), a `Maker`'s in groups of files it makes together (`making`)."""

from __future__ import annotations

from initializers.store.contract import Maker, Source, Storage
from initializers.transfer.bandwidth import TokenBucket
from initializers.transfer.concurrency import Ramp
from initializers.transfer.engine import TaskFactory
from initializers.transfer.making import MadeGroups
from initializers.transfer.ranges import StoredRanges


def task_factory(source: Source, ramp: Ramp, bandwidth: TokenBucket | None) -> TaskFactory:
    """The engine's tasks for `source`: ranges under the MAX_BANDWIDTH cap, or groups of made files (the cap does not
    apply: the cache source refuses MAX_BANDWIDTH)."""
    if isinstance(source, Storage):
        return StoredRanges(source, ramp, bandwidth)
    if isinstance(source, Maker):
        return MadeGroups(source)
    raise TypeError(f"{type(source).__name__} is neither a Storage nor a Maker: the engine cannot move its files")
