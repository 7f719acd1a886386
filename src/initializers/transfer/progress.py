"""Progress events at a steady cadence: files and bytes done, rate, ETA. Never a carriage-return bar.

Totals are what the listing has shown so far; the ETA appears once the listing is complete.
"""

from __future__ import annotations

import threading
import time
from typing import Any


class Progress:
    """Counters updated by transfer threads and reported by a timer thread every `interval` seconds."""

    def __init__(self, log: Any, interval: float) -> None:
        self._log = log
        self.total_files = 0  # known so far: they grow while the listing goes on
        self.total_bytes = 0
        self.listing_done = False
        self.files_done = 0
        self.files_done_bytes = 0
        self.bytes_done = 0  # as they arrive, before their files are done
        self._interval = interval
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._report_periodically, name="progress", daemon=True)

    def __enter__(self) -> Progress:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stopped.set()
        self._thread.join()

    def add_todo(self, size: int) -> None:
        with self._lock:
            self.total_files += 1
            self.total_bytes += size

    def listed_all(self) -> None:
        """The listing has ended: the totals are final, and an ETA can be given."""
        self.listing_done = True

    def add_bytes(self, count: int) -> None:
        with self._lock:
            self.bytes_done += count

    def file_done(self, size: int) -> None:
        """A file is at its final path, `size` bytes as written."""
        with self._lock:
            self.files_done += 1
            self.files_done_bytes += size

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._started

    def _report_periodically(self) -> None:
        while not self._stopped.wait(self._interval):
            self._report()

    def _report(self) -> None:
        with self._lock:
            files, done, total_files, total_bytes = self.files_done, self.bytes_done, self.total_files, self.total_bytes
        rate = done / self.elapsed if self.elapsed > 0 else 0.0
        eta = (total_bytes - done) / rate if rate > 0 and self.listing_done else None
        self._log.info(
            "progress",
            files=f"{files}/{total_files}",
            bytes=done,
            total_bytes=total_bytes,
            percent=round(100 * done / total_bytes, 1) if total_bytes else 100.0,
            rate_mb_s=round(rate / 1e6, 1),
            eta_s=None if eta is None else round(eta, 1),
            listing="done" if self.listing_done else "in progress",
        )
