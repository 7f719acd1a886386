"""Getting written bytes onto stable storage (syncfs(2), sync_file_range(2): through libc, `os` lacks them), and
knowing when the page cache may stand in for them: a file written but not yet synced is safe to trust on the boot
that wrote it (the page cache holds its bytes), never after a reboot."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

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


#: A record's bookkeeping (the journal, a partial download's record): its header names the boot that wrote it, and a
#: marker says how many of its bytes describe data a syncfs put on stable storage.
_BOOT = "boot"
_SYNCED = "synced"
_BOOKKEEPING = (b'{"' + _BOOT.encode() + b'"', b'{"' + _SYNCED.encode() + b'"')  # how the header and markers begin


def boot_header(**fields: object) -> bytes:
    """A record's first line: this boot, then `fields`."""
    return json.dumps({_BOOT: boot_id(), **fields}).encode() + b"\n"


def synced_marker(length: int) -> bytes:
    """A line saying that the record's first `length` bytes describe data on stable storage."""
    return json.dumps({_SYNCED: length}).encode() + b"\n"


def trusted_lines(handle: BinaryIO) -> Iterator[bytes]:
    """The lines of a record (a seekable file) this boot may trust: all of them on the boot that wrote it (the page
    cache holds what they describe), after a reboot only those a marker covers (delayed allocation could otherwise
    pass zeros off as data). Two passes, so that a record of millions of lines is never held whole."""
    synced, same_boot, this_boot = 0, False, boot_id()
    for line in handle:  # first pass: how far the last marker reaches, and whose record this is
        if line.startswith(_BOOKKEEPING):  # the other lines are parsed once, by the caller
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
        yield line
