"""Stored files as byte ranges: the task factory of `Storage` sources (every object store, the Hub).

A file comes in one request, or in ranges written at their offsets, many at once, each sized as it is handed out
(`RangeTasks._range_size`); one whose bytes miss its checksum is fetched again, whole (`_finish_or_fetch_again`).

What lands is recorded beside the temporary (each range when done, and how far one in flight got about every
second), so that a file an earlier run left part-way comes in only the ranges it lacks (`partials`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import partial

from initializers.common.errors import disk_error
from initializers.common.remote_file import RemoteFile
from initializers.destination.partials import missing
from initializers.destination.stable_storage import start_writeback
from initializers.store.contract import Storage, comes_whole
from initializers.store.lane import LaneReads
from initializers.store.retry import Retriable, retrying
from initializers.transfer.bandwidth import TokenBucket
from initializers.transfer.concurrency import Ramp
from initializers.transfer.engine import Task, TransferContext
from initializers.transfer.file_transfer import FileTransfer
from initializers.transfer.lane import Lane
from initializers.transfer.lane_files import LANE_BATCH, LaneFile, SmallFileWork, for_lane, lane_task
from initializers.transfer.part_sink import PartSink


class RangeTasks:
    """One task per range of a stored file; the first to run opens its transfer's temporary, the last finishes it."""

    def __init__(
        self, reader: Storage, ramp: Ramp, bandwidth: TokenBucket | None = None, lane: LaneReads | None = None
    ) -> None:
        """`bandwidth`: the MAX_BANDWIDTH cap, if set; `lane`: the source's small-file reads, if any (`Advice.lane`)."""
        self._reader = reader
        self._ramp = ramp
        self._bandwidth = bandwidth
        self._lane_reads = lane

    def tasks(self, files: Iterable[RemoteFile], context: TransferContext) -> Iterator[Task]:
        lane = self._lane(context)
        batch: list[LaneFile] = []
        for file in files:
            transfer = context.start(file)
            if transfer.kept:
                transfer.keep_only(self._reader.resumable(file, transfer.kept))
            part = self._range_size(file)
            if transfer.kept and not part:  # the server no longer takes ranges: nothing kept can be completed
                transfer.start_over()
            if not transfer.kept and comes_whole(file.size, part):
                transfer.handed_out(last=True)
                if lane is not None and for_lane(file, self._ramp.round_trips):
                    batch.append(LaneFile(transfer))
                    if len(batch) == LANE_BATCH:
                        yield lane_task(lane, batch)
                        batch = []
                    continue
                yield Task(file.size, partial(self._transfer_range, context, transfer, 0, file.size))
                continue
            # What an earlier run did not keep; all kept: one empty interval at its end, for the part that finishes it.
            gaps = missing(transfer.kept, file.size) or [(file.size, 0)]
            for number, (offset, length) in enumerate(gaps):
                end = offset + length
                while True:
                    length = min(self._range_size(file) or file.size, end - offset)
                    transfer.handed_out(last=offset + length == end and number == len(gaps) - 1)
                    yield Task(length, partial(self._transfer_range, context, transfer, offset, length))
                    offset += length
                    if offset >= end:
                        break
        if batch and lane is not None:
            yield lane_task(lane, batch)

    def interrupt(self) -> None:
        self._reader.interrupt()

    def _lane(self, context: TransferContext) -> Lane[LaneFile] | None:
        """The lane small files take, when the source offers one and no MAX_BANDWIDTH cap paces reads."""
        reads = self._lane_reads
        if reads is None or self._bandwidth is not None:
            return None
        work = SmallFileWork(self._reader, reads.begin, context, self._ramp.throttle, partial(self._part_done, context))
        return Lane(work, self._lane_width, reads.timeout, context.cancel, context.clock)

    def _lane_width(self) -> int:
        """The lane's requests at once: the small-file requests the ramp allows, less one for each other transfer
        thread (a range of a large file, a file waiting for short round trips), so that all together stay within it."""
        ramp = self._ramp
        return max(1, ramp.requests - ramp.workers + 1)

    def _range_size(self, file: RemoteFile) -> int | None:
        """The size of the file's next range: the storage's advised size, grown to the size one connection's measured
        rate calls for (`Ramp.part_size`); None: the storage takes whole files only. Asked per file and per range:
        connections speed up, and a storage may learn late whether its server takes ranges."""
        advised = self._reader.part_size_for(file)
        return max(advised, self._ramp.part_size) if advised else None

    def _transfer_range(self, context: TransferContext, transfer: FileTransfer, offset: int, length: int) -> None:
        with transfer.working():
            transfer.open(ranged=length < transfer.file.size)
            if length or transfer.verifier.awaits_word():
                self._read_range(context, transfer, offset, length)
                if length < transfer.file.size:  # a part of a large file: its bytes head for disk while others arrive
                    try:
                        start_writeback(transfer.fd, offset, length)
                    except OSError as exc:
                        raise disk_error(exc, transfer.file.path) from None
            self._part_done(context, transfer)

    def _part_done(self, context: TransferContext, transfer: FileTransfer) -> None:
        if transfer.part_done():
            self._finish_or_fetch_again(context, transfer)

    def _read_range(self, context: TransferContext, transfer: FileTransfer, offset: int, length: int) -> None:
        sink = PartSink(transfer, offset, length, context.progress, context.clock)
        self._reader.read(transfer.file, offset, length, self._bandwidth.metered(sink) if self._bandwidth else sink)
        sink.landed(context.request_times)

    def _finish_or_fetch_again(self, context: TransferContext, transfer: FileTransfer) -> None:
        """Finish the file; bytes that miss its checksum (corrupted on the way) are fetched again, whole, in this
        thread, under the retry policy: a source that keeps sending them is at fault, and the run fails."""

        def attempt() -> None:
            if transfer.checks:  # the last check found its bytes corrupt
                transfer.fetch_again()
                if transfer.file.size or transfer.verifier.awaits_word():
                    self._read_range(context, transfer, 0, transfer.file.size)
            transfer.finish()

        # The one Retriable here is the checksum mismatch; an OSError is the local disk's, never worth a retry.
        retrying(
            "download", transfer.file.path, attempt, interrupted=context.cancel.is_set, clock=context.clock,
            transient=(Retriable,),
        )  # fmt: skip
