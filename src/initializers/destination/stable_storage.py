"""Getting written bytes onto stable storage, and knowing when the page cache may stand in for them.

Python's `os` lacks syncfs(2) and sync_file_range(2); they are called through libc here. A file written but not
yet synced is still safe to trust on the boot that wrote it (the page cache holds its bytes), never after a reboot.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

_BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
_SYNC_FILE_RANGE_WRITE = 2


def boot_id() -> str:
    """This machine's current boot (Linux's random boot id): page-cache contents survive a process, not a boot."""
    try:
        return Path(_BOOT_ID_PATH).read_text().strip()
    except OSError:
        return ""


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
