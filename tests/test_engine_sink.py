"""A range's bytes land at its offset in its file transfer's temporary, pass through the digest its file's verifier
hands it, and stop once the transfer or the run is cancelled; a file's objects are freed once done with (pure engine
logic)."""

from __future__ import annotations

import gc
import hashlib
import os
import threading
import weakref
import zlib
from pathlib import Path

import pytest

from devkit.driven_clock import DrivenClock
from initializers.common.errors import FetchError
from initializers.common.remote_file import Checksum, RemoteFile
from initializers.destination.state import StateDir
from initializers.sources.aws.crc32 import CRC32
from initializers.sources.s3.source import S3Source
from initializers.transfer.file_transfer import Cancelled, FileTransfer, Transfers
from initializers.transfer.part_sink import PartSink
from initializers.transfer.progress import Progress

BODY = os.urandom(300_000)
WHOLE = b"head-" + BODY  # the file the part belongs to: the part starts at offset 5
CRC = Checksum(CRC32, f"{zlib.crc32(WHOLE):08x}")
SHA256 = Checksum("sha256", hashlib.sha256(WHOLE).hexdigest())


def sink_on(
    path: Path, checksum: Checksum | None = None, cancel: threading.Event | None = None
) -> tuple[PartSink, FileTransfer, Progress]:
    """A sink for the part at offset 5 of a transfer writing `path` (`cancel`: the run's cancellation)."""
    progress = Progress()
    run = Transfers(StateDir(str(path.parent / "out")).temps, cancel or threading.Event(), _unused, _unused, S3Source)
    target = FileTransfer(RemoteFile("f.bin", len(WHOLE), "v", "f.bin", checksum), str(path), run)
    target.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    return PartSink(target, 5, len(BODY), progress, DrivenClock()), target, progress


def _unused(*_args: object) -> None:
    raise AssertionError("no file is finished here")


def write_body(sink: PartSink) -> None:
    view = memoryview(BODY)
    for start in range(0, len(BODY), 65536):
        sink.write(view[start : start + 65536])
    sink.part_complete()


def verified_from_the_parts(target: FileTransfer, path: Path) -> Checksum | None:
    """What the file checks against once its first 5 bytes land too, from the digests the parts fed (and the ranges
    hashed in order as they landed): the file is emptied first, so any reading of it at verification would fail."""
    digest = target.verifier.part_digest(5)
    if digest is not None:
        digest.update(b"head-")
    target.verifier.part_complete(0, 5, digest, target.read_back)
    target.verifier.finish_hashing(target.read_back)
    target.close()
    os.truncate(path, 0)
    return target.verifier.verify(str(path))


@pytest.mark.parametrize("checksum", [None, CRC, SHA256], ids=["unhashed", "crc32 of the range", "sha256 later"])
def test_bytes_land_at_the_part_offset(checksum: Checksum | None, tmp_path: Path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"head-")
    sink, target, progress = sink_on(path, checksum)
    write_body(sink)
    assert path.read_bytes() == WHOLE
    assert sink.written == progress.bytes_done == len(BODY)
    # A range's CRC-32 combines with the others'; other digests take the ranges in order as they land.
    assert verified_from_the_parts(target, path) == checksum


def test_a_checksum_vouched_for_before_the_body_is_digested_and_a_differing_one_refused(tmp_path: Path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"head-")
    sink, target, _ = sink_on(path)
    sink.expect(CRC)
    write_body(sink)
    with pytest.raises(FetchError, match="changed during the download"):
        sink.expect(Checksum(CRC32, "00000000"))
    assert verified_from_the_parts(target, path) == CRC


def test_a_rewound_part_is_counted_and_hashed_afresh(tmp_path: Path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"head-")
    sink, target, progress = sink_on(path, CRC)
    sink.write(memoryview(b"bytes of a reply the server then sent again"))
    sink.rewind()
    assert sink.written == progress.bytes_done == 0
    write_body(sink)
    assert path.read_bytes() == WHOLE
    assert verified_from_the_parts(target, path) == CRC


def test_a_cancelled_run_stops_before_writing(tmp_path: Path):
    cancel = threading.Event()
    sink, target, _ = sink_on(tmp_path / "f.bin", cancel=cancel)
    cancel.set()
    with pytest.raises(Cancelled):
        sink.write(memoryview(b"x"))
    assert sink.written == target.landed == 0
    assert (tmp_path / "f.bin").read_bytes() == b""


def test_a_cancelled_transfer_stops_before_writing_while_the_run_goes_on(tmp_path: Path):
    cancel = threading.Event()
    sink, target, _ = sink_on(tmp_path / "f.bin", cancel=cancel)
    sink.write(memoryview(b"x"))
    target.cancel()
    with pytest.raises(Cancelled):
        sink.write(memoryview(b"y"))
    assert not cancel.is_set(), "one file's cancellation is its own"
    assert sink.written == target.landed == 1
    assert (tmp_path / "f.bin").read_bytes() == b"\0" * 5 + b"x"


def test_a_files_objects_are_freed_when_dropped_without_the_cyclic_garbage_collector(tmp_path: Path):
    """Objects in a reference cycle wait for the cyclic collector, which runs ever more rarely as the heap grows:
    at a million small files they piled up megabytes of peak memory (bench/results.md)."""
    path = tmp_path / "f.bin"
    path.write_bytes(b"head-")
    gc.disable()
    try:
        sink, target, _ = sink_on(path, SHA256)
        write_body(sink)  # a range hashed in order: the verifier holds that digest too
        assert verified_from_the_parts(target, path) == SHA256
        dropped = weakref.ref(target)
        del sink, target
        assert dropped() is None
    finally:
        gc.enable()
