"""Progress: counters the transfer threads update, read as a `Snapshot` by reporters at their own cadence (the
structured `progress` events, the live view). Totals grow while the listing goes on, and no percentage or ETA is given
until it ends: either would be computed over a part taken for the whole."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol


class InFlight(NamedTuple):
    """A file being fetched: its path, its size as listed, and the bytes of it that have landed."""

    path: str
    size: int
    landed: int


@dataclass(frozen=True)
class Snapshot:
    """The counters at one moment; `files`/`bytes` are what the listing has shown to fetch so far."""

    files_done: int
    files: int
    bytes_done: int
    bytes: int
    listing_done: bool
    seconds: float
    in_flight: tuple[InFlight, ...] = ()  # the largest first
    files_present: int = 0  # listed, and already here as listed: not to fetch

    @property
    def rate(self) -> float:
        """Bytes per second since the start."""
        return self.bytes_done / self.seconds if self.seconds > 0 else 0.0

    @property
    def percent(self) -> float | None:
        """Of the bytes to fetch, once the listing has ended (before, the total is not known); 100 for none."""
        if not self.listing_done:
            return None
        return 100.0 * min(self.bytes_done, self.bytes) / self.bytes if self.bytes else 100.0

    @property
    def eta(self) -> float | None:
        """Seconds left at the rate so far, once the listing has ended and bytes are arriving."""
        if not self.listing_done or self.rate <= 0:
            return None
        return max(0, self.bytes - self.bytes_done) / self.rate


class Fetched(NamedTuple):
    """What one run fetched (named as the manifest's `this_run` names it): its files done and their bytes that came
    over the network, and of those files the ones an earlier run had started (resumed), with the bytes that run had
    fetched and this one kept."""

    fetched_files: int = 0
    fetched_bytes: int = 0
    resumed_files: int = 0
    kept_bytes: int = 0


class Reporter(Protocol):
    """Told the progress every `interval` seconds, the first time after `first` seconds, and once more at the end."""

    interval: float
    first: float

    def report(self, snapshot: Snapshot) -> None: ...

    def close(self, snapshot: Snapshot, failed: bool) -> None:
        """The run's transfers have ended (`failed`: by an error or a stop) with the counters at `snapshot`."""


class Progress:
    """Counters updated by transfer threads; a timer thread per reporter reads them."""

    def __init__(self, reporters: Sequence[Reporter] = ()) -> None:
        self.total_files = 0  # known so far: they grow while the listing goes on
        self.total_bytes = 0
        self.listing_done = False  # set once the listing has ended: the totals are final, and an ETA can be given
        self.files_done = 0
        self.files_done_bytes = 0  # their whole sizes, resumed ones too
        self.files_resumed = 0  # of those done, the ones an earlier run had started
        self.kept_bytes = 0  # of `files_done_bytes`, what an earlier run had fetched: not fetched again
        self.bytes_done = 0  # as they arrive, before their files are done
        self.files_present = 0  # listed and already here
        #: Where the files being fetched are found (the engine sets its own), for reporters that show them.
        self.in_flight: Callable[[], list[InFlight]] = list
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._started = time.monotonic()
        self._reporters = reporters
        self._threads = [
            threading.Thread(target=self._report_periodically, args=(reporter,), name="progress", daemon=True)
            for reporter in reporters
        ]

    def __enter__(self) -> Progress:
        self._started = time.monotonic()
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, exc_type: Any, *_exc: object) -> None:
        self._stopped.set()
        for thread in self._threads:
            thread.join()
        final = self.snapshot()
        for reporter in self._reporters:
            reporter.close(final, failed=exc_type is not None)

    def add_todo(self, size: int) -> None:
        with self._lock:
            self.total_files += 1
            self.total_bytes += size

    def add_present(self) -> None:
        """A file listed is already here as listed: nothing to fetch."""
        with self._lock:
            self.files_present += 1

    def add_bytes(self, count: int) -> None:
        with self._lock:
            self.bytes_done += count

    def file_done(self, size: int, kept: int) -> None:
        """A file is at its final path, `size` bytes as written, `kept` of them from an earlier run's partial."""
        with self._lock:
            self.files_done += 1
            self.files_done_bytes += size
            if kept:
                self.files_resumed += 1
                self.kept_bytes += kept

    def fetched(self) -> Fetched:
        with self._lock:
            return Fetched(
                self.files_done, self.files_done_bytes - self.kept_bytes, self.files_resumed, self.kept_bytes
            )

    def snapshot(self) -> Snapshot:
        with self._lock:
            counters = self.files_done, self.total_files, self.bytes_done, self.total_bytes, self.listing_done
            present = self.files_present
        in_flight = tuple(sorted(self.in_flight(), key=lambda file: (-file.size, file.path)))
        return Snapshot(*counters, seconds=time.monotonic() - self._started, in_flight=in_flight, files_present=present)

    def _report_periodically(self, reporter: Reporter) -> None:
        wait = reporter.first
        while not self._stopped.wait(wait):
            reporter.report(self.snapshot())
            wait = reporter.interval


class ProgressEvents:
    """The structured `progress` log event, for log collectors: exact numbers (while listing: the files so far)."""

    def __init__(self, log: Any, interval: float) -> None:
        self._log = log
        self.interval = self.first = interval

    def report(self, snapshot: Snapshot) -> None:
        rate_mb_s = round(snapshot.rate / 1e6, 1)
        if not snapshot.listing_done:
            self._log.info(
                "progress",
                files_done=snapshot.files_done,
                listed_so_far=snapshot.files,
                bytes=snapshot.bytes_done,
                rate_mb_s=rate_mb_s,
                listing="in progress",
            )
            return
        eta, percent = snapshot.eta, snapshot.percent
        self._log.info(
            "progress",
            files=f"{snapshot.files_done}/{snapshot.files}",
            bytes=snapshot.bytes_done,
            total_bytes=snapshot.bytes,
            percent=None if percent is None else round(percent, 1),
            rate_mb_s=rate_mb_s,
            eta_s=None if eta is None else round(eta, 1),
            listing="done",
        )

    def close(self, snapshot: Snapshot, failed: bool) -> None:
        """Nothing: the run's last log line says how it ended."""
