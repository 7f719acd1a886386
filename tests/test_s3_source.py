"""The S3 source end to end: the real programs against a real SeaweedFS with enforced credentials."""

from __future__ import annotations

import hashlib
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from devkit.outputs import manifest, tree
from devkit.processes import settle
from devkit.programs import ProgramResult, run_program, start_program
from devkit.relay import Relay, self_signed_certificate
from devkit.seaweed import ACCESS_KEY, PUBLIC_BUCKET, REGION, SECRET_KEY, SeaweedFS
from initializers.destination.journal import JOURNAL, journal_entries
from initializers.destination.state import StateDir


def put_all(s3: Any, bucket: str, objects: dict[str, bytes]) -> None:
    for key, body in objects.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body)


def fetch(
    seaweed: SeaweedFS, uri: str, output: Path, kind: str = "dataset", endpoint: str | None = None, **extra: str
) -> ProgramResult:
    env = {**seaweed.env(), "STORAGE_URI": uri, "OUTPUT_PATH": str(output), **extra}
    if endpoint:
        env["ENDPOINT"] = endpoint
    return run_program(kind, env)


def test_nested_prefix_is_copied_relative_to_the_prefix(seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path):
    objects = {
        "data/train/part-0.jsonl": b'{"x": 1}\n' * 100,
        "data/train/deep/er/part-1.jsonl": os.urandom(70_000),
        "data/test.jsonl": b"",
        "other/ignored.txt": b"not under the prefix",
    }
    put_all(s3, bucket, objects)
    result = fetch(seaweed, f"s3://{bucket}/data", tmp_path / "out")
    assert result.code == 0, result.stdout + result.stderr
    assert tree(tmp_path / "out") == {
        "train/part-0.jsonl": objects["data/train/part-0.jsonl"],
        "train/deep/er/part-1.jsonl": objects["data/train/deep/er/part-1.jsonl"],
        "test.jsonl": b"",
    }
    recorded = manifest(tmp_path / "out")
    assert recorded["source"]["uri"] == f"s3://{bucket}/data"
    assert {f["path"]: f["size"] for f in recorded["files"]} == {
        "test.jsonl": 0,
        "train/deep/er/part-1.jsonl": 70_000,
        "train/part-0.jsonl": 900,
    }
    etags = {f["path"]: f["version"] for f in recorded["files"]}
    assert etags["train/part-0.jsonl"] == hashlib.md5(objects["data/train/part-0.jsonl"]).hexdigest()
    assert result.last["event"] == "done" and result.last["files"] == 3 and result.last["bytes"] == 70_900


def test_an_empty_object_is_asked_for_and_verified_by_what_s3_sends_for_it(
    seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path
):
    put_all(s3, bucket, {"e/empty.txt": b""})
    result = fetch(seaweed, f"s3://{bucket}/e", tmp_path / "out")
    assert result.code == 0, result.stdout + result.stderr
    (entry,) = manifest(tmp_path / "out")["files"]
    assert entry["checksum"] in (
        {"algorithm": "md5", "hexdigest": hashlib.md5(b"").hexdigest()},
        {"algorithm": "crc32", "hexdigest": "00000000"},
    ), entry


def test_a_prefix_is_a_folder_not_a_string_prefix(seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path):
    put_all(s3, bucket, {"data/a.txt": b"a", "data-old/b.txt": b"b", "database.txt": b"c"})
    result = fetch(seaweed, f"s3://{bucket}/data", tmp_path / "out")
    assert result.code == 0, result.stderr
    assert tree(tmp_path / "out") == {"a.txt": b"a"}


def test_trailing_slash_and_whole_bucket(seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path):
    put_all(s3, bucket, {"data/a.txt": b"a", "top.txt": b"t"})
    assert fetch(seaweed, f"s3://{bucket}/data/", tmp_path / "one").code == 0
    assert tree(tmp_path / "one") == {"a.txt": b"a"}
    assert fetch(seaweed, f"s3://{bucket}", tmp_path / "all").code == 0
    assert tree(tmp_path / "all") == {"data/a.txt": b"a", "top.txt": b"t"}


def test_a_uri_naming_one_object_fetches_that_object(seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path):
    body = os.urandom(5000)
    siblings = {"models/bert/model.safetensors.index.json": b"{}", "models/bert/config.json": b"{}"}
    put_all(s3, bucket, {"models/bert/model.safetensors": body, **siblings})
    result = fetch(seaweed, f"s3://{bucket}/models/bert/model.safetensors", tmp_path / "out", kind="model")
    assert result.code == 0, result.stderr
    assert tree(tmp_path / "out") == {"model.safetensors": body}
    # A string prefix of keys that is neither an object nor a folder names nothing.
    partial = fetch(seaweed, f"s3://{bucket}/models/bert/model", tmp_path / "none", kind="model")
    assert partial.code == 1 and "has no files" in partial.last["error"]


def test_more_than_one_listing_page(seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path):
    objects = {f"shards/{i // 100:02d}/{i:05d}.bin": i.to_bytes(4, "big") * (i % 5) for i in range(1234)}
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda kv: s3.put_object(Bucket=bucket, Key=kv[0], Body=kv[1]), objects.items()))
    result = fetch(seaweed, f"s3://{bucket}/shards", tmp_path / "out")
    assert result.code == 0, result.stderr
    assert tree(tmp_path / "out") == {k.removeprefix("shards/"): v for k, v in objects.items()}


def test_folder_markers_are_skipped_and_empty_and_unicode_names_kept(
    seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path
):
    put_all(
        s3,
        bucket,
        {
            "ds/": b"",
            "ds/sub/": b"",
            "ds/empty.txt": b"",
            "ds/données/naïve café.txt": "é".encode(),
            "ds/日本/データ 1+1=2.bin": b"\x00\x01",
        },
    )
    result = fetch(seaweed, f"s3://{bucket}/ds", tmp_path / "out")
    assert result.code == 0, result.stderr
    assert tree(tmp_path / "out") == {
        "empty.txt": b"",
        "données/naïve café.txt": "é".encode(),
        "日本/データ 1+1=2.bin": b"\x00\x01",
    }
    assert not (tmp_path / "out" / "sub").exists()


WEIGHTS = {
    "m/config.json": b"{}",
    "m/model.safetensors": b"S" * 100,
    "m/pytorch_model.bin": b"B" * 100,
    "m/flax_model.msgpack": b"F" * 10,
    "m/tf_model.h5": b"H" * 10,
    "m/sub/optimizer.pt": b"P" * 10,
    "m/logs/run.log": b"log",
}


@pytest.mark.parametrize(
    ("kind", "patterns", "expected"),
    [
        ("model", None, {"config.json", "model.safetensors"}),  # no trainer loads logs/run.log
        ("model", "", set(k.removeprefix("m/") for k in WEIGHTS)),
        ("model", "*.safetensors,logs/", {"config.json", "pytorch_model.bin", "flax_model.msgpack", "tf_model.h5",
                                          "sub/optimizer.pt"}),
        ("dataset", None, set(k.removeprefix("m/") for k in WEIGHTS)),
        ("dataset", "", set(k.removeprefix("m/") for k in WEIGHTS)),
        ("dataset", "*.bin, sub/*", {"config.json", "model.safetensors", "flax_model.msgpack", "tf_model.h5",
                                     "logs/run.log"}),
        # Patterns match the path relative to the prefix: "m/*" would match the full key, and matches nothing here.
        ("dataset", "m/*", set(k.removeprefix("m/") for k in WEIGHTS)),
    ],
)  # fmt: skip
def test_ignore_patterns_unset_empty_and_custom(
    seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path, kind: str, patterns: str | None, expected: set[str]
):
    put_all(s3, bucket, WEIGHTS)
    extra = {} if patterns is None else {"IGNORE_PATTERNS": patterns}
    result = fetch(seaweed, f"s3://{bucket}/m", tmp_path / "out", kind=kind, **extra)
    assert result.code == 0, result.stderr
    assert set(tree(tmp_path / "out")) == expected


@pytest.mark.parametrize("default_list", [None, "*.msgpack,*.h5,*.bin,*.pt,*.pth"])
def test_model_without_safetensors_keeps_bin_weights_under_the_default_list(
    seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path, default_list: str | None
):
    put_all(s3, bucket, {"m/config.json": b"{}", "m/pytorch_model.bin": b"B" * 10, "m/flax.msgpack": b"F"})
    extra = {} if default_list is None else {"IGNORE_PATTERNS": default_list}
    result = fetch(seaweed, f"s3://{bucket}/m", tmp_path / "out", kind="model", **extra)
    assert result.code == 0, result.stderr
    assert set(tree(tmp_path / "out")) == {"config.json", "pytorch_model.bin"}
    assert result.named("keeping .bin/.pt/.pth weights")
    # An explicit list is the user's decision, even when it leaves no weights.
    result = fetch(seaweed, f"s3://{bucket}/m", tmp_path / "explicit", kind="model", IGNORE_PATTERNS="*.bin")
    assert result.code == 0
    assert set(tree(tmp_path / "explicit")) == {"config.json", "flax.msgpack"}


def test_small_objects_land_whole_with_no_more_requests_at_once_than_max_workers(
    seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path
):
    """600 small objects, straight from SeaweedFS and through a relay that counts the requests at once: every byte
    lands, and never more than MAX_WORKERS requests are in flight, whichever way the files went. Which way is the
    round trips' to decide (the lane under LANE_ROUND_TRIP_SECONDS), measured under the machine's load: a clean-clone
    run on loaded cores saw even SeaweedFS's loopback answers past it and sent no file through the lane, so the choice
    is tested where the round trips are given (tests/test_lane.py), not here."""
    objects = {f"tiny/{i:03d}.txt": os.urandom(100 + i) for i in range(600)}
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda item: s3.put_object(Bucket=bucket, Key=item[0], Body=item[1]), objects.items()))
    env = {**seaweed.env(), "STORAGE_URI": f"s3://{bucket}/tiny", "LOG_LEVEL": "debug", "MAX_WORKERS": "12"}
    direct = run_program("dataset", {**env, "OUTPUT_PATH": str(tmp_path / "direct")})
    with Relay(seaweed.endpoint) as relay:
        relayed = run_program("dataset", {**env, "ENDPOINT": relay.endpoint, "OUTPUT_PATH": str(tmp_path / "relayed")})
    for result, output in ((direct, tmp_path / "direct"), (relayed, tmp_path / "relayed")):
        assert result.code == 0, result.stderr
        assert {f"tiny/{p.name}": p.read_bytes() for p in output.iterdir() if p.is_file()} == objects
    assert max(relay.traffic.object_gets_on_arrival) <= 12


def test_large_object_in_parallel_ranges_is_exact(seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path):
    body = os.urandom(40 * 1024 * 1024 + 12345)  # five 8 MiB ranges, the last one short
    s3.put_object(Bucket=bucket, Key="big/blob.bin", Body=body)
    result = fetch(seaweed, f"s3://{bucket}/big", tmp_path / "out", MAX_WORKERS="3")
    assert result.code == 0, result.stderr
    assert hashlib.sha256((tmp_path / "out" / "blob.bin").read_bytes()).digest() == hashlib.sha256(body).digest()
    assert list((tmp_path / "out" / ".initializer" / "tmp").iterdir()) == []


def test_a_key_that_would_escape_is_refused(seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path):
    put_all(s3, bucket, {"ds/fine.txt": b"fine"})
    with Relay(seaweed.endpoint) as relay:
        relay.injected[bucket] = {"ds/../../escape.txt": b"evil"}
        result = fetch(seaweed, f"s3://{bucket}/ds", tmp_path / "ws" / "out", endpoint=relay.endpoint)
    assert result.code == 1
    assert "'..'" in result.last["error"] and "escape" in result.last["error"]
    assert not (tmp_path / "ws" / "escape.txt").exists()
    assert not (tmp_path / "escape.txt").exists()
    # The listing may hand the good key to a transfer before it lists the bad one: it may be complete, never partial.
    assert tree(tmp_path / "ws" / "out") in ({}, {"fine.txt": b"fine"})
    assert not (tmp_path / "ws" / "out" / ".initializer" / "manifest.json").exists()


def test_a_listing_of_a_few_pages_is_one_chain_of_plain_pages(seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path):
    keys = [f"ds/top-{i}.txt" for i in range(3)] + [
        f"ds/f{folder:02d}/s{sub}/k{index:04d}.bin" for folder in range(12) for sub in range(4) for index in range(62)
    ]
    keys.append("ds/f00/direct é+.txt")
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda key: s3.put_object(Bucket=bucket, Key=key, Body=key.encode()), keys))
    with Relay(seaweed.endpoint) as relay:
        result = fetch(seaweed, f"s3://{bucket}/ds", tmp_path / "out", endpoint=relay.endpoint)
        listings = [path for method, path in relay.traffic.requests if "list-type=" in path]
    assert result.code == 0, result.stderr
    assert tree(tmp_path / "out") == {key.removeprefix("ds/"): key.encode() for key in keys}
    # 2980 keys: three pages, each asked once, with no folder listing and no ranges to cut the listing at
    assert len(listings) == 3 and not any("delimiter=" in path or "start-after=" in path for path in listings)
    assert manifest(tmp_path / "out")["total_files"] == len(keys)


def test_keys_colliding_after_normalisation_are_refused(seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path):
    put_all(s3, bucket, {"ds/a/b.txt": b"1"})
    with Relay(seaweed.endpoint) as relay:
        relay.injected[bucket] = {"ds/a//b.txt": b"2"}
        result = fetch(seaweed, f"s3://{bucket}/ds", tmp_path / "out", endpoint=relay.endpoint)
    assert result.code == 1
    assert "both map to 'a/b.txt'" in result.last["error"]
    # The listing may hand the first of the two to a transfer before it lists the second: that one may be
    # complete (as the other's content, never a mix), and nothing claims completion.
    assert tree(tmp_path / "out") in ({}, {"a/b.txt": b"1"}, {"a/b.txt": b"2"})
    assert not (tmp_path / "out" / ".initializer" / "manifest.json").exists()


def test_wrong_secret_is_reported_as_rejected_credentials(seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path):
    put_all(s3, bucket, {"a.txt": b"a"})
    result = fetch(seaweed, f"s3://{bucket}", tmp_path / "out", SECRET_ACCESS_KEY="wrong-secret-0d1e")
    assert result.code == 1
    assert "credentials were rejected" in result.last["error"]
    assert "SignatureDoesNotMatch" in result.last["error"]
    assert "wrong-secret-0d1e" not in result.stdout + result.stderr


def test_anonymous_access_to_a_public_bucket(seaweed: SeaweedFS, s3: Any, tmp_path: Path):
    if PUBLIC_BUCKET not in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
        s3.create_bucket(Bucket=PUBLIC_BUCKET)
    put_all(s3, PUBLIC_BUCKET, {"open/data.csv": b"a,b\n1,2\n", "open/big.bin": b"x" * (17 * 1024 * 1024)})
    env = {"STORAGE_URI": f"s3://{PUBLIC_BUCKET}/open", "OUTPUT_PATH": str(tmp_path / "out"),
           "ENDPOINT": seaweed.endpoint, "ANONYMOUS": "true"}  # fmt: skip
    result = run_program("dataset", env)
    assert result.code == 0, result.stderr
    assert tree(tmp_path / "out") == {"data.csv": b"a,b\n1,2\n", "big.bin": b"x" * (17 * 1024 * 1024)}
    # Without ANONYMOUS and without credentials, nothing silently falls back to unsigned requests.
    del env["ANONYMOUS"]
    assert run_program("dataset", {**env, "OUTPUT_PATH": str(tmp_path / "o2"), "HOME": str(tmp_path)}).code == 2


@pytest.mark.parametrize("chain", ["environment", "profile"])
def test_the_standard_credential_chain_applies_without_contract_keys(
    seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path, chain: str
):
    put_all(s3, bucket, {"a.txt": b"chain"})
    env = {"STORAGE_URI": f"s3://{bucket}", "OUTPUT_PATH": str(tmp_path / "out"), "ENDPOINT": seaweed.endpoint,
           "HOME": str(tmp_path)}  # fmt: skip
    if chain == "environment":
        env |= {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": REGION}
    else:
        credentials = tmp_path / "credentials"
        credentials.write_text(f"[train]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n")
        env |= {"AWS_SHARED_CREDENTIALS_FILE": str(credentials), "AWS_PROFILE": "train"}
    result = run_program("dataset", env)
    assert result.code == 0, result.stderr
    assert tree(tmp_path / "out") == {"a.txt": b"chain"}
    assert SECRET_KEY not in result.stdout + result.stderr


@pytest.mark.parametrize("variable", ["AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"])
def test_botocores_endpoint_variables_stand_in_for_an_unset_endpoint(
    seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path, variable: str
):
    """Set by habit for boto3 and the aws CLI, they are honoured as botocore reads them; S3's own wins over every
    service's, here a port where nothing listens."""
    put_all(s3, bucket, {"a.txt": b"endpoint"})
    env = {name: value for name, value in seaweed.env().items() if name != "ENDPOINT"}
    env |= {"STORAGE_URI": f"s3://{bucket}", "OUTPUT_PATH": str(tmp_path / "out"), "HOME": str(tmp_path)}
    env |= {variable: seaweed.endpoint, "AWS_EC2_METADATA_DISABLED": "true"}
    if variable == "AWS_ENDPOINT_URL_S3":
        env["AWS_ENDPOINT_URL"] = "http://127.0.0.1:9"
    result = run_program("dataset", env)
    assert result.code == 0, result.last
    assert tree(tmp_path / "out") == {"a.txt": b"endpoint"}


def imported(stderr: str) -> set[str]:
    """The modules a run imported, read from PYTHONPROFILEIMPORTTIME's lines alone: the logs share stderr with them
    and name the test's bucket, which may hold a module's name."""
    return {line.rpartition("|")[2].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def test_keys_and_an_endpoint_leave_botocore_unimported(seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path):
    """Its import and client cost ~0.2 s before the first byte; with nothing to resolve, it is not loaded. Nor is
    urllib.request while no proxy variable is set (test_proxies covers the runs with one)."""
    put_all(s3, bucket, {"a.txt": b"a"})
    keys = fetch(seaweed, f"s3://{bucket}", tmp_path / "keys", PYTHONPROFILEIMPORTTIME="1", HOME=str(tmp_path))
    modules = imported(keys.stderr)
    assert keys.code == 0 and "initializers.cli" in modules
    assert not {module for module in modules if module.split(".")[0] == "botocore"}
    assert "urllib.request" not in modules
    env = {"STORAGE_URI": f"s3://{bucket}", "OUTPUT_PATH": str(tmp_path / "chain"), "ENDPOINT": seaweed.endpoint,
           "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "HOME": str(tmp_path),
           "PYTHONPROFILEIMPORTTIME": "1"}  # fmt: skip
    chain = run_program("dataset", env)
    assert chain.code == 0 and "botocore.credentials" in imported(chain.stderr)


def test_anonymous_access_to_a_private_bucket_is_denied(seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path):
    put_all(s3, bucket, {"a.txt": b"a"})
    env = {"STORAGE_URI": f"s3://{bucket}", "OUTPUT_PATH": str(tmp_path / "out"), "ENDPOINT": seaweed.endpoint,
           "ANONYMOUS": "true"}  # fmt: skip
    result = run_program("dataset", env)
    assert result.code == 1
    assert "AccessDenied" in result.last["error"]


@pytest.mark.parametrize(
    ("uri_suffix", "message"),
    [
        ("-missing-bucket", "does not exist"),
        ("/no/such/prefix", "has no files"),
    ],
)
def test_missing_bucket_and_empty_prefix_fail(
    seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path, uri_suffix: str, message: str
):
    put_all(s3, bucket, {"a.txt": b"a"})
    result = fetch(seaweed, f"s3://{bucket}{uri_suffix}", tmp_path / "out")
    assert result.code == 1, result.stderr
    assert message in result.last["error"]
    assert not (tmp_path / "out" / ".initializer" / "manifest.json").exists()


def test_nothing_left_after_filtering_fails(seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path):
    put_all(s3, bucket, {"m/a.bin": b"a", "m/b.pt": b"b"})
    result = fetch(seaweed, f"s3://{bucket}/m", tmp_path / "out", IGNORE_PATTERNS="*.bin,*.pt")
    assert result.code == 1
    assert "all 2 files are excluded by IGNORE_PATTERNS" in result.last["error"]


def test_rerun_after_success_transfers_nothing(seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path):
    put_all(s3, bucket, {f"d/{i}.bin": os.urandom(1000 + i) for i in range(20)})
    with Relay(seaweed.endpoint) as relay:
        first = fetch(seaweed, f"s3://{bucket}/d", tmp_path / "out", endpoint=relay.endpoint)
        assert first.code == 0
        assert len(relay.traffic.object_gets()) == 20
        before = (tmp_path / "out" / ".initializer" / "manifest.json").stat().st_mtime_ns
        relay.reset()
        second = fetch(seaweed, f"s3://{bucket}/d", tmp_path / "out", endpoint=relay.endpoint)
        assert second.code == 0
        assert relay.traffic.object_gets() == []
        assert second.last["fetched_files"] == 0 and second.named("up to date")
        assert (tmp_path / "out" / ".initializer" / "manifest.json").stat().st_mtime_ns == before
        # One object changes at the source, one local file is deleted: exactly those two are fetched again.
        s3.put_object(Bucket=bucket, Key="d/3.bin", Body=b"new")
        (tmp_path / "out" / "7.bin").unlink()
        relay.reset()
        third = fetch(seaweed, f"s3://{bucket}/d", tmp_path / "out", endpoint=relay.endpoint)
        assert third.code == 0
        assert sorted(relay.traffic.object_gets()) == [f"/{bucket}/d/3.bin", f"/{bucket}/d/7.bin"]
    assert (tmp_path / "out" / "3.bin").read_bytes() == b"new"
    assert {f["path"] for f in manifest(tmp_path / "out")["files"]} == {f"{i}.bin" for i in range(20)}


def test_killed_run_leaves_no_partial_file_and_no_manifest_then_completes(
    seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path
):
    objects = {f"d/{i:02d}.bin": os.urandom(256 * 1024) for i in range(24)}
    put_all(s3, bucket, objects)
    output = tmp_path / "out"
    with Relay(seaweed.endpoint) as relay:
        relay.bytes_per_second = 2 * 1024 * 1024  # about 3 s for the whole set
        env = {**seaweed.env(), "STORAGE_URI": f"s3://{bucket}/d", "OUTPUT_PATH": str(output),
               "ENDPOINT": relay.endpoint, "MAX_WORKERS": "2"}  # fmt: skip
        process = start_program("dataset", env)
        deadline = time.monotonic() + 60
        while not any(journal_entries(output / ".initializer" / JOURNAL)):  # until the first file has landed
            assert process.poll() is None and time.monotonic() < deadline, "no file landed within 60 s"
            time.sleep(0.02)
        relay.bytes_per_second = 16 * 1024  # the rest crawls: the kill lands mid-set, however late it comes
        process.send_signal(signal.SIGKILL)
        process.wait()
        settle(lambda: relay.traffic.body_bytes)  # the relay notices the dead client a little later
        assert relay.traffic.body_bytes < sum(map(len, objects.values())), "the kill came too late to test anything"
        # Whatever reached a final path is complete and exact; nothing claims completion.
        partial = tree(output)
        assert 0 < len(partial) < len(objects)
        for path, body in partial.items():
            assert body == objects[f"d/{path}"], path
        assert not (output / ".initializer" / "manifest.json").exists()
        # What the killed run claims is the journal. The kill may land between a file's rename and its journal
        # line: such a file is complete but unclaimed, and the re-run fetches it again (at most one per worker).
        claimed = {done.path for done in StateDir(str(output)).journal.files()}
        assert claimed and claimed <= set(partial)
        assert len(set(partial) - claimed) <= int(env["MAX_WORKERS"])
        relay.bytes_per_second = None
        relay.reset()
        result = run_program("dataset", env)
        assert result.code == 0, result.stderr
        refetched = {p.rsplit("/", 1)[-1] for p in relay.traffic.object_gets()}
        refetched_bytes = relay.traffic.body_bytes
    assert tree(output) == {k.removeprefix("d/"): v for k, v in objects.items()}
    assert refetched == {k.removeprefix("d/") for k in objects} - claimed
    assert refetched_bytes == sum(len(v) for k, v in objects.items() if k.removeprefix("d/") not in claimed)
    assert manifest(output)["total_files"] == 24


def test_secrets_never_appear_in_output_or_on_disk(seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path):
    put_all(s3, bucket, {"a.txt": b"a"})
    ok = fetch(seaweed, f"s3://{bucket}", tmp_path / "out", LOG_LEVEL="debug")
    bad = fetch(seaweed, f"s3://{bucket}-nope", tmp_path / "bad", LOG_LEVEL="debug")
    assert ok.code == 0 and bad.code == 1
    for result in (ok, bad):
        assert SECRET_KEY not in result.stdout + result.stderr
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET_KEY.encode() not in path.read_bytes(), path


def test_progress_events_report_files_bytes_rate_and_eta(seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path):
    put_all(s3, bucket, {f"d/{i}.bin": os.urandom(200 * 1024) for i in range(10)})
    with Relay(seaweed.endpoint) as relay:
        relay.bytes_per_second = 1024 * 1024  # per connection: about 2 s with one worker
        result = fetch(
            seaweed,
            f"s3://{bucket}/d",
            tmp_path / "out",
            endpoint=relay.endpoint,
            PROGRESS_INTERVAL="0.3",
            MAX_WORKERS="1",
        )
    assert result.code == 0
    progress = result.named("progress")
    listed = [p for p in progress if p["listing"] == "done"]  # before: the files listed so far, no percentage
    assert len(listed) >= 3
    assert all("percent" not in p and "listed_so_far" in p for p in progress if p["listing"] != "done")
    assert {"files", "bytes", "total_bytes", "rate_mb_s", "eta_s", "percent"} <= set(listed[0])
    assert [p["bytes"] for p in progress] == sorted(p["bytes"] for p in progress)
    assert listed[-1]["total_bytes"] == 10 * 200 * 1024


def test_https_endpoint_with_a_custom_ca_bundle(seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path):
    body = os.urandom(20 * 1024 * 1024)  # three ranges
    put_all(s3, bucket, {"d/small.txt": b"tls", "d/big.bin": body})
    cert, key = self_signed_certificate(tmp_path)
    with Relay(seaweed.endpoint, tls=(cert, key)) as relay:
        trusted = fetch(seaweed, f"s3://{bucket}/d", tmp_path / "ok", endpoint=relay.endpoint, AWS_CA_BUNDLE=str(cert))
        untrusted = fetch(seaweed, f"s3://{bucket}/d", tmp_path / "no", endpoint=relay.endpoint)
    assert trusted.code == 0, trusted.stderr
    assert tree(tmp_path / "ok") == {"small.txt": b"tls", "big.bin": body}
    assert untrusted.code == 1
    assert "the server's TLS certificate does not verify" in untrusted.last["error"]
    assert "AWS_CA_BUNDLE" in untrusted.last["error"]
    assert untrusted.named("waiting to retry") == []  # permanent: no retry can fix it
    missing = fetch(seaweed, f"s3://{bucket}/d", tmp_path / "missing", AWS_CA_BUNDLE=str(tmp_path / "nope.pem"))
    assert missing.code == 2 and "AWS_CA_BUNDLE (or the profile's ca_bundle): no such file" in missing.last["error"]


def test_s3_served_over_tls_as_the_clouds_serve_it(tmp_path: Path):
    """SeaweedFS itself serving HTTPS (no relay): small objects answered together through the lane, a large one in
    ranges, every byte as stored and verified, the certificate trusted through AWS_CA_BUNDLE alone."""
    with SeaweedFS.start(tls=True, parent=tmp_path) as server:
        s3 = server.client()
        s3.create_bucket(Bucket="tls-data")
        objects = {f"small/{i:03d}.bin": os.urandom(1000 + 97 * i) for i in range(150)}
        objects["large.bin"] = os.urandom(40 * 1024 * 1024)
        put_all(s3, "tls-data", objects)
        assert server.env()["AWS_CA_BUNDLE"] == str(server.certificate)
        result = fetch(server, "s3://tls-data", tmp_path / "out")
    assert result.code == 0, result.stderr
    assert tree(tmp_path / "out") == objects
    assert result.last["event"] == "done" and result.last["files"] == len(objects)


def test_a_profile_ca_bundle_applies_with_static_keys(seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path):
    """Keys and ENDPOINT alone skip botocore, but an AWS config file may still say something: it is honoured."""
    put_all(s3, bucket, {"d/small.txt": b"tls"})
    cert, key = self_signed_certificate(tmp_path)
    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / "config").write_text(f"[default]\nca_bundle = {cert}\n")
    with Relay(seaweed.endpoint, tls=(cert, key)) as relay:
        result = fetch(seaweed, f"s3://{bucket}/d", tmp_path / "out", endpoint=relay.endpoint, HOME=str(tmp_path))
    assert result.code == 0, result.stderr
    assert tree(tmp_path / "out") == {"small.txt": b"tls"}
