"""Made files (the cache source's shard parts): the task factory of `Maker` sources, a group of files made in one
go as the unit of work, into temporaries the engine then verifies and renames."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Protocol

from initializers.common.remote_file import RemoteFile
from initializers.transfer.engine import Assembly, Cancelled, OpenFile, Task


class Making(Protocol):
    """What made files come from: a `Maker`."""

    def made_with(self, file: RemoteFile) -> str: ...

    def make(self, files: list[tuple[RemoteFile, str]], on_bytes: Callable[[int], None]) -> None: ...

    def interrupt(self) -> None: ...


class MadeGroups:
    """One task per group of files the maker makes in one go (usually one file each)."""

    def __init__(self, maker: Making) -> None:
        self._maker = maker

    def tasks(self, files: Iterable[RemoteFile], assembly: Assembly) -> Iterator[Task]:
        groups: dict[str, list[OpenFile]] = {}
        for file in files:
            groups.setdefault(self._maker.made_with(file), []).append(assembly.target(file))
        for group in groups.values():
            yield Task(sum(target.file.size for target in group), partial(self._deliver, assembly, group))

    def interrupt(self) -> None:
        self._maker.interrupt()

    def _deliver(self, assembly: Assembly, group: list[OpenFile]) -> None:
        for target in group:
            assembly.opened(target)  # so that a failure removes whatever the maker left there
        self._maker.make([(target.file, target.temp) for target in group], _counting(assembly))
        for target in group:
            assembly.finish(target)


def _counting(assembly: Assembly) -> Callable[[int], None]:
    """Bytes the maker reports, counted as progress; a cancelled run stops it at its next report."""

    def on_bytes(count: int) -> None:
        if assembly.cancel.is_set():
            raise Cancelled
        assembly.progress.add_bytes(count)

    return on_bytes
