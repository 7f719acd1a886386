"""The journal of finished files, and the checkpoints that say which of them are on stable storage.

Each file is journaled as it reaches its final path; durability is claimed in checkpoints: one syncfs of the
destination's filesystem (not a sync per file), then a marker saying which journal lines it covers. After a node
crash, files finished since the last checkpoint are fetched again rather than trusted with possibly unwritten blocks
(`stable_storage.trusted_lines`).
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from initializers.destination.done import DoneFile
from initializers.destination.output_path import Destination
from initializers.destination.stable_storage import boot_header, sync_filesystem, synced_marker, trusted_lines

JOURNAL = "journal.jsonl"


class Journal:
    """The journal in `folder` (this run's: a share of a split plan has its own), appended to by any thread."""

    def __init__(self, destination: Destination, folder: Path) -> None:
        self._destination = destination
        self._folder = folder
        self.path = folder / JOURNAL
        self._fd = -1
        self._lock = threading.Lock()  # appends, and a checkpoint's reading of how far they reach
        self._unsynced = False  # lines written since the last checkpoint
        #: Files this run recorded (`record_done`): files that landed.
        self.recorded = 0

    def files(self) -> Iterator[DoneFile]:
        """Files the journal records as finished, oldest first; lines a crash cut short are skipped."""
        return journal_entries(self.path)

    def restart(self, finished: Iterable[DoneFile]) -> None:
        """Start a fresh journal holding `finished` (what the old one may be trusted for), written and synced whole,
        under a header naming this boot."""
        self._destination.write_atomically(
            self.path, itertools.chain([boot_header()], (d.to_json().encode() + b"\n" for d in finished))
        )
        with self._destination.folder(self._folder) as folder:
            self._fd = os.open(JOURNAL, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
        with self._lock:
            os.write(self._fd, self._synced_marker())

    def record_done(self, done: DoneFile) -> None:
        """Journal a file that has reached its final path. One O_APPEND write, so a crash leaves whole lines or a
        cut-off last line, which `files` skips."""
        line = (done.to_json() + "\n").encode()
        with self._lock:
            os.write(self._fd, line)
            self._unsynced = True
            self.recorded += 1

    def checkpoint(self) -> None:
        """syncfs the destination, then mark the lines written before it began as describing bytes on stable storage."""
        with self._lock:
            if not self._unsynced:
                return
            self._unsynced = False
            marker = self._synced_marker()
        sync_filesystem(self._destination.root)
        with self._lock:
            os.write(self._fd, marker)

    def _synced_marker(self) -> bytes:
        return synced_marker(os.fstat(self._fd).st_size)

    def remove(self) -> None:
        self.close()
        self._destination.unlink(self.path)

    def close(self) -> None:
        """Under the appends' lock: a transfer thread that outlived a stop's grace never writes to a descriptor
        closed, or reused, under it (its append fails instead)."""
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


def journal_entries(path: Path) -> Iterator[DoneFile]:
    """The files a journal records, those a checkpoint covers and, on the boot that wrote it, the others too."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed once the lines are read
    except OSError:
        return
    with handle:
        for line in trusted_lines(handle):
            try:
                record = json.loads(line)
            except ValueError:  # a line a crash cut short
                continue
            if (done := DoneFile.from_record(record)) is not None:  # not the header, a marker or a damaged line
                yield done
