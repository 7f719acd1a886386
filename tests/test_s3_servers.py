"""The S3 source against three S3 implementations: SeaweedFS, rclone's `serve s3`, and moto with IAM enforced.

Each behaviour runs against every server; where a server deviates from S3 (rclone answers a Range request
with 200 and the exact Content-Range), the source accepts what is unambiguous.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from devkit.outputs import tree
from devkit.programs import ProgramResult, run_program
from devkit.rclone import RcloneS3
from devkit.seaweed import SECRET_KEY

LARGE = os.urandom(40 * 1024 * 1024 + 99)  # six 8 MiB ranges, the last one short
ODD_KEYS = ["dir/ünïcode name+1=2.txt", "a~b/c(d)&e$f@g,h;i.txt", "sp ace/x y.bin", "q?uery#hash.txt"]


class Server:
    """One S3 server as a test needs it: a bucket of its own, objects put into it, the variables that reach it."""

    def __init__(self, env: dict[str, str], bucket: str, put: Any, make_bucket: Any) -> None:
        self.env = env
        self._name = bucket
        self._put = put
        self._make_bucket = make_bucket

    def bucket(self, objects: dict[str, bytes]) -> str:
        self._make_bucket(self._name)
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda item: self._put(self._name, *item), objects.items()))
        return self._name


@pytest.fixture(scope="module")
def rclone() -> Iterator[RcloneS3]:
    with RcloneS3.start() as server:
        yield server


@pytest.fixture(params=["seaweedfs", "rclone", "moto"])
def server(request: pytest.FixtureRequest) -> Server:
    bucket = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower())[:55].strip("-")
    if request.param == "rclone":
        rclone = request.getfixturevalue("rclone")
        client, env = rclone.client(), rclone.env()
    elif request.param == "moto":
        moto = request.getfixturevalue("moto")
        client, env = moto.client("s3", "admin"), moto.env("direct")
    else:
        client, env = request.getfixturevalue("s3"), request.getfixturevalue("seaweed").env()
    put = lambda name, key, body: client.put_object(Bucket=name, Key=key, Body=body)  # noqa: E731
    return Server(env, bucket, put, lambda name: client.create_bucket(Bucket=name))


def fetch(server: Server, uri: str, output: Path, **extra: str) -> ProgramResult:
    return run_program("dataset", {**server.env, "STORAGE_URI": uri, "OUTPUT_PATH": str(output), **extra})


def test_a_listing_of_several_pages_and_a_rerun(server: Server, tmp_path: Path):
    objects = {f"many/{i % 3}/{i:05d}.json": f'{{"n": {i}}}\n'.encode() for i in range(1100)}
    bucket = server.bucket(objects)
    result = fetch(server, f"s3://{bucket}/many", tmp_path / "out")
    assert result.code == 0, result.stdout + result.stderr
    assert tree(tmp_path / "out") == {key.removeprefix("many/"): body for key, body in objects.items()}
    again = fetch(server, f"s3://{bucket}/many", tmp_path / "out")
    assert again.code == 0 and again.named("up to date") and again.last["fetched_files"] == 0


def test_a_single_object_and_a_prefix_that_is_a_folder(server: Server, tmp_path: Path):
    bucket = server.bucket({"data/a.txt": b"a", "data-old/b.txt": b"b", "database.txt": b"c"})
    folder = fetch(server, f"s3://{bucket}/data", tmp_path / "folder")
    assert folder.code == 0, folder.stdout + folder.stderr
    assert tree(tmp_path / "folder") == {"a.txt": b"a"}
    single = fetch(server, f"s3://{bucket}/database.txt", tmp_path / "single")
    assert single.code == 0, single.stdout + single.stderr
    assert tree(tmp_path / "single") == {"database.txt": b"c"}


def test_unicode_and_reserved_characters_in_keys(server: Server, tmp_path: Path):
    objects = {key: key.encode() for key in ODD_KEYS}
    bucket = server.bucket(objects)
    result = fetch(server, f"s3://{bucket}", tmp_path / "out")
    assert result.code == 0, result.stdout + result.stderr
    assert tree(tmp_path / "out") == objects


def test_a_large_object_in_ranges_arrives_byte_exact(server: Server, tmp_path: Path):
    bucket = server.bucket({"weights.bin": LARGE, "config.json": b"{}"})
    result = fetch(server, f"s3://{bucket}", tmp_path / "out")
    assert result.code == 0, result.stdout + result.stderr
    assert hashlib.sha256((tmp_path / "out" / "weights.bin").read_bytes()).digest() == hashlib.sha256(LARGE).digest()


def test_a_wrong_secret_and_a_missing_bucket_exit_1_saying_why(server: Server, tmp_path: Path):
    bucket = server.bucket({"a.txt": b"a"})
    wrong = fetch(server, f"s3://{bucket}", tmp_path / "wrong", SECRET_ACCESS_KEY="not-the-secret")
    assert wrong.code == 1
    assert "credentials were rejected" in wrong.last["error"] and "not-the-secret" not in wrong.stdout + wrong.stderr
    assert SECRET_KEY not in wrong.stdout + wrong.stderr
    missing = fetch(server, "s3://no-such-bucket-here", tmp_path / "missing")
    assert missing.code == 1 and "does not exist" in missing.last["error"], missing.last
