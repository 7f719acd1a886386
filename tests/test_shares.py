"""A plan split over several initializers writing one folder (SHARD_INDEX / SHARD_COUNT), and the cache source's
per-node shards (SHARD_INDEX): the same result as one run, balanced shares, failures that leave no manifest."""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from devkit.iceberg import simple_table, sql_catalog
from devkit.programs import ProgramResult, run_program, start_program, wait_for_event
from devkit.relay import Relay
from devkit.seaweed import SeaweedFS
from initializers.cache.sharding import cut
from initializers.common.remote_file import RemoteFile
from initializers.plan.index import PlanIndex

SIZES = [random.Random(7).choice([1, 3, 17, 64, 200, 900]) * 1024 for _ in range(60)]
OBJECTS = {f"d/{i:03d}.bin": os.urandom(size) for i, size in enumerate(SIZES)}
TOTAL_BYTES = sum(SIZES)


@pytest.fixture
def objects(s3: Any, bucket: str) -> str:
    for key, body in OBJECTS.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    return f"s3://{bucket}/d"


def _finish(process: subprocess.Popen[str]) -> ProgramResult:
    stdout, stderr = process.communicate(timeout=120)
    return ProgramResult(process.returncode, stdout, stderr)


def _entries(output: Path) -> list[dict[str, Any]]:
    """The manifest's file entries without their timing field."""
    files = json.loads((output / ".initializer" / "manifest.json").read_text())["files"]
    return [{key: value for key, value in entry.items() if key != "mtime_ns"} for entry in files]


def _env(seaweed: SeaweedFS, endpoint: str, uri: str, output: Path, **extra: str) -> dict[str, str]:
    return {**seaweed.env(), "ENDPOINT": endpoint, "STORAGE_URI": uri, "OUTPUT_PATH": str(output), **extra}


def test_three_shares_on_one_folder_make_what_one_run_makes(seaweed: SeaweedFS, objects: str, tmp_path: Path) -> None:
    with Relay(seaweed.endpoint) as relay:
        runs = [start_program("dataset", _env(seaweed, relay.endpoint, objects, tmp_path / "split",
                                              SHARD_INDEX=str(i), SHARD_COUNT="3")) for i in range(3)]  # fmt: skip
        results = [_finish(run) for run in runs]
        assert [r.code for r in results] == [0, 0, 0], [r.last for r in results]
        assert relay.traffic.body_bytes == TOTAL_BYTES, "every object fetched once, by one share"
        again = run_program("dataset", _env(seaweed, relay.endpoint, objects, tmp_path / "split", SHARD_INDEX="1",
                                            SHARD_COUNT="3"))  # fmt: skip
        assert again.code == 0 and again.named("up to date"), again.stderr
    assert sum(bool(r.named("set complete")) for r in results) == 1
    fetched = {f"d/{p.name}": p.read_bytes() for p in (tmp_path / "split").glob("*.bin")}
    assert fetched == OBJECTS
    single = run_program("dataset", _env(seaweed, seaweed.endpoint, objects, tmp_path / "single"))
    assert single.code == 0
    assert _entries(tmp_path / "split") == _entries(tmp_path / "single")
    source = json.loads((tmp_path / "split" / ".initializer" / "manifest.json").read_text())["source"]
    assert source["shards"] == 3 and len(source["plan"]) == 64


def test_a_share_killed_mid_run_then_run_again_completes_the_set_fetching_only_what_it_lacked(
    seaweed: SeaweedFS, objects: str, tmp_path: Path
) -> None:
    output = tmp_path / "out"
    with Relay(seaweed.endpoint) as relay:
        for index in (0, 2):
            done = run_program("dataset", _env(seaweed, relay.endpoint, objects, output, SHARD_INDEX=str(index),
                                               SHARD_COUNT="3"))  # fmt: skip
            assert done.code == 0 and done.named("share complete")
        assert not (output / ".initializer" / "manifest.json").exists()
        relay.bytes_per_second = 512 * 1024
        relay.reset()
        share = start_program("dataset", _env(seaweed, relay.endpoint, objects, output, SHARD_INDEX="1",
                                              SHARD_COUNT="3", MAX_WORKERS="1"))  # fmt: skip
        share_bytes = wait_for_event(share, "share")["bytes"]
        while relay.traffic.body_bytes < share_bytes // 3:
            assert share.poll() is None
            time.sleep(0.01)
        share.kill()
        share.wait()
        first_bytes = relay.traffic.body_bytes
        assert not (output / ".initializer" / "manifest.json").exists()
        relay.bytes_per_second = None
        relay.reset()
        rerun = run_program("dataset", _env(seaweed, relay.endpoint, objects, output, SHARD_INDEX="1", SHARD_COUNT="3"))
        assert rerun.code == 0 and rerun.named("set complete"), rerun.stdout + rerun.stderr
        assert relay.traffic.body_bytes < share_bytes, "what the killed run finished is not fetched again"
        assert relay.traffic.body_bytes + first_bytes >= share_bytes
    assert {f"d/{p.name}": p.read_bytes() for p in output.glob("*.bin")} == OBJECTS
    assert len(_entries(output)) == len(OBJECTS)


def test_a_source_changed_between_the_shares_listings_fails_cleanly(
    seaweed: SeaweedFS, s3: Any, bucket: str, objects: str, tmp_path: Path
) -> None:
    output = tmp_path / "out"
    first = run_program("dataset", _env(seaweed, seaweed.endpoint, objects, output, SHARD_INDEX="0", SHARD_COUNT="2"))
    assert first.code == 0 and first.named("share complete")
    s3.put_object(Bucket=bucket, Key="d/000.bin", Body=b"rewritten between the two listings")
    second = run_program("dataset", _env(seaweed, seaweed.endpoint, objects, output, SHARD_INDEX="1", SHARD_COUNT="2"))
    assert second.code == 1
    assert "the source changed between the shares' listings: share(s) [0] of 2" in second.last["error"]
    assert not (output / ".initializer" / "manifest.json").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"SHARD_INDEX": "3", "SHARD_COUNT": "3"}, "SHARD_INDEX=3 is out of range: 3 shards are numbered 0 to 2"),
        ({"SHARD_INDEX": "-1", "SHARD_COUNT": "3"}, "SHARD_INDEX: expected an integer, 0 or more"),
        ({"SHARD_INDEX": "1"}, "SHARD_INDEX is set but SHARD_COUNT is not"),
        ({"SHARD_COUNT": "2"}, "SHARD_COUNT is set but SHARD_INDEX is not"),
        ({"SHARD_COUNT": "2", "JOB_COMPLETION_INDEX": "2"}, "SHARD_INDEX=2 is out of range"),
    ],
)
def test_bad_shard_settings_exit_2(extra: dict[str, str], message: str, tmp_path: Path) -> None:
    result = run_program("dataset", {"STORAGE_URI": "s3://b/d", "OUTPUT_PATH": str(tmp_path), **extra})
    assert result.code == 2 and message in result.last["error"], result.last


def test_a_share_running_twice_at_once_is_refused(seaweed: SeaweedFS, objects: str, tmp_path: Path) -> None:
    with Relay(seaweed.endpoint) as relay:
        relay.bytes_per_second = 64 * 1024  # one object at a time: the share takes far longer than a second run's start
        env = _env(seaweed, relay.endpoint, objects, tmp_path / "out", SHARD_INDEX="0", SHARD_COUNT="2")
        first = start_program("dataset", {**env, "MAX_WORKERS": "1"})
        wait_for_event(first, "share")
        duplicate = run_program("dataset", env)
        first.kill()
        first.wait()
    assert duplicate.code == 2
    assert "SHARD_INDEX 0 (of 2) is already being fetched" in duplicate.last["error"]


def test_the_job_completion_index_of_an_indexed_job_names_the_share(
    seaweed: SeaweedFS, objects: str, tmp_path: Path
) -> None:
    results = [
        run_program(
            "dataset",
            _env(seaweed, seaweed.endpoint, objects, tmp_path / "out", SHARD_COUNT="2", JOB_COMPLETION_INDEX=str(i)),
        )
        for i in (1, 0)
    ]
    assert [r.code for r in results] == [0, 0]
    assert [r.named("share")[0]["shard"] for r in results] == [1, 0]
    assert results[1].named("set complete")


@pytest.mark.parametrize("count", [1, 2, 4, 8])
def test_shares_are_balanced_by_bytes(count: int, tmp_path: Path) -> None:
    sizes = [random.Random(11).choice([1, 10, 100, 1000, 10_000]) * random.Random(i).randint(1, 9) for i in range(2000)]
    index = PlanIndex(tmp_path / "index.sqlite")
    index.plan([RemoteFile(f"f/{i:05d}", size, "v", f"f/{i:05d}") for i, size in enumerate(sizes)])
    index.assign_shares(count)
    shares = index.shares(count)
    assert sum(files for files, _ in shares) == 2000 and sum(size for _, size in shares) == sum(sizes)
    assert max(size for _, size in shares) <= max(1.1 * sum(sizes) / count, max(sizes))
    again = PlanIndex(tmp_path / "again.sqlite")
    again.plan([RemoteFile(f"f/{i:05d}", size, "v", f"f/{i:05d}") for i, size in reversed(list(enumerate(sizes)))])
    again.assign_shares(count)  # listed in another order: split the same way

    def split(plan: PlanIndex) -> list[list[str]]:
        return [[file.path for batch in plan.share(share) for file in batch] for share in range(count)]

    assert split(again) == split(index)


def test_a_cache_node_materialises_only_its_shard_reading_only_its_data_files(
    seaweed: SeaweedFS, bucket: str, tmp_path: Path
) -> None:
    table = simple_table(sql_catalog(tmp_path, f"s3://{bucket}/warehouse", seaweed), "reviews", 6, 1000)
    env = {**seaweed.env(), "STORAGE_URI": "cache://shop/reviews", "METADATA_LOC": table.metadata_location,
           "NUM_DATA_NODES": "3"}  # fmt: skip
    whole = run_program("dataset", {**env, "OUTPUT_PATH": str(tmp_path / "whole")})
    assert whole.code == 0
    tasks = sorted(table.scan().plan_files(), key=lambda t: t.file.file_path)
    overlapping = {tasks[piece.input].file.file_path.split("/", 3)[3] for piece in cut(
        [t.file.record_count for t in tasks], 3) if piece.shard == 1}  # fmt: skip
    with Relay(seaweed.endpoint) as relay:
        node = run_program("dataset", {**env, "ENDPOINT": relay.endpoint, "SHARD_INDEX": "1",
                                       "OUTPUT_PATH": str(tmp_path / "node")})  # fmt: skip
    assert node.code == 0, node.stdout + node.stderr
    assert sorted(p.name for p in (tmp_path / "node").glob("shard-*")) == ["shard-1"]

    def rows(folder: Path) -> Counter[str]:
        return Counter(json.dumps(r, sort_keys=True) for r in pq.read_table(folder).to_pylist())

    assert rows(tmp_path / "node" / "shard-1") == rows(tmp_path / "whole" / "shard-1")
    read = {path.split("/", 2)[2] for path in relay.traffic.object_gets() if "/data/" in path}
    assert read == overlapping and len(read) < len(tasks)


def test_a_hub_model_split_over_two_shares_at_once(tmp_path: Path) -> None:
    """The Hub's plan splits the same way: both shares resolve the one commit, each fetches its files."""
    from devkit.hubserver import HubServer

    files = {f"model-{i:02d}.safetensors": os.urandom(random.Random(i).randint(1, 300) * 1024) for i in range(10)}
    files["config.json"] = b"{}"
    with HubServer() as hub:
        hub.add_repo("org/split", files)
        env = {"STORAGE_URI": "hf://org/split", "OUTPUT_PATH": str(tmp_path / "m"), "HF_ENDPOINT": hub.endpoint,
               "SHARD_COUNT": "2"}  # fmt: skip
        shares = [start_program("model", {**env, "SHARD_INDEX": str(i)}) for i in range(2)]
        results = [_finish(share) for share in shares]
    assert [r.code for r in results] == [0, 0], [r.last for r in results]
    assert all(r.named("share")[0]["files"] > 0 for r in results), "both shares had work"
    assert {p.name: p.read_bytes() for p in (tmp_path / "m").iterdir() if p.is_file()} == files
    manifest = json.loads((tmp_path / "m" / ".initializer" / "manifest.json").read_text())
    assert manifest["total_files"] == 11 and manifest["source"]["shards"] == 2
