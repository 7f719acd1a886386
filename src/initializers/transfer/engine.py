"""The transfer engine: parallel work into temporaries, verify, rename into place. Written once for every source.

Work is a lazy stream of tasks pulled by threads whose number `concurrency.Ramp` decides as the run goes, so memory
stays flat whatever the number or size of files. Each task (from a `TaskFactory`: `factories`) carries its file's
`FileTransfer`, which reaches its final path only once its last part landed and its size and checksum are verified.
"""

from __future__ import annotations

import contextlib
import errno
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple, Protocol

from initializers.common import logs
from initializers.common.clock import Clock, SystemClock
from initializers.common.errors import FetchError, disk_error
from initializers.common.remote_file import RemoteFile
from initializers.destination.done import DoneFile
from initializers.destination.journal import Journal
from initializers.destination.temporaries import Temporaries
from initializers.store.contract import Source
from initializers.transfer.concurrency import WINDOW_SECONDS, Ramp, RequestTimes
from initializers.transfer.file_transfer import Cancelled, FileTransfer, Transfers
from initializers.transfer.progress import Progress

_STOP_GRACE_SECONDS = 2.0  # how long a stopped run waits for transfer threads to notice before cleaning up
#: How often what the partials' records say landed is put on stable storage: a node crash loses at most this much
#: of a partial's progress, and one syncfs this often costs little (ranges start their own writeback as they land).
_RECORDS_SYNC_SECONDS = 2.0
_log = logs.get_logger("initializers.transfer.engine")


class Task(NamedTuple):
    """One unit of work, and the bytes it moves (for made files, the estimate): the ramp sizes concurrency by it."""

    size: int
    do: Callable[[], None]


class TransferContext(Protocol):
    """What task factories see of the engine: the file transfers to start, the run's shared signals and measures."""

    progress: Progress
    cancel: threading.Event  # set once the run fails or is being stopped
    request_times: RequestTimes  # how long requests waited for their first byte, and took in all: factories add
    clock: Clock

    def start(self, file: RemoteFile) -> FileTransfer:
        """The transfer of `file`, which its tasks open, feed and finish."""


class TaskFactory(Protocol):
    """What a transfer is, for one kind of source: the engine runs the tasks, which carry each file's transfer."""

    def tasks(self, files: Iterable[RemoteFile], context: TransferContext) -> Iterator[Task]:
        """The transfers, lazily: threads take turns pulling them, so making one must be cheap and I/O-free."""

    def interrupt(self) -> None:
        """Unblock tasks waiting on the source, from another thread, when the run is being stopped."""


class Engine:
    """Parallel tasks from a factory, each carrying a file's transfer; the `TransferContext` its factories see."""

    def __init__(
        self,
        factory: TaskFactory,
        temps: Temporaries,
        journal: Journal,
        ramp: Ramp,
        progress: Progress,
        store: type[Source],
        clock: Clock | None = None,
    ) -> None:
        """`store`: the source's class (its checksum kinds verify the files); `clock`: times the windows and waits."""
        self._factory = factory
        self._temps = temps
        self._journal = journal
        self._ramp = ramp
        self.progress = progress
        self.clock = clock or SystemClock()
        self._threads: dict[int, threading.Thread] = {}  # by number
        #: Set once a thread has failed or the run is being stopped; the task stream's producers stop on it too.
        self.cancel = threading.Event()
        self._transfers = Transfers(
            temps, self.cancel, self._record_done, lambda count: progress.add_bytes(-count), store
        )
        self.start = self._transfers.start  # `TransferContext.start`
        #: The files being fetched right now: for the progress shown, and for what a stopped run was waiting for.
        self.in_flight = self._transfers.in_flight
        progress.in_flight = self.in_flight
        #: Threads take turns pulling tasks; nothing else ever waits for it, since its holder may wait on the listing.
        self._next_lock = threading.Lock()
        self._error_lock = threading.Lock()
        self._error: BaseException | None = None
        self._tasks_ran_out = False
        #: Set when a thread ends, or when smaller tasks call for more threads than run.
        self._wake = threading.Event()
        self._started_for = 0  # the number of threads `_start_threads` last started up to
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
            for thread in self._threads.values():
                if thread.is_alive():  # a thread that failed to start never began
                    thread.join(max(0.0, deadline - self.clock.monotonic()))
        if self._error is not None:
            self._transfers.discard_unfinished()
            with contextlib.suppress(OSError, FetchError):  # what did finish stays claimed, for the re-run
                self._checkpoint(self._journal)
            raise self._error
        self._checkpoint(self._journal)

    def _record_done(self, transfer: FileTransfer, done: DoneFile) -> None:
        self._journal.record_done(done)
        self.progress.file_done(done.size, kept=sum(length for _offset, length in transfer.kept))

    # The scheduling.

    def _run_threads(self, tasks: Iterator[Task], check_stop: Callable[[], None]) -> None:
        """Keep `ramp.workers` threads pulling tasks, re-deciding the limit every window, until the tasks run out."""
        self._ramp.follow_round_trip()  # the listing's round trips size the first wave of small-file requests
        self._start_threads(tasks)
        before = (self.clock.monotonic(), time.process_time(), self.progress.bytes_done)
        records_synced = before[0]
        while any(thread.is_alive() for thread in self._threads.values()):
            self._wake.wait(max(0.0, before[0] + WINDOW_SECONDS - self.clock.monotonic()))
            check_stop()
            self._wake.clear()
            now = (self.clock.monotonic(), time.process_time(), self.progress.bytes_done)
            elapsed = now[0] - before[0]
            if elapsed >= WINDOW_SECONDS:
                throughput, cpu_share = (now[2] - before[2]) / elapsed, (now[1] - before[1]) / elapsed
                limit, requests = self._ramp.limit, self._ramp.requests
                latency = self.request_times.window()
                running = sum(thread.is_alive() for thread in self._threads.values())
                self._ramp.observe(throughput, cpu_share, latency, running)
                if self._ramp.limit != limit or self._ramp.requests != requests:
                    _log.debug("streams", streams=self._ramp.limit, was=limit, workers=self._ramp.workers,
                               requests=self._ramp.requests, waiting_share=round(latency.waiting_share, 2),
                               part_mib=self._ramp.part_size >> 20, mb_s=round(throughput / 1e6, 1),
                               cpu_share=round(cpu_share, 2))  # fmt: skip
                before = now
                self._checkpoint(self._journal)
                if now[0] - records_synced >= _RECORDS_SYNC_SECONDS:
                    records_synced = now[0]
                    self._checkpoint(self._temps)
            if self._error is None and not self._tasks_ran_out:
                self._start_threads(tasks)

    def _start_threads(self, tasks: Iterator[Task]) -> None:
        """Threads numbered below `ramp.workers` run (again); one numbered above it ends after its current task."""
        self._started_for = self._ramp.workers
        # Daemon threads: a thread stuck in a read must not keep a stopped process alive.
        for number in range(self._started_for):
            if number in self._threads and self._threads[number].is_alive():
                continue
            thread = threading.Thread(target=self._work, args=(tasks, number), name=f"transfer-{number}", daemon=True)
            self._threads[number] = thread
            thread.start()

    def _checkpoint(self, what: Journal | Temporaries) -> None:
        """`what.checkpoint()`, a local disk failure raised as one: the journal claims the files finished since the last
        checkpoint, once their bytes are on stable storage; the temporaries put what their records say landed there."""
        try:
            what.checkpoint()
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
                task.do()
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
