"""A large file's ranges are sized as they are handed out: when the ramp's range size changes mid-file, the ranges
still tile the file exactly, the file is finished once, after its last range, and its checksum is verified (pure
engine logic, over an in-memory storage); a file whose bytes miss its checksum is fetched again under the retry
policy, its waits on a driven clock."""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from devkit.driven_clock import DrivenClock
from initializers.common.errors import FetchError
from initializers.common.logs import structlog
from initializers.common.remote_file import Checksum, RemoteFile
from initializers.destination.state import StateDir
from initializers.sources.aws.crc32 import CRC32, CRC32_KIND
from initializers.store.contract import Storage
from initializers.store.hashers import SHA256, kinds
from initializers.store.retry import ATTEMPTS
from initializers.store.sink import Sink
from initializers.transfer.concurrency import Ramp
from initializers.transfer.engine import Engine, Task, TransferContext
from initializers.transfer.file_transfer import FileTransfer
from initializers.transfer.progress import Progress
from initializers.transfer.ranges import RangeTasks

KiB = 1 << 10
SMALL, LARGE = 64 * KiB, 256 * KiB


class InMemory(Storage):
    """One stored file; after its first range is served the ramp calls for larger ranges, as a fast stream would."""

    checksum_kinds = kinds(CRC32_KIND, SHA256)

    def __init__(
        self,
        body: bytes,
        ramp: Ramp,
        vouched: Checksum | None = None,
        corrupt_at: int | None = None,
        corrupt_always: bool = False,
    ) -> None:
        """`vouched`: the checksum every answer vouches for, as S3's do; `corrupt_at`: the offset of the range whose
        first byte is served inverted, once (`corrupt_always`: every time)."""
        self.body = body
        self.ramp = ramp
        self.vouched = vouched
        self.corrupt_at = corrupt_at
        self.corrupt_always = corrupt_always
        self.ranges: list[tuple[int, int]] = []
        self._lock = threading.Lock()

    def list_files(self) -> Iterator[RemoteFile]:
        raise NotImplementedError  # the engine is handed its files

    def describe(self) -> dict[str, Any]:
        return {}

    def part_size_for(self, file: RemoteFile) -> int | None:
        return SMALL

    def read(self, file: RemoteFile, offset: int, length: int, sink: Sink) -> None:
        with self._lock:
            self.ranges.append((offset, length))
            self.ramp.part_size = LARGE
            corrupt = offset == self.corrupt_at
            if corrupt and not self.corrupt_always:
                self.corrupt_at = None
        if self.vouched is not None and not self.vouches_late:
            sink.expect(self.vouched)
        data = bytearray(self.body[offset : offset + length])
        if corrupt:
            data[0] ^= 0xFF
        sink.write(memoryview(data))
        if self.vouched is not None and self.vouches_late:
            sink.expect(self.vouched)


class VouchingLate(InMemory):
    """Vouches for the whole file once each answer's bytes are sent (as a trailer would), in sha256."""

    vouches_late = "sha256"


class Kept:
    """The engine as tasks see it, keeping each file transfer they start, to look at once the run is over."""

    def __init__(self, context: TransferContext) -> None:
        self._context = context
        self.progress, self.cancel, self.clock = context.progress, context.cancel, context.clock
        self.request_times = context.request_times
        self.transfers: list[FileTransfer] = []

    def start(self, file: RemoteFile) -> FileTransfer:
        self.transfers.append(self._context.start(file))
        return self.transfers[-1]


class KeepingTransfers:
    """Range tasks, handed a context that keeps the transfers they start (`kept`)."""

    def __init__(self, tasks: RangeTasks) -> None:
        self._tasks = tasks
        self.kept: Kept | None = None

    def tasks(self, files: Iterable[RemoteFile], context: TransferContext) -> Iterator[Task]:
        self.kept = Kept(context)
        return self._tasks.tasks(files, self.kept)

    def interrupt(self) -> None:
        self._tasks.interrupt()


def fetch(
    tmp_path: Path,
    body: bytes,
    checksum: Checksum | None,
    clock: DrivenClock | None = None,
    store: type[InMemory] = InMemory,
    **storage_options: Any,
) -> tuple[InMemory, StateDir, FileTransfer]:
    """Fetch `body` as weights.bin through the engine's range tasks: the storage (a `store`), the state, the file's
    transfer."""
    ramp = Ramp(4, 4)
    ramp.part_size = 0  # the storage's own part size rules until the first range is served
    storage = store(body, ramp, **storage_options)
    state = StateDir(str(tmp_path / "out"))
    tasks = KeepingTransfers(RangeTasks(storage, ramp))
    with state.session(lambda holder, seconds: None):
        state.journal.restart([])
        engine = Engine(tasks, state.temps, state.journal, ramp, Progress(), store, clock)
        try:
            engine.fetch([RemoteFile("weights.bin", len(body), "v1", "weights.bin", checksum)])
        finally:
            state.journal.close()
    assert tasks.kept is not None
    (transfer,) = tasks.kept.transfers
    return storage, state, transfer


def test_ranges_sized_as_they_are_handed_out_tile_the_file_and_finish_it_once(tmp_path: Path):
    body = os.urandom(3 * 1024 * KiB + 5)
    storage, state, transfer = fetch(tmp_path, body, Checksum("sha256", hashlib.sha256(body).hexdigest()))
    assert transfer.checks == 1
    assert (tmp_path / "out" / "weights.bin").read_bytes() == body
    ranges = sorted(storage.ranges)
    assert [offset for offset, _ in ranges] == [0] + [offset + length for offset, length in ranges[:-1]]
    assert sum(length for _, length in ranges) == len(body)
    lengths = {length for _, length in ranges[:-1]}
    assert SMALL in lengths and LARGE in lengths, "the range size changed while the file was being fetched"
    assert [done.path for done in state.journal.files()] == ["weights.bin"]
    assert not list(state.tmp.iterdir()), "no temporary is left behind"


def test_a_file_assembled_from_ranges_of_several_sizes_is_still_verified(tmp_path: Path):
    body = os.urandom(2 * 1024 * KiB)
    with pytest.raises(FetchError, match="checksum mismatch"):
        fetch(tmp_path, body, Checksum("sha256", hashlib.sha256(b"other bytes").hexdigest()))
    assert not (tmp_path / "out" / "weights.bin").exists()


def test_ranges_crcs_vouched_for_by_the_answers_catch_a_corrupt_range_and_the_file_is_fetched_again(tmp_path: Path):
    body = os.urandom(2 * 1024 * KiB)
    crc = Checksum(CRC32, f"{zlib.crc32(body):08x}")
    storage, state, transfer = fetch(tmp_path, body, None, vouched=crc, corrupt_at=SMALL)
    assert (tmp_path / "out" / "weights.bin").read_bytes() == body
    assert transfer.checks == 2, "checked, found corrupt, fetched again, checked"
    assert storage.ranges[-1] == (0, len(body)), "fetched again, whole, after its ranges"
    assert [(done.algorithm, done.hexdigest) for done in state.journal.files()] == [(CRC32, crc.hexdigest)]


@pytest.fixture
def logged() -> Iterator[list[dict[str, Any]]]:
    """The log events of the test, at every level."""
    configured = structlog.get_config()["wrapper_class"]
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    try:
        with structlog.testing.capture_logs() as events:
            yield events
    finally:
        structlog.configure(wrapper_class=configured)


def test_a_checksum_mismatch_waits_and_fetches_again_under_the_retry_policy(
    tmp_path: Path, logged: list[dict[str, Any]]
):
    body = os.urandom(2 * 1024 * KiB)
    clock = DrivenClock()
    fetch(tmp_path, body, None, clock, vouched=Checksum(CRC32, f"{zlib.crc32(body):08x}"), corrupt_at=SMALL)
    assert (tmp_path / "out" / "weights.bin").read_bytes() == body
    (retry,) = [event for event in logged if event["event"] == "waiting to retry"]
    assert retry["request"] == "download weights.bin" and "crc32 checksum mismatch" in retry["reason"]
    (wait,) = clock.sleeps
    assert round(wait, 2) == retry["wait_s"] and 0.2 <= wait <= 0.6  # the policy's first backoff
    assert [event["event"] for event in logged if event["log_level"] == "warning"] == [
        "checksum mismatch, fetching the file again"
    ]


def test_a_file_corrupted_every_time_is_given_up_on_after_the_policys_attempts(tmp_path: Path):
    body = os.urandom(2 * 1024 * KiB)
    clock = DrivenClock()
    with pytest.raises(FetchError, match=f"cannot download weights.bin after {ATTEMPTS} attempts: .*crc32"):
        fetch(tmp_path, body, None, clock, vouched=Checksum(CRC32, f"{zlib.crc32(body):08x}"), corrupt_at=0,
              corrupt_always=True)  # fmt: skip
    assert len(clock.sleeps) == ATTEMPTS - 1
    assert not (tmp_path / "out" / "weights.bin").exists()


def test_a_word_sent_after_each_answers_bytes_is_checked_by_the_bytes_hashed_as_they_landed(tmp_path: Path):
    """A store that vouches late: its ranges are hashed as they land, its word checked once the last one is in, and
    bytes that miss it fetched again."""
    body = os.urandom(3 * 1024 * KiB + 5)
    word = Checksum("sha256", hashlib.sha256(body).hexdigest())
    storage, state, transfer = fetch(tmp_path, body, None, store=VouchingLate, vouched=word, corrupt_at=SMALL)
    assert (tmp_path / "out" / "weights.bin").read_bytes() == body
    assert transfer.checks == 2, "checked, found corrupt, fetched again, checked"
    assert len(storage.ranges) > 2 and storage.ranges[-1] == (0, len(body))
    assert [(done.algorithm, done.hexdigest) for done in state.journal.files()] == [("sha256", word.hexdigest)]


@pytest.mark.parametrize("store", [InMemory, VouchingLate], ids=["before its bytes", "after them"])
def test_an_empty_file_is_read_for_the_stores_word_and_verified_by_it(tmp_path: Path, store: type[InMemory]):
    """An empty file nothing listed a checksum for is asked for all the same, and the word its store sends checked
    against the digest of no bytes: recorded by it, or refused when it is another file's."""
    word = Checksum("sha256", hashlib.sha256(b"").hexdigest())
    storage, state, _transfer = fetch(tmp_path / "vouched", b"", None, store=store, vouched=word)
    assert storage.ranges == [(0, 0)]
    assert [(done.algorithm, done.hexdigest) for done in state.journal.files()] == [("sha256", word.hexdigest)]
    other = Checksum("sha256", hashlib.sha256(b"not empty").hexdigest())
    with pytest.raises(FetchError, match=f"after {ATTEMPTS} attempts: .*sha256 checksum mismatch"):
        fetch(tmp_path / "wrong", b"", None, DrivenClock(), store=store, vouched=other)
    assert not (tmp_path / "wrong" / "out" / "weights.bin").exists()
    listed, _, _ = fetch(tmp_path / "listed", b"", word, store=store)  # the listing vouched: nothing to ask
    assert listed.ranges == []
