"""Faults injected for real, between the programs and the real servers: survive what is transient, fail cleanly
on what is not, never hang."""

from __future__ import annotations

import json
import math
import os
import statistics
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from devkit.hubserver import HubServer
from devkit.outputs import tree
from devkit.programs import ProgramResult, run_program, run_until_the_deadline_catches
from devkit.relay import CorruptFault, Relay, ResetFault, StallFault, StatusFault
from devkit.seaweed import SeaweedFS
from initializers.store.throttle import FIRST_PAUSE_SECONDS

BIG = os.urandom(20 * 1024 * 1024 + 777)  # three 8 MiB ranges on S3; an LFS file on the Hub
RANGED = os.urandom(40 << 20)  # five 8 MiB ranges on S3
MIDDLE_RANGE = 16 << 20  # where the third starts
#: Only catches a hang (a stall waited out, retries without end): the runs take seconds; not a measure of speed.
HANG_CEILING_SECONDS = 120.0
#: A stall no run could wait out within the ceiling (the relay ends it when the test stops it).
ENDLESS_STALL_SECONDS = 2 * HANG_CEILING_SECONDS
SMALL = {f"s/{i}.json": json.dumps({"i": i}).encode() * 50 for i in range(6)}


def completed(output: Path) -> bool:
    return (output / ".initializer" / "manifest.json").exists()


def manifest_checksums(output: Path) -> dict[str, str]:
    """Each file's checksum algorithm in the manifest, or what it says was verified instead."""
    entries = json.loads((output / ".initializer" / "manifest.json").read_text())["files"]
    return {e["path"]: e["checksum"]["algorithm"] if "checksum" in e else e["verified"] for e in entries}


# -- S3 -------------------------------------------------------------------------------------------------------------


@pytest.fixture
def s3_relay(seaweed: SeaweedFS, s3: Any, bucket: str) -> Iterator[tuple[Relay, str]]:
    s3.put_object(Bucket=bucket, Key="m/big.bin", Body=BIG)
    for key, body in SMALL.items():
        s3.put_object(Bucket=bucket, Key=f"m/{key}", Body=body)
    with Relay(seaweed.endpoint) as relay:
        yield relay, bucket


def s3_fetch(seaweed: SeaweedFS, relay: Relay, bucket: str, output: Path, **extra: str) -> ProgramResult:
    env = {**seaweed.env(), "ENDPOINT": relay.endpoint, "STORAGE_URI": f"s3://{bucket}/m", "OUTPUT_PATH": str(output)}
    return run_program("dataset", {**env, **extra}, timeout=HANG_CEILING_SECONDS)


def retried_after_a_read_timeout(result: ProgramResult) -> bool:
    """The run gave up on a silent connection and tried again, rather than waiting the silence out."""
    return any("timed out" in wait["reason"] for wait in result.named("waiting to retry"))


S3_EXPECTED = {"big.bin": BIG, **SMALL}


def test_s3_survives_a_503_storm_and_500s(seaweed: SeaweedFS, s3_relay: tuple[Relay, str], tmp_path: Path):
    relay, bucket = s3_relay
    storm = relay.add_fault(StatusFault(status=503, times=4, match=f"/{bucket}/m/", method="GET"))
    errors = relay.add_fault(StatusFault(status=500, times=2, match="big.bin"))
    result = s3_fetch(seaweed, relay, bucket, tmp_path / "out")
    assert result.code == 0, result.stderr
    assert (storm.hits, errors.hits) == (4, 2)
    assert tree(tmp_path / "out") == S3_EXPECTED and completed(tmp_path / "out")


def test_s3_resumes_after_resets_mid_body_without_refetching(
    seaweed: SeaweedFS, s3_relay: tuple[Relay, str], tmp_path: Path
):
    relay, bucket = s3_relay
    reset = relay.add_fault(ResetFault(after_bytes=3_000_000, times=3, match="big.bin"))
    result = s3_fetch(seaweed, relay, bucket, tmp_path / "out")
    assert result.code == 0, result.stderr
    assert reset.hits == 3
    assert tree(tmp_path / "out") == S3_EXPECTED
    # Each retry asks only for the bytes it lacks: what crossed the wire is the content, nothing twice.
    assert relay.traffic.body_bytes == len(BIG) + sum(map(len, SMALL.values()))


def test_s3_stall_longer_than_the_read_timeout_is_retried_not_waited_for(
    seaweed: SeaweedFS, s3_relay: tuple[Relay, str], tmp_path: Path
):
    relay, bucket = s3_relay
    stall = relay.add_fault(StallFault(seconds=ENDLESS_STALL_SECONDS, after_bytes=1_000_000, times=1, match="big.bin"))
    result = s3_fetch(seaweed, relay, bucket, tmp_path / "out", READ_TIMEOUT="1")
    assert result.code == 0, result.stderr
    assert stall.hits == 1 and retried_after_a_read_timeout(result)
    assert tree(tmp_path / "out") == S3_EXPECTED


def test_s3_persistent_failure_exits_1_in_bounded_time_with_nothing_complete(
    seaweed: SeaweedFS, s3_relay: tuple[Relay, str], tmp_path: Path
):
    relay, bucket = s3_relay
    relay.add_fault(StatusFault(status=500, times=None, match="big.bin"))
    result = s3_fetch(seaweed, relay, bucket, tmp_path / "out")  # the waits are real: test_retry drives them
    assert result.code == 1
    assert "big.bin after 5 attempts: 500 InternalError" in result.last["error"]
    assert "big.bin" not in tree(tmp_path / "out") and not completed(tmp_path / "out")
    assert list((tmp_path / "out" / ".initializer" / "tmp").iterdir()) == []


def test_s3_throttling_is_waited_out_as_asked_beyond_the_attempts_for_errors(
    seaweed: SeaweedFS, s3_relay: tuple[Relay, str], tmp_path: Path
):
    relay, bucket = s3_relay
    slow_down = relay.add_fault(StatusFault(status=503, times=7, match="big.bin", headers={"Retry-After": "1"}))
    result = s3_fetch(seaweed, relay, bucket, tmp_path / "out", MAX_WORKERS="1")
    assert result.code == 0, result.stdout + result.stderr
    assert slow_down.hits == 7 and tree(tmp_path / "out") == {"big.bin": BIG, **SMALL}
    waits = result.named("waiting to retry")
    assert len(waits) == 7 and all(1 <= wait["wait_s"] <= 1.5 and "SlowDown" in wait["reason"] for wait in waits)


#: Small files, many at once: what a fleet of requests hitting a throttled prefix looks like.
FLEET = {f"{i:03}.bin": os.urandom(4096) for i in range(150)}


def test_s3_throttling_a_third_of_requests_backs_the_whole_fleet_off(
    seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path
):
    """SlowDown (no Retry-After) to every third object GET: the run completes, each refused GET is asked once more
    (no more requests than that), the ramp halves the transfers (its debug log), and fewer requests are under way at
    once as the throttling goes on (at the relay)."""
    for key, body in FLEET.items():
        s3.put_object(Bucket=bucket, Key=f"fleet/{key}", Body=body)
    output = tmp_path / "out"
    with Relay(seaweed.endpoint) as relay:
        slow_down = relay.add_fault(StatusFault(status=503, times=None, every=3, match=f"/{bucket}/fleet/"))
        env = {**seaweed.env(), "ENDPOINT": relay.endpoint, "STORAGE_URI": f"s3://{bucket}/fleet"}
        result = run_program(
            "dataset", {**env, "OUTPUT_PATH": str(output), "LOG_LEVEL": "debug"}, timeout=HANG_CEILING_SECONDS
        )
    assert result.code == 0, result.stderr
    assert tree(output) == FLEET and completed(output)
    assert any(event["streams"] < event["was"] for event in result.named("streams")), "halved for the throttling"
    gets, on_arrival = relay.traffic.object_gets(), relay.traffic.object_gets_on_arrival
    assert slow_down.hits == len(gets) // 3 and len(gets) <= len(FLEET) * 3 // 2 + 1
    # On average: on a loaded machine the first requests go out unevenly, so one peak says little.
    third = len(on_arrival) // 3
    assert statistics.mean(on_arrival[-third:]) < statistics.mean(on_arrival[:third]), on_arrival


#: A storm of SlowDown: every object GET refused for `STORM_SECONDS` once `STORM_AFTER` went through, as S3 answers
#: while it scales a prefix up; enough objects after it for the fleet to come back.
STORM_AFTER, STORM_SECONDS = 300, 2.0
STORMY = {f"{i:04}.bin": os.urandom(1024) for i in range(2400)}
#: The most probes a fleet that holds may send through the storm: one at a time, `FIRST_PAUSE_SECONDS` apart at the
#: least (the jitter only lengthens the pauses).
PROBES_IN_A_STORM = math.ceil(STORM_SECONDS / FIRST_PAUSE_SECONDS) + 1


def test_s3_through_a_storm_of_slowdown_the_fleet_holds_and_probes_then_completes(
    seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path
):
    """Bound by events, not seconds: every object lands, and the storm answers no more SlowDowns than the requests
    under way when it began (at most the run's `max_requests`) and one probe at a time after them; a fleet that did not
    hold would be refused each of its retries. How soon it is back at its level is speed, measured side by side in
    bench/throttling.py (`make bench-throttling`); the ramp's way back is tested with a driven clock (test_throttle.py).
    """
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda item: s3.put_object(Bucket=bucket, Key=f"stormy/{item[0]}", Body=item[1]), STORMY.items()))
    output = tmp_path / "out"
    with Relay(seaweed.endpoint) as relay:
        storm = relay.add_fault(
            StatusFault(status=503, times=None, match=f"/{bucket}/stormy/", method="GET", after=STORM_AFTER,
                        lasting=STORM_SECONDS)
        )  # fmt: skip
        env = {**seaweed.env(), "ENDPOINT": relay.endpoint, "STORAGE_URI": f"s3://{bucket}/stormy"}
        result = run_program("dataset", {**env, "OUTPUT_PATH": str(output)}, timeout=HANG_CEILING_SECONDS)
    assert result.code == 0, result.stderr
    assert tree(output) == STORMY and completed(output)
    assert storm.began_at is not None and storm.hits > 0
    (fetching,) = result.named("fetching")
    assert storm.hits <= fetching["max_requests"] + PROBES_IN_A_STORM, (storm.hits, fetching["max_requests"])


def test_s3_throttling_without_end_is_bounded_by_timeout(
    seaweed: SeaweedFS, s3_relay: tuple[Relay, str], tmp_path: Path
):
    relay, bucket = s3_relay
    relay.add_fault(StatusFault(status=503, times=None, match="big.bin"))
    result = run_until_the_deadline_catches(
        "big.bin",
        4,
        lambda deadline: s3_fetch(seaweed, relay, bucket, tmp_path / f"out-{deadline}", TIMEOUT=str(deadline)),
    )
    assert result.named("waiting to retry") and not any(completed(output) for output in tmp_path.iterdir())


def put_with_checksum(seaweed: SeaweedFS, bucket: str, key: str, body: bytes, stored: str | None) -> None:
    """Store `body` with S3's own checksum in the `stored` algorithm (None: none, the ETag is its MD5)."""
    from botocore.config import Config

    uploader = seaweed.client(
        config=Config(s3={"addressing_style": "path"}, request_checksum_calculation="when_required")
    )
    extra = {"ChecksumAlgorithm": stored} if stored else {}
    uploader.put_object(Bucket=bucket, Key=key, Body=body, **extra)


@pytest.mark.parametrize(
    ("stored", "named"),
    [
        ("CRC32", "crc32 checksum mismatch"),  # boto3's default since 2025: the cheaper check
        ("SHA256", "sha256 checksum mismatch"),
        (None, "md5 checksum mismatch"),  # stored without a checksum of its own: its ETag is the MD5
    ],
)
def test_s3_a_body_corrupted_in_flight_every_time_fails_the_run(
    seaweed: SeaweedFS, bucket: str, tmp_path: Path, stored: str | None, named: str
):
    put_with_checksum(seaweed, bucket, "m/data.bin", b"payload" * 1000, stored)
    with Relay(seaweed.endpoint) as relay:
        corrupt = relay.add_fault(CorruptFault(match="data.bin", times=None))
        result = s3_fetch(seaweed, relay, bucket, tmp_path / "out")
    assert result.code == 1 and corrupt.hits == 5  # fetched again, a few times, then given up on
    assert named in result.last["error"] and "corrupt" in result.last["error"] and "data.bin" in result.last["error"]
    assert "data.bin" not in tree(tmp_path / "out") and not completed(tmp_path / "out")


@pytest.mark.parametrize("stored", ["CRC32", None], ids=["crc32", "plain etag"])
def test_s3_a_middle_range_corrupted_once_is_caught_and_the_object_fetched_again(
    seaweed: SeaweedFS, bucket: str, tmp_path: Path, stored: str | None
):
    put_with_checksum(seaweed, bucket, "m/ranged.bin", RANGED, stored)
    with Relay(seaweed.endpoint) as relay:
        corrupt = relay.add_fault(CorruptFault(match="ranged.bin", range_from=MIDDLE_RANGE))
        result = s3_fetch(seaweed, relay, bucket, tmp_path / "out")
        gets = [path for path in relay.traffic.object_gets() if "ranged.bin" in path]
    assert result.code == 0, result.stderr
    assert corrupt.hits == 1 and len(gets) == 5 + 1  # five ranges, then the whole object once more
    assert result.named("checksum mismatch, fetching the file again")
    assert tree(tmp_path / "out") == {"ranged.bin": RANGED} and completed(tmp_path / "out")
    # Fetched again whole, the object's own checksum comes with it (SeaweedFS sends none with ranges).
    assert manifest_checksums(tmp_path / "out") == {"ranged.bin": (stored or "md5").lower()}


def test_s3_a_multipart_object_is_recorded_as_checked_by_size_and_etag(
    seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path
):
    upload = s3.create_multipart_upload(Bucket=bucket, Key="m/parts.bin")["UploadId"]
    chunks = [RANGED[i : i + (6 << 20)] for i in range(0, 18 << 20, 6 << 20)]  # its ETag ends in -3: no MD5
    parts = [
        {"PartNumber": n, "ETag": s3.upload_part(Bucket=bucket, Key="m/parts.bin", UploadId=upload, PartNumber=n,
                                                 Body=chunk)["ETag"]}
        for n, chunk in enumerate(chunks, 1)
    ]  # fmt: skip
    s3.complete_multipart_upload(Bucket=bucket, Key="m/parts.bin", UploadId=upload, MultipartUpload={"Parts": parts})
    with Relay(seaweed.endpoint) as relay:
        result = s3_fetch(seaweed, relay, bucket, tmp_path / "out")
    assert result.code == 0, result.stderr
    assert tree(tmp_path / "out") == {"parts.bin": b"".join(chunks)}
    assert manifest_checksums(tmp_path / "out") == {"parts.bin": "size+version"}


@pytest.mark.parametrize("stored", ["CRC32", None], ids=["crc32", "plain etag"])
def test_s3_a_ranged_object_corrupted_every_time_fails_the_run_naming_it(
    seaweed: SeaweedFS, bucket: str, tmp_path: Path, stored: str | None
):
    put_with_checksum(seaweed, bucket, "m/ranged.bin", RANGED, stored)
    with Relay(seaweed.endpoint) as relay:
        relay.add_fault(CorruptFault(match="ranged.bin", times=None))
        result = s3_fetch(seaweed, relay, bucket, tmp_path / "out")
    assert result.code == 1
    error = result.last["error"]
    assert "ranged.bin" in error and "checksum mismatch" in error and "after 5 attempts" in error
    assert "ranged.bin" not in tree(tmp_path / "out") and not completed(tmp_path / "out")


def test_s3_persistent_resets_exit_1(seaweed: SeaweedFS, s3_relay: tuple[Relay, str], tmp_path: Path):
    relay, bucket = s3_relay
    relay.add_fault(ResetFault(after_bytes=10_000, times=None, match="big.bin"))
    result = s3_fetch(seaweed, relay, bucket, tmp_path / "out")
    assert result.code == 1 and "after 5 attempts" in result.last["error"]
    assert not completed(tmp_path / "out")


def test_s3_refused_connections_fail_the_listing_cleanly(
    seaweed: SeaweedFS, s3_relay: tuple[Relay, str], tmp_path: Path
):
    relay, bucket = s3_relay
    relay.refuse = True
    result = s3_fetch(seaweed, relay, bucket, tmp_path / "out")
    assert result.code == 1 and "cannot list" in result.last["error"]
    assert tree(tmp_path / "out") == {}


# -- Hub ------------------------------------------------------------------------------------------------------------


@dataclass
class HubRelays:
    hub: HubServer
    api: Relay
    cdn: Relay


@pytest.fixture
def hub_relays() -> Iterator[HubRelays]:
    with HubServer() as hub, Relay(hub.endpoint) as api, Relay(hub.cdn_endpoint) as cdn:
        hub.cdn_public_endpoint = cdn.endpoint
        hub.add_repo("org/m", {"model.safetensors": BIG, **SMALL})
        yield HubRelays(hub, api, cdn)


def hub_fetch(relays: HubRelays, output: Path, **extra: str) -> ProgramResult:
    env = {"STORAGE_URI": "hf://org/m", "OUTPUT_PATH": str(output), "HF_ENDPOINT": relays.api.endpoint}
    return run_program("model", {**env, **extra}, timeout=HANG_CEILING_SECONDS)


HUB_EXPECTED = {"model.safetensors": BIG, **SMALL}


def test_hub_survives_503s_on_the_api_and_resets_on_the_cdn(hub_relays: HubRelays, tmp_path: Path):
    busy = hub_relays.api.add_fault(
        StatusFault(status=503, times=2, match="/resolve/", body=b'{"error": "busy"}', content_type="application/json")
    )
    reset = hub_relays.cdn.add_fault(ResetFault(after_bytes=2_000_000, times=2))
    result = hub_fetch(hub_relays, tmp_path / "out")
    assert result.code == 0, result.stdout + result.stderr
    assert busy.hits == 2 and reset.hits == 2
    assert tree(tmp_path / "out") == HUB_EXPECTED and completed(tmp_path / "out")


@pytest.mark.parametrize("variable", ["READ_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT"])
def test_hub_stall_longer_than_the_read_timeout_is_retried(hub_relays: HubRelays, tmp_path: Path, variable: str):
    stall = hub_relays.cdn.add_fault(StallFault(seconds=ENDLESS_STALL_SECONDS, after_bytes=1_000_000, times=1))
    result = hub_fetch(hub_relays, tmp_path / "out", **{variable: "1"})  # waiting the stall out passes the ceiling
    assert result.code == 0, result.stderr
    assert stall.hits == 1
    assert tree(tmp_path / "out") == HUB_EXPECTED


def test_hub_resume_that_the_server_answers_whole_starts_the_file_over(hub_relays: HubRelays, tmp_path: Path):
    hub_relays.hub.honour_ranges = False
    probe = hub_relays.cdn.add_fault(ResetFault(after_bytes=5_000_000, times=1))  # answered whole, dropped at once
    reset = hub_relays.cdn.add_fault(ResetFault(after_bytes=5_000_000, times=1))
    result = hub_fetch(hub_relays, tmp_path / "out")
    assert result.code == 0, result.stderr
    assert probe.hits == 1 and reset.hits == 1
    assert tree(tmp_path / "out") == HUB_EXPECTED and completed(tmp_path / "out")
    assert hub_relays.hub.served_bytes["cdn"] >= len(BIG) + 5_000_000  # sent again from its first byte


@pytest.mark.parametrize("match", ["/api/models/org/m/revision/", "/api/models/org/m/tree/"], ids=["resolve", "tree"])
def test_hub_rate_limits_on_the_api_are_waited_out(hub_relays: HubRelays, tmp_path: Path, match: str):
    limited = hub_relays.api.add_fault(
        StatusFault(status=429, times=6, match=match, headers={"Retry-After": "0.3"},
                    body=b'{"error": "rate limited"}', content_type="application/json")
    )  # fmt: skip
    result = hub_fetch(hub_relays, tmp_path / "out")
    assert result.code == 0, result.stdout + result.stderr
    assert limited.hits == 6  # more than the attempts a failing request gets: throttling is waited out
    assert tree(tmp_path / "out") == HUB_EXPECTED
    # huggingface_hub retries tree pages itself too; every wait of ours honours Retry-After.
    waits = result.named("waiting to retry")
    assert waits and all(wait["wait_s"] >= 0.3 and "429" in wait["reason"] for wait in waits)


def test_a_malformed_hub_download_timeout_is_a_configuration_error(hub_relays: HubRelays, tmp_path: Path):
    result = hub_fetch(hub_relays, tmp_path / "out", HF_HUB_DOWNLOAD_TIMEOUT="soon")
    assert (
        result.code == 2 and "HF_HUB_DOWNLOAD_TIMEOUT: expected a positive number, got 'soon'" in result.last["error"]
    )


def test_hub_persistent_failure_exits_1_with_nothing_complete(hub_relays: HubRelays, tmp_path: Path):
    hub_relays.cdn.add_fault(StatusFault(status=500, times=None, body=b"{}", content_type="application/json"))
    result = hub_fetch(hub_relays, tmp_path / "out")  # the waits are real: test_retry drives them
    assert result.code == 1 and "after 5 attempts" in result.last["error"]
    assert "model.safetensors" not in tree(tmp_path / "out") and not completed(tmp_path / "out")
