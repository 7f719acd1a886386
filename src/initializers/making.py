"""Made files (the cache source's shard parts), beside the transfers of stored ones: the same threads,
temporaries, verification and renames, with a group of files made in one go as the unit of work."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import partial

from initializers.concurrency import Ramp
from initializers.engine import Cancelled, OpenFile, Task, TransferEngine
from initializers.plan import RemoteFile
from initializers.progress import Progress
from initializers.sources.base import Maker
from initializers.state import StateDir


class MadeFiles(TransferEngine):
    """Files a `Maker` makes, a group at a time, into temporaries the engine then verifies and renames."""

    def __init__(self, maker: Maker, state: StateDir, ramp: Ramp, progress: Progress) -> None:
        super().__init__(maker, state, ramp, progress)
        self._maker = maker

    def _tasks(self, files: Iterable[RemoteFile]) -> Iterator[Task]:
        """One task per group of files the source makes in one go (usually one file each)."""
        groups: dict[str, list[OpenFile]] = {}
        for file in files:
            groups.setdefault(self._maker.made_with(file), []).append(OpenFile(file, self._state.temps.path(file.path)))
        for group in groups.values():
            yield Task(sum(target.file.size for target in group), partial(self._deliver, group))

    def _deliver(self, group: list[OpenFile]) -> None:
        for target in group:
            self._opened(target)  # so that a failure removes whatever the source left there
        self._maker.make([(target.file, target.temp) for target in group], self._counting)
        for target in group:
            self._finish(target)

    def _counting(self, count: int) -> None:
        if self.cancel.is_set():
            raise Cancelled
        self._progress.add_bytes(count)
