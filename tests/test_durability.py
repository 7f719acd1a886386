"""Durability: what the manifest and the journal claim is on stable storage first; VERIFY catches what changed
behind their back; the termination message says how a run ended."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from devkit.programs import clean_env, command, run_program, start_program
from devkit.relay import CorruptFault, Relay
from devkit.seaweed import SeaweedFS
from initializers.destination.done import DoneFile
from initializers.destination.stable_storage import boot_id
from initializers.destination.state import StateDir
from initializers.process.termination import LIMIT_BYTES, PATH_VARIABLE, leave
from initializers.store.contract import PART_SIZE

OBJECTS = {f"d/{i:02d}.bin": os.urandom(64 * 1024) for i in range(12)} | {"d/big.bin": os.urandom(40 << 20)}
_SYSCALL = re.compile(r"^\d+\s+(\w+)\((.*)\)\s+=\s+(-?\d+)")
_UNFINISHED = re.compile(r"^(\d+)\s+(.*) <unfinished \.\.\.>$")
_RESUMED = re.compile(r"^(\d+)\s+<\.\.\. \w+ resumed>(.*)$")
_AT_FOLDER = re.compile(r'-?\d+<([^>]*)>, "([^"]*)"')  # a folder's descriptor (as strace -y shows it) and a name in it


@pytest.fixture
def objects(s3: Any, bucket: str) -> str:
    for key, body in OBJECTS.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    return f"s3://{bucket}/d"


def _traced(
    env: dict[str, str], trace: Path, syscalls: str = "trace=syncfs,fsync,fdatasync,rename,renameat,renameat2"
) -> list[tuple[str, str]]:
    """Run the dataset program under strace; its successful `syscalls` (syncs and renames), in the order they
    returned, with names given relative to a folder's descriptor written as whole paths."""
    done = subprocess.run(["strace", "-f", "-qq", "-y", "-e", syscalls, "-o", str(trace), *command("dataset")],
                          env=clean_env(env), capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    calls, started = [], {}
    for line in trace.read_text().splitlines():
        if (unfinished := _UNFINISHED.match(line)) is not None:  # another thread's call came in between
            started[unfinished.group(1)] = unfinished.group(2)
            continue
        if (resumed := _RESUMED.match(line)) is not None:
            line = f"{resumed.group(1)} {started.pop(resumed.group(1))}{resumed.group(2)}"
        if (found := _SYSCALL.match(line)) and found.group(3) == "0":
            calls.append((found.group(1), _AT_FOLDER.sub(r'"\1/\2"', found.group(2))))
    return calls


def test_every_file_is_on_stable_storage_before_the_manifest_claims_it(
    seaweed: SeaweedFS, objects: str, tmp_path: Path
) -> None:
    output = tmp_path / "out"
    env = {**seaweed.env(), "STORAGE_URI": objects, "OUTPUT_PATH": str(output)}
    calls = _traced(env, tmp_path / "trace")
    renames = [(i, args) for i, (name, args) in enumerate(calls) if name.startswith("rename")]
    manifest = next(i for i, args in renames if args.rstrip('"').endswith("/.initializer/manifest.json"))
    data = [
        i for i, args in renames if f'"{output}/' in args.split(", ")[-1] and ".initializer" not in args.split(", ")[-1]
    ]
    assert len(data) == len(OBJECTS)
    syncs = [i for i, (name, _) in enumerate(calls) if name == "syncfs"]
    assert any(max(data) < i < manifest for i in syncs), (
        "the filesystem is synced after the last file, before the manifest"
    )
    assert any(i < manifest and calls[i][0] == "fsync" for i in range(manifest)), "the manifest itself is synced"


def test_each_range_of_a_large_file_starts_its_writeback_as_it_lands(
    seaweed: SeaweedFS, objects: str, tmp_path: Path
) -> None:
    env = {**seaweed.env(), "STORAGE_URI": objects, "OUTPUT_PATH": str(tmp_path / "out")}
    calls = _traced(env, tmp_path / "trace", "trace=sync_file_range")
    started = sorted((int(offset), int(length)) for _fd, offset, length, _flags in (a.split(", ") for _, a in calls))
    # d/big.bin (40 MiB) comes in five ranges of the S3 source's part size, the small files whole
    assert started == [(offset, PART_SIZE) for offset in range(0, 40 << 20, PART_SIZE)]
    assert {a.split(", ")[3] for _, a in calls} == {"SYNC_FILE_RANGE_WRITE"}


def test_verify_fetches_again_a_file_changed_behind_the_manifests_back(
    seaweed: SeaweedFS, objects: str, tmp_path: Path
) -> None:
    output = tmp_path / "out"
    with Relay(seaweed.endpoint) as relay:
        env = {**seaweed.env(), "ENDPOINT": relay.endpoint, "STORAGE_URI": objects, "OUTPUT_PATH": str(output)}
        assert run_program("dataset", env).code == 0
        victim = output / "03.bin"
        before = victim.stat()
        victim.write_bytes(bytes(before.st_size))  # zeros, as a crash under delayed allocation leaves them
        os.utime(victim, ns=(before.st_atime_ns, before.st_mtime_ns))
        relay.reset()
        trusting = run_program("dataset", env)
        assert trusting.code == 0 and trusting.named("up to date"), "without VERIFY, size and mtime are trusted"
        verifying = run_program("dataset", {**env, "VERIFY": "true"})
    assert verifying.code == 0, verifying.stdout + verifying.stderr
    assert relay.traffic.object_gets() == [f"/{objects.split('/')[2]}/d/03.bin"]
    assert victim.read_bytes() == OBJECTS["d/03.bin"]
    (verified,) = verifying.named("verified")
    assert verified["differing"] == 1 and verified["files"] == len(OBJECTS) - 1
    assert verified["without_checksum"] == 0  # single-part uploads: every ETag is the content's MD5


def test_verify_trusts_as_recorded_the_files_fetched_without_a_checksum_and_fetches_a_corrupt_one_once(
    seaweed: SeaweedFS, s3: Any, objects: str, bucket: str, tmp_path: Path
) -> None:
    """An SSE-KMS object (its ETag looks like an MD5 but is not) and a multipart one (ETag `<hex>-1`) are checked by
    size and version when fetched: VERIFY re-runs trust them as recorded instead of fetching them on every run,
    and a file corrupted on disk is fetched again once."""
    sealed, composite = os.urandom(4096), os.urandom(4096)
    upload = s3.create_multipart_upload(Bucket=bucket, Key="d/composite.bin")["UploadId"]
    etag = s3.upload_part(Bucket=bucket, Key="d/composite.bin", UploadId=upload, PartNumber=1, Body=composite)["ETag"]
    s3.complete_multipart_upload(Bucket=bucket, Key="d/composite.bin", UploadId=upload,
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})  # fmt: skip
    output, differs = tmp_path / "out", "differs from its checksum, fetching it again"
    with Relay(seaweed.endpoint) as relay:
        relay.injected[bucket] = {"d/sealed.bin": sealed}
        relay.kms_encrypted.add("d/sealed.bin")
        env = {**seaweed.env(), "ENDPOINT": relay.endpoint, "STORAGE_URI": objects, "OUTPUT_PATH": str(output)}

        def verifying() -> tuple[Any, list[str]]:
            """A VERIFY run, and the objects it fetched."""
            relay.reset()
            result = run_program("dataset", {**env, "VERIFY": "true"})
            assert result.code == 0, result.stdout + result.stderr
            return result, relay.traffic.object_gets()

        assert run_program("dataset", env).code == 0
        assert {f"/{bucket}/d/sealed.bin", f"/{bucket}/d/composite.bin"} <= set(relay.traffic.object_gets())
        clean, fetched_when_clean = verifying()
        victim = output / "03.bin"
        before = victim.stat()
        victim.write_bytes(bytes(before.st_size))  # same size and mtime as recorded: only hashing tells
        os.utime(victim, ns=(before.st_atime_ns, before.st_mtime_ns))
        repairing, fetched_when_repairing = verifying()
        repaired, fetched_when_repaired = verifying()
    entries = {
        entry["path"]: entry for entry in json.loads((output / ".initializer" / "manifest.json").read_text())["files"]
    }
    assert entries["sealed.bin"]["verified"] == entries["composite.bin"]["verified"] == "size+version"
    assert (output / "sealed.bin").read_bytes() == sealed and (output / "composite.bin").read_bytes() == composite
    assert fetched_when_clean == [] and not clean.named(differs) and clean.named("up to date")
    (verified,) = clean.named("verified")
    assert (verified["files"], verified["differing"], verified["without_checksum"]) == (len(OBJECTS), 0, 2)
    assert fetched_when_repairing == [f"/{bucket}/d/03.bin"]
    assert [event["path"] for event in repairing.named(differs)] == ["03.bin"]
    assert victim.read_bytes() == OBJECTS["d/03.bin"]
    assert fetched_when_repaired == [] and not repaired.named(differs) and repaired.named("up to date")


def test_the_outcome_is_left_as_the_termination_message(
    seaweed: SeaweedFS, objects: str, bucket: str, tmp_path: Path
) -> None:
    message = tmp_path / "termination-log"
    message.write_text("stale")
    env = {**seaweed.env(), "STORAGE_URI": objects, "OUTPUT_PATH": str(tmp_path / "out"), PATH_VARIABLE: str(message)}
    assert run_program("dataset", env).code == 0
    assert message.read_text().startswith(f"done: {len(OBJECTS)} files, ")
    secret = "wrong-secret-7a6b5c"
    failed = run_program("dataset", {**env, "SECRET_ACCESS_KEY": secret, "OUTPUT_PATH": str(tmp_path / "other")})
    assert failed.code == 1
    assert message.read_text() == f"failed (exit 1): {failed.last['error']}" and secret not in message.read_text()
    refused = run_program("dataset", {**env, "STORAGE_URI": "ftp://x"})
    assert refused.code == 2 and message.read_text().startswith("failed (exit 2): STORAGE_URI")
    absent = tmp_path / "absent"
    assert run_program("dataset", {**env, PATH_VARIABLE: str(absent)}).code == 0
    assert not absent.exists(), "outside Kubernetes nothing is created"
    assert json.loads((tmp_path / "out" / ".initializer" / "manifest.json").read_text())["files"]


@pytest.mark.parametrize("same_boot", [True, False])
def test_journal_lines_past_the_last_checkpoint_are_trusted_only_on_the_boot_that_wrote_them(
    tmp_path: Path, same_boot: bool
) -> None:
    """A process killed after a file reached its final path left its bytes in the page cache, which a re-run on the
    same boot reads; a node that crashed may have lost them, so after a reboot only checkpointed lines count."""
    state = StateDir(str(tmp_path))
    state.tmp.mkdir(parents=True)
    synced, unsynced = DoneFile("a.bin", 1, "v1", 11), DoneFile("b.bin", 2, "v2", 22)
    state.journal.restart([synced])
    state.journal.record_done(unsynced)
    state.journal.close()
    if not same_boot:
        journal = state.journal.path.read_text().replace(boot_id(), "a-boot-before-the-crash")
        state.journal.path.write_text(journal)
    assert list(state.journal.files()) == ([synced, unsynced] if same_boot else [synced])
    state.journal.restart([synced])
    state.journal.record_done(unsynced)
    state.journal.checkpoint()  # a checkpoint covers what was journaled before it, whatever the boot
    state.journal.close()
    state.journal.path.write_text(state.journal.path.read_text().replace(boot_id(), "another-boot"))
    assert list(state.journal.files()) == [synced, unsynced]


def test_a_withdrawn_manifest_still_counts_what_it_lists_as_done(
    seaweed: SeaweedFS, s3: Any, bucket: str, objects: str, tmp_path: Path
) -> None:
    """A run that starts changing the files a manifest describes renames it (not a copy of millions of entries);
    killed then, the next run still skips everything the old manifest lists, and removes it once complete."""
    output = tmp_path / "out"
    assert run_program("dataset", {**seaweed.env(), "STORAGE_URI": objects, "OUTPUT_PATH": str(output)}).code == 0
    s3.put_object(Bucket=bucket, Key="d/big.bin", Body=os.urandom(40 << 20))  # changed: fetched again, slowly
    state = output / ".initializer"
    with Relay(seaweed.endpoint) as relay:
        relay.bytes_per_second = 4 << 20
        env = {**seaweed.env(), "ENDPOINT": relay.endpoint, "STORAGE_URI": objects, "OUTPUT_PATH": str(output)}
        process = start_program("dataset", env)
        while not (state / "manifest.withdrawn.json").exists():
            assert process.poll() is None, "the run ended before withdrawing the manifest"
            time.sleep(0.01)
        process.kill()
        process.wait()
        assert not (state / "manifest.json").exists()
        relay.bytes_per_second = None
        relay.reset()
        result = run_program("dataset", env)
    assert result.code == 0, result.stdout + result.stderr
    assert set(relay.traffic.object_gets()) == {f"/{bucket}/d/big.bin"}  # in ranges: only the changed object
    assert (state / "manifest.json").exists() and not (state / "manifest.withdrawn.json").exists()


#: A name a terminal would obey: ESC opening a sequence that retitles the window and clears the screen, BEL, a newline.
CONTROL_NAME = "d/x\x1b]0;pwned\x07\x1b[2J\nlaunch.bin"


def test_the_termination_message_shows_control_characters_of_a_name_as_escapes(
    seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path
) -> None:
    """A failure naming an object whose name holds control characters (every answer for its bytes corrupted, so the
    checksum misses 5 times: exit 1): the termination message is one line, each control character written as its
    escape, as the console logs and the live view show it; the JSON log line carries the name as it is."""
    s3.put_object(Bucket=bucket, Key=CONTROL_NAME, Body=b"payload" * 100)
    message = tmp_path / "termination-log"
    message.write_text("stale")
    with Relay(seaweed.endpoint) as relay:
        corrupt = relay.add_fault(CorruptFault(match="launch.bin", method="GET", times=None))
        env = {**seaweed.env(), "ENDPOINT": relay.endpoint, "STORAGE_URI": f"s3://{bucket}/d",
               "OUTPUT_PATH": str(tmp_path / "out"), PATH_VARIABLE: str(message)}  # fmt: skip
        failed = run_program("dataset", env)
    assert failed.code == 1 and corrupt.hits >= 1, failed.stdout + failed.stderr
    assert CONTROL_NAME in failed.last["error"], failed.last  # the JSON line escapes it as JSON does
    written = message.read_bytes()
    assert not re.search(rb"[\x00-\x1f\x7f]", written), written
    escaped = failed.last["error"].replace("\x1b", "\\x1b").replace("\x07", "\\x07").replace("\n", "\\n")
    assert written.decode() == f"failed (exit 1): {escaped}"


def test_the_termination_message_is_cut_at_a_whole_character(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kubernetes keeps 4096 bytes: a message longer than that is cut there, never inside a character (a name's
    three-byte characters straddle the limit here), so the message stays valid UTF-8."""
    message = tmp_path / "termination-log"
    message.write_text("stale")
    monkeypatch.setenv(PATH_VARIABLE, str(message))
    leave("failed (exit 1): " + "語" * LIMIT_BYTES)
    written = message.read_bytes()
    assert LIMIT_BYTES - 3 < len(written) <= LIMIT_BYTES
    assert written.decode() == ("failed (exit 1): " + "語" * LIMIT_BYTES)[: len(written.decode())]
