"""Partial downloads kept for a re-run: beside a ranged file's temporary, a record of which of its bytes landed,
pinned to what identifies them (path, size, version), so that a run stopped or killed part-way fetches only what
is missing the next time.

The record (`<temporary>.ranges`) is JSON lines, appended: a header naming the file and the boot that wrote it, then
`[offset, length]` per interval written (a range that landed, or how far one in flight got), and now and then a
`{"synced": n}` marker after a syncfs; a re-run trusts its lines as the journal's (`stable_storage.trusted_lines`).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import threading
from collections.abc import Iterable
from typing import NamedTuple

from initializers.common.remote_file import RemoteFile
from initializers.destination.stable_storage import boot_header, synced_marker, trusted_lines

RECORD_SUFFIX = ".ranges"


class Partial(NamedTuple):
    """A kept temporary per its record: its file, and the intervals that landed ((offset, length), merged, in order)."""

    path: str
    size: int
    version: str
    kept: tuple[tuple[int, int], ...]

    @property
    def kept_bytes(self) -> int:
        return sum(length for _, length in self.kept)

    def of(self, file: RemoteFile) -> bool:
        """True when these bytes are part of `file` as the source offers it now."""
        return (self.path, self.size, self.version) == (file.path, file.size, file.version)


def header(file: RemoteFile) -> bytes:
    return boot_header(path=file.path, size=file.size, version=file.version)


class PartRecord:
    """The record of one temporary being written, appended to by its ranges' threads (one O_APPEND write a line, so
    a kill leaves whole lines or a cut-off last one, which `read_partial` skips); closed, it ignores what comes."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = threading.Lock()
        self._length = os.fstat(fd).st_size  # bytes of the record written so far
        self._synced = self._length  # of which a marker covers (a record opened afresh has its header synced or not)

    def add(self, offset: int, length: int) -> None:
        """The bytes [offset, offset + length) of the temporary are written."""
        line = b"[%d, %d]\n" % (offset, length)
        with self._lock:
            if self._fd >= 0:
                os.write(self._fd, line)
                self._length += len(line)

    def unsynced(self) -> int | None:
        """How far the record reaches, when a marker does not cover it all yet; None: nothing to sync."""
        with self._lock:
            return self._length if self._fd >= 0 and self._length > self._synced else None

    def synced(self, length: int) -> None:
        """A syncfs that began once the record reached `length` bytes has ended: mark them as on stable storage."""
        with self._lock:
            if self._fd >= 0:
                marker = synced_marker(length)
                os.write(self._fd, marker)
                self._length += len(marker)
                self._synced = length

    @property
    def is_open(self) -> bool:
        return self._fd >= 0

    def close(self) -> None:
        with self._lock:
            fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)


def read_partial(data: bytes) -> Partial | None:
    """The partial a record's `data` describes, with the intervals this boot may trust; None: not a record."""
    lines = list(trusted_lines(io.BytesIO(data)))
    try:
        head = json.loads(lines[0])
        path, size, version = head["path"], head["size"], head["version"]
    except (IndexError, ValueError, KeyError, TypeError):
        return None
    written: list[tuple[int, int]] = []
    for line in lines[1:]:
        if not line.endswith(b"\n"):  # cut off by a kill
            break
        with contextlib.suppress(ValueError, TypeError, KeyError):  # markers are no intervals
            entry = json.loads(line)
            written.append((int(entry[0]), int(entry[1])))
    return Partial(path, size, version, merged(written, size))


def merged(intervals: Iterable[tuple[int, int]], size: int) -> tuple[tuple[int, int], ...]:
    """`intervals` (offset, length) within [0, size), overlapping or adjoining ones joined, in order."""
    joined: list[list[int]] = []  # [start, end]
    for offset, length in sorted(intervals):
        start, end = max(0, offset), min(size, offset + length)
        if joined and start <= joined[-1][1]:
            joined[-1][1] = max(joined[-1][1], end)
        elif start < end:
            joined.append([start, end])
    return tuple((start, end - start) for start, end in joined)


def missing(kept: tuple[tuple[int, int], ...], size: int) -> list[tuple[int, int]]:
    """The intervals (offset, length) of [0, size) that `kept` (merged, in order) does not cover."""
    gaps, position = [], 0
    for offset, length in (*kept, (size, 0)):  # the end of the file closes the last gap
        if offset > position:
            gaps.append((position, offset - position))
        position = offset + length
    return gaps
