"""The `.initializer/` folder under OUTPUT_PATH: temporaries, the journal of finished files, the lock, the manifest.

On the destination filesystem, so that every rename into place is atomic. This lays out the parts (`output_path`,
`temporaries`, `journal`, `locking`, `share_records`) and opens and closes them around a run. The manifest is
written last, after a final checkpoint, atomically, and its presence alone means "complete".
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from initializers.common.clock import Clock
from initializers.common.errors import ConfigError, FetchError, InitializerError
from initializers.destination import manifest
from initializers.destination.journal import Journal
from initializers.destination.locking import RunLock
from initializers.destination.output_path import Destination
from initializers.destination.share_records import ShareRecords, share_path
from initializers.destination.temporaries import Temporaries

#: The folder under OUTPUT_PATH that holds temporaries, the journal and the manifest; no source may write there.
STATE_DIR = ".initializer"
MANIFEST = "manifest.json"
WITHDRAWN_MANIFEST = "manifest.withdrawn.json"
#: Times the state folder is made and the lock taken, when another run removes them meanwhile.
_PREPARE_ATTEMPTS = 5


class StateDir:
    """`share`: (index, count) when this run fetches one share of a plan split over several initializers; its
    temporaries, journal and lock are then its own (`.initializer/shards/<i>-of-<n>/`), the manifest the set's."""

    def __init__(self, output_path: str, share: tuple[int, int] | None = None, clock: Clock | None = None) -> None:
        """`clock`: what waiting for another run's lock sleeps through (the system's by default)."""
        self.root = Path(output_path).absolute()
        self.shared = self.root / STATE_DIR
        self.share = share
        self.dir = share_path(self.shared, share) if share else self.shared
        self.tmp = self.dir / "tmp"
        self.destination = Destination(self.root, self.tmp)
        self.temps = Temporaries(self.destination)
        self.journal = Journal(self.destination, self.dir)
        self.lock = RunLock(self.destination, self.shared, share, self.dir, clock)
        self.share_records = ShareRecords(self.destination, self.shared, share) if share else None
        self.manifest_path = self.shared / MANIFEST
        #: A manifest withdrawn before its files changed: no claim of completion, still a record of what was done.
        self.withdrawn_manifest_path = self.shared / WITHDRAWN_MANIFEST
        #: What this run made to hold its state (folders and lock files, OUTPUT_PATH itself maybe), deepest last.
        self._made: list[Path] = []
        #: Whether a journal was there once the lock was held, and whether this run withdrew the manifest.
        self._journal_found = self._withdrew = False

    @contextlib.contextmanager
    def session(self, waiting: Callable[[str, float], None]) -> Iterator[None]:
        """The destination, made ready and locked for one run; on the way out its temporaries go (but for the partials
        a re-run can resume, when the run did not complete), then the lock; a run that did not complete and landed no
        file leaves OUTPUT_PATH as it found it (`_leave_as_found`). Stopped (a signal, TIMEOUT) while it waits for
        another run's lock (`waiting`), it leaves everything as it is: the other run owns those temporaries."""
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
            with contextlib.suppress(OSError):  # best effort: a failure here must not mask the error that ended the run
                if completed:
                    self.temps.clear()
                else:
                    self.temps.keep_partials()
            if not completed:
                self._leave_as_found()
            self.lock.release()
            self.destination.close_folders()

    def _prepare(self, waiting: Callable[[str, float], None]) -> None:
        """Make the folders, prove them writable and take the lock before any transfer starts (a link in the way is
        refused: `tree`); a destination that refuses them (full, read-only) keeps none made on the way. A lock no
        longer at its path once held (`RunLock.in_place`) is taken anew, its folders made again."""
        for attempt in range(_PREPARE_ATTEMPTS):
            folders = [self.root, self.shared, *([self.dir.parent, self.dir] if self.share else []), self.tmp]
            made = [path for path in [*folders, *self.lock.paths] if not os.path.lexists(path)]
            # Unique across machines and containers, where two initializers sharing a volume may both be PID 1.
            probe = self.tmp / f".probe-{os.getpid()}-{secrets.token_hex(8)}"
            try:
                self.root.mkdir(parents=True, exist_ok=True)
                self.destination.new_file(probe, lambda fd: None)  # its folders made on the way
                self.destination.unlink(probe)
            except FileNotFoundError:
                if attempt + 1 < _PREPARE_ATTEMPTS:  # a folder removed under this run: made again
                    self.destination.close_folders()
                    continue
                raise
            except OSError as exc:
                error = _unusable(self.root, exc)
                self._remove_folders([path for path in made if path not in self.lock.paths])  # no lock taken yet
                raise error from None
            self.lock.take(waiting)
            if self.lock.in_place():
                self._made = made
                self._journal_found = self.journal.path.exists()
                return
            self.lock.release()
            self.destination.close_folders()
        raise FetchError(f"OUTPUT_PATH {str(self.root)!r} keeps changing under this run: its state folder was removed")

    def _leave_as_found(self) -> None:
        """Landed no file (none finished, none removed as stale): the withdrawn manifest back, its journal gone unless
        one was there, the folders and lock files it made (OUTPUT_PATH too) removed, so that a failure before the first
        file (a repo not found) leaves no `.initializer/`. Only while no other run holds the destination (a share
        asks); a folder goes only when empty, so kept partials keep theirs. Best effort: never masks the run's error."""
        if self.journal.recorded or self.destination.removed_any or not self.lock.alone():
            return
        with contextlib.suppress(OSError):
            if self._withdrew:
                self.destination.replace(self.withdrawn_manifest_path, self.manifest_path)
            if not self._journal_found:
                self.destination.unlink(self.journal.path)
        for path in reversed(self.lock.paths):  # the deepest first
            if path in self._made:
                with contextlib.suppress(OSError):
                    self.destination.unlink(path)  # still held: a run waiting for it finds it gone (`_prepare`)
        self._remove_folders([path for path in self._made if path not in self.lock.paths])

    def _remove_folders(self, made: list[Path]) -> None:
        """The folders this run made (OUTPUT_PATH itself maybe), the deepest first, each only if empty; best effort."""
        for path in reversed(made):
            with contextlib.suppress(OSError):
                if path == self.root:
                    self.destination.close_folders()
                    os.rmdir(path)  # only if empty
                else:
                    self.destination.folders.remove_empty(self.destination.relative(path))

    def remove_manifest(self) -> None:
        """Withdraw the completion claim before changing anything it describes: one atomic rename, however many
        files it lists, and what it lists still counts as done for the next run (size, mtime and version checked)."""
        with contextlib.suppress(FileNotFoundError):
            self.destination.replace(self.manifest_path, self.withdrawn_manifest_path)
            self._withdrew = True
            self.destination.fsync_folder(self.shared)

    def discard(self, paths: Iterable[str]) -> int:
        """Take back a download that must not be loaded (a signature that failed under enforce, another source's
        files replaced): the completion claim first, then the files at `paths` (relative to OUTPUT_PATH, never under
        `.initializer/`) and the folders they leave empty, then every record of them; a crash in between leaves no
        manifest, and a re-run picks up where this stopped. Returns the files removed."""
        self.remove_manifest()
        removed = self.destination.remove_files(sorted({path for path in paths if path.split("/")[0] != STATE_DIR}))
        self.journal.remove()
        self.destination.unlink(self.withdrawn_manifest_path)
        return removed

    def held_source(self) -> tuple[str, dict[str, Any]] | None:
        """(program, source) as the manifest, or one withdrawn, records what OUTPUT_PATH holds; None for nothing."""
        head = manifest.read_head(self.manifest_path) or manifest.read_head(self.withdrawn_manifest_path)
        if not head or not isinstance(head.get("source"), dict):
            return None
        return str((head.get("tool") or {}).get("name")), head["source"]

    def remove_held_source(self) -> int:
        """Remove what another source left: the files its manifest, a withdrawn one and the journal list (never
        others), then those records. Returns the files removed."""
        self.remove_manifest()  # withdrawn first: what it lists is read from there
        listed = itertools.chain(manifest.read_files(self.withdrawn_manifest_path), self.journal.files())
        return self.discard(done.path for done in listed)

    def write_manifest(self, lines: Iterable[bytes]) -> None:
        self.destination.write_atomically(self.manifest_path, lines)
        self.destination.unlink(self.withdrawn_manifest_path)


def _unusable(root: Path, exc: OSError) -> InitializerError:
    """Why OUTPUT_PATH cannot be prepared: a file where it or a folder above it should be is bad configuration
    (exit 2, nothing written), anything else a destination that refuses writes."""
    blocker = next((path for path in (root, *root.parents) if os.path.lexists(path)), None)
    if blocker is not None and blocker.is_file():
        where = "is a file" if blocker == root else f"is under {str(blocker)!r}, which is a file"
        return ConfigError(f"OUTPUT_PATH {str(root)!r} {where}, not a folder: name a folder (made if missing)")
    return FetchError(f"OUTPUT_PATH {str(root)!r} is not writable: {exc.strerror or exc}")
