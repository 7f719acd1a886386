"""The `.initializer/` folder under OUTPUT_PATH: temporaries, the journal of finished files, the manifest.

It lives on the destination filesystem so that every rename into place is atomic. Durability is claimed in
checkpoints: files reach their final paths as they finish, and a checkpoint flushes the destination's
filesystem to stable storage (one syncfs, not a sync per file) and only then appends them to the journal. So a
journal line means its file's bytes survive a node crash, and a re-run after one skips exactly those; the
manifest is written last, after a final checkpoint, atomically, and its presence alone means "complete".
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import hashlib
import json
import os
import shutil
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from initializers.errors import FetchError
from initializers.plan import STATE_DIR

MANIFEST = "manifest.json"
JOURNAL = "journal.jsonl"
LOCK = "lock"
_LOCK_POLL_SECONDS = 0.5
_LOCK_REPORT_SECONDS = 30.0  # how often a run waiting for another one says so


@dataclass(frozen=True)
class DoneFile:
    """A file at its final path, as we left it: valid while its size and mtime are unchanged."""

    path: str
    size: int
    version: str
    mtime_ns: int

    def to_json(self) -> str:
        return json.dumps({"path": self.path, "size": self.size, "version": self.version, "mtime_ns": self.mtime_ns})


class StateDir:
    def __init__(self, output_path: str) -> None:
        self.root = Path(output_path).absolute()
        self.dir = self.root / STATE_DIR
        self.tmp = self.dir / "tmp"
        #: A folder a source may keep its own bookkeeping in during a run; removed at the end of every run.
        self.staging = self.dir / "staging"
        self._journal_fd = -1
        self._lock_fd = -1
        self._unclaimed: list[str] = []  # journal lines of files at their final path, awaiting a checkpoint
        self._unclaimed_lock = threading.Lock()

    @contextlib.contextmanager
    def session(self, waiting: Callable[[str, float], None]) -> Iterator[None]:
        """The destination, made ready and locked for one run; on the way out its temporaries go (the source's
        staging too: huggingface_hub's HF_HOME), then the lock.

        While another run holds the lock, this one waits (`waiting(holder, seconds)` is called now and then);
        stopping it then (a signal, TIMEOUT) leaves everything as it is: the other run owns those temporaries.
        """
        self._prepare(waiting)
        try:
            yield
        finally:
            self.close_journal()
            self.clear_temps_quietly()
            shutil.rmtree(self.staging, ignore_errors=True)
            self._release()

    def _prepare(self, waiting: Callable[[str, float], None]) -> None:
        """Create the folders, prove they are writable and take the lock, before any transfer starts."""
        try:
            self.tmp.mkdir(parents=True, exist_ok=True)
            probe = self.tmp / f".probe-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise FetchError(f"OUTPUT_PATH {str(self.root)!r} is not writable: {exc.strerror or exc}") from None
        self._lock(waiting)

    def _lock(self, waiting: Callable[[str, float], None]) -> None:
        """One run at a time per destination; a run that finds another one writing waits for it to end, then
        carries on as any run does: up to date if it completed, finishing the job if it died.

        A POSIX record lock (fcntl), not flock: on NFS the kernel takes it through the NFS lock protocol (NFSv4's
        own, or NLM), so it holds across nodes; a holder that dies releases it with its process, or on NFS when its
        node's lease expires (90 s by default). The file names the holder (pid@host), for the messages.
        """
        fd = os.open(self.dir / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        started = time.monotonic()
        next_report = started
        try:
            while not _try_lock(fd):
                if time.monotonic() >= next_report:
                    holder = os.pread(fd, 256, 0).decode(errors="replace").strip() or "unknown"
                    waiting(holder, time.monotonic() - started)
                    next_report += _LOCK_REPORT_SECONDS
                time.sleep(_LOCK_POLL_SECONDS)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}@{socket.gethostname()}".encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        self._lock_fd = fd

    def _release(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # closing the descriptor releases the lock
            self._lock_fd = -1

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
        for leftover in self.tmp.glob("*.part"):
            leftover.unlink(missing_ok=True)

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
        return self.dir / MANIFEST

    def remove_manifest(self) -> None:
        """Withdraw the completion claim before changing anything it describes."""
        self.manifest_path.unlink(missing_ok=True)
        _fsync_dir(self.dir)

    def write_manifest(self, lines: Iterable[bytes]) -> None:
        self.write_atomically(self.manifest_path, lines)

    def write_atomically(self, path: Path, chunks: Iterable[bytes]) -> None:
        temp = self.tmp / (path.name + ".tmp")
        with open(temp, "wb") as handle:
            handle.writelines(chunks)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
        _fsync_dir(path.parent)

    # -- the journal ----------------------------------------------------------------------------------

    @property
    def journal_path(self) -> Path:
        return self.dir / JOURNAL

    def journal_files(self) -> Iterator[DoneFile]:
        """Files the journal records as finished, oldest first; lines a crash cut short are skipped."""
        try:
            handle = open(self.journal_path, encoding="utf-8")  # noqa: SIM115 - closed once the lines are read
        except OSError:
            return
        with handle:
            for line in handle:
                with contextlib.suppress(ValueError, TypeError):
                    yield DoneFile(**json.loads(line))

    def restart_journal(self, finished: Iterable[DoneFile]) -> None:
        """Carry what earlier runs finished into a fresh journal, so the manifest can be withdrawn safely."""
        self.write_atomically(self.journal_path, (d.to_json().encode() + b"\n" for d in finished))
        self._journal_fd = os.open(self.journal_path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)

    def record_done(self, done: DoneFile) -> None:
        """Note a file that has reached its final path; the next checkpoint claims it."""
        line = done.to_json() + "\n"
        with self._unclaimed_lock:
            self._unclaimed.append(line)

    def checkpoint(self) -> None:
        """Flush the destination's filesystem, then journal the files noted before the flush began: each line
        then stands for bytes on stable storage. One O_APPEND write, so a crash leaves whole lines or a cut-off
        last line, which `journal_files` skips."""
        with self._unclaimed_lock:
            lines, self._unclaimed = self._unclaimed, []
        if lines:
            sync_filesystem(self.root)
            os.write(self._journal_fd, "".join(lines).encode())

    def remove_journal(self) -> None:
        self.close_journal()
        self.journal_path.unlink(missing_ok=True)

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


def _try_lock(fd: int) -> bool:
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EAGAIN):  # held by another process
            return False
        raise
    return True


def sync_filesystem(path: Path) -> None:
    """syncfs(2): everything written to the filesystem holding `path`, data and names, onto stable storage."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if _libc.syncfs(fd) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"syncfs: {os.strerror(error)}", str(path))
    finally:
        os.close(fd)


_libc = ctypes.CDLL(None, use_errno=True)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
