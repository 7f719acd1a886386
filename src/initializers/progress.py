"""Progress events at a steady cadence: files and bytes done, rate, ETA. Never a carriage-return bar."""

from __future__ import annotations

import threading
import time
from typing import Any


class Progress:
    """Counters updated by transfer threads and reported by a timer thread every `interval` seconds."""

    def __init__(self, log: Any, total_files: int, total_bytes: int, interval: float) -> None:
        self._log = log
        self.total_files = total_files
        self.total_bytes = total_bytes
        self.files_done = 0
        self.bytes_done = 0
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

    def add_bytes(self, count: int) -> None:
        with self._lock:
            self.bytes_done += count

    def file_done(self) -> None:
        with self._lock:
            self.files_done += 1

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._started

    def _report_periodically(self) -> None:
        while not self._stopped.wait(self._interval):
            self._report()

    def _report(self) -> None:
        with self._lock:
            files, done = self.files_done, self.bytes_done
        rate = done / self.elapsed if self.elapsed > 0 else 0.0
        eta = (self.total_bytes - done) / rate if rate > 0 else None
        self._log.info(
            "progress",
            files=f"{files}/{self.total_files}",
            bytes=done,
            total_bytes=self.total_bytes,
            percent=round(100 * done / self.total_bytes, 1) if self.total_bytes else 100.0,
            rate_mb_s=round(rate / 1e6, 1),
            eta_s=None if eta is None else round(eta, 1),
        )
