"""The `.initializer/` folder under OUTPUT_PATH: temporaries, the journal of finished files, the manifest.

It lives on the destination filesystem so that every rename into place is atomic. Each file is journaled as it
reaches its final path; durability is claimed in checkpoints: one syncfs of the destination's filesystem (not a
sync per file), then a marker saying which journal lines it covers. A re-run trusts the lines a marker covers,
and the others only on the machine and boot that wrote them (whose page cache still holds their bytes): after a
node crash, files finished since the last checkpoint are fetched again rather than trusted with possibly
unwritten blocks. The manifest is written last, after a final checkpoint, atomically, and its presence alone
means "complete".
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import hashlib
import itertools
import json
import os
import shutil
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from initializers.errors import ConfigError, FetchError
from initializers.nofollow import Tree, refuse_link
from initializers.plan import STATE_DIR

MANIFEST = "manifest.json"
WITHDRAWN_MANIFEST = "manifest.withdrawn.json"
JOURNAL = "journal.jsonl"
LOCK = "lock"
_BOOT = "boot"  # a journal's header: the boot that wrote it
_SYNCED = "synced"  # a checkpoint's marker: how many of the journal's bytes describe synced files
_BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
_BOOKKEEPING = (b'{"' + _BOOT.encode() + b'"', b'{"' + _SYNCED.encode() + b'"')  # how the header and markers begin
SHARDS = "shards"
_LOCK_POLL_SECONDS = 0.5
_LOCK_REPORT_SECONDS = 30.0  # how often a run waiting for another one says so
#: How state files and temporaries are opened: never through a link planted at their name.
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


class DoneFile(NamedTuple):
    """A file at its final path, as we left it: valid while its size and mtime are unchanged (a tuple, as
    `RemoteFile` is: one is made per file a re-run finds)."""

    path: str
    size: int
    version: str
    mtime_ns: int
    #: The checksum its bytes were verified against when fetched (None: none existed, only the size was checked).
    algorithm: str | None = None
    hexdigest: str | None = None

    def to_json(self) -> str:
        record: dict[str, object] = {"path": self.path, "size": self.size, "version": self.version}
        record["mtime_ns"] = self.mtime_ns
        if self.algorithm is not None:
            record.update(algorithm=self.algorithm, hexdigest=self.hexdigest)
        return json.dumps(record)


class StateDir:
    """`shard`: (index, count) when this run fetches one share of a plan split over several initializers; its
    temporaries, journal and lock are then its own (`.initializer/shards/<index>-of-<count>/`), the manifest is
    the set's."""

    def __init__(self, output_path: str, shard: tuple[int, int] | None = None) -> None:
        self.root = Path(output_path).absolute()
        self.shared = self.root / STATE_DIR
        self.shard = shard
        self.dir = self._share_path(shard[0]) if shard else self.shared
        self.tmp = self.dir / "tmp"
        self._tmp_relative = self._relative(self.tmp)  # used per file: worked out once
        #: A folder a source may keep its own bookkeeping in during a run; removed at the end of every run.
        self.staging = self.dir / "staging"
        self._tree: Tree | None = None
        self._journal_fd = -1
        self._lock_fds: list[int] = []
        self._journal_lock = threading.Lock()  # appends, and a checkpoint's reading of how far they reach
        self._unsynced = False  # journal lines written since the last checkpoint

    @contextlib.contextmanager
    def session(self, waiting: Callable[[str, float], None]) -> Iterator[None]:
        """The destination, made ready and locked for one run; on the way out its temporaries go (the source's
        staging too: huggingface_hub's HF_HOME), then the lock.

        While another run holds the lock, this one waits (`waiting(holder, seconds)` is called now and then);
        stopping it then (a signal, TIMEOUT) leaves everything as it is: the other run owns those temporaries.
        """
        try:
            self._prepare(waiting)
        except BaseException:
            self.close_folders()
            raise
        try:
            yield
        finally:
            self.close_journal()
            self.clear_temps_quietly()
            shutil.rmtree(self.staging, ignore_errors=True)  # never follows a link (none is left there: `_prepare`)
            self._release()
            self.close_folders()

    def _prepare(self, waiting: Callable[[str, float], None]) -> None:
        """Create the folders, prove they are writable and take the lock, before any transfer starts; a link
        where one of them goes is refused (`nofollow`)."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            with self._folder(self.staging):
                pass
            self._new_file(self.tmp / f".probe-{os.getpid()}", lambda fd: None)
            self._unlink(self.tmp / f".probe-{os.getpid()}")
        except OSError as exc:
            raise FetchError(f"OUTPUT_PATH {str(self.root)!r} is not writable: {exc.strerror or exc}") from None
        self._lock(waiting)

    # -- files under OUTPUT_PATH, never through a link --------------------------------------------------

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

    def _folder(self, path: Path) -> contextlib.AbstractContextManager[int]:
        """A descriptor of the folder `path` under OUTPUT_PATH, made if missing."""
        return self.folders.folder(self._relative(path))

    def _relative(self, path: Path) -> str:
        """`path` relative to OUTPUT_PATH, as `Tree` names folders ("" for OUTPUT_PATH itself)."""
        relative = path.relative_to(self.root).as_posix()
        return "" if relative == "." else relative

    def _new_file(self, path: Path, write: Callable[[int], None]) -> None:
        """Make `path` afresh (whatever was at its name, a link included, is unlinked first, never followed), pass
        its descriptor to `write`, close it."""
        with self._folder(path.parent) as folder:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path.name, dir_fd=folder)
            fd = os.open(path.name, _NEW_FILE | os.O_EXCL, 0o666, dir_fd=folder)
            try:
                write(fd)
            finally:
                os.close(fd)

    def _unlink(self, path: Path) -> None:
        with self._folder(path.parent) as folder, contextlib.suppress(FileNotFoundError):
            os.unlink(path.name, dir_fd=folder)

    def _replace(self, source: Path, destination: Path) -> None:
        """Rename within OUTPUT_PATH, from and to folders opened without following links."""
        with self._folder(source.parent) as source_folder, self._folder(destination.parent) as destination_folder:
            os.replace(source.name, destination.name, src_dir_fd=source_folder, dst_dir_fd=destination_folder)

    def _lock(self, waiting: Callable[[str, float], None]) -> None:
        """One run at a time per destination; a run that finds another one writing waits for it to end, then
        carries on as any run does: up to date if it completed, finishing the job if it died. The shares of a
        split plan run together (each holds the destination's lock shared, and its share's exclusively); a second
        run of the same share is refused.

        POSIX record locks (fcntl), not flock: on NFS the kernel takes them through the NFS lock protocol (NFSv4's
        own, or NLM), so they hold across nodes; a holder that dies releases them with its process, or on NFS when
        its node's lease expires (90 s by default). A lock file names its exclusive holder (pid@host).
        """
        try:
            self._lock_fds.append(self._wait_for_lock(self.shared / LOCK, self.shard is None, waiting))
            if self.shard is not None:
                fd = self._open_lock(self.dir / LOCK)
                if not _try_lock(fd, exclusive=True):
                    holder = _holder(fd)
                    os.close(fd)
                    raise ConfigError(
                        f"SHARD_INDEX {self.shard[0]} (of {self.shard[1]}) is already being fetched into OUTPUT_PATH "
                        f"{str(self.root)!r} by {holder}: every initializer of a split plan needs its own SHARD_INDEX"
                    )
                _name_holder(fd)
        except BaseException:
            self._release()
            raise

    def _wait_for_lock(self, path: Path, exclusive: bool, waiting: Callable[[str, float], None]) -> int:
        fd = self._open_lock(path)
        started = next_report = time.monotonic()
        try:
            while not _try_lock(fd, exclusive):
                if time.monotonic() >= next_report:
                    waiting(_holder(fd), time.monotonic() - started)
                    next_report += _LOCK_REPORT_SECONDS
                time.sleep(_LOCK_POLL_SECONDS)
            if exclusive:
                _name_holder(fd)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _open_lock(self, path: Path) -> int:
        """A lock file, opened where it is (another run may hold it); a link at its name is refused."""
        with self._folder(path.parent) as folder:
            try:
                return os.open(path.name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=folder)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise refuse_link(str(path)) from None
                raise

    def _release(self) -> None:
        while self._lock_fds:
            os.close(self._lock_fds.pop())  # closing the descriptor releases the lock

    # -- the shares of a split plan ---------------------------------------------------------------------

    def record_share(self, record: dict[str, object]) -> None:
        """Say that this run's share is complete (on stable storage), and of which plan."""
        assert self.shard is not None
        self.write_atomically(self._share_path(self.shard[0], ".json"), [json.dumps(record).encode()])

    def share_records(self) -> dict[int, dict[str, object]]:
        """The records of this split's complete shares, by share number."""
        assert self.shard is not None
        records = {}
        for index in range(self.shard[1]):
            with contextlib.suppress(OSError, ValueError):
                records[index] = json.loads(self._share_path(index, ".json").read_text())
        return records

    def remove_share_records(self) -> None:
        """The set is complete and its manifest written: the next round of shares starts from nothing."""
        assert self.shard is not None
        for index in range(self.shard[1]):
            self._unlink(self._share_path(index, ".json"))

    def share_journal(self, index: int) -> Iterator[DoneFile]:
        """What share `index` of this split has claimed as finished."""
        return _journal_entries(self._share_path(index) / JOURNAL)

    def _share_path(self, index: int, suffix: str = "") -> Path:
        """Share `index` of this split: its folder, or with `suffix` its record beside it."""
        assert self.shard is not None
        return self.shared / SHARDS / f"{index}-of-{self.shard[1]}{suffix}"

    @contextlib.contextmanager
    def completing_set(self) -> Iterator[None]:
        """Shares finishing at once take turns at checking whether the set is complete and writing its manifest."""
        fd = self._open_lock(self.shared / SHARDS / "set.lock")
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def free_space(self) -> int:
        return shutil.disk_usage(self.root).free

    def check_free_space(self, needed: int, free: int) -> None:
        """Refuse a download that cannot fit (`needed` bytes in all, `free` before it started), before writing the
        file that would not fit."""
        if needed > free:
            raise FetchError(
                f"not enough space in OUTPUT_PATH {str(self.root)!r}: the download needs at least {needed} bytes, "
                f"{free} were free when it started"
            )

    # Plain strings, not Path objects: these two run for every file, and pathlib costs more than the syscalls.
    def final_path(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def temp_path(self, relative: str) -> str:
        """A stable temporary name per destination path, on the destination's filesystem."""
        return f"{self.tmp}/{hashlib.sha256(relative.encode()).hexdigest()[:32]}.part"

    def clear_temps(self) -> None:
        """Remove leftover temporaries (links among them: the links, never what they point to)."""
        with self._folder(self.tmp) as folder:
            for name in os.listdir(folder):
                if name.endswith(".part"):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(name, dir_fd=folder)

    def open_temp(self, temp: str, size: int | None) -> int:
        """Open (truncated) the temporary `temp` (a `temp_path`) for writing, sized `size` when given; a link
        planted at its name is not followed."""
        with self.folders.folder(self._tmp_relative) as folder:
            fd = os.open(os.path.basename(temp), _NEW_FILE | os.O_TRUNC, 0o666, dir_fd=folder)
        if size is not None:
            os.ftruncate(fd, size)
        return fd

    def remove_temp(self, temp: str) -> None:
        self._unlink(Path(temp))

    def place(self, temp: str, relative: str) -> None:
        """Rename the temporary `temp` to the file `relative` under OUTPUT_PATH, making its folders; a link or a
        file in the way of a folder, or a link or a folder at the file's own name, is refused (FetchError)."""
        folder, _, name = relative.rpartition("/")
        with self.folders.folder(self._tmp_relative) as temps, self.folders.folder(folder) as destination:
            self.folders.check_file_entry(destination, relative)
            os.replace(os.path.basename(temp), name, src_dir_fd=temps, dst_dir_fd=destination)

    def clear_temps_quietly(self) -> None:
        """Best effort on the way out: a failure here must not mask the error that ended the run."""
        with contextlib.suppress(OSError):
            self.clear_temps()

    def remove_stale(self, folder_glob: str, keep: set[str]) -> list[str]:
        """Delete files under the top-level folders matching `folder_glob` that `keep` (relative paths) does not
        list, and folders left empty, so that a folder a reader consumes whole holds exactly the new content."""
        removed = []
        for folder in sorted(self.root.glob(folder_glob)):
            if folder.is_symlink() or not folder.is_dir():
                continue
            for parent, dirs, files in os.walk(folder, topdown=False):
                for name in files:
                    path = os.path.join(parent, name)
                    if os.path.relpath(path, self.root) not in keep:
                        os.unlink(path)
                        removed.append(os.path.relpath(path, self.root))
                for name in dirs:
                    with contextlib.suppress(OSError):  # not empty: it holds files of the plan
                        os.rmdir(os.path.join(parent, name))
            with contextlib.suppress(OSError):
                folder.rmdir()
        return removed

    # -- the manifest ---------------------------------------------------------------------------------

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
            self._replace(self.manifest_path, self.withdrawn_manifest_path)
            self._fsync_folder(self.shared)

    def write_manifest(self, lines: Iterable[bytes]) -> None:
        self.write_atomically(self.manifest_path, lines)
        self._unlink(self.withdrawn_manifest_path)

    def write_atomically(self, path: Path, chunks: Iterable[bytes]) -> None:
        """`path` (a state file) replaced whole by `chunks`, on stable storage, through a temporary made afresh."""

        def write(fd: int) -> None:
            with open(fd, "wb", closefd=False) as handle:
                handle.writelines(chunks)
            os.fsync(fd)

        temp = self.tmp / (path.name + ".tmp")
        self._new_file(temp, write)
        self._replace(temp, path)
        self._fsync_folder(path.parent)

    def _fsync_folder(self, path: Path) -> None:
        with self._folder(path) as folder:
            os.fsync(folder)

    # -- the journal ----------------------------------------------------------------------------------

    @property
    def journal_path(self) -> Path:
        return self.dir / JOURNAL

    def journal_files(self) -> Iterator[DoneFile]:
        """Files the journal records as finished, oldest first; lines a crash cut short are skipped."""
        return _journal_entries(self.journal_path)

    def restart_journal(self, finished: Iterable[DoneFile]) -> None:
        """Start a fresh journal holding `finished` (what the old one may be trusted for), written and synced whole,
        under a header naming this boot."""
        header = json.dumps({_BOOT: boot_id()}).encode() + b"\n"
        self.write_atomically(
            self.journal_path, itertools.chain([header], (d.to_json().encode() + b"\n" for d in finished))
        )
        with self._folder(self.dir) as folder:
            self._journal_fd = os.open(JOURNAL, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
        with self._journal_lock:
            os.write(self._journal_fd, self._synced_marker())

    def record_done(self, done: DoneFile) -> None:
        """Journal a file that has reached its final path. One O_APPEND write, so a crash leaves whole lines or a
        cut-off last line, which `journal_files` skips."""
        line = (done.to_json() + "\n").encode()
        with self._journal_lock:
            os.write(self._journal_fd, line)
            self._unsynced = True

    def checkpoint(self) -> None:
        """Flush the destination's filesystem, then mark the journal lines written before the flush began as
        standing for bytes on stable storage."""
        with self._journal_lock:
            if not self._unsynced:
                return
            self._unsynced = False
            marker = self._synced_marker()
        sync_filesystem(self.root)
        with self._journal_lock:
            os.write(self._journal_fd, marker)

    def _synced_marker(self) -> bytes:
        """A line saying that the journal's first `n` bytes (those written so far) describe synced files."""
        return json.dumps({_SYNCED: os.fstat(self._journal_fd).st_size}).encode() + b"\n"

    def remove_journal(self) -> None:
        self.close_journal()
        self._unlink(self.journal_path)

    def close_journal(self) -> None:
        if self._journal_fd >= 0:
            os.close(self._journal_fd)
            self._journal_fd = -1

    def unchanged(self, done: DoneFile) -> bool:
        """The file is at its final path as it was left: same size and mtime."""
        try:
            st = os.stat(self.final_path(done.path), follow_symlinks=False)
        except OSError:
            return False
        return stat.S_ISREG(st.st_mode) and st.st_size == done.size and st.st_mtime_ns == done.mtime_ns


def _journal_entries(path: Path) -> Iterator[DoneFile]:
    """The files a journal records, those a checkpoint covers and, on the boot that wrote it, the others too."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed once the lines are read
    except OSError:
        return
    with handle:
        synced, same_boot, this_boot = 0, False, boot_id()
        for line in handle:  # first pass: how far the last checkpoint reaches, and whose journal this is
            if line.startswith(_BOOKKEEPING):  # file lines are parsed once, in the second pass
                with contextlib.suppress(ValueError, AttributeError):
                    record = json.loads(line)
                    synced = max(synced, record.get(_SYNCED, 0))
                    same_boot = same_boot or record.get(_BOOT) == this_boot
        handle.seek(0)
        offset = 0
        for line in handle:
            if not same_boot and offset >= synced:
                return
            offset += len(line)
            with contextlib.suppress(ValueError, TypeError):
                yield DoneFile(**json.loads(line))


def boot_id() -> str:
    """This machine's current boot (Linux's random boot id): page-cache contents survive a process, not a boot."""
    try:
        return Path(_BOOT_ID_PATH).read_text().strip()
    except OSError:
        return ""


def _try_lock(fd: int, exclusive: bool) -> bool:
    try:
        fcntl.lockf(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EAGAIN):  # held by another process
            return False
        raise
    return True


def _holder(fd: int) -> str:
    return os.pread(fd, 256, 0).decode(errors="replace").strip() or "unknown"


def _name_holder(fd: int) -> None:
    """Write pid@host over the previous holder's name, then cut what is left of it: never empty for a reader."""
    name = f"{os.getpid()}@{socket.gethostname()}".encode()
    os.pwrite(fd, name, 0)
    os.ftruncate(fd, len(name))


def sync_filesystem(path: Path) -> None:
    """syncfs(2): everything written to the filesystem holding `path`, data and names, onto stable storage."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _call_libc("syncfs", fd, path=str(path))
    finally:
        os.close(fd)


def start_writeback(fd: int, offset: int, length: int) -> None:
    """sync_file_range(2) with SYNC_FILE_RANGE_WRITE: start writing these bytes back to disk, without waiting, so
    that the checkpoint's syncfs finds little left to write (a no-op where nothing is written back, as on tmpfs)."""
    _call_libc("sync_file_range", fd, ctypes.c_int64(offset), ctypes.c_int64(length), _SYNC_FILE_RANGE_WRITE)


def _call_libc(name: str, *args: object, path: str | None = None) -> None:
    """A libc call Python's `os` lacks; its failure as the OSError `os` would raise."""
    if getattr(_libc, name)(*args) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{name}: {os.strerror(error)}", path)


_libc = ctypes.CDLL(None, use_errno=True)
_SYNC_FILE_RANGE_WRITE = 2
