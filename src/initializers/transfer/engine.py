"""The transfer engine: parallel work into temporaries, verify, rename into place. Written once for every source.

Work is a lazy stream of tasks pulled by threads whose number `concurrency.Ramp` decides as the run goes, so memory
stays flat whatever the number or size of files. What a task is comes from a `TaskFactory` the source picks: ranges
of a stored file (`ranges.py`) or a group of made files (`making.py`). A file reaches its final path only after its
last part has landed and its size and checksum are verified (each file's `checksums.FileVerifier`). Factories see
the engine through `Assembly`: files to assemble and finish, and the run's shared signals and measures.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from initializers.common import logs
from initializers.common.clock import Clock, SystemClock
from initializers.common.errors import FetchError
from initializers.common.remote_file import RemoteFile
from initializers.destination.done import DoneFile
from initializers.destination.journal import Journal
from initializers.destination.partials import PartRecord
from initializers.destination.temporaries import Temporaries
from initializers.transfer.checksums import FileVerifier
from initializers.transfer.concurrency import WINDOW_SECONDS, Ramp, RequestTimes
from initializers.transfer.progress import InFlight, Progress

_STOP_GRACE_SECONDS = 2.0  # how long a stopped run waits for transfer threads to notice before cleaning up
#: How often what the partials' records say landed is put on stable storage: a node crash loses at most this much
#: of a partial's progress, and one syncfs this often costs little (ranges start their own writeback as they land).
_RECORDS_SYNC_SECONDS = 2.0
_log = logs.get_logger("initializers.transfer.engine")


class Cancelled(Exception):
    """Raised inside a transfer thread once another thread has failed or the run is being stopped."""


class Task(NamedTuple):
    """One unit of work, and the bytes it moves (for made files, the estimate): the ramp sizes concurrency by it."""

    size: int
    run: Callable[[], None]


@dataclass
class OpenFile:
    """A file being assembled in its temporary: its descriptor, the parts handed out and not yet done, and its
    verifier, which the parts feed; the task that completes its last part finishes it. A file fetched in ranges has
    a record of what landed (`record`), and may resume what an earlier run left (`kept`)."""

    file: RemoteFile
    temp: str
    #: Intervals (offset, length) of the temporary an earlier run wrote, for this run to keep rather than fetch.
    kept: tuple[tuple[int, int], ...] = ()
    fd: int = -1
    record: PartRecord | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)  # guards the descriptor's opening and the parts
    #: Writers of one file take turns here: the kernel serialises them on the inode's lock anyway, and its waiters
    #: spin, burning CPU that waiting on this lock does not.
    write_lock: threading.Lock = field(default_factory=threading.Lock)
    verifier: FileVerifier = field(init=False)
    #: Bytes of the file in its temporary (kept ones included), for the live view; ranges add under `write_lock`.
    landed: int = field(default=0, init=False)
    _parts_pending: int = field(default=0, init=False)  # parts handed out and not yet done
    _all_handed_out: bool = field(default=False, init=False)  # the file's last part is among them

    def __post_init__(self) -> None:
        self.verifier = FileVerifier(self.file, resumed=bool(self.kept))
        self.landed = sum(length for _offset, length in self.kept)

    def start_over(self) -> None:
        """Keep nothing an earlier run or attempt wrote: the file is fetched whole, and checked from scratch."""
        self.kept = ()
        self.landed = 0
        self.verifier.reset()

    def handed_out(self, last: bool) -> None:
        """One more part is handed out; `last`: the file's last."""
        with self.lock:
            self._parts_pending += 1
            self._all_handed_out = last

    def part_done(self) -> bool:
        """A part handed out is done; True when it completes the file."""
        with self.lock:
            self._parts_pending -= 1
            return self._parts_pending == 0 and self._all_handed_out

    def close(self) -> None:
        """Close the temporary's descriptor and its record, if open."""
        if self.record is not None:
            self.record.close()
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)

    def read_back(self, offset: int, length: int) -> bytes:
        """Bytes of the temporary, for the verifier to hash ranges in order (from the page cache)."""
        return os.pread(self.fd, length, offset)


class Assembly(Protocol):
    """What task factories need of the engine: files to assemble and finish, and the run's shared state."""

    progress: Progress
    cancel: threading.Event  # set once the run fails or is being stopped
    request_times: RequestTimes  # how long requests waited for their first byte, and took in all
    clock: Clock

    def target(self, file: RemoteFile) -> OpenFile:
        """A file to assemble, at its temporary path (nothing is created yet), with what an earlier run kept of it."""

    def opened(self, target: OpenFile) -> None:
        """`target`'s temporary is about to be written: a failure of the run removes it."""

    def open_temp(self, target: OpenFile, size: int | None) -> None:
        """Open `target`'s temporary, afresh unless it keeps an earlier run's bytes, and keep its descriptor; with a
        `size` (for writes at offsets), with a record of what lands."""

    def finish(self, target: OpenFile) -> None:
        """Check the complete file, rename it into place and record it done; ChecksumMismatch when its bytes are
        not what the source vouched for."""


class TaskFactory(Protocol):
    """What a transfer is, for one kind of source: the engine runs the tasks and finishes the files."""

    def tasks(self, files: Iterable[RemoteFile], assembly: Assembly) -> Iterator[Task]:
        """The transfers, lazily: threads take turns pulling them, so making one must be cheap and I/O-free."""

    def interrupt(self) -> None:
        """Unblock tasks waiting on the source, from another thread, when the run is being stopped."""


class Engine:
    """Parallel tasks from a factory; each file verified and renamed into place by whichever task completes it.
    The `Assembly` its factories work with."""

    def __init__(
        self,
        factory: TaskFactory,
        temps: Temporaries,
        journal: Journal,
        ramp: Ramp,
        progress: Progress,
        clock: Clock | None = None,
    ) -> None:
        """`clock`: what the windows and waits are timed by (the system's by default)."""
        self._factory = factory
        self._temps = temps
        self._journal = journal
        self._ramp = ramp
        self.progress = progress
        progress.watch(self.in_flight)
        self.clock = clock or SystemClock()
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
        #: How long requests waited for their first byte, and took in all: the factories add, each window reads.
        self.request_times = RequestTimes()

    def fetch(self, files: Iterable[RemoteFile], check_stop: Callable[[], None] | None = None) -> None:
        """Fetch every file to its final path, or raise with nothing partial left at a final path; `check_stop` is
        called at every wait of this (the main) thread, and raises to stop the run (a signal, the deadline)."""
        tasks = self._factory.tasks(files, self)
        try:
            self._run_threads(tasks, check_stop or (lambda: None))
        except BaseException as exc:  # a stop, raised in this thread: stop everyone, promptly
            self._fail(exc)
            self._factory.interrupt()
            deadline = self.clock.monotonic() + _STOP_GRACE_SECONDS
            for thread in self._threads:
                if thread.is_alive():  # a thread that failed to start never began
                    thread.join(max(0.0, deadline - self.clock.monotonic()))
        if self._error is not None:
            self._discard_unfinished()
            with contextlib.suppress(OSError, FetchError):  # what did finish stays claimed, for the re-run
                self._checkpoint()
            raise self._error
        self._checkpoint()

    def in_flight(self) -> list[InFlight]:
        """The files being fetched right now, by path, and how much of each has landed: for the progress shown, and
        for messages about what a stopped run was waiting for."""
        with self._open_changes:
            return [InFlight(path, target.file.size, target.landed) for path, target in sorted(self._open.items())]

    # What tasks call, from their threads.

    def target(self, file: RemoteFile) -> OpenFile:
        temp = self._temps.path(file.path)
        partial = self._temps.partial(temp)
        if partial is None:
            return OpenFile(file, temp)
        if partial.of(file):
            return OpenFile(file, temp, partial.kept)
        _log.info("the source changed since the partial download: starting the file over", path=file.path,
                  was_version=partial.version, version=file.version, was_size=partial.size, size=file.size)  # fmt: skip
        return OpenFile(file, temp)

    def opened(self, target: OpenFile) -> None:
        with self._open_changes:
            if self._fenced:  # a thread that outlived the stop's grace: its temporary would outlive the cleanup
                raise Cancelled
            self._open[target.file.path] = target

    def open_temp(self, target: OpenFile, size: int | None) -> None:
        keep = bool(target.kept)
        target.fd = self._temps.open(target.temp, size, keep)
        if size is not None:
            target.record = self._temps.record(target.temp, target.file, keep)

    def finish(self, target: OpenFile) -> None:
        """Check the file's size, then its checksum, rename it into place and record it done."""
        file = target.file
        # Before the descriptor closes: a thread may still be reading through it.
        target.verifier.finish_hashing(target.read_back)
        target.close()
        # Size and mtime survive the rename: one stat serves the checks and the journal.
        st = os.stat(target.temp, follow_symlinks=False)
        if file.exact_size and st.st_size != file.size:
            raise FetchError(f"{file.locator}: got {st.st_size} bytes, the source listed {file.size}")
        verified = target.verifier.verify(target.temp)
        with self._open_changes:
            if self._fenced:
                raise Cancelled
            self._renaming += 1
        try:
            self._temps.place(target.temp, file.path, recorded=target.record is not None)
        finally:
            with self._open_changes:
                self._renaming -= 1
                self._open_changes.notify_all()
        with self._open_changes:
            self._open.pop(file.path, None)
        done = DoneFile(file.path, st.st_size, file.version, st.st_mtime_ns)
        if verified is not None:
            done = done._replace(algorithm=verified.algorithm, hexdigest=verified.hexdigest)
        self._journal.record_done(done)
        self.progress.file_done(st.st_size, kept=sum(length for _offset, length in target.kept))

    # The scheduling.

    def _run_threads(self, tasks: Iterator[Task], check_stop: Callable[[], None]) -> None:
        """Keep `ramp.workers` threads pulling tasks, re-deciding the limit every window, until the tasks run out."""
        self._ramp.follow_round_trip()  # the listing's round trips size the first wave of small-file requests
        self._start_threads(tasks)
        before = (self.clock.monotonic(), time.process_time(), self.progress.bytes_done)
        records_synced = before[0]
        while any(thread.is_alive() for thread in self._threads):
            self._wake.wait(max(0.0, before[0] + WINDOW_SECONDS - self.clock.monotonic()))
            check_stop()
            self._wake.clear()
            now = (self.clock.monotonic(), time.process_time(), self.progress.bytes_done)
            elapsed = now[0] - before[0]
            if elapsed >= WINDOW_SECONDS:
                throughput, cpu_share = (now[2] - before[2]) / elapsed, (now[1] - before[1]) / elapsed
                limit, requests = self._ramp.limit, self._ramp.requests
                latency = self.request_times.window()
                if self._ramp.observe(throughput, cpu_share, latency) != limit or self._ramp.requests != requests:
                    _log.debug("streams", streams=self._ramp.limit, was=limit, workers=self._ramp.workers,
                               requests=self._ramp.requests, waiting_share=round(latency.waiting_share, 2),
                               part_mib=self._ramp.part_size >> 20, mb_s=round(throughput / 1e6, 1),
                               cpu_share=round(cpu_share, 2))  # fmt: skip
                before = now
                self._checkpoint()
                if now[0] - records_synced >= _RECORDS_SYNC_SECONDS:
                    records_synced = now[0]
                    try:
                        self._temps.checkpoint()
                    except OSError as exc:
                        raise disk_error(exc) from None
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

    def _checkpoint(self) -> None:
        """Claim the files finished since the last checkpoint, once their bytes are on stable storage."""
        try:
            self._journal.checkpoint()
        except OSError as exc:
            raise disk_error(exc) from None

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
            self._fail(disk_error(exc) if exc.errno in (errno.ENOSPC, errno.EDQUOT) else exc)
        except BaseException as exc:
            self._fail(exc)
        finally:
            self._wake.set()

    def _fail(self, exc: BaseException) -> None:
        with self._error_lock:
            if self._error is None or isinstance(self._error, Cancelled):
                self._error = exc
        self.cancel.set()

    def _discard_unfinished(self) -> None:
        """Close every temporary, and remove those without a record of what landed (the others are kept for a
        re-run to resume), with threads that outlived the stop's grace fenced off: none may start a file or rename
        one into place from now on, and renames under way are waited for."""
        with self._open_changes:
            self._fenced = True
            self._open_changes.wait_for(lambda: self._renaming == 0)
            unfinished = list(self._open.values())
            self._open.clear()
        for target in unfinished:
            with contextlib.suppress(OSError):
                target.close()
            if target.record is None:
                self._temps.remove(target.temp)


def disk_error(exc: OSError, path: str | None = None) -> FetchError:
    """A local disk failure, named as such: not the source's fault, never worth a retry."""
    where = f"writing {path!r} under OUTPUT_PATH" if path else "writing under OUTPUT_PATH"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return FetchError(f"{where} failed: {exc.strerror}; free space there or choose a larger volume")
    return FetchError(f"{where} failed: {exc.strerror or exc}")
