"""Made files (the cache source's shard parts): the task factory of `Maker` sources, a group of files made in one
go as the unit of work, each into its transfer's temporary, which the transfer then verifies and renames."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from functools import partial

from initializers.common.remote_file import RemoteFile
from initializers.store.contract import Maker
from initializers.transfer.engine import Task, TransferContext
from initializers.transfer.file_transfer import Cancelled, FileTransfer


class MakeTasks:
    """One task per group of files the maker makes in one go (usually one file each)."""

    def __init__(self, maker: Maker) -> None:
        self._maker = maker

    def tasks(self, files: Iterable[RemoteFile], context: TransferContext) -> Iterator[Task]:
        groups: dict[str, list[FileTransfer]] = {}
        for file in files:
            groups.setdefault(self._maker.made_with(file), []).append(context.start(file))
        for group in groups.values():
            yield Task(sum(transfer.file.size for transfer in group), partial(self._make, context, group))

    def interrupt(self) -> None:
        self._maker.interrupt()

    def _make(self, context: TransferContext, group: list[FileTransfer]) -> None:
        with ExitStack() as working:
            for transfer in group:
                working.enter_context(transfer.working())
                transfer.begin_made()  # so that a failure removes whatever the maker left there
            self._maker.make([(transfer.file, transfer.temp) for transfer in group], partial(_count, context))
            for transfer in group:
                transfer.finish()


def _count(context: TransferContext, count: int) -> None:
    """Bytes the maker reports, counted as progress; a cancelled run stops it at its next report."""
    if context.cancel.is_set():
        raise Cancelled
    context.progress.add_bytes(count)
