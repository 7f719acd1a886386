"""The transfer engine: parallel fetch into temporaries, verify, rename into place. Written once for every source.

Work is a lazy stream of tasks (here a whole small stored file or one range of a large one; in `making.py` a
group of made files) pulled by threads whose number `concurrency.Ramp` decides as the run goes, so memory stays
flat whatever the number or size of files. A file reaches its final path only after its last part has landed
and its size and checksum are verified: the checksum the listing gave, or the one the first response vouched for
(`Sink.vouch`), checked in-stream for a file in one part, by combining the ranges' CRCs, or from the page cache
after the last range. A file whose bytes do not match is fetched again, whole.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple

from initializers import logs
from initializers.bandwidth import TokenBucket
from initializers.checksums import CRC32, Checksum, combined_crc32, file_hexdigest, new_hasher
from initializers.concurrency import WINDOW_SECONDS, Ramp, RequestTimes
from initializers.errors import FetchError
from initializers.plan import RemoteFile
from initializers.progress import Progress
from initializers.retry import ATTEMPTS
from initializers.sources.base import Source, Storage
from initializers.state import DoneFile, StateDir, start_writeback

_STOP_GRACE_SECONDS = 2.0  # how long a stopped run waits for transfer threads to notice before cleaning up
_log = logs.get_logger("initializers.engine")


class Cancelled(Exception):
    """Raised inside a transfer thread once another thread has failed or the run is being stopped."""


class Task(NamedTuple):
    """One unit of work, and the bytes it moves (for made files, the estimate): the ramp sizes concurrency by it."""

    size: int
    run: Callable[[], None]


@dataclass
class OpenFile:
    """A file being assembled in its temporary; the thread that lands its last part finishes it."""

    file: RemoteFile
    temp: str
    parts_pending: int = 0  # ranges handed out whose bytes have not all landed
    all_handed_out: bool = False  # the file's last range is among them
    fd: int = -1
    #: What the whole file must hash to: the listing's checksum, else the first one a response vouched for.
    expected: Checksum | None = None
    streamed: str | None = None  # the in-stream digest in `expected`'s algorithm, when the file came in one part
    range_crcs: dict[int, tuple[int, int]] = field(default_factory=dict)  # offset -> (length, CRC-32) of ranges
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: Writers of one file take turns here: the kernel serialises them on the inode's lock anyway, and its waiters
    #: spin, burning CPU that waiting on this lock does not.
    write_lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.expected is None:
            self.expected = self.file.checksum


class ChecksumMismatch(FetchError):
    """A file's bytes do not hash to what its source vouched for."""


class _PartSink:
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
        """The part is complete: keep its digest for the file's check."""
        if self._digest is None:
            return
        if self._length == self._target.file.size:
            self._target.streamed = self._digest.hexdigest()
        else:
            with self._target.lock:
                self._target.range_crcs[self._offset] = (self._length, int(self._digest.hexdigest(), 16))

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
            raise _disk_error(exc, self._target.file.path) from None
        if self._digest is not None:
            self._digest.update(data)
        self.written += len(data)
        self._progress.add_bytes(len(data))

    def rewind(self) -> None:
        self._progress.add_bytes(-self.written)
        self.written = 0
        self._digest = self._new_digest()


class TransferEngine(ABC):
    """Parallel transfers into temporaries, each file verified and renamed into place by whichever thread completes
    it; what a transfer is (a range of a stored file, a group of made files) is the subclass's."""

    def __init__(self, source: Source, state: StateDir, ramp: Ramp, progress: Progress) -> None:
        self._source = source
        self._state = state
        self._ramp = ramp
        self._progress = progress
        self._threads: list[threading.Thread] = []
        #: Set once a thread has failed or the run is being stopped; the task stream's producers stop on it too.
        self.cancel = threading.Event()
        #: Threads take turns pulling tasks; nothing else ever waits for it, since its holder may wait on the listing.
        self._next_lock = threading.Lock()
        self._error_lock = threading.Lock()
        #: Files with a temporary, guarded by `_open_changes`; once `_fenced`, no temporary is renamed into place.
        self._open: dict[str, OpenFile] = {}
        self._open_changes = threading.Condition()
        self._renaming = 0
        self._fenced = False
        self._error: BaseException | None = None
        self._tasks_ran_out = False
        #: Set when a thread ends, or when smaller tasks call for more threads than run.
        self._wake = threading.Event()
        self._started_for = 0  # the number of threads `_start_threads` last started up to
        self._request_times = RequestTimes()

    def fetch(self, files: Iterable[RemoteFile]) -> None:
        """Fetch every file to its final path, or raise with nothing partial left at a final path."""
        tasks = self._tasks(files)
        try:
            self._run_threads(tasks)
        except BaseException as exc:  # a signal or the deadline, raised in this thread: stop everyone, promptly
            self._fail(exc)
            self._source.interrupt()
            deadline = time.monotonic() + _STOP_GRACE_SECONDS
            for thread in self._threads:
                thread.join(max(0.0, deadline - time.monotonic()))
        if self._error is not None:
            self._discard_unfinished()
            with contextlib.suppress(OSError, FetchError):  # what did finish stays claimed, for the re-run
                self._checkpoint()
            raise self._error
        self._checkpoint()

    def _run_threads(self, tasks: Iterator[Task]) -> None:
        """Keep `ramp.workers` threads pulling tasks, re-deciding the limit every window, until the tasks run out."""
        self._start_threads(tasks)
        before = (time.monotonic(), time.process_time(), self._progress.bytes_done)
        while any(thread.is_alive() for thread in self._threads):
            self._wake.wait(max(0.0, before[0] + WINDOW_SECONDS - time.monotonic()))  # signals interrupt it
            self._wake.clear()
            now = (time.monotonic(), time.process_time(), self._progress.bytes_done)
            elapsed = now[0] - before[0]
            if elapsed >= WINDOW_SECONDS:
                throughput, cpu_share = (now[2] - before[2]) / elapsed, (now[1] - before[1]) / elapsed
                limit, requests = self._ramp.limit, self._ramp.requests
                latency = self._request_times.window()
                if self._ramp.observe(throughput, cpu_share, latency) != limit or self._ramp.requests != requests:
                    _log.debug("streams", streams=self._ramp.limit, was=limit, workers=self._ramp.workers,
                               requests=self._ramp.requests, waiting_share=round(latency.waiting_share, 2),
                               part_mib=self._ramp.part_size >> 20, mb_s=round(throughput / 1e6, 1),
                               cpu_share=round(cpu_share, 2))  # fmt: skip
                before = now
                self._checkpoint()
            if self._error is None and not self._tasks_ran_out:
                self._start_threads(tasks)

    def _start_threads(self, tasks: Iterator[Task]) -> None:
        """Threads numbered below `ramp.workers` run (again); one numbered above it ends after its current task."""
        self._started_for = self._ramp.workers
        # Daemon threads: a thread stuck in a read must not keep a stopped process alive.
        for number in range(self._started_for):
            if number < len(self._threads) and self._threads[number].is_alive():
                continue
            thread = threading.Thread(target=self._work, args=(tasks, number), name=f"transfer-{number}", daemon=True)
            if number < len(self._threads):
                self._threads[number] = thread
            else:
                self._threads.append(thread)
            thread.start()

    def in_flight(self) -> list[str]:
        """Paths being fetched right now, for messages about what a stopped run was waiting for."""
        with self._open_changes:
            return sorted(self._open)

    def _checkpoint(self) -> None:
        """Claim the files finished since the last checkpoint, once their bytes are on stable storage."""
        try:
            self._state.checkpoint()
        except OSError as exc:
            raise _disk_error(exc) from None

    @abstractmethod
    def _tasks(self, files: Iterable[RemoteFile]) -> Iterator[Task]:
        """The transfers, lazily: threads take turns pulling them, so making one must be cheap and I/O-free."""

    def _work(self, tasks: Iterator[Task], number: int) -> None:
        try:
            while self._error is None and number < self._ramp.workers:
                with self._next_lock:
                    task = next(tasks, None) if self._error is None else None
                    if task is not None:
                        self._ramp.task_started(task.size)
                if task is None:
                    self._tasks_ran_out = True
                    return
                if self._ramp.workers > self._started_for:  # smaller tasks: more of them may run at once
                    self._wake.set()
                task.run()
        except OSError as exc:
            self._fail(_disk_error(exc) if exc.errno in (errno.ENOSPC, errno.EDQUOT) else exc)
        except BaseException as exc:
            self._fail(exc)
        finally:
            self._wake.set()

    def _fail(self, exc: BaseException) -> None:
        with self._error_lock:
            if self._error is None or isinstance(self._error, Cancelled):
                self._error = exc
        self.cancel.set()

    def _finish(self, target: OpenFile) -> None:
        file = target.file
        if target.fd >= 0:
            os.close(target.fd)
            target.fd = -1
        # Size and mtime survive the rename: one stat serves the checks and the journal.
        st = os.stat(target.temp, follow_symlinks=False)
        if file.exact_size and st.st_size != file.size:
            raise FetchError(f"{file.locator}: got {st.st_size} bytes, the source listed {file.size}")
        self._verify_checksum(target)
        with self._open_changes:
            if self._fenced:
                raise Cancelled
            self._renaming += 1
        try:
            self._state.place(target.temp, file.path)
        finally:
            with self._open_changes:
                self._renaming -= 1
                self._open_changes.notify_all()
        with self._open_changes:
            self._open.pop(file.path, None)
        verified = target.expected
        done = DoneFile(file.path, st.st_size, file.version, st.st_mtime_ns)
        if verified is not None:
            done = done._replace(algorithm=verified.algorithm, hexdigest=verified.hexdigest)
        self._state.record_done(done)
        self._progress.file_done(st.st_size)

    def _verify_checksum(self, target: OpenFile) -> None:
        expected, size = target.expected, target.file.size
        if expected is None:  # nothing vouched for: the size (and, for S3, If-Match on the ETag) is all there is
            return
        found = target.streamed
        if found is None and expected.algorithm == CRC32:
            found = combined_crc32(target.range_crcs, size)
        if found is None:  # ranges in another algorithm, or handed over whole: hash the temporary, from the page cache
            found = file_hexdigest(target.temp, expected, size)
        if found != expected.hexdigest:
            raise ChecksumMismatch(
                f"{target.file.locator}: {expected.algorithm} checksum mismatch (expected {expected.hexdigest}, "
                f"got {found}); the downloaded bytes are corrupt"
            )

    def _opened(self, target: OpenFile) -> None:
        with self._open_changes:
            if self._fenced:  # a thread that outlived the stop's grace: its temporary would outlive the cleanup
                raise Cancelled
            self._open[target.file.path] = target

    def _discard_unfinished(self) -> None:
        """Remove every temporary, with threads that outlived the stop's grace fenced off: none may start a
        file or rename one into place from now on, and renames under way are waited for."""
        with self._open_changes:
            self._fenced = True
            self._open_changes.wait_for(lambda: self._renaming == 0)
            unfinished = list(self._open.values())
            self._open.clear()
        for target in unfinished:
            if target.fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(target.fd)
            self._state.remove_temp(target.temp)


class RangeTransfers(TransferEngine):
    """Stored files (S3, the Hub), fetched as byte ranges written at their offsets: many at once for a large file."""

    def __init__(
        self, storage: Storage, state: StateDir, ramp: Ramp, progress: Progress, bandwidth: TokenBucket | None = None
    ) -> None:
        """`bandwidth`: the MAX_BANDWIDTH cap every range's bytes are taken from, when there is one."""
        super().__init__(storage, state, ramp, progress)
        self._storage = storage
        self._bandwidth = bandwidth

    def _tasks(self, files: Iterable[RemoteFile]) -> Iterator[Task]:
        """One task per range; the first range to run opens the temporary.

        A file of up to two parts comes in one request: splitting it would save at most one part's time and lose
        the check of its checksum as it streams in. Each range of a larger file is sized when it is handed out,
        from the rate connections achieve by then.
        """
        for file in files:
            target = OpenFile(file, self._state.temp_path(file.path))
            part_size = self._part_size()
            if not part_size or file.size <= 2 * part_size:
                target.parts_pending, target.all_handed_out = 1, True
                yield Task(file.size, partial(self._transfer_range, target, 0, file.size))
                continue
            offset = 0
            while offset < file.size:
                length = min(self._part_size() or file.size, file.size - offset)
                with target.lock:
                    target.parts_pending += 1
                    target.all_handed_out = offset + length == file.size
                yield Task(length, partial(self._transfer_range, target, offset, length))
                offset += length

    def _part_size(self) -> int | None:
        """The storage's part size, grown to what one connection's measured rate calls for; None: whole files only.

        Asked per file and per range: a source may learn late whether its server takes ranges.
        """
        advised = self._storage.part_size
        return max(advised, self._ramp.part_size) if advised else None

    def _transfer_range(self, target: OpenFile, offset: int, length: int) -> None:
        if target.fd < 0:
            self._open_temp(target, ranged=length < target.file.size)
        if length:
            self._read_range(target, offset, length)
            if length < target.file.size:  # a part of a large file: its bytes head for the disk while others arrive
                try:
                    start_writeback(target.fd, offset, length)
                except OSError as exc:
                    raise _disk_error(exc, target.file.path) from None
        with target.lock:
            target.parts_pending -= 1
            last = target.parts_pending == 0 and target.all_handed_out
        if last:
            self._finish_or_fetch_again(target)

    def _read_range(self, target: OpenFile, offset: int, length: int) -> None:
        started = time.monotonic()
        sink = _PartSink(target, offset, length, self._progress, self.cancel)
        self._storage.read(target.file, offset, length, self._bandwidth.metered(sink) if self._bandwidth else sink)
        if sink.written != length:
            raise FetchError(
                f"{target.file.locator}: received {sink.written} bytes of range {offset}+{length}; "
                "the source ended early"
            )
        sink.landed()
        if sink.first_byte is not None:
            self._request_times.add(sink.first_byte - started, time.monotonic() - started)

    def _finish_or_fetch_again(self, target: OpenFile) -> None:
        """Finish the file; bytes that miss its checksum (corrupted on the way) are fetched again, whole, in this
        thread, a few times at most: a source that keeps sending them is at fault, and the run fails."""
        for attempt in range(1, ATTEMPTS + 1):
            try:
                self._finish(target)
                return
            except ChecksumMismatch as exc:
                if attempt == ATTEMPTS:
                    raise FetchError(f"{exc}; giving up after {ATTEMPTS} downloads") from None
                _log.warning("checksum mismatch, fetching the file again", path=target.file.path, error=str(exc))
                self._progress.add_bytes(-target.file.size)
                target.expected, target.streamed, target.range_crcs = target.file.checksum, None, {}
                target.fd = self._state.open_temp(target.temp, None)
                if target.file.size:
                    self._read_range(target, 0, target.file.size)

    def _open_temp(self, target: OpenFile, ranged: bool) -> None:
        with target.lock:
            if target.fd >= 0:
                return
            self._opened(target)
            target.fd = self._state.open_temp(target.temp, target.file.size if ranged else None)


def _disk_error(exc: OSError, path: str | None = None) -> FetchError:
    where = f"writing {path!r} under OUTPUT_PATH" if path else "writing under OUTPUT_PATH"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return FetchError(f"{where} failed: {exc.strerror}; free space there or choose a larger volume")
    return FetchError(f"{where} failed: {exc.strerror or exc}")
