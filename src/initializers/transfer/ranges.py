"""Stored files as byte ranges: the task factory of `Storage` sources (S3, the Hub).

A file comes in one request, or in ranges written at their offsets, many at once for a large file, each sized when
it is handed out (`concurrency.range_size`). Bytes pass through a digest when one helps check their file; a file
whose bytes miss its checksum is fetched again, whole.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Iterator
from functools import partial
from typing import Any, Protocol

from initializers.common import logs
from initializers.common.errors import FetchError
from initializers.common.remote_file import Checksum, RemoteFile
from initializers.destination.stable_storage import start_writeback
from initializers.transfer.bandwidth import TokenBucket
from initializers.transfer.checksums import CRC32, InOrderDigest, new_hasher
from initializers.transfer.concurrency import Ramp
from initializers.transfer.engine import Cancelled, ChecksumMismatch, Engine, OpenFile, Task, disk_error
from initializers.transfer.progress import Progress
from initializers.transfer.range_sizes import comes_whole, range_size
from initializers.transfer.retry import ATTEMPTS
from initializers.transfer.sink import Sink

_log = logs.get_logger("initializers.transfer.engine")


class Reader(Protocol):
    """What ranges are read from: a `Storage`."""

    def part_size_for(self, file: RemoteFile) -> int | None:
        """The smallest range `file` is fetched in; None: in one range."""

    def read(self, file: RemoteFile, offset: int, length: int, sink: Sink) -> None: ...

    def interrupt(self) -> None: ...


class PartSink:
    """Writes one range at its offset in the temporary, digesting it when its file has a checksum to meet; counts
    progress; notices cancellation."""

    def __init__(self, target: OpenFile, offset: int, length: int, progress: Progress, cancel: threading.Event) -> None:
        self._target = target
        self._offset = offset
        self._length = length
        self._progress = progress
        self._cancel = cancel
        self.written = 0
        self.first_byte: float | None = None  # when the first byte arrived (time.monotonic)
        self._digest = self._new_digest()

    def vouch(self, checksum: Checksum) -> None:
        """Take the whole file's checksum from the response, before its body: the first one vouched for stands."""
        target = self._target
        with target.lock:
            if target.expected is None:
                target.expected = checksum
            elif target.expected.algorithm == checksum.algorithm and target.expected != checksum:
                raise FetchError(
                    f"{target.file.locator} changed during the download ({checksum.algorithm} "
                    f"{target.expected.hexdigest} became {checksum.hexdigest}); run again to fetch the new version"
                )
        if self._digest is None and self.written == 0:
            self._digest = self._new_digest()

    def _new_digest(self) -> Any:
        """A digest of this part that helps check the file: any, for a file in one part; a CRC-32, for a range."""
        expected, size = self._target.expected, self._target.file.size
        if expected is None:
            return None
        if self._length == size:
            return new_hasher(expected, size)
        return new_hasher(expected, self._length) if expected.algorithm == CRC32 else None

    def landed(self) -> None:
        """The part is complete: keep its digest for the file's check, or hash it in order with the others."""
        target = self._target
        if self._digest is None:
            if target.expected is not None and self._length < target.file.size:
                self._hash_in_order(target.expected)
        elif self._length == target.file.size:
            target.streamed = self._digest.hexdigest()
        else:
            with target.lock:
                target.range_crcs[self._offset] = (self._length, int(self._digest.hexdigest(), 16))

    def _hash_in_order(self, expected: Checksum) -> None:
        target = self._target
        with target.lock:
            if target.in_order is None:
                size = target.file.size
                fd = target.fd
                target.in_order = InOrderDigest(
                    new_hasher(expected, size), size, lambda offset, length: os.pread(fd, length, offset)
                )
            in_order = target.in_order
        try:
            in_order.landed(self._offset, self._length)
        except OSError as exc:
            raise disk_error(exc, target.file.path) from None

    def write(self, data: memoryview) -> None:
        if self._cancel.is_set():
            raise Cancelled
        if self.first_byte is None:
            self.first_byte = time.monotonic()
        fd, position = self._target.fd, self._offset + self.written
        remaining = data
        try:
            with self._target.write_lock:
                while remaining:
                    count = os.pwrite(fd, remaining, position)
                    remaining, position = remaining[count:], position + count
        except OSError as exc:  # a local disk failure: not the source's fault, never worth a retry
            raise disk_error(exc, self._target.file.path) from None
        if self._digest is not None:
            self._digest.update(data)
        self.written += len(data)
        self._progress.add_bytes(len(data))

    def rewind(self) -> None:
        self._progress.add_bytes(-self.written)
        self.written = 0
        self._digest = self._new_digest()


class StoredRanges:
    """One task per range of a stored file; the first range to run opens the temporary, the last finishes it."""

    def __init__(self, reader: Reader, ramp: Ramp, bandwidth: TokenBucket | None = None) -> None:
        """`bandwidth`: the MAX_BANDWIDTH cap every range's bytes are taken from, when there is one."""
        self._reader = reader
        self._ramp = ramp
        self._bandwidth = bandwidth

    def tasks(self, files: Iterable[RemoteFile], engine: Engine) -> Iterator[Task]:
        for file in files:
            target = engine.target(file)
            if comes_whole(file.size, self._range_size(file)):
                target.parts_pending, target.all_handed_out = 1, True
                yield Task(file.size, partial(self._transfer_range, engine, target, 0, file.size))
                continue
            offset = 0
            while offset < file.size:
                length = min(self._range_size(file) or file.size, file.size - offset)
                with target.lock:
                    target.parts_pending += 1
                    target.all_handed_out = offset + length == file.size
                yield Task(length, partial(self._transfer_range, engine, target, offset, length))
                offset += length

    def interrupt(self) -> None:
        self._reader.interrupt()

    def _range_size(self, file: RemoteFile) -> int | None:
        return range_size(self._reader.part_size_for(file), self._ramp.part_size)

    def _transfer_range(self, engine: Engine, target: OpenFile, offset: int, length: int) -> None:
        if target.fd < 0:
            _open_once(engine, target, ranged=length < target.file.size)
        if length:
            self._read_range(engine, target, offset, length)
            if length < target.file.size:  # a part of a large file: its bytes head for the disk while others arrive
                try:
                    start_writeback(target.fd, offset, length)
                except OSError as exc:
                    raise disk_error(exc, target.file.path) from None
        with target.lock:
            target.parts_pending -= 1
            last = target.parts_pending == 0 and target.all_handed_out
        if last:
            self._finish_or_fetch_again(engine, target)

    def _read_range(self, engine: Engine, target: OpenFile, offset: int, length: int) -> None:
        started = time.monotonic()
        sink = PartSink(target, offset, length, engine.progress, engine.cancel)
        self._reader.read(target.file, offset, length, self._bandwidth.metered(sink) if self._bandwidth else sink)
        if sink.written != length:
            raise FetchError(
                f"{target.file.locator}: received {sink.written} bytes of range {offset}+{length}; "
                "the source ended early"
            )
        sink.landed()
        if sink.first_byte is not None:
            engine.request_times.add(sink.first_byte - started, time.monotonic() - started)

    def _finish_or_fetch_again(self, engine: Engine, target: OpenFile) -> None:
        """Finish the file; bytes that miss its checksum (corrupted on the way) are fetched again, whole, in this
        thread, a few times at most: a source that keeps sending them is at fault, and the run fails."""
        for attempt in range(1, ATTEMPTS + 1):
            try:
                engine.finish(target)
                return
            except ChecksumMismatch as exc:
                if attempt == ATTEMPTS:
                    raise FetchError(f"{exc}; giving up after {ATTEMPTS} downloads") from None
                _log.warning("checksum mismatch, fetching the file again", path=target.file.path, error=str(exc))
                engine.progress.add_bytes(-target.file.size)
                target.expected, target.streamed, target.range_crcs = target.file.checksum, None, {}
                target.in_order = None
                engine.open_temp(target, None)
                if target.file.size:
                    self._read_range(engine, target, 0, target.file.size)


def _open_once(engine: Engine, target: OpenFile, ranged: bool) -> None:
    """The first range of a file to run creates its temporary; the others find it open."""
    with target.lock:
        if target.fd >= 0:
            return
        engine.opened(target)
        engine.open_temp(target, target.file.size if ranged else None)
