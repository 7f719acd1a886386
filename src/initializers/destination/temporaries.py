"""Temporaries: each file is written under a stable temporary name on the destination's filesystem, then renamed
to its final path, so that a path under OUTPUT_PATH only ever holds a whole file. A ranged file's temporary has a
record of what landed (`partials`): a run that ends before the file does keeps both, and the next one resumes it."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import threading
from pathlib import Path

from initializers.common.remote_file import RemoteFile
from initializers.destination.output_path import NEW_FILE, Destination
from initializers.destination.partials import RECORD_SUFFIX, Partial, PartRecord, header, read_partial
from initializers.destination.stable_storage import sync_filesystem

#: Temporaries are read back as well as written: ranges are hashed from them as they join up.
_TEMPORARY = NEW_FILE & ~os.O_WRONLY | os.O_RDWR
_RECORD = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
_SUFFIX = ".part"


class Temporaries:
    """The temporaries in `destination.tmp` (this run's own: a share of a split plan has its folder)."""

    def __init__(self, destination: Destination) -> None:
        self._destination = destination
        self._folder = destination.relative(destination.tmp)  # used per file: worked out once
        self._partials: dict[str, Partial] = {}  # temporary path -> what it holds, as `keep_partials` found it
        self._records: list[PartRecord] = []  # the records being written, guarded by `_records_lock`
        self._records_lock = threading.Lock()

    # A plain string, not a Path: this runs for every file, and pathlib costs more than the syscalls.
    def path(self, relative: str) -> str:
        """A stable temporary name per destination path, on the destination's filesystem."""
        return self._tmp_path(f"{hashlib.sha256(relative.encode()).hexdigest()[:32]}{_SUFFIX}")

    def _tmp_path(self, name: str) -> str:
        return f"{self._destination.tmp}/{name}"

    def open(self, temp: str, size: int | None, keep: bool = False) -> int:
        """Open the temporary `temp` (a `path`) to be written and read back, truncated unless `keep` (a partial
        resumed), sized `size` when given; a link planted at its name is not followed."""
        with self._destination.folders.folder(self._folder) as folder:
            fd = os.open(os.path.basename(temp), _TEMPORARY | (0 if keep else os.O_TRUNC), 0o666, dir_fd=folder)
        if size is not None:
            os.ftruncate(fd, size)
        return fd

    def record(self, temp: str, file: RemoteFile, keep: bool) -> PartRecord:
        """The record of what lands in `temp`, part of `file`: the one it has, when `keep`, else one begun afresh."""
        with self._destination.folders.folder(self._folder) as folder:
            fd = os.open(os.path.basename(temp) + RECORD_SUFFIX, _RECORD | (0 if keep else os.O_TRUNC), 0o666,
                         dir_fd=folder)  # fmt: skip
        if not keep:
            os.write(fd, header(file))
        record = PartRecord(fd)
        with self._records_lock:
            self._records = [kept for kept in self._records if kept.is_open]
            self._records.append(record)
        return record

    def checkpoint(self) -> None:
        """Put what the records say landed on stable storage (one syncfs for all), and mark it so in each."""
        with self._records_lock:
            pending = [(record, length) for record in self._records if (length := record.unsynced()) is not None]
        if pending:
            sync_filesystem(self._destination.root)
            for record, length in pending:
                record.synced(length)

    def partial(self, temp: str) -> Partial | None:
        """What the temporary `temp` holds from an earlier run, once (`keep_partials`); None: nothing."""
        return self._partials.pop(temp, None)

    def keep_partials(self) -> list[Partial]:
        """At the start of a run: keep the temporaries whose record says some bytes landed, for their files to resume;
        remove every other temporary and record (a link among them as a link, never what it points to)."""
        self._partials.clear()
        with self._destination.folder(self._destination.tmp) as folder:
            names = os.listdir(folder)
            for name in names:
                if name.endswith(_SUFFIX) and (partial := _kept(name, folder)) is not None:
                    self._partials[self._tmp_path(name)] = partial
            for name in names:  # the records of temporaries not kept
                if (
                    name.endswith(RECORD_SUFFIX)
                    and self._partials.get(self._tmp_path(name.removesuffix(RECORD_SUFFIX))) is None
                ):
                    _unlink(name, folder)
        return list(self._partials.values())

    def remove(self, temp: str) -> None:
        self._destination.unlink(Path(temp))
        self._destination.unlink(Path(temp + RECORD_SUFFIX))

    def place(self, temp: str, relative: str, recorded: bool = False) -> None:
        """Rename `temp` to `relative` under OUTPUT_PATH, making its folders, dropping its record if `recorded`;
        a link or file in the way of a folder, or a link or folder at the file's name, is refused (FetchError)."""
        folders = self._destination.folders
        folder, _, name = relative.rpartition("/")
        with folders.folder(self._folder) as temps, folders.folder(folder) as destination:
            folders.check_file_entry(destination, relative)
            os.replace(os.path.basename(temp), name, src_dir_fd=temps, dst_dir_fd=destination)
            if recorded:
                _unlink(os.path.basename(temp) + RECORD_SUFFIX, temps)

    def clear(self) -> None:
        """Remove every temporary and record (links among them: the links, never what they point to)."""
        with self._destination.folder(self._destination.tmp) as folder:
            for name in os.listdir(folder):
                if name.endswith((_SUFFIX, RECORD_SUFFIX)):
                    _unlink(name, folder)


def _kept(name: str, folder: int) -> Partial | None:
    """The partial in temporary `name`: a regular file of its record's size, bytes landed; else None, it removed."""
    partial = None
    with contextlib.suppress(OSError):
        st = os.stat(name, dir_fd=folder, follow_symlinks=False)
        fd = os.open(name + RECORD_SUFFIX, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
        with open(fd, "rb") as handle:
            partial = read_partial(handle.read())
        if partial is not None and not (stat.S_ISREG(st.st_mode) and st.st_size == partial.size and partial.kept):
            partial = None
    if partial is None:
        _unlink(name, folder)
    return partial


def _unlink(name: str, folder: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=folder)
