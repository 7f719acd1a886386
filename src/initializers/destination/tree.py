"""Folders under OUTPUT_PATH, walked and made one name at a time from the root's descriptor, never through a link.

OUTPUT_PATH may be a shared volume others write to: a symbolic link planted there (`1_Pooling -> /elsewhere`,
`.initializer/tmp -> /elsewhere`) would make a path-based write, truncation or removal land outside it. Here every
folder is opened from its parent's descriptor with O_NOFOLLOW, every file operation is relative to a folder's
descriptor (`dir_fd`), and a link, a file where a folder is needed or a folder where a file goes is refused with an
error naming it: nothing is written through a link, and nothing the user put there is removed to make room.
OUTPUT_PATH itself is followed: it is the configuration, not something found there.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import os
import posixpath
import stat
import threading
from collections.abc import Iterable, Iterator

from initializers.common.errors import FetchError

_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: Folders kept open for the run (each a descriptor): enough for the folders a listing fills one after another,
#: few enough to stay far below a container's default limit of 1024 descriptors.
MOST_KEPT_OPEN = 256


def refuse_link(where: str) -> FetchError:
    return FetchError(
        f"{where!r} is a symbolic link: the initializer never writes through one, since it may lead out of "
        "OUTPUT_PATH; remove it, or choose another OUTPUT_PATH"
    )


class Tree:
    """The folders under one root, opened (and made, when asked) without following links; the folders opened are
    kept open until `close`, up to MOST_KEPT_OPEN of them. Thread-safe."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._fds: dict[str, int] = {"": os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)}
        self._lock = threading.Lock()

    def where(self, relative: str) -> str:
        """The path messages name: under the root as configured."""
        return f"{self.root}/{relative}" if relative else self.root

    @contextlib.contextmanager
    def folder(self, relative: str, create: bool = True) -> Iterator[int]:
        """A descriptor of the folder at `relative` ("" for the root), valid within the block; made when missing and
        `create`, else FileNotFoundError; FetchError when a link or a file is in the way."""
        fd = self._fds.get(relative)
        if fd is not None:
            yield fd
            return
        fd, kept = self._open(relative, create)
        try:
            yield fd
        finally:
            if not kept:
                os.close(fd)

    def check_file_entry(self, folder_fd: int, relative: str) -> None:
        """Refuse (FetchError) a link or a folder at `relative` (in `folder_fd`), where a file is to be renamed: a
        rename would replace the link, or fail on the folder. A regular file there (the rename replaces it) passes."""
        try:
            st = os.stat(os.path.basename(relative), dir_fd=folder_fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(st.st_mode):
            raise refuse_link(self.where(relative))
        if stat.S_ISDIR(st.st_mode):
            raise FetchError(f"cannot write {self.where(relative)!r}: a folder of that name is in the way")

    def remove_unlisted(self, top_glob: str, keep: set[str]) -> list[str]:
        """Delete the files under the top-level folders matching `top_glob` that `keep` (relative paths) does not
        list, and the folders left empty; returns the paths removed. Walked from descriptors (`os.fwalk`), so a link
        found there is removed as a name, never followed, and a folder swapped for a link mid-walk is not entered."""
        removed: list[str] = []
        root_fd = self._fds[""]
        with os.scandir(root_fd) as entries:
            tops = sorted(
                e.name for e in entries if e.is_dir(follow_symlinks=False) and fnmatch.fnmatchcase(e.name, top_glob)
            )
        for top in tops:
            with self.folder(top, create=False) as top_fd:
                for parent, folders, files, parent_fd in os.fwalk(".", topdown=False, dir_fd=top_fd):
                    for name in files:
                        relative = posixpath.normpath(f"{top}/{parent}/{name}")
                        if relative not in keep:
                            os.unlink(name, dir_fd=parent_fd)
                            removed.append(relative)
                    for name in folders:
                        self._forget(posixpath.normpath(f"{top}/{parent}/{name}"))
                        with contextlib.suppress(OSError):  # not empty: it holds files of the plan (or is a link)
                            os.rmdir(name, dir_fd=parent_fd)
            self._forget(top)
            with contextlib.suppress(OSError):
                os.rmdir(top, dir_fd=root_fd)
        return removed

    def remove_files(self, paths: Iterable[str]) -> int:
        """Delete the files at `paths` (relative; a link there as a name, never followed; a folder there is left)
        and the folders they leave empty; returns how many files were removed."""
        removed = 0
        for relative in paths:
            if relative.startswith("/") or any(part in ("", ".", "..") for part in relative.split("/")):
                continue  # not a path under the root: never one this tree removes
            parent, _, name = relative.rpartition("/")
            try:
                with self.folder(parent, create=False) as parent_fd:
                    os.unlink(name, dir_fd=parent_fd)
                removed += 1
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
                continue  # gone already, or not a file: not ours to remove
            while parent:
                with contextlib.suppress(OSError):  # not empty: it holds other files
                    self.remove_empty(parent)
                parent = parent.rpartition("/")[0]
        return removed

    def remove_empty(self, relative: str) -> None:
        """Remove the folder at `relative` if it is empty (else OSError), its kept descriptor closed first."""
        parent, _, name = relative.rpartition("/")
        self._forget(relative)
        with self.folder(parent, create=False) as parent_fd:
            os.rmdir(name, dir_fd=parent_fd)

    def _forget(self, relative: str) -> None:
        """Close the kept descriptor of a folder about to be removed, so that no later write lands in it."""
        with self._lock:
            fd = self._fds.pop(relative, None)
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        with self._lock:
            fds, self._fds = list(self._fds.values()), {}
        for fd in fds:
            os.close(fd)

    def _open(self, relative: str, create: bool) -> tuple[int, bool]:
        """The folder's descriptor, walked from its nearest open ancestor; and whether it is kept open."""
        ancestor, names = relative, []
        while ancestor not in self._fds:
            ancestor, _, name = ancestor.rpartition("/")
            names.append(name)
        fd, kept, path = self._fds[ancestor], True, ancestor
        for name in reversed(names):
            path = f"{path}/{name}" if path else name
            try:
                child = self._open_child(fd, name, path, create)
            finally:
                if not kept:
                    os.close(fd)
            fd, kept = self._keep(path, child)
        return fd, kept

    def _keep(self, path: str, fd: int) -> tuple[int, bool]:
        """Keep `fd` open as the folder `path`'s while there is room; another thread's, if it got there first."""
        with self._lock:
            known = self._fds.get(path)
            if known is not None:
                os.close(fd)
                return known, True
            if len(self._fds) < MOST_KEPT_OPEN:
                self._fds[path] = fd
                return fd, True
        return fd, False

    def _open_child(self, parent_fd: int, name: str, path: str, create: bool) -> int:
        try:
            return os.open(name, _FOLDER_FLAGS, dir_fd=parent_fd)
        except FileNotFoundError:
            if not create:
                raise
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise self._in_the_way(parent_fd, name, path) from None
            raise
        with contextlib.suppress(FileExistsError):  # another thread may be making it too
            os.mkdir(name, 0o777, dir_fd=parent_fd)
        return self._open_child(parent_fd, name, path, create=False)

    def _in_the_way(self, parent_fd: int, name: str, path: str) -> FetchError:
        if stat.S_ISLNK(os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode):
            return refuse_link(self.where(path))
        return FetchError(f"cannot create folder {self.where(path)!r}: a file of that name is in the way")
