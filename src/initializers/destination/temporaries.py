"""Temporaries: each file is written under a stable temporary name on the destination's filesystem, then renamed
to its final path, so that a path under OUTPUT_PATH only ever holds a whole file."""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

from initializers.destination.tree import NEW_FILE, Destination

#: Temporaries are read back as well as written: ranges are hashed from them as they join up.
_TEMPORARY = NEW_FILE & ~os.O_WRONLY | os.O_RDWR


class Temporaries:
    """The temporaries in `destination.tmp` (this run's own: a share of a split plan has its folder)."""

    def __init__(self, destination: Destination) -> None:
        self._destination = destination
        self._folder = destination.relative(destination.tmp)  # used per file: worked out once

    # A plain string, not a Path: this runs for every file, and pathlib costs more than the syscalls.
    def path(self, relative: str) -> str:
        """A stable temporary name per destination path, on the destination's filesystem."""
        return f"{self._destination.tmp}/{hashlib.sha256(relative.encode()).hexdigest()[:32]}.part"

    def open(self, temp: str, size: int | None) -> int:
        """Open (truncated) the temporary `temp` (a `path`) to be written and read back, sized `size` when given; a
        link planted at its name is not followed."""
        with self._destination.folders.folder(self._folder) as folder:
            fd = os.open(os.path.basename(temp), _TEMPORARY | os.O_TRUNC, 0o666, dir_fd=folder)
        if size is not None:
            os.ftruncate(fd, size)
        return fd

    def remove(self, temp: str) -> None:
        self._destination.unlink(Path(temp))

    def place(self, temp: str, relative: str) -> None:
        """Rename the temporary `temp` to the file `relative` under OUTPUT_PATH, making its folders; a link or a
        file in the way of a folder, or a link or a folder at the file's own name, is refused (FetchError)."""
        folders = self._destination.folders
        folder, _, name = relative.rpartition("/")
        with folders.folder(self._folder) as temps, folders.folder(folder) as destination:
            folders.check_file_entry(destination, relative)
            os.replace(os.path.basename(temp), name, src_dir_fd=temps, dst_dir_fd=destination)

    def clear(self) -> None:
        """Remove leftover temporaries (links among them: the links, never what they point to)."""
        with self._destination.folder(self._destination.tmp) as folder:
            for name in os.listdir(folder):
                if name.endswith(".part"):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(name, dir_fd=folder)

    def clear_quietly(self) -> None:
        """Best effort on the way out: a failure here must not mask the error that ended the run."""
        with contextlib.suppress(OSError):
            self.clear()
