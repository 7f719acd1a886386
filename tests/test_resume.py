"""Resuming inside a file: a ranged download stopped or killed part-way is completed by the next run, which fetches
only what is missing (the relay counts the bytes), verifies the whole file, and starts over when the object changed."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_reliability import finish, wait_until

from devkit.hubserver import HubServer
from devkit.programs import ProgramResult, run_program, start_program, wait_for_event
from devkit.relay import Relay
from devkit.seaweed import SeaweedFS
from initializers.destination.partials import RECORD_SUFFIX, read_partial

MIB = 1 << 20
SIZE = 48 * MIB  # six 8 MiB ranges
#: Per response: with two streams, about 12 s for the whole object, so the kill finds it part-way.
BYTES_PER_SECOND = 2 * MIB
#: What a re-run may fetch beyond the missing bytes: ranges in flight at the kill, recorded about a second behind.
SLACK = 2 * 8 * MIB


@pytest.fixture
def relay(seaweed: SeaweedFS) -> Iterator[Relay]:
    with Relay(seaweed.endpoint) as relay:
        yield relay


def killed_part_way(seaweed: SeaweedFS, relay: Relay, uri: str, output: Path, signum: int) -> int:
    """Start a slowed download of the object, `signum` it once over 60% of its bytes crossed; the bytes that did."""
    relay.bytes_per_second = BYTES_PER_SECOND
    env = {**seaweed.env(), "ENDPOINT": relay.endpoint, "STORAGE_URI": uri, "OUTPUT_PATH": str(output),
           "MAX_WORKERS": "2"}  # fmt: skip
    process = start_program("dataset", env)
    wait_for_event(process, "fetching")
    wait_until(lambda: relay.traffic.body_bytes > SIZE * 0.6, timeout=60)
    process.send_signal(signum)
    if signum == signal.SIGKILL:
        process.wait(timeout=30)
    else:
        assert finish(process).code == 1
    crossed = relay.traffic.body_bytes
    relay.reset()
    relay.bytes_per_second = None
    return crossed


def rerun(seaweed: SeaweedFS, relay: Relay, uri: str, output: Path) -> ProgramResult:
    env = {**seaweed.env(), "ENDPOINT": relay.endpoint, "STORAGE_URI": uri, "OUTPUT_PATH": str(output)}
    result = run_program("dataset", env)
    assert result.code == 0, result.stderr
    assert (output / ".initializer" / "manifest.json").exists()
    assert not list((output / ".initializer" / "tmp").iterdir()), "a completed run leaves no partial behind"
    return result


def the_partial(output: Path) -> tuple[Path, Any]:
    (record,) = (output / ".initializer" / "tmp").glob(f"*{RECORD_SUFFIX}")
    return Path(str(record).removesuffix(RECORD_SUFFIX)), read_partial(record.read_bytes())


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_ranged_download_resumes_with_only_the_missing_bytes(
    seaweed: SeaweedFS, relay: Relay, s3: Any, bucket: str, tmp_path: Path, signum: int
):
    body = os.urandom(SIZE)
    s3.put_object(Bucket=bucket, Key="big.bin", Body=body)
    output = tmp_path / "out"
    crossed = killed_part_way(seaweed, relay, f"s3://{bucket}/big.bin", output, signum)
    temp, partial = the_partial(output)
    assert temp.exists() and partial.kept_bytes > 0
    result = rerun(seaweed, relay, f"s3://{bucket}/big.bin", output)
    assert (output / "big.bin").read_bytes() == body
    (resuming,) = result.named("resuming")
    assert resuming["files"] == 1 and resuming["already_here"] == partial.kept_bytes
    this_run = {"fetched_files": 1, "fetched_bytes": SIZE - partial.kept_bytes, "resumed_files": 1,
                "kept_bytes": partial.kept_bytes}  # fmt: skip
    assert {name: result.last[name] for name in this_run} == this_run, "the done line: what this run fetched"
    assert json.loads((output / ".initializer" / "manifest.json").read_text())["this_run"] == this_run
    assert relay.traffic.body_bytes <= SIZE - partial.kept_bytes + SLACK
    assert relay.traffic.body_bytes <= SIZE - crossed + SLACK  # what the kill lost: at most the ranges in flight


def test_an_object_replaced_between_the_runs_is_fetched_whole(
    seaweed: SeaweedFS, relay: Relay, s3: Any, bucket: str, tmp_path: Path
):
    s3.put_object(Bucket=bucket, Key="big.bin", Body=os.urandom(SIZE))
    output = tmp_path / "out"
    killed_part_way(seaweed, relay, f"s3://{bucket}/big.bin", output, signal.SIGKILL)
    replaced = os.urandom(SIZE)
    s3.put_object(Bucket=bucket, Key="big.bin", Body=replaced)
    result = rerun(seaweed, relay, f"s3://{bucket}/big.bin", output)
    assert (output / "big.bin").read_bytes() == replaced
    (started_over,) = result.named("the source changed since the partial download: starting the file over")
    assert started_over["path"] == "big.bin"
    assert relay.traffic.body_bytes >= SIZE


def test_a_corrupted_partial_is_caught_by_the_checksum(
    seaweed: SeaweedFS, relay: Relay, s3: Any, bucket: str, tmp_path: Path
):
    body = os.urandom(SIZE)
    s3.put_object(Bucket=bucket, Key="big.bin", Body=body)
    output = tmp_path / "out"
    killed_part_way(seaweed, relay, f"s3://{bucket}/big.bin", output, signal.SIGKILL)
    temp, partial = the_partial(output)
    offset, _ = partial.kept[0]
    with open(temp, "r+b") as handle:  # bytes kept from the first run, no longer what landed
        handle.seek(offset)
        handle.write(b"\0" * 4096)
    result = rerun(seaweed, relay, f"s3://{bucket}/big.bin", output)
    assert result.named("checksum mismatch, fetching the file again")
    assert (output / "big.bin").read_bytes() == body
    assert (result.last["fetched_bytes"], result.last["resumed_files"], result.last["kept_bytes"]) == (SIZE, 0, 0)


def test_a_killed_hub_download_resumes_with_only_the_missing_bytes(tmp_path: Path):
    body = os.urandom(SIZE)
    output = tmp_path / "m"
    with HubServer() as hub:
        hub.add_repo("org/big", {"model.safetensors": body})
        env = {"STORAGE_URI": "hf://org/big", "OUTPUT_PATH": str(output), "HF_ENDPOINT": hub.endpoint}
        hub.bytes_per_second = BYTES_PER_SECOND
        process = start_program("model", {**env, "MAX_WORKERS": "2"})
        wait_for_event(process, "fetching")
        wait_until(lambda: sum(hub.served_bytes.values()) > SIZE * 0.6, timeout=60)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        crossed = sum(hub.served_bytes.values())
        hub.reset()
        hub.bytes_per_second = None
        result = run_program("model", env)
        assert result.code == 0, result.stderr
        assert result.named("resuming")
        assert sum(hub.served_bytes.values()) <= SIZE - crossed + SLACK
    assert (output / "model.safetensors").read_bytes() == body
