"""Reliability under stops, deadlines, full disks, read-only destinations and concurrent runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from devkit.hubserver import HubServer
from devkit.programs import (
    LATER_DEADLINES_SECONDS,
    ProgramResult,
    run_program,
    run_until_the_deadline_catches,
    start_program,
    wait_for_event,
)
from devkit.relay import Relay, StallFault
from devkit.seaweed import SeaweedFS
from initializers.destination.journal import JOURNAL, journal_entries

OBJECTS = {f"d/{i:02d}.bin": os.urandom(512 * 1024) for i in range(8)}  # 4 MiB in all
#: Per response, for the runs a stop or a deadline must cut short: half a minute for an object, a minute for a file.
CRAWL_BYTES_PER_SECOND = 16 * 1024
#: Seconds a stopped run may take to exit, at most: it needs well under one; a stop that waited for the crawling
#: transfers would need the half minute. Only catches a stop that is not one, not a measure of speed.
STOP_CEILING_SECONDS = 15.0


@pytest.fixture
def objects(s3: Any, bucket: str) -> str:
    for key, body in OBJECTS.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    return f"s3://{bucket}/d"


@pytest.fixture
def slow(seaweed: SeaweedFS) -> Iterator[Relay]:
    with Relay(seaweed.endpoint) as relay:
        relay.bytes_per_second = 256 * 1024  # per response: about 2 s per object
        yield relay


def leftovers(output: Path) -> list[str]:
    """Anything that could pass for finished work: temporaries, a manifest, partial files at final paths."""
    found = [p.name for p in (output / ".initializer" / "tmp").glob("*")] if (output / ".initializer").exists() else []
    if (output / ".initializer" / "manifest.json").exists():
        found.append("manifest.json")
    for path in output.rglob("*.bin"):
        if path.read_bytes() != OBJECTS[f"d/{path.name}"]:
            found.append(f"partial {path.name}")
    return found


def wait_until(condition: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not so within {timeout} s"
        time.sleep(0.02)


def finish(process: subprocess.Popen[str], timeout: float = 30) -> ProgramResult:
    stdout, stderr = process.communicate(timeout=timeout)
    return ProgramResult(process.returncode, stdout, stderr)


#: How many times each stop point is tried, alternating SIGTERM and SIGINT: a few in the suite, many in `make stress`.
STOP_REPETITIONS = int(os.environ.get("STOP_REPETITIONS", "2"))


class StopPoint(NamedTuple):
    """Where a run is stopped: the relay set up before it starts, then the wait until it gets there."""

    prepare: Callable[[Relay], None]
    reached: Callable[[subprocess.Popen[str], Relay, Path], None]
    may_complete: bool  # the stop may come once the manifest is being written: the run then completes


def _hold_the_listing(relay: Relay) -> None:
    relay.add_fault(StallFault(match="list-type=", seconds=2 * STOP_CEILING_SECONDS, before_headers=True))


def _crawl(relay: Relay) -> None:
    relay.bytes_per_second = CRAWL_BYTES_PER_SECOND


def _listing_asked(_process: subprocess.Popen[str], relay: Relay, _output: Path) -> None:
    wait_until(lambda: any("list-type=" in path for _, path in relay.traffic.requests))


def _first_bytes(process: subprocess.Popen[str], relay: Relay, _output: Path) -> None:
    wait_for_event(process, "fetching")
    wait_until(lambda: relay.traffic.body_bytes > 0)


def _first_file_placed(process: subprocess.Popen[str], _relay: Relay, output: Path) -> None:
    """The others are being verified and renamed, or about to be."""
    wait_for_event(process, "fetching")
    wait_until(lambda: any(output.glob("*.bin")))


def _every_file_fetched(process: subprocess.Popen[str], _relay: Relay, _output: Path) -> None:
    """`listed`: the manifest comes next."""
    wait_for_event(process, "listed")


STOP_POINTS = {
    "listing": StopPoint(_hold_the_listing, _listing_asked, may_complete=False),
    "first-bytes": StopPoint(_crawl, _first_bytes, may_complete=False),
    "verify-rename": StopPoint(lambda _relay: None, _first_file_placed, may_complete=True),
    "manifest": StopPoint(lambda _relay: None, _every_file_fetched, may_complete=True),
}


@pytest.mark.parametrize("repetition", range(STOP_REPETITIONS))
@pytest.mark.parametrize("point", sorted(STOP_POINTS))
def test_a_stop_at_any_point_ends_the_run_stopped_or_complete_never_in_an_internal_error(
    seaweed: SeaweedFS, slow: Relay, objects: str, tmp_path: Path, point: str, repetition: int
):
    """A signal ends the run promptly with `stopped by ...`, exit 1 and nothing left that looks complete; one that
    comes once the manifest is being written lets it complete instead. Either way, never an internal error."""
    signum = (signal.SIGTERM, signal.SIGINT)[repetition % 2]
    stop_point = STOP_POINTS[point]
    output = tmp_path / "out"
    stop_point.prepare(slow)
    process = start_program("dataset", {**seaweed.env(), "ENDPOINT": slow.endpoint, "STORAGE_URI": objects,
                                        "OUTPUT_PATH": str(output)})  # fmt: skip
    try:
        stop_point.reached(process, slow, output)
        process.send_signal(signum)
        result = finish(process, timeout=STOP_CEILING_SECONDS)
    finally:
        process.kill()
    assert "internal error" not in result.stdout, result.stderr
    if result.code == 0 and stop_point.may_complete:
        assert result.last["event"] == "done"
        assert leftovers(output) == ["manifest.json"]
        assert len(list(output.rglob("*.bin"))) == len(OBJECTS)
    else:
        assert result.code == 1, result.stderr
        assert result.last["error"].startswith(f"stopped by {signal.Signals(signum).name} while waiting for")
        assert leftovers(output) == []


def test_waiting_for_an_event_leaves_the_events_after_it_to_communicate() -> None:
    """The stops above read the log up to an event, then `communicate`: a run's last events, written in the same
    moment as the one waited for, must still be in what `communicate` returns (a buffered read took them once)."""
    both = 'import sys; sys.stderr.write(\'{"event": "listed"}\\n{"event": "done"}\\n\'); sys.stderr.flush()'
    process = subprocess.Popen([sys.executable, "-c", both], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert wait_for_event(process, "listed") == {"event": "listed"}
    assert finish(process).last == {"event": "done"}


def test_the_deadline_ends_a_slow_run_saying_what_it_waited_for(
    seaweed: SeaweedFS, slow: Relay, objects: str, tmp_path: Path
):
    output = tmp_path / "out"
    slow.bytes_per_second = CRAWL_BYTES_PER_SECOND

    def run(deadline: float) -> ProgramResult:
        result = run_program("dataset", {**seaweed.env(), "ENDPOINT": slow.endpoint, "STORAGE_URI": objects,
                                         "OUTPUT_PATH": str(output), "TIMEOUT": f"{deadline:g}"},
                             timeout=deadline + STOP_CEILING_SECONDS)  # fmt: skip
        assert leftovers(output) == []
        return result

    run_until_the_deadline_catches(".bin", 1.5, run)


def test_the_deadline_also_covers_a_hub_download(tmp_path: Path):
    with HubServer() as hub:
        hub.add_repo("org/slow", {f"w{i}.safetensors": os.urandom(1024 * 1024) for i in range(4)})
        hub.bytes_per_second = CRAWL_BYTES_PER_SECOND
        result = run_program("model", {"STORAGE_URI": "hf://org/slow", "OUTPUT_PATH": str(tmp_path / "m"),
                                       "HF_ENDPOINT": hub.endpoint, "TIMEOUT": "1"},
                             timeout=1 + STOP_CEILING_SECONDS)  # fmt: skip
    assert result.code == 1 and "TIMEOUT of 1 s passed" in result.last["error"]
    # Nothing landed, partial Hub downloads (whole-file requests) are removed: OUTPUT_PATH, which the run made, goes.
    assert not (tmp_path / "m").exists()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 3 MiB tmpfs: real ENOSPC, not a simulated one (the suite runs as root, as in CI)."""
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


@pytest.mark.parametrize("inodes", [3, 4, 5], ids=["state-folder", "tmp-folder", "plan-index"])
def test_a_volume_without_room_for_the_state_fails_leaving_output_path_absent(
    seaweed: SeaweedFS, objects: str, tmp_path: Path, inodes: int
):
    """A tmpfs of `inodes` inodes (its root, then OUTPUT_PATH, `.initializer`, `tmp`, the plan index, one each):
    no room for `.initializer/` itself, for its `tmp/`, or for the plan index. Exit 1 saying the volume is full, never
    an internal error, and OUTPUT_PATH, which the run made, gone with every folder it made on the way."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size=1m,nr_inodes={inodes}", "tmpfs", str(mount)], check=True)
    try:
        result = run_program("dataset", {**seaweed.env(), "STORAGE_URI": objects, "OUTPUT_PATH": str(mount / "out")})
        left = sorted(path.relative_to(mount).as_posix() for path in mount.rglob("*"))
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)
    assert result.code == 1 and "No space left on device" in result.last["error"], result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    if inodes == 5:
        assert "index.sqlite' under OUTPUT_PATH failed" in result.last["error"], result.last
    assert left == []


def test_a_download_larger_than_the_free_space_is_refused_before_the_file_that_would_not_fit(
    seaweed: SeaweedFS, objects: str, small_disk: Path
):
    output = small_disk / "out"
    result = run_program("dataset", {**seaweed.env(), "STORAGE_URI": objects, "OUTPUT_PATH": str(output)})
    assert result.code == 1
    error = result.last["error"]
    assert "not enough space in OUTPUT_PATH" in error and str(output) in error and "needs at least" in error
    assert "No space left" not in error  # refused by the check, not by the disk
    assert leftovers(output) == []
    # Listing and transfer are one pipeline: files that fitted may be complete (and count for a re-run), never partial.
    fetched = list(output.rglob("*.bin"))
    assert len(fetched) < len(OBJECTS)
    assert all(path.read_bytes() == OBJECTS[f"d/{path.name}"] for path in fetched)


def test_running_out_of_space_mid_download_fails_cleanly(
    seaweed: SeaweedFS, slow: Relay, s3: Any, bucket: str, small_disk: Path
):
    for key, body in list(OBJECTS.items())[:4]:  # 2 MiB: fits the 3 MiB disk when it starts
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    output = small_disk / "out"
    env = {**seaweed.env(), "ENDPOINT": slow.endpoint, "STORAGE_URI": f"s3://{bucket}/d", "OUTPUT_PATH": str(output)}
    process = start_program("dataset", env)
    wait_for_event(process, "fetching")
    filler = small_disk / "filler"
    with pytest.raises(OSError), open(filler, "wb", buffering=0) as handle:  # another tenant fills the volume
        while True:
            handle.write(b"\0" * 65536)
    result = finish(process)
    assert result.code == 1
    assert "No space left on device" in result.last["error"] and "under OUTPUT_PATH" in result.last["error"]
    filler.unlink()
    assert leftovers(output) == []


def test_a_read_only_output_path_fails_before_any_transfer(
    seaweed: SeaweedFS, slow: Relay, objects: str, tmp_path: Path
):
    readonly = tmp_path / "ro"
    readonly.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(readonly)], check=True)
    try:
        result = run_program("dataset", {**seaweed.env(), "ENDPOINT": slow.endpoint, "STORAGE_URI": objects,
                                         "OUTPUT_PATH": str(readonly / "out")})  # fmt: skip
    finally:
        subprocess.run(["umount", "-l", str(readonly)], check=True)
    assert result.code == 1
    assert "is not writable" in result.last["error"] and "Read-only file system" in result.last["error"]
    assert slow.traffic.object_gets() == []


def test_runs_started_together_on_one_output_path_fetch_once_and_all_succeed(
    seaweed: SeaweedFS, slow: Relay, objects: str, tmp_path: Path
):
    """Four runs started together while a first one fetches (held at work by events, not by how long a fetch takes
    on a loaded machine) all wait for it, and find its output up to date."""
    output = tmp_path / "out"
    env = {**seaweed.env(), "ENDPOINT": slow.endpoint, "STORAGE_URI": objects, "OUTPUT_PATH": str(output)}
    first = start_program("dataset", {**env, "MAX_WORKERS": "1"})
    wait_until(lambda: any(journal_entries(output / ".initializer" / JOURNAL)))  # at work: an object is done
    slow.bytes_per_second = CRAWL_BYTES_PER_SECOND  # and still at work while the others come
    others = [start_program("dataset", env) for _ in range(4)]
    holders = [wait_for_event(run, "waiting for another initializer")["holder"] for run in others]
    slow.bytes_per_second = None
    results = [finish(run, timeout=120) for run in [first, *others]]
    assert [r.code for r in results] == [0] * 5, [r.last for r in results]
    assert slow.traffic.body_bytes == sum(len(body) for body in OBJECTS.values()), "exactly one transfer"
    assert sorted(slow.traffic.object_gets()) == sorted(f"/{objects.split('/')[2]}/{key}" for key in OBJECTS)
    assert sum(bool(r.named("up to date")) for r in results[1:]) == 4
    assert all("@" in holder for holder in holders), holders  # the first run's pid@host
    assert leftovers(output) == ["manifest.json"]


def test_a_run_waiting_for_a_holder_that_dies_takes_over(seaweed: SeaweedFS, slow: Relay, objects: str, tmp_path: Path):
    output = tmp_path / "out"
    env = {**seaweed.env(), "ENDPOINT": slow.endpoint, "STORAGE_URI": objects, "OUTPUT_PATH": str(output)}
    holder = start_program("dataset", {**env, "MAX_WORKERS": "2"})
    wait_until(lambda: any(journal_entries(output / ".initializer" / JOURNAL)))  # the first object is done
    slow.bytes_per_second = CRAWL_BYTES_PER_SECOND  # and the holder is still at work when the waiter comes
    waiter = start_program("dataset", env)
    wait_for_event(waiter, "waiting for another initializer")
    holder.kill()
    holder.wait()
    slow.bytes_per_second = None
    result = finish(waiter, timeout=120)
    assert result.code == 0, result.stdout + result.stderr
    assert {p.name for p in output.glob("*.bin")} == {k.removeprefix("d/") for k in OBJECTS}
    assert leftovers(output) == ["manifest.json"]
    (listed,) = result.named("listed")
    assert listed["already_done"] >= 1, "what the holder finished before it died is not fetched again"


#: Per response, for a holder that must outlast a waiter's every deadline: an object takes twice their sum.
HOLDING_BYTES_PER_SECOND = len(OBJECTS["d/00.bin"]) / (2 * (1 + sum(LATER_DEADLINES_SECONDS)))


def test_a_run_waiting_for_another_is_bounded_by_its_timeout(
    seaweed: SeaweedFS, slow: Relay, objects: str, tmp_path: Path
):
    """The holder crawls until the waiter is done, whatever the waiter's start-up takes on a loaded machine: an object
    takes longer than every deadline the waiter may be given (one that caught its start-up is tried longer)."""
    output = tmp_path / "out"
    env = {**seaweed.env(), "ENDPOINT": slow.endpoint, "STORAGE_URI": objects, "OUTPUT_PATH": str(output)}
    slow.bytes_per_second = HOLDING_BYTES_PER_SECOND
    first = start_program("dataset", {**env, "MAX_WORKERS": "8"})
    wait_for_event(first, "fetching")
    run_until_the_deadline_catches(
        "another initializer", 1, lambda deadline: run_program("dataset", {**env, "TIMEOUT": f"{deadline:g}"})
    )
    slow.bytes_per_second = None
    assert finish(first, timeout=60).code == 0
    assert leftovers(output) == ["manifest.json"], "the waiter left the holder's temporaries alone"


def test_an_absolute_ignore_pattern_is_refused(tmp_path: Path):
    result = run_program("dataset", {"STORAGE_URI": "s3://b", "IGNORE_PATTERNS": "*.tmp,/logs/*",
                                     "OUTPUT_PATH": str(tmp_path)})  # fmt: skip
    assert result.code == 2
    assert "'/logs/*' starts with '/'" in result.last["error"] and "'logs/*'" in result.last["error"]


SECRETS = {
    "SECRET_ACCESS_KEY": "contract-secret-key-91f3",
    "ACCESS_TOKEN": "hf_contract_token_6b2e",
    "HF_TOKEN": "hf_fallback_token_c4d8",
    "AWS_SECRET_ACCESS_KEY": "aws-env-secret-07aa",
    "AWS_SESSION_TOKEN": "aws-session-token-5e19",
}


@pytest.mark.parametrize("uri", ["s3", "hf"])
def test_no_secret_variable_ever_reaches_output_manifest_or_files(
    seaweed: SeaweedFS, objects: str, tmp_path: Path, uri: str
):
    output = tmp_path / "out"
    with HubServer() as hub:
        hub.add_repo("org/private", {"a.safetensors": b"x" * 100}, private=True)
        hub.tokens[SECRETS["ACCESS_TOKEN"]] = {"org/private"}
        env = {**SECRETS, "ENDPOINT": seaweed.endpoint, "ACCESS_KEY_ID": "initializers-test-key",
               "HF_ENDPOINT": hub.endpoint, "OUTPUT_PATH": str(output), "LOG_LEVEL": "debug"}  # fmt: skip
        # S3: the contract's secret is wrong on purpose, so the failure message is produced too.
        env["STORAGE_URI"] = objects if uri == "s3" else "hf://org/private"
        result = run_program("dataset" if uri == "s3" else "model", env)
    assert result.code == (1 if uri == "s3" else 0), result.stderr
    written = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    for name, value in SECRETS.items():
        assert value not in result.stdout + result.stderr, name
        assert value.encode() not in written, name
