"""One engine, two task factories: groups of made files (a small in-process `Maker`) and ranges of stored files
(an in-memory `Storage`); the engine's own part (threads, failures, cancellation, discarding unfinished
temporaries, claiming what finished) is the same for both. Real files in a temporary folder."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from initializers.common.errors import FetchError
from initializers.common.remote_file import RemoteFile
from initializers.destination.state import StateDir
from initializers.store.contract import Maker, Storage
from initializers.store.sink import Sink
from initializers.transfer.concurrency import Ramp
from initializers.transfer.engine import Engine, Task, TransferContext
from initializers.transfer.file_transfer import FileTransfer
from initializers.transfer.making import MakeTasks
from initializers.transfer.progress import Progress
from initializers.transfer.ranges import RangeTasks

#: How long a test waits for an event another thread sets: a generous ceiling on shared cores, never reached.
EVENT_CEILING_SECONDS = 60.0


class Shards(Maker):
    """Makes each file as its path repeated, those of one folder in one `make`; `fail_in`: a folder whose `make`
    writes its files and then fails."""

    def __init__(self, fail_in: str | None = None) -> None:
        self.fail_in = fail_in
        self.groups: list[list[str]] = []
        self._lock = threading.Lock()

    def list_files(self) -> Iterator[RemoteFile]:
        raise NotImplementedError  # the engine is handed its files

    def describe(self) -> dict[str, Any]:
        return {}

    def made_with(self, file: RemoteFile) -> str:
        return file.path.split("/")[0]

    def make(self, files: list[tuple[RemoteFile, str]], on_bytes: Callable[[int], None]) -> None:
        with self._lock:
            self.groups.append([file.path for file, _ in files])
        for file, destination in files:
            body = made(file.path)
            Path(destination).write_bytes(body)
            on_bytes(len(body))
        if self.made_with(files[0][0]) == self.fail_in:
            raise FetchError(f"{self.fail_in}: the data file is corrupt")


def made(path: str) -> bytes:
    return path.encode() * 100


def estimated(path: str) -> RemoteFile:
    """A made file, listed with an estimate of its size, as the cache source lists its parts."""
    return RemoteFile(path, 1000, "v1", path, exact_size=False)


class Stored(Storage):
    """Files held in memory, read by range."""

    def __init__(self, bodies: dict[str, bytes]) -> None:
        self.bodies = bodies

    def list_files(self) -> Iterator[RemoteFile]:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {}

    def part_size_for(self, file: RemoteFile) -> int | None:
        return None  # whole files: the ranges' own logic is test_engine_ranges'

    def read(self, file: RemoteFile, offset: int, length: int, sink: Sink) -> None:
        sink.write(memoryview(self.bodies[file.path][offset : offset + length]))


def run(tmp_path: Path, factory: Any, files: Iterable[RemoteFile]) -> tuple[StateDir, Progress, Engine]:
    """Fetch `files` with `factory` into tmp_path/out; the engine's error, if any, is raised after the journal is
    closed, with the state left to look at."""
    state = StateDir(str(tmp_path / "out"))
    ramp = Ramp(4, 4)
    progress = Progress()
    engine = Engine(factory, state.temps, state.journal, ramp, progress, Storage)
    with state.session(lambda holder, seconds: None):
        state.journal.restart([])
        try:
            engine.fetch(files)
        finally:
            state.journal.close()
    return state, progress, engine


def test_made_files_are_made_a_group_at_a_time_then_verified_renamed_and_recorded_at_their_real_sizes(
    tmp_path: Path,
):
    shards = Shards()
    paths = ["shard-0/part-0.parquet", "shard-1/part-0.parquet", "shard-0/part-1.parquet"]
    state, progress, _ = run(tmp_path, MakeTasks(shards), [estimated(path) for path in paths])
    assert sorted(shards.groups) == [[paths[0], paths[2]], [paths[1]]]
    for path in paths:
        assert (tmp_path / "out" / path).read_bytes() == made(path)
    assert {done.path: done.size for done in state.journal.files()} == {path: len(made(path)) for path in paths}
    assert progress.files_done == 3 and progress.bytes_done == sum(len(made(path)) for path in paths)
    assert not list(state.tmp.iterdir())


def test_a_failed_group_fails_the_run_leaves_no_temporary_and_what_finished_stays_claimed(tmp_path: Path):
    paths = ["good/part-0.parquet", "bad/part-0.parquet", "bad/part-1.parquet"]
    state = StateDir(str(tmp_path / "out"))
    with pytest.raises(FetchError, match="bad: the data file is corrupt"):
        run(tmp_path, MakeTasks(Shards(fail_in="bad")), [estimated(path) for path in paths])
    assert not (tmp_path / "out" / "bad").exists(), "nothing of the failed group reached a final path"
    claimed = [done.path for done in state.journal.files()]
    assert claimed in ([], ["good/part-0.parquet"])  # finished before the failure, or never started after it
    if claimed:
        assert (tmp_path / "out" / "good" / "part-0.parquet").exists()
        assert not list(state.tmp.iterdir()), "its temporaries were removed"
    else:  # the failure came first: a run that landed no file leaves OUTPUT_PATH as it found it, not even a folder
        assert not (tmp_path / "out").exists()


def test_stored_files_come_through_the_range_factory_with_the_same_engine(tmp_path: Path):
    bodies = {"a.txt": b"alpha" * 1000, "dir/b.txt": b"", "c.bin": bytes(range(256)) * 64}
    files = [RemoteFile(path, len(body), "v1", path) for path, body in bodies.items()]
    state, progress, _ = run(tmp_path, RangeTasks(Stored(bodies), Ramp(4, 4)), files)
    assert {path: (tmp_path / "out" / path).read_bytes() for path in bodies} == bodies
    assert sorted(done.path for done in state.journal.files()) == sorted(bodies)
    assert progress.files_done == 3


class Gate:
    """A factory whose first task opens its file's temporary and waits until the run is cancelled, and whose second
    fails once the first is waiting: the failure must cancel the waiting task and remove its temporary."""

    def __init__(self) -> None:
        self.waiting = threading.Event()
        self.saw_cancel = threading.Event()
        self.interrupted = False
        self.transfers: list[FileTransfer] = []

    def tasks(self, files: Iterable[RemoteFile], context: TransferContext) -> Iterator[Task]:
        self.transfers = [context.start(file) for file in files]
        waiting, failing = self.transfers
        yield Task(1, lambda: self._wait(context, waiting))
        yield Task(1, lambda: self._fail(failing))

    def interrupt(self) -> None:
        self.interrupted = True

    def _wait(self, context: TransferContext, transfer: FileTransfer) -> None:
        with transfer.working():
            transfer.open(ranged=False)
            self.waiting.set()
            if context.cancel.wait(EVENT_CEILING_SECONDS):
                self.saw_cancel.set()

    def _fail(self, transfer: FileTransfer) -> None:
        assert self.waiting.wait(EVENT_CEILING_SECONDS)
        with transfer.working():
            transfer.open(ranged=False)
            raise FetchError("the second file failed")


def test_a_failing_task_cancels_the_others_and_their_temporaries_are_removed(tmp_path: Path):
    gate = Gate()
    state = StateDir(str(tmp_path / "out"))
    files = [RemoteFile("slow.bin", 1, "v1", "slow.bin"), RemoteFile("failing.bin", 1, "v1", "failing.bin")]
    with pytest.raises(FetchError, match="the second file failed"):
        run(tmp_path, gate, files)
    assert gate.saw_cancel.is_set(), "the waiting task saw the run cancelled"
    assert not gate.interrupted, "a task's failure cancels through the event; only a stop interrupts the source"
    # No file landed: the session leaves OUTPUT_PATH as found, its temporaries and journal gone with .initializer/.
    assert not state.tmp.exists() and not (tmp_path / "out" / "slow.bin").exists()
    assert list(state.journal.files()) == []


class HeldUntilInterrupted(Stored):
    """Stored files whose reads are answered only once the run interrupts its source, as a stop does: requests in
    flight on a network that answers late, so no file can finish before the stop."""

    def __init__(self, bodies: dict[str, bytes]) -> None:
        super().__init__(bodies)
        self.interrupted = threading.Event()

    def read(self, file: RemoteFile, offset: int, length: int, sink: Sink) -> None:
        assert self.interrupted.wait(EVENT_CEILING_SECONDS)
        super().read(file, offset, length, sink)

    def interrupt(self) -> None:
        self.interrupted.set()


def test_a_stop_landing_while_a_transfer_thread_starts_still_stops_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """SIGINT raised inside `Thread.start` (the main thread waits there for the new thread to begin): the stop must
    surface as itself, not as the join of a thread that never began; the thread that did begin stops too."""
    real_start = threading.Thread.start
    started: list[threading.Thread] = []

    def start(thread: threading.Thread) -> None:
        if started:  # the second transfer thread: the signal lands before it began
            raise KeyboardInterrupt
        started.append(thread)
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    bodies = {f"{n}.bin": bytes([n]) * 1000 for n in range(8)}
    files = [RemoteFile(path, len(body), "v1", path) for path, body in bodies.items()]
    state = StateDir(str(tmp_path / "out"))
    storage = HeldUntilInterrupted(bodies)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, RangeTasks(storage, Ramp(4, 4)), files)
    assert storage.interrupted.is_set(), "the stop interrupted the source"
    started[0].join(EVENT_CEILING_SECONDS)  # past the stop's grace on a busy machine, it still ends
    assert not started[0].is_alive(), "the thread that began ended with the stop"
    assert not state.tmp.exists(), "no file landed: OUTPUT_PATH is left as found, no temporary in it"
    assert not list((tmp_path / "out").glob("*.bin"))
