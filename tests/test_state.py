"""The parts of `.initializer/`, each on real files under tmp_path: the run lock between processes, the journal and
its checkpoints, the records of a split plan's shares, temporaries placed and cleared, files found as left."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from initializers.common.errors import ConfigError, FetchError
from initializers.common.remote_file import RemoteFile
from initializers.destination.done import DoneFile
from initializers.destination.journal import journal_entries
from initializers.destination.locking import RunLock
from initializers.destination.stable_storage import boot_id
from initializers.destination.state import StateDir
from initializers.plan import shares
from initializers.plan.index import PlanIndex

#: A run holding the destination's lock (of one share, when given) until its standard input closes.
_HOLDER = """
import sys
from initializers.destination.state import StateDir
share = tuple(map(int, sys.argv[2].split("/"))) if len(sys.argv) > 2 else None
with StateDir(sys.argv[1], share).session(lambda holder, seconds: None):
    print("holding", flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start another process holding the lock of `tmp_path / "out"` (of `share`, "index/count", when given)."""
    started: list[subprocess.Popen[str]] = []

    def start(*share: str) -> subprocess.Popen[str]:
        process = subprocess.Popen([sys.executable, "-c", _HOLDER, str(tmp_path / "out"), *share],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
        started.append(process)
        assert process.stdout is not None and process.stdout.readline() == "holding\n"
        return process

    yield start
    for process in started:
        end(process)


def end(process: subprocess.Popen[str]) -> None:
    """Let a holder go, and wait for its end (which releases its locks)."""
    if process.returncode is None:
        process.communicate(timeout=60)


class StepClock:
    """A clock that moves only when slept on; `on_sleep` runs after each sleep, given the time reached."""

    def __init__(self, on_sleep: Callable[[float], None]) -> None:
        self.now = 0.0
        self._on_sleep = on_sleep

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self._on_sleep(self.now)


def held_elsewhere(lock: Path) -> bool:
    """Whether another process finds the lock file `lock` locked (asking for it exclusively, without waiting)."""
    probe = subprocess.run([sys.executable, "-c", _LOCK_PROBE, str(lock)], capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, probe.stderr
    return probe.stdout == "held\n"


_LOCK_PROBE = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except OSError:
    print("held")
"""


def me() -> str:
    return f"{os.getpid()}@{socket.gethostname()}"


def quiet(holder: str, seconds: float) -> None:
    raise AssertionError(f"nothing should be waited for, but {holder} holds the lock")


def done_file(state: StateDir, path: str, body: bytes, version: str = "v1") -> DoneFile:
    """A file written at its final path, as the engine would record it."""
    final = Path(state.destination.final_path(path))
    final.parent.mkdir(parents=True, exist_ok=True)
    final.write_bytes(body)
    return DoneFile(path, len(body), version, final.stat().st_mtime_ns)


# -- the run lock -----------------------------------------------------------------------------------------------


def test_a_run_waits_for_the_holder_naming_it_every_thirty_seconds_then_takes_the_lock(
    tmp_path: Path, holder: Callable[..., subprocess.Popen[str]]
) -> None:
    other = holder()
    state = StateDir(str(tmp_path / "out"))
    reports: list[tuple[str, float]] = []

    def let_go_after_a_minute(now: float) -> None:
        if now == 61.0:
            end(other)

    lock = RunLock(state.destination, state.shared, None, state.dir, StepClock(let_go_after_a_minute))
    lock.take(lambda who, seconds: reports.append((who, seconds)))
    lock.release()
    state.destination.close_folders()
    assert reports == [(f"{other.pid}@{socket.gethostname()}", seconds) for seconds in (0.0, 30.0, 60.0)]
    assert (state.shared / "lock").read_text() == me(), "the lock file names its last holder: this run"


def test_shares_run_together_but_a_second_run_of_one_share_is_refused_naming_the_first(
    tmp_path: Path, holder: Callable[..., subprocess.Popen[str]]
) -> None:
    first = holder("0/2")
    with StateDir(str(tmp_path / "out"), (1, 2)).session(quiet):
        pass
    with pytest.raises(ConfigError) as refused, StateDir(str(tmp_path / "out"), (0, 2)).session(quiet):
        pass
    assert str(refused.value) == (
        f"SHARD_INDEX 0 (of 2) is already being fetched into OUTPUT_PATH {str(tmp_path / 'out')!r} by "
        f"{first.pid}@{socket.gethostname()}: every initializer of a split plan needs its own SHARD_INDEX"
    )


def test_a_run_of_the_whole_plan_waits_for_the_shares_running(
    tmp_path: Path, holder: Callable[..., subprocess.Popen[str]]
) -> None:
    share = holder("1/2")
    state = StateDir(str(tmp_path / "out"))
    reports: list[str] = []
    lock = RunLock(state.destination, state.shared, None, state.dir, StepClock(lambda now: end(share)))
    lock.take(lambda who, seconds: reports.append(who))
    lock.release()
    state.destination.close_folders()
    assert len(reports) == 1, "it waited once, for the share holding the destination's lock shared"


def test_a_share_lets_go_of_its_own_lock_when_its_session_ends(
    tmp_path: Path, holder: Callable[..., subprocess.Popen[str]]
) -> None:
    lock = tmp_path / "out" / ".initializer" / "shards" / "0-of-2" / "lock"
    with StateDir(str(tmp_path / "out"), (0, 2)).session(quiet):
        assert held_elsewhere(lock)  # seen from another process: opening it here would release it (POSIX locks)
    end(holder("0/2"))  # another process takes the same share's lock: it would be refused if this one still held it


# -- the journal ------------------------------------------------------------------------------------------------


@pytest.fixture
def state(tmp_path: Path) -> Iterator[StateDir]:
    state = StateDir(str(tmp_path / "out"))
    with state.session(quiet):
        yield state


def test_the_journal_reads_back_what_was_recorded_in_order_checksums_included(state: StateDir) -> None:
    recorded = [DoneFile("b.bin", 2, "v2", 22, "sha256", "ab" * 32), DoneFile("a.bin", 1, "v1", 11)]
    state.journal.restart([])
    for done in recorded:
        state.journal.record_done(done)
    assert list(state.journal.files()) == recorded
    state.journal.close()
    assert list(state.journal.files()) == recorded, "and after it is closed, as a re-run reads it"


def test_a_line_a_crash_cut_short_is_skipped_and_the_lines_before_it_kept(state: StateDir) -> None:
    whole = DoneFile("a.bin", 1, "v1", 11)
    state.journal.restart([])
    state.journal.record_done(whole)
    state.journal.close()
    with open(state.journal.path, "ab") as journal:
        journal.write(DoneFile("b.bin", 2, "v2", 22).to_json().encode()[:20])  # no newline: cut off mid-write
    assert list(state.journal.files()) == [whole]


def test_a_restarted_journal_holds_exactly_what_it_was_given_under_this_boot(state: StateDir) -> None:
    kept, dropped = DoneFile("a.bin", 1, "v1", 11), DoneFile("b.bin", 2, "v2", 22)
    state.journal.restart([])
    state.journal.record_done(dropped)
    state.journal.restart([kept])
    state.journal.close()
    lines = [json.loads(line) for line in state.journal.path.read_text().splitlines()]
    assert lines[0] == {"boot": boot_id()}
    assert lines[-1] == {"synced": state.journal.path.stat().st_size - len(json.dumps(lines[-1])) - 1}
    assert list(state.journal.files()) == [kept]


def test_a_checkpoint_covers_the_lines_before_it_not_those_after(state: StateDir) -> None:
    before, after = DoneFile("a.bin", 1, "v1", 11), DoneFile("b.bin", 2, "v2", 22)
    state.journal.restart([])
    state.journal.record_done(before)
    state.journal.checkpoint()
    state.journal.record_done(after)
    state.journal.close()
    another_boot = "0" * len(boot_id())  # as long as this one's: the markers count bytes
    state.journal.path.write_text(state.journal.path.read_text().replace(boot_id(), another_boot))
    assert list(state.journal.files()) == [before], "after a reboot, only checkpointed lines count"


def test_a_checkpoint_with_nothing_new_to_cover_writes_nothing(state: StateDir) -> None:
    state.journal.restart([DoneFile("a.bin", 1, "v1", 11)])
    written = state.journal.path.read_bytes()
    state.journal.checkpoint()
    assert state.journal.path.read_bytes() == written
    state.journal.record_done(DoneFile("b.bin", 2, "v2", 22))
    state.journal.checkpoint()
    state.journal.checkpoint()
    assert state.journal.path.read_text().count('{"synced"') == 2, "the restart's marker, then one checkpoint's"


def test_a_removed_journal_is_gone_and_reads_as_empty(state: StateDir) -> None:
    state.journal.restart([DoneFile("a.bin", 1, "v1", 11)])
    state.journal.remove()
    assert not state.journal.path.exists() and list(state.journal.files()) == []
    state.journal.close()  # closing twice is harmless


@pytest.mark.parametrize(
    "done",
    [
        DoneFile("a.bin", 1, "v1", 11),
        DoneFile('q"uo\\te/\u00e9t\u00e9 \U0001f600\n.bin', 0, '"etag"', -1, "md5", "ab" * 16),
    ],
)
def test_a_journal_line_is_the_record_as_json_writes_it(done: DoneFile) -> None:
    record = {"path": done.path, "size": done.size, "version": done.version, "mtime_ns": done.mtime_ns}
    if done.algorithm is not None:
        record.update(algorithm=done.algorithm, hexdigest=done.hexdigest)
    assert done.to_json() == json.dumps(record)
    assert DoneFile.from_record(json.loads(done.to_json())) == done


def test_a_line_with_a_field_of_the_wrong_type_is_skipped_and_a_restart_writes_the_others_back(
    state: StateDir,
) -> None:
    whole = DoneFile("a.bin", 1, "v1", 11)
    state.journal.restart([whole])
    state.journal.close()
    damaged = [
        {"path": "b.bin", "size": "2", "version": "v2", "mtime_ns": 22},
        {"path": "c.bin", "size": True, "version": "v3", "mtime_ns": 33},
        {"path": 4, "size": 4, "version": "v4", "mtime_ns": 44},
        {"path": "e.bin", "size": 5, "version": "v5", "mtime_ns": 55, "algorithm": 5, "hexdigest": "x"},
        {"path": "f.bin", "size": 6, "version": "v6"},
        {"path": "g.bin", "size": 7, "version": "v7", "mtime_ns": 77, "extra": 1},
    ]
    with open(state.journal.path, "a") as journal:
        journal.writelines(json.dumps(record) + "\n" for record in damaged)
    assert list(state.journal.files()) == [whole]
    state.journal.restart(state.journal.files())  # as a re-run does
    assert list(state.journal.files()) == [whole]


def test_a_journal_that_is_not_one_yields_nothing(tmp_path: Path) -> None:
    (tmp_path / "journal.jsonl").write_bytes(b"\x00\xff not json\n[1, 2]\n")
    assert list(journal_entries(tmp_path / "journal.jsonl")) == []
    assert list(journal_entries(tmp_path / "missing.jsonl")) == []


# -- files at their final path, temporaries -------------------------------------------------------------------


def test_a_file_counts_as_unchanged_only_with_its_size_and_mtime_as_recorded(state: StateDir) -> None:
    done = done_file(state, "d/a.bin", b"abc")
    assert state.destination.unchanged(done)
    os.utime(state.destination.final_path(done.path), ns=(done.mtime_ns, done.mtime_ns + 1))
    assert not state.destination.unchanged(done)
    assert not state.destination.unchanged(done._replace(path="d/missing.bin"))
    link = done_file(state, "d/b.bin", b"abc")
    Path(state.destination.final_path("d/b.bin")).unlink()
    Path(state.destination.final_path("d/b.bin")).symlink_to(state.destination.final_path("d/a.bin"))
    assert not state.destination.unchanged(link), "a link is never the file that was left there"


def test_a_temporary_is_placed_at_its_path_and_leftovers_are_cleared(state: StateDir) -> None:
    temp = state.temps.path("d/e/f.bin")
    assert temp == state.temps.path("d/e/f.bin") and Path(temp).parent == state.tmp and temp.endswith(".part")
    fd = state.temps.open(temp, 4)
    os.write(fd, b"ab")
    os.close(fd)
    state.temps.place(temp, "d/e/f.bin")
    assert Path(state.destination.final_path("d/e/f.bin")).read_bytes() == b"ab\0\0" and not Path(temp).exists()
    fd = state.temps.open(state.temps.path("g.bin"), None)
    os.close(fd)
    (state.tmp / "manifest.json.tmp").write_text("{}")
    state.temps.clear()
    assert sorted(path.name for path in state.tmp.iterdir()) == ["manifest.json.tmp"], "only temporaries go"


def test_a_temporary_is_not_placed_over_a_folder(state: StateDir) -> None:
    Path(state.destination.final_path("d/f.bin")).mkdir(parents=True)
    temp = state.temps.path("d/f.bin")
    os.close(state.temps.open(temp, None))
    with pytest.raises(FetchError, match="a folder of that name is in the way"):
        state.temps.place(temp, "d/f.bin")


def test_a_download_that_cannot_fit_is_refused_naming_output_path(state: StateDir) -> None:
    free = state.destination.free_space()
    state.destination.check_free_space(free, free)
    with pytest.raises(FetchError, match=f"not enough space in OUTPUT_PATH {str(state.root)!r}"):
        state.destination.check_free_space(free + 1, free)


def test_a_manifest_withdrawn_then_written_again_leaves_one_manifest(state: StateDir) -> None:
    state.write_manifest([b"{}\n"])
    state.remove_manifest()
    assert not state.manifest_path.exists() and state.withdrawn_manifest_path.read_text() == "{}\n"
    state.remove_manifest()  # nothing to withdraw: no error
    state.write_manifest([b'{"files": ', b"[]}\n"])
    assert state.manifest_path.read_text() == '{"files": []}\n' and not state.withdrawn_manifest_path.exists()


# -- the shares of a split plan -----------------------------------------------------------------------------------


def test_share_records_are_read_by_number_and_a_torn_one_is_not_a_record(tmp_path: Path) -> None:
    first, second = StateDir(str(tmp_path / "out"), (0, 3)), StateDir(str(tmp_path / "out"), (2, 3))
    with first.session(quiet), second.session(quiet):
        assert first.share_records is not None and second.share_records is not None
        first.share_records.record_complete({"plan": "p"})
        second.share_records.record_complete({"plan": "q"})
        assert first.share_records.read() == {0: {"plan": "p"}, 2: {"plan": "q"}}
        (first.shared / "shards" / "2-of-3.json").write_text('{"plan": ')
        assert second.share_records.read() == {0: {"plan": "p"}}
        first.share_records.remove()
        assert second.share_records.read() == {} and not list((first.shared / "shards").glob("*.json"))


def test_a_share_reads_another_shares_journal(tmp_path: Path) -> None:
    mine, other = StateDir(str(tmp_path / "out"), (0, 2)), StateDir(str(tmp_path / "out"), (1, 2))
    with other.session(quiet):
        other.journal.restart([DoneFile("a.bin", 1, "v1", 11)])
        other.journal.close()
    assert mine.share_records is not None and list(mine.share_records.journal(1)) == [DoneFile("a.bin", 1, "v1", 11)]
    assert other.journal.path == tmp_path / "out" / ".initializer" / "shards" / "1-of-2" / "journal.jsonl"
    assert list(mine.share_records.journal(0)) == []


def test_the_set_lock_is_held_by_one_process_at_a_time(tmp_path: Path) -> None:
    state = StateDir(str(tmp_path / "out"), (0, 2))
    with state.session(quiet):
        assert state.share_records is not None
        with state.share_records.completing_set():
            assert held_elsewhere(state.shared / "shards" / "set.lock")
        assert not held_elsewhere(state.shared / "shards" / "set.lock")


class Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def info(self, event: str, **fields: Any) -> None:
        self.events.append((event, fields))


def _split(tmp_path: Path, count: int) -> tuple[list[StateDir], list[PlanIndex]]:
    """`count` shares of one plan of six files, each with its own index, its files written and journaled."""
    states = [StateDir(str(tmp_path / "out"), (number, count)) for number in range(count)]
    plan = [RemoteFile(f"d/{i}.bin", i + 1, "v1", f"d/{i}.bin") for i in range(6)]
    indexes = []
    for number, state in enumerate(states):
        index = PlanIndex(tmp_path / f"index-{number}.sqlite")
        index.plan(plan)
        mine = [file for batch in shares.own_share(iter([plan]), index, (number, count), Log()) for file in batch]
        with state.session(quiet):
            state.journal.restart(done_file(state, file.path, b"x" * file.size) for file in mine)
            state.journal.close()
        index.add_finished(state.journal.files(), in_manifest=False)
        indexes.append(index)
    return states, indexes


def test_the_last_share_to_complete_may_write_the_manifest_with_every_shares_files(tmp_path: Path) -> None:
    states, indexes = _split(tmp_path, 2)
    described = shares.described(indexes[0], (0, 2))
    log = Log()
    with states[0].session(quiet), shares.completing(states[0], indexes[0], described, log) as complete:
        assert not complete
    assert log.events[-1] == ("share complete", {"shard": 0, "shards": 2, "waiting_for": [1]})
    with states[1].session(quiet), shares.completing(states[1], indexes[1], described, log) as complete:
        assert complete
        assert all(done is not None for _, done in indexes[1].planned()), "the other share's files are known"
    assert not list((states[0].shared / "shards").glob("*.json")), "the records go once the set is complete"


def test_a_set_whose_shares_listed_different_plans_is_refused(tmp_path: Path) -> None:
    states, indexes = _split(tmp_path, 2)
    with states[0].session(quiet), shares.completing(states[0], indexes[0], {"plan": "one"}, Log()):
        pass
    refused = pytest.raises(FetchError, match=r"share\(s\) \[0\] of 2 fetched a different plan than share 1")
    with refused, states[1].session(quiet), shares.completing(states[1], indexes[1], {"plan": "another"}, Log()):
        pass


def test_a_set_with_a_file_changed_since_its_share_finished_is_refused(tmp_path: Path) -> None:
    states, indexes = _split(tmp_path, 2)
    described = shares.described(indexes[0], (0, 2))
    with states[0].session(quiet), shares.completing(states[0], indexes[0], described, Log()):
        pass
    theirs = next(file for batch in indexes[0].share(0) for file in batch)
    Path(states[0].destination.final_path(theirs.path)).write_bytes(b"changed!" * 10)
    refused = pytest.raises(FetchError, match=f"but {theirs.path} is not on disk as one of them left it")
    with refused, states[1].session(quiet), shares.completing(states[1], indexes[1], described, Log()):
        pass
