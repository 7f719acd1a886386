"""OUTPUT_PATH as the initializer writes it, reached from its root's descriptor, never through a link (`tree`): state
files made afresh or replaced whole, on stable storage; finished files found as they were left, stale ones removed; a
download that cannot fit refused before it starts filling the volume."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from initializers.common.errors import FetchError
from initializers.destination.done import DoneFile
from initializers.destination.tree import Tree

#: How state files and temporaries are opened: never through a link planted at their name.
NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


class Destination:
    """OUTPUT_PATH (`root`); `tmp`: the folder under it that state files are written in before their rename."""

    def __init__(self, root: Path, tmp: Path) -> None:
        self.root = root
        self.tmp = tmp
        self._tree: Tree | None = None
        #: Whether files were removed (`remove_stale`, `remove_files`): the tree no longer is as the run found it.
        self.removed_any = False

    @property
    def folders(self) -> Tree:
        """The folders under OUTPUT_PATH, opened without following links (once OUTPUT_PATH exists)."""
        if self._tree is None:
            self._tree = Tree(str(self.root))
        return self._tree

    def close_folders(self) -> None:
        if self._tree is not None:
            self._tree.close()
            self._tree = None

    def folder(self, path: Path) -> contextlib.AbstractContextManager[int]:
        """A descriptor of the folder `path` under OUTPUT_PATH, made if missing."""
        return self.folders.folder(self.relative(path))

    def relative(self, path: Path) -> str:
        """`path` relative to OUTPUT_PATH, as `Tree` names folders ("" for OUTPUT_PATH itself)."""
        relative = path.relative_to(self.root).as_posix()
        return "" if relative == "." else relative

    def new_file(self, path: Path, write: Callable[[int], None]) -> None:
        """Make `path` afresh (what is at its name, a link too, is unlinked, never followed) for `write(fd)`."""
        with self.folder(path.parent) as folder:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path.name, dir_fd=folder)
            fd = os.open(path.name, NEW_FILE | os.O_EXCL, 0o666, dir_fd=folder)
            try:
                write(fd)
            finally:
                os.close(fd)

    def unlink(self, path: Path) -> None:
        with self.folder(path.parent) as folder, contextlib.suppress(FileNotFoundError):
            os.unlink(path.name, dir_fd=folder)

    def replace(self, source: Path, destination: Path) -> None:
        """Rename within OUTPUT_PATH, from and to folders opened without following links."""
        with self.folder(source.parent) as source_folder, self.folder(destination.parent) as destination_folder:
            os.replace(source.name, destination.name, src_dir_fd=source_folder, dst_dir_fd=destination_folder)

    def write_atomically(self, path: Path, chunks: Iterable[bytes]) -> None:
        """`path` (a state file) replaced whole by `chunks`, on stable storage, through a temporary made afresh."""

        def write(fd: int) -> None:
            with open(fd, "wb", closefd=False) as handle:
                handle.writelines(chunks)
            os.fsync(fd)

        temp = self.tmp / (path.name + ".tmp")
        self.new_file(temp, write)
        self.replace(temp, path)
        self.fsync_folder(path.parent)

    def fsync_folder(self, path: Path) -> None:
        with self.folder(path) as folder:
            os.fsync(folder)

    # Plain strings, not Path objects: this runs for every file, and pathlib costs more than the syscalls.
    def final_path(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def unchanged(self, done: DoneFile) -> bool:
        """The file is at its final path as it was left: same size and mtime."""
        try:
            st = os.stat(self.final_path(done.path), follow_symlinks=False)
        except OSError:
            return False
        return stat.S_ISREG(st.st_mode) and st.st_size == done.size and st.st_mtime_ns == done.mtime_ns

    def remove_stale(self, folder_glob: str, keep: set[str]) -> list[str]:
        """`Tree.remove_unlisted`: a folder a reader consumes whole then holds exactly the new content."""
        removed = self.folders.remove_unlisted(folder_glob, keep)
        self.removed_any = self.removed_any or bool(removed)
        return removed

    def remove_files(self, paths: Iterable[str]) -> int:
        removed = self.folders.remove_files(paths)
        self.removed_any = self.removed_any or bool(removed)
        return removed

    def free_space(self) -> int:
        return shutil.disk_usage(self.root).free

    def check_free_space(self, needed: int, free: int) -> None:
        """Refuse a download that cannot fit (`needed` bytes in all, `free` at its start) before it fills the volume."""
        if needed > free:
            raise FetchError(
                f"not enough space in OUTPUT_PATH {str(self.root)!r}: the download needs at least {needed} bytes, "
                f"{free} were free when it started"
            )
