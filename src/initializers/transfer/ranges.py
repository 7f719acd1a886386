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
from collections.abc import Iterable, Iterator
from functools import partial
from typing import Protocol

from initializers.common import logs
from initializers.common.clock import Clock
from initializers.common.errors import FetchError
from initializers.common.remote_file import Checksum, RemoteFile
from initializers.destination.partials import missing
from initializers.destination.stable_storage import start_writeback
from initializers.transfer.bandwidth import TokenBucket
from initializers.transfer.concurrency import Ramp
from initializers.transfer.engine import Assembly, Cancelled, OpenFile, Task, disk_error
from initializers.transfer.progress import Progress
from initializers.transfer.range_sizes import comes_whole, range_size
from initializers.transfer.retry import Retriable, retrying
from initializers.transfer.sink import Sink

_log = logs.get_logger("initializers.transfer.engine")
#: How often a range in flight records how far it got: a kill loses about this much of its transfer.
_RECORD_SECONDS = 1.0


class Reader(Protocol):
    """What ranges are read from: a `Storage`."""

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
            self._target.verifier.landed(self._offset, self._length, self._digest)
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
        for file in files:
            target = assembly.target(file)
            part = self._range_size(file)
            if target.kept and not part:  # the server no longer takes ranges: nothing kept can be completed
                target.start_over()
            if not target.kept and comes_whole(file.size, part):
                target.handed_out(last=True)
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

    def interrupt(self) -> None:
        self._reader.interrupt()

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
        if target.part_done():
            self._finish_or_fetch_again(assembly, target)

    def _read_range(self, assembly: Assembly, target: OpenFile, offset: int, length: int) -> None:
        clock = assembly.clock
        started = clock.monotonic()
        sink = PartSink(target, offset, length, assembly.progress, assembly.cancel, clock)
        self._reader.read(target.file, offset, length, self._bandwidth.metered(sink) if self._bandwidth else sink)
        if sink.written != length:
            raise FetchError(
                f"{target.file.locator}: received {sink.written} bytes of range {offset}+{length}; "
                "the source ended early"
            )
        sink.landed()
        if sink.first_byte is not None:
            assembly.request_times.add(sink.first_byte - started, clock.monotonic() - started)

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
