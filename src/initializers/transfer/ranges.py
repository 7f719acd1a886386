"""Stored files as byte ranges: the task factory of `Storage` sources (S3, the Hub).

A file comes in one request, or in ranges written at their offsets, many at once for a large file, each sized when
it is handed out (`concurrency.range_size`). Bytes pass through the digest their file's verifier hands them; a
file whose bytes miss its checksum is fetched again, whole, under the one retry policy (`retry.retrying`).

What lands is recorded beside the temporary (each range when done, and how far one in flight got about every
second), so that a file an earlier run left part-way comes in only the ranges it lacks (`partials`).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from initializers.common import logs
from initializers.common.clock import Clock
from initializers.common.errors import FetchError
from initializers.common.remote_file import Checksum, RemoteFile
from initializers.destination.partials import missing
from initializers.destination.stable_storage import start_writeback
from initializers.store.contract import PART_SIZE, comes_whole
from initializers.store.lane import Exchange, LaneReads
from initializers.store.retry import TRANSIENT, Retriable, retrying
from initializers.store.sink import Sink
from initializers.store.throttle import Throttle
from initializers.transfer.bandwidth import TokenBucket
from initializers.transfer.concurrency import Ramp
from initializers.transfer.engine import Assembly, Cancelled, OpenFile, Task, disk_error
from initializers.transfer.lane import Lane
from initializers.transfer.progress import Progress
from initializers.transfer.range_sizes import range_size

_log = logs.get_logger("initializers.transfer.engine")
#: How often a range in flight records how far it got: a kill loses about this much of its transfer.
_RECORD_SECONDS = 1.0


#: Whole files this small go through the lane (`lane`) once round trips are short: their requests, not their bytes,
#: cost the CPU.
LANE_MOST_BYTES = 256 << 10
#: The longest round trip the lane is used at (an object store in the cluster, or on the node): it opens its
#: connections one at a time, which costs microseconds there but would hold up every request in flight over a long
#: one, where threads open theirs at once (and the network, not the CPU, sets the pace).
LANE_ROUND_TRIP_SECONDS = 0.002
#: Files handed to the lane by one task.
_LANE_BATCH = 64
#: Throttled answers a file in the lane is asked again for in the lane, as the fleet's hold lets it; past them it goes
#: the threads' way, under the retry policy's budget (throttling that long holds the whole lane anyway).
_LANE_THROTTLED_TIMES = 8


class Reader(Protocol):
    """What ranges are read from: a `Storage`."""

    #: How the lane reads small files; None: no lane, a thread per request.
    lane_reads: LaneReads | None

    def part_size_for(self, file: RemoteFile) -> int | None:
        """The smallest range `file` is fetched in; None: in one range."""

    def read(self, file: RemoteFile, offset: int, length: int, sink: Sink) -> None: ...

    def interrupt(self) -> None: ...


class PartSink:
    """Writes one range at its offset in the temporary, through the digest its file's verifier hands it, and records
    how far it got; counts progress; notices cancellation."""

    def __init__(
        self, target: OpenFile, offset: int, length: int, progress: Progress, cancel: threading.Event, clock: Clock
    ) -> None:
        self._target = target
        self._offset = offset
        self._length = length
        self._progress = progress
        self._cancel = cancel
        self._clock = clock
        self.written = 0
        self.first_byte: float | None = None  # when the first byte arrived (clock.monotonic)
        self._recorded_at = 0.0  # when the record last heard how far this range got (clock.monotonic)
        self._digest = target.verifier.part_digest(length)

    def vouch(self, checksum: Checksum) -> None:
        """Pass the whole file's checksum from the response, before its body, to the verifier; a part that had no
        digest to feed may have one now."""
        verifier = self._target.verifier
        verifier.vouch(checksum)
        if self._digest is None and self.written == 0:
            self._digest = verifier.part_digest(self._length)

    def landed(self) -> None:
        """The part is complete: hand it to the verifier, and record it."""
        try:
            self._target.verifier.landed(self._offset, self._length, self._digest, self._target.read_back)
            self._record()
        except OSError as exc:  # reading it back to hash it in order, or recording it
            raise disk_error(exc, self._target.file.path) from None

    def _record(self) -> None:
        """Record the bytes written so far (a file fetched in one part has no record)."""
        if self._target.record is not None and self.written:
            self._target.record.add(self._offset, self.written)

    def write(self, data: memoryview) -> None:
        if self._cancel.is_set():
            with contextlib.suppress(OSError):  # the run is stopping: what it wrote is kept for the next one
                self._record()
            raise Cancelled
        now = self._clock.monotonic()
        if self.first_byte is None:
            self.first_byte = self._recorded_at = now
        fd, position = self._target.fd, self._offset + self.written
        remaining = data
        try:
            with self._target.write_lock:
                while remaining:
                    count = os.pwrite(fd, remaining, position)
                    remaining, position = remaining[count:], position + count
                self._target.landed += len(data)
        except OSError as exc:  # a local disk failure: not the source's fault, never worth a retry
            raise disk_error(exc, self._target.file.path) from None
        if self._digest is not None:
            self._digest.update(data)
        self.written += len(data)
        self._progress.add_bytes(len(data))
        if now - self._recorded_at >= _RECORD_SECONDS:
            self._recorded_at = now
            try:
                self._record()
            except OSError as exc:
                raise disk_error(exc, self._target.file.path) from None

    def rewind(self) -> None:
        self._progress.add_bytes(-self.written)
        with self._target.write_lock:
            self._target.landed -= self.written
        self.written = 0
        self._digest = self._target.verifier.part_digest(self._length)


class StoredRanges:
    """One task per range of a stored file; the first range to run opens the temporary, the last finishes it."""

    def __init__(self, reader: Reader, ramp: Ramp, bandwidth: TokenBucket | None = None) -> None:
        """`bandwidth`: the MAX_BANDWIDTH cap every range's bytes are taken from, when there is one."""
        self._reader = reader
        self._ramp = ramp
        self._bandwidth = bandwidth

    def tasks(self, files: Iterable[RemoteFile], assembly: Assembly) -> Iterator[Task]:
        lane = self._lane(assembly)
        batch: list[_LaneFile] = []
        for file in files:
            target = assembly.target(file)
            part = self._range_size(file)
            if target.kept and not part:  # the server no longer takes ranges: nothing kept can be completed
                target.start_over()
            if not target.kept and comes_whole(file.size, part):
                target.handed_out(last=True)
                if lane is not None and self._for_lane(file):
                    batch.append(_LaneFile(target))
                    if len(batch) == _LANE_BATCH:
                        yield _lane_task(lane, batch)
                        batch = []
                    continue
                yield Task(file.size, partial(self._transfer_range, assembly, target, 0, file.size))
                continue
            gaps = missing(target.kept, file.size) or [(file.size, 0)]  # all kept: one empty range finishes it
            for number, (offset, length) in enumerate(gaps):
                end = offset + length
                while True:
                    length = min(self._range_size(file) or file.size, end - offset)
                    target.handed_out(last=offset + length == end and number == len(gaps) - 1)
                    yield Task(length, partial(self._transfer_range, assembly, target, offset, length))
                    offset += length
                    if offset >= end:
                        break
        if batch and lane is not None:
            yield _lane_task(lane, batch)

    def interrupt(self) -> None:
        self._reader.interrupt()

    def _lane(self, assembly: Assembly) -> Lane[_LaneFile] | None:
        """The lane small files take, when the source offers one and no MAX_BANDWIDTH cap paces reads."""
        reads = self._reader.lane_reads
        if reads is None or self._bandwidth is not None:
            return None
        work = _LaneWork(self._reader, reads.begin, assembly, self._ramp.throttle, partial(self._part_done, assembly))
        return Lane(work, self._lane_width, reads.timeout, assembly.cancel, assembly.clock)

    def _lane_width(self) -> int:
        """The lane's requests at once: the small-file requests the ramp allows, less one for each other transfer
        thread (a range of a large file, a file waiting for short round trips), so that all together stay within it."""
        ramp = self._ramp
        return max(1, ramp.requests - ramp.workers + 1)

    def _for_lane(self, file: RemoteFile) -> bool:
        round_trips = self._ramp.round_trips
        shortest = round_trips.shortest if round_trips is not None else None
        return 0 < file.size <= LANE_MOST_BYTES and shortest is not None and shortest <= LANE_ROUND_TRIP_SECONDS

    def _range_size(self, file: RemoteFile) -> int | None:
        return range_size(self._reader.part_size_for(file), self._ramp.part_size)

    def _transfer_range(self, assembly: Assembly, target: OpenFile, offset: int, length: int) -> None:
        if target.fd < 0:
            _open_once(assembly, target, ranged=length < target.file.size)
        if length:
            self._read_range(assembly, target, offset, length)
            if length < target.file.size:  # a part of a large file: its bytes head for the disk while others arrive
                try:
                    start_writeback(target.fd, offset, length)
                except OSError as exc:
                    raise disk_error(exc, target.file.path) from None
        self._part_done(assembly, target)

    def _part_done(self, assembly: Assembly, target: OpenFile) -> None:
        """A part of `target` is done: the file is finished if it was the last."""
        if target.part_done():
            self._finish_or_fetch_again(assembly, target)

    def _read_range(self, assembly: Assembly, target: OpenFile, offset: int, length: int) -> None:
        started = assembly.clock.monotonic()
        sink = PartSink(target, offset, length, assembly.progress, assembly.cancel, assembly.clock)
        self._reader.read(target.file, offset, length, self._bandwidth.metered(sink) if self._bandwidth else sink)
        _range_landed(assembly, target, sink, offset, length, started)

    def _finish_or_fetch_again(self, assembly: Assembly, target: OpenFile) -> None:
        """Finish the file; bytes that miss its checksum (corrupted on the way) are fetched again, whole, in this
        thread, under the retry policy: a source that keeps sending them is at fault, and the run fails."""
        finishes = 0

        def attempt() -> None:
            nonlocal finishes
            finishes += 1
            if finishes > 1:
                self._fetch_again(assembly, target)
            assembly.finish(target)

        # The one Retriable here is the checksum mismatch; an OSError is the local disk's, never worth a retry.
        retrying(
            "download", target.file.path, attempt, interrupted=assembly.cancel.is_set, clock=assembly.clock,
            transient=(Retriable,),
        )  # fmt: skip

    def _fetch_again(self, assembly: Assembly, target: OpenFile) -> None:
        """The whole file afresh, in one part, into a new temporary checked from scratch."""
        _log.warning("checksum mismatch, fetching the file again", path=target.file.path)
        assembly.progress.add_bytes(-target.file.size)
        target.start_over()
        assembly.open_temp(target, target.file.size)
        if target.file.size:
            self._read_range(assembly, target, 0, target.file.size)


def _open_once(assembly: Assembly, target: OpenFile, ranged: bool) -> None:
    """The first range of a file to run creates its temporary; the others find it open."""
    with target.lock:
        if target.fd >= 0:
            return
        assembly.opened(target)
        assembly.open_temp(target, target.file.size if ranged else None)


def _range_landed(
    assembly: Assembly, target: OpenFile, sink: PartSink, offset: int, length: int, started: float
) -> None:
    """All of a range is in `sink` (FetchError when the source sent less): hand it to the verifier, and record its
    request's times (`started`: when it was sent)."""
    if sink.written != length:
        raise FetchError(
            f"{target.file.locator}: received {sink.written} bytes of range {offset}+{length}; the source ended early"
        )
    sink.landed()
    if sink.first_byte is not None:
        assembly.request_times.add(sink.first_byte - started, assembly.clock.monotonic() - started)


def _lane_task(lane: Lane[_LaneFile], batch: list[_LaneFile]) -> Task:
    """Handing a batch to the lane, counted as a part's work: a few threads keep the lane fed, its requests in flight
    are its own (`Ramp.requests`), and threads beyond those would only wait."""
    return Task(PART_SIZE, partial(lane.take, batch))


@dataclass
class _LaneFile:
    """A small file in the lane: its temporary, and once its request is sent, the sink it is read into."""

    target: OpenFile
    sink: PartSink | None = None
    started: float = 0.0  # when its request was sent (clock.monotonic)
    throttled: int = 0  # its requests throttled so far


class _LaneWork:
    """What the lane does with a small file: one request for all of it, and the file finished as a range's last
    part would finish it; a failed request is made again the threads' way, under the retry policy."""

    def __init__(
        self,
        reader: Reader,
        begin: Callable[[RemoteFile, Sink], Exchange],
        assembly: Assembly,
        throttle: Throttle | None,
        part_done: Callable[[OpenFile], None],
    ) -> None:
        """`begin`: the source's lane request (`LaneReads.begin`); `reader`: how a failed one is asked again;
        `part_done`: what a range's thread does once its part is in (the file finished after its last)."""
        self._reader = reader
        self._begin = begin
        self._assembly = assembly
        self._throttle = throttle
        self._part_done = part_done

    def start(self, item: _LaneFile) -> Exchange:
        if self._throttle is not None:
            self._throttle.wait_turn()  # the fleet's hold keeps the lane's requests back too
        assembly, target = self._assembly, item.target
        _open_once(assembly, target, ranged=False)
        item.sink = PartSink(target, 0, target.file.size, assembly.progress, assembly.cancel, assembly.clock)
        item.started = assembly.clock.monotonic()
        return self._begin(target.file, item.sink)

    def done(self, item: _LaneFile, exchange: Exchange) -> None:
        sink, size = item.sink, item.target.file.size
        assert sink is not None, "started"
        if sink.written != size:
            self.failed(item, ConnectionError(f"the body ended {size - sink.written} bytes early"))
            return
        if self._throttle is not None:
            self._throttle.answered(item.started)  # a probe of the fleet's hold, if sent during one: it ends the hold
        self._landed(item, sink)

    def failed(self, item: _LaneFile, error: Exception) -> bool:
        """A throttled request is asked again in the lane (True), once the fleet's hold lets it, up to
        `_LANE_THROTTLED_TIMES` times: retried here, in the lane's own thread, each would hold every other request of
        the lane until it is answered, for as long as the throttling lasts and one at a time after it. Other failures,
        and throttling beyond that, are asked again the threads' way, for the rest of the file after what the lane
        received, under the retry policy: a failure that persists fails the run, as a thread's would."""
        sink, file = item.sink, item.target.file
        if not isinstance(error, TRANSIENT) or self._assembly.cancel.is_set() or sink is None:
            raise error  # final (a refused answer, the disk's failure, a stop), or the temporary could not be opened
        if isinstance(error, Retriable) and error.throttled and self._throttle is not None:
            self._throttle.throttled(error.retry_after, item.started)  # the fleet is held, the lane's width halved
            item.throttled += 1
            if item.throttled <= _LANE_THROTTLED_TIMES and sink.written == 0:
                return True
        _log.debug("a request in the lane failed: asking again", path=file.path, error=str(error))
        self._reader.read(file, 0, file.size, sink)
        self._landed(item, sink)
        return False

    def _landed(self, item: _LaneFile, sink: PartSink) -> None:
        _range_landed(self._assembly, item.target, sink, 0, item.target.file.size, item.started)
        self._part_done(item.target)
