"""One run at a time per destination, with POSIX record locks (fcntl) on files under `.initializer/`, not flock: on
NFS the kernel takes them through the NFS lock protocol (NFSv4's own, or NLM), so they hold across nodes; a holder
that dies releases them with its process, or on NFS when its node's lease expires (90 s by default). A lock file
names its exclusive holder (pid@host), for the messages of those waiting for it or refused by it."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

from initializers.common.clock import Clock, SystemClock
from initializers.common.errors import ConfigError
from initializers.destination.output_path import Destination
from initializers.destination.tree import refuse_link

LOCK = "lock"
_LOCK_POLL_SECONDS = 0.5
_LOCK_REPORT_SECONDS = 30.0  # how often a run waiting for another one says so


class RunLock:
    """The locks of one run: the destination's (`shared`/lock) and, for a share of a split plan (`share`: index,
    count), its share's (`share_folder`/lock)."""

    def __init__(
        self,
        destination: Destination,
        shared: Path,
        share: tuple[int, int] | None,
        share_folder: Path,
        clock: Clock | None = None,
    ) -> None:
        self._destination = destination
        self._shared = shared
        self._share = share
        self._share_folder = share_folder
        self._clock = clock or SystemClock()
        self._fds: list[int] = []
        #: The lock files, the destination's first.
        self.paths = [shared / LOCK, *([share_folder / LOCK] if share is not None else [])]

    def take(self, waiting: Callable[[str, float], None]) -> None:
        """Wait for a run already writing to end (`waiting(holder, seconds)` now and then), then carry on as any run
        does: up to date if it completed, finishing the job if it died. The shares of a split plan run together (each
        holds the destination's lock shared, its share's exclusively); a second run of the same share is refused."""
        try:
            self._wait_for(self._shared / LOCK, self._share is None, waiting)
            if self._share is not None:
                fd = open_lock(self._destination, self._share_folder / LOCK)
                self._fds.append(fd)
                if not _try_lock(fd, exclusive=True):
                    raise ConfigError(
                        f"SHARD_INDEX {self._share[0]} (of {self._share[1]}) is already being fetched into OUTPUT_PATH "
                        f"{str(self._destination.root)!r} by {_holder(fd)}: every initializer of a split plan needs "
                        "its own SHARD_INDEX"
                    )
                _name_holder(fd)
        except BaseException:  # the locks opened so far closed, held or not
            self.release()
            raise

    def in_place(self) -> bool:
        """Whether each lock held is still the file at its path: a run that failed early removes the lock files it
        made while it holds them (`state`), and one that was waiting for such a file must take the lock anew."""
        try:
            return all(
                os.path.samestat(os.stat(path, follow_symlinks=False), os.fstat(fd))
                for fd, path in zip(self._fds, self.paths, strict=True)
            )
        except FileNotFoundError:
            return False

    def alone(self) -> bool:
        """Whether no other run holds the destination: a run that is no share holds it exclusively; a share asks
        for it exclusively (converting its shared lock), which it gets only when no other share holds it."""
        return self._share is None or (bool(self._fds) and _try_lock(self._fds[0], exclusive=True))

    def release(self) -> None:
        while self._fds:
            os.close(self._fds.pop())  # closing the descriptor releases the lock

    def _wait_for(self, path: Path, exclusive: bool, waiting: Callable[[str, float], None]) -> None:
        fd = open_lock(self._destination, path)
        self._fds.append(fd)
        started = next_report = self._clock.monotonic()
        while not _try_lock(fd, exclusive):
            if self._clock.monotonic() >= next_report:
                waiting(_holder(fd), self._clock.monotonic() - started)
                next_report += _LOCK_REPORT_SECONDS
            self._clock.sleep(_LOCK_POLL_SECONDS)
        if exclusive:
            _name_holder(fd)


@contextlib.contextmanager
def exclusively(destination: Destination, path: Path) -> Iterator[None]:
    """The lock file `path` held exclusively within the block, waiting for it as long as another process holds it."""
    fd = open_lock(destination, path)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def open_lock(destination: Destination, path: Path) -> int:
    """A lock file, opened where it is (another run may hold it); a link at its name is refused."""
    with destination.folder(path.parent) as folder:
        try:
            return os.open(path.name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=folder)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise refuse_link(str(path)) from None
            raise


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
