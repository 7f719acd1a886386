"""The `.initializer/` folder under OUTPUT_PATH: temporaries, the journal of finished files, the lock, the manifest.

It lives on the destination filesystem so that every rename into place is atomic. The parts are each their own
module (`destination`, `temporaries`, `journal`, `locking`, and `shares` for a split plan); this lays them out
under OUTPUT_PATH and opens and closes them around a run. The manifest is written last, after a final checkpoint,
atomically, and its presence alone means "complete".
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from initializers.common.clock import Clock
from initializers.common.errors import FetchError
from initializers.destination.journal import Journal
from initializers.destination.locking import RunLock
from initializers.destination.share_records import ShareRecords, share_path
from initializers.destination.temporaries import Temporaries
from initializers.destination.tree import Destination

#: The folder under OUTPUT_PATH that holds temporaries, the journal and the manifest; no source may write there.
STATE_DIR = ".initializer"
MANIFEST = "manifest.json"
WITHDRAWN_MANIFEST = "manifest.withdrawn.json"


class StateDir:
    """`share`: (index, count) when this run fetches one share of a plan split over several initializers; its
    temporaries, journal and lock are then its own (`.initializer/shards/<index>-of-<count>/`), the manifest is
    the set's."""

    def __init__(self, output_path: str, share: tuple[int, int] | None = None, clock: Clock | None = None) -> None:
        """`clock`: what waiting for another run's lock sleeps through (the system's by default)."""
        self.root = Path(output_path).absolute()
        self.shared = self.root / STATE_DIR
        self.share = share
        self.dir = share_path(self.shared, share) if share else self.shared
        self.tmp = self.dir / "tmp"
        #: A folder a source may keep its own bookkeeping in during a run; removed at the end of every run.
        self.staging = self.dir / "staging"
        self.destination = Destination(self.root, self.tmp)
        self.temps = Temporaries(self.destination)
        self.journal = Journal(self.destination, self.dir)
        self.lock = RunLock(self.destination, self.shared, share, self.dir, clock)
        self.share_records = ShareRecords(self.destination, self.shared, share) if share else None

    @contextlib.contextmanager
    def session(self, waiting: Callable[[str, float], None]) -> Iterator[None]:
        """The destination, made ready and locked for one run; on the way out its temporaries go, but for the
        partials a re-run can resume when the run did not complete (the source's staging goes too: huggingface_hub's
        HF_HOME), then the lock.

        While another run holds the lock, this one waits (`waiting(holder, seconds)` is called now and then);
        stopping it then (a signal, TIMEOUT) leaves everything as it is: the other run owns those temporaries.
        """
        try:
            self._prepare(waiting)
        except BaseException:
            self.destination.close_folders()
            raise
        completed = False
        try:
            yield
            completed = True
        finally:
            self.journal.close()
            self.temps.clear_quietly(keep_partials=not completed)
            shutil.rmtree(self.staging, ignore_errors=True)  # never follows a link (none is left there: `_prepare`)
            self.lock.release()
            self.destination.close_folders()

    def _prepare(self, waiting: Callable[[str, float], None]) -> None:
        """Create the folders, prove they are writable and take the lock, before any transfer starts; a link
        where one of them goes is refused (`nofollow`)."""
        probe = self.tmp / f".probe-{os.getpid()}"
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            with self.destination.folder(self.staging):
                pass
            self.destination.new_file(probe, lambda fd: None)
            self.destination.unlink(probe)
        except OSError as exc:
            raise FetchError(f"OUTPUT_PATH {str(self.root)!r} is not writable: {exc.strerror or exc}") from None
        self.lock.take(waiting)

    @property
    def manifest_path(self) -> Path:
        return self.shared / MANIFEST

    @property
    def withdrawn_manifest_path(self) -> Path:
        """A manifest withdrawn before its files changed: no claim of completion, still a record of what was done."""
        return self.shared / WITHDRAWN_MANIFEST

    def remove_manifest(self) -> None:
        """Withdraw the completion claim before changing anything it describes: one atomic rename, however many
        files it lists, and what it lists still counts as done for the next run (size, mtime and version checked)."""
        with contextlib.suppress(FileNotFoundError):
            self.destination.replace(self.manifest_path, self.withdrawn_manifest_path)
            self.destination.fsync_folder(self.shared)

    def discard(self, paths: Iterable[str]) -> None:
        """Take back a download that must not be loaded (a signature that failed under enforce): the completion claim
        first, then the files at their final paths (relative to OUTPUT_PATH), then every record of them; a crash
        in between leaves no manifest, and a re-run finds the files gone and fetches them again."""
        self.remove_manifest()
        for path in paths:
            self.destination.unlink(self.root / path)
        self.journal.remove()
        self.destination.unlink(self.withdrawn_manifest_path)

    def write_manifest(self, lines: Iterable[bytes]) -> None:
        self.destination.write_atomically(self.manifest_path, lines)
        self.destination.unlink(self.withdrawn_manifest_path)
