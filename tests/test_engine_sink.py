"""A range's bytes land at its offset in the temporary, pass through a digest when one helps check its file, and
stop once the run is cancelled (pure engine logic)."""

from __future__ import annotations

import hashlib
import os
import threading
import zlib
from pathlib import Path

import pytest

from initializers.common.errors import FetchError
from initializers.common.remote_file import Checksum, RemoteFile
from initializers.transfer.checksums import CRC32
from initializers.transfer.engine import Cancelled, OpenFile
from initializers.transfer.progress import Progress
from initializers.transfer.ranges import PartSink

BODY = os.urandom(300_000)
WHOLE = b"head-" + BODY  # the file the part belongs to: the part starts at offset 5
CRC = Checksum(CRC32, f"{zlib.crc32(WHOLE):08x}")
SHA256 = Checksum("sha256", hashlib.sha256(WHOLE).hexdigest())


def sink_on(path: Path, checksum: Checksum | None = None) -> tuple[PartSink, Progress]:
    target = OpenFile(RemoteFile("f.bin", len(WHOLE), "v", "f.bin", checksum), str(path))
    target.fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    progress = Progress(None, 60.0)
    return PartSink(target, 5, len(BODY), progress, threading.Event()), progress


def write_body(sink: PartSink) -> None:
    view = memoryview(BODY)
    for start in range(0, len(BODY), 65536):
        sink.write(view[start : start + 65536])
    sink.landed()


@pytest.mark.parametrize("checksum", [None, CRC, SHA256], ids=["unhashed", "crc32 of the range", "sha256 later"])
def test_bytes_land_at_the_part_offset(checksum: Checksum | None, tmp_path: Path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"head-")
    sink, progress = sink_on(path, checksum)
    write_body(sink)
    assert path.read_bytes() == WHOLE
    assert sink.written == progress.bytes_done == len(BODY)
    # Only a CRC-32 of a range helps: ranges' CRCs combine, other digests are computed over the whole file.
    assert sink._target.range_crcs == ({5: (len(BODY), zlib.crc32(BODY))} if checksum == CRC else {})


def test_a_checksum_vouched_for_before_the_body_is_digested_and_a_differing_one_refused(tmp_path: Path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"head-")
    sink, _ = sink_on(path)
    sink.vouch(CRC)
    write_body(sink)
    assert sink._target.expected == CRC and sink._target.range_crcs[5] == (len(BODY), zlib.crc32(BODY))
    with pytest.raises(FetchError, match="changed during the download"):
        sink.vouch(Checksum(CRC32, "00000000"))


def test_a_rewound_part_is_counted_and_hashed_afresh(tmp_path: Path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"head-")
    sink, progress = sink_on(path, CRC)
    sink.write(memoryview(b"bytes of a reply the server then sent again"))
    sink.rewind()
    assert sink.written == progress.bytes_done == 0
    write_body(sink)
    assert path.read_bytes() == WHOLE
    assert sink._target.range_crcs[5] == (len(BODY), zlib.crc32(BODY))


def test_a_cancelled_run_stops_before_writing(tmp_path: Path):
    sink, _ = sink_on(tmp_path / "f.bin")
    sink._cancel.set()
    with pytest.raises(Cancelled):
        sink.write(memoryview(b"x"))
    assert sink.written == 0
    assert (tmp_path / "f.bin").read_bytes() == b""
