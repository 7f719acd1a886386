"""A range's bytes land at its offset in the temporary, pass through the file's hasher when it has one, and stop
once the run is cancelled (pure engine logic)."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import pytest

from initializers.checksums import Checksum
from initializers.engine import Cancelled, OpenFile, _PartSink
from initializers.plan import RemoteFile
from initializers.progress import Progress

BODY = os.urandom(300_000)
SHA256 = Checksum("sha256", hashlib.sha256(BODY).hexdigest())


def sink_on(path: Path, checksum: Checksum | None = None) -> tuple[_PartSink, Progress]:
    target = OpenFile(RemoteFile("f.bin", len(BODY) + 5, "v", "f.bin", checksum), str(path))
    target.fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    if checksum is not None:
        target.hasher = hashlib.sha256()
    progress = Progress(None, 60.0)
    return _PartSink(target, 5, progress, threading.Event()), progress


@pytest.mark.parametrize("checksum", [None, SHA256], ids=["unhashed", "hashed in stream"])
def test_bytes_land_at_the_part_offset(checksum: Checksum | None, tmp_path: Path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"head-")  # the part starts at offset 5
    sink, progress = sink_on(path, checksum)
    view = memoryview(BODY)
    for start in range(0, len(BODY), 65536):
        sink.write(view[start : start + 65536])
    assert path.read_bytes() == b"head-" + BODY
    assert sink.written == progress.bytes_done == len(BODY)
    if checksum is not None:
        assert sink._target.hasher.hexdigest() == checksum.hexdigest


def test_a_rewound_part_is_counted_and_hashed_afresh(tmp_path: Path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"head-")
    sink, progress = sink_on(path, SHA256)
    sink.write(memoryview(b"bytes of a reply the server then sent again"))
    sink.rewind()
    assert sink.written == progress.bytes_done == 0
    sink.write(memoryview(BODY))
    assert path.read_bytes() == b"head-" + BODY
    assert sink._target.hasher.hexdigest() == SHA256.hexdigest


def test_a_cancelled_run_stops_before_writing(tmp_path: Path):
    sink, _ = sink_on(tmp_path / "f.bin")
    sink._cancel.set()
    with pytest.raises(Cancelled):
        sink.write(memoryview(b"x"))
    assert sink.written == 0
    assert (tmp_path / "f.bin").read_bytes() == b""
