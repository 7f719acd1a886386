"""Bytes spliced from a pipe land at the part's offset, whatever the target can take (pure engine logic)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
from pathlib import Path

import pytest

from initializers.checksums import Checksum
from initializers.engine import Cancelled, OpenFile, _PartSink
from initializers.plan import RemoteFile
from initializers.progress import Progress

BODY = os.urandom(300_000)  # more than a default 64 KiB pipe holds, less than a 1 MiB one


def sink_on(path: Path, flags: int, checksum: Checksum | None = None) -> tuple[_PartSink, Progress]:
    target = OpenFile(RemoteFile("f.bin", len(BODY) + 5, "v", "f.bin", checksum), str(path), 1)
    target.fd = os.open(path, os.O_WRONLY | os.O_CREAT | flags, 0o600)
    if checksum is not None:
        target.hasher = hashlib.sha256()
    progress = Progress(None, 60.0)
    return _PartSink(target, 5, progress, threading.Event()), progress


def pipe_with(data: bytes) -> int:
    read_fd, write_fd = os.pipe()
    fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, 1 << 20)
    assert os.write(write_fd, data) == len(data)
    os.close(write_fd)
    return read_fd


@pytest.mark.parametrize(
    ("case", "flags", "checksum"),
    [
        ("spliced into the file", 0, None),
        # splice refuses an O_APPEND target with EINVAL, as a filesystem without splice support does
        ("through memory when the target cannot splice", os.O_APPEND, None),
        ("through memory when the bytes must be hashed", 0, Checksum("sha256", hashlib.sha256(BODY).hexdigest())),
    ],
)
def test_pipe_bytes_land_at_the_part_offset(case: str, flags: int, checksum: Checksum | None, tmp_path: Path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"head-")  # the part starts at offset 5
    sink, progress = sink_on(path, flags, checksum)
    read_fd = pipe_with(BODY)
    sink.write_from_pipe(read_fd, len(BODY))
    os.close(read_fd)
    assert path.read_bytes() == b"head-" + BODY, case
    assert sink.written == progress.bytes_done == len(BODY)
    if checksum is not None:
        assert sink._target.hasher.hexdigest() == checksum.hexdigest


def test_a_cancelled_run_stops_before_writing(tmp_path: Path):
    sink, _ = sink_on(tmp_path / "f.bin", 0)
    sink._cancel.set()
    with pytest.raises(Cancelled):
        sink.write_from_pipe(pipe_with(b"x"), 1)
    assert sink.written == 0
