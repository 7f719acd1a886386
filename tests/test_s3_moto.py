"""What only moto's server checks here: IAM permissions, STS sessions for ROLE_ARN, and stored checksums."""

from __future__ import annotations

import base64
import hashlib
import os
import zlib
from pathlib import Path

import pytest

from devkit.moto import ACCOUNT, Moto
from devkit.programs import ProgramResult, run_program
from devkit.relay import CorruptFault, Relay

OBJECTS = {"d/plain.txt": b"plain", "d/crc32.bin": os.urandom(3000), "d/sha256.bin": os.urandom(5000)}


@pytest.fixture(scope="module")
def bucket(moto: Moto) -> str:
    s3 = moto.client("s3", "admin")
    s3.create_bucket(Bucket="moto-data")
    s3.put_object(Bucket="moto-data", Key="d/plain.txt", Body=OBJECTS["d/plain.txt"])
    s3.put_object(Bucket="moto-data", Key="d/crc32.bin", Body=OBJECTS["d/crc32.bin"], ChecksumAlgorithm="CRC32")
    s3.put_object(Bucket="moto-data", Key="d/sha256.bin", Body=OBJECTS["d/sha256.bin"], ChecksumAlgorithm="SHA256")
    return "moto-data"


def fetch(moto: Moto, user: str, output: Path, **extra: str) -> ProgramResult:
    env = {**moto.env(user), "STORAGE_URI": "s3://moto-data/d", "OUTPUT_PATH": str(output), **extra}
    return run_program("dataset", env)


def fetched(output: Path) -> dict[str, bytes]:
    return {f"d/{p.name}": p.read_bytes() for p in output.iterdir() if p.is_file()}


def test_role_arn_end_to_end_with_the_session_sts_issues(moto: Moto, bucket: str, tmp_path: Path):
    # `reader` may read nothing itself: only the assumed role's session can list and read.
    alone = fetch(moto, "reader", tmp_path / "alone")
    assert alone.code == 1 and "AccessDenied" in alone.last["error"]
    role = f"arn:aws:iam::{ACCOUNT}:role/s3-reader"
    with Relay(moto.endpoint) as relay:
        result = fetch(moto, "reader", tmp_path / "out", ROLE_ARN=role, ENDPOINT=relay.endpoint)
        requests = list(zip(relay.traffic.requests, relay.traffic.headers, strict=True))
    assert result.code == 0, result.stdout + result.stderr
    assert fetched(tmp_path / "out") == OBJECTS
    # Every S3 request is signed with the session STS issued for the role, never with the user's own key.
    s3_requests = [headers for (_, path), headers in requests if path.startswith("/moto-data")]
    assert len(s3_requests) >= 1 + len(OBJECTS)
    reader_key = moto.keys["reader"][0]
    for headers in s3_requests:
        assert headers.get("x-amz-security-token") and f"Credential={reader_key}/" not in headers["authorization"]


def test_a_role_that_may_not_be_assumed_and_a_wrong_secret_name_their_cause(moto: Moto, bucket: str, tmp_path: Path):
    role = f"arn:aws:iam::{ACCOUNT}:role/admin-only"
    denied = fetch(moto, "reader", tmp_path / "denied", ROLE_ARN=role)
    assert denied.code == 1
    assert "may not assume it: check ROLE_ARN and the role's trust policy (AccessDenied" in denied.last["error"]
    reader_role = f"arn:aws:iam::{ACCOUNT}:role/s3-reader"
    wrong = fetch(moto, "reader", tmp_path / "wrong", ROLE_ARN=reader_role, SECRET_ACCESS_KEY="not-it")
    assert wrong.code == 1
    assert "STS rejected the credentials" in wrong.last["error"] and "SignatureDoesNotMatch" in wrong.last["error"]
    assert "not-it" not in wrong.stdout + wrong.stderr
    assert not (tmp_path / "denied" / ".initializer" / "manifest.json").exists()


def test_objects_stored_with_crc32_and_sha256_checksums_are_verified(moto: Moto, bucket: str, tmp_path: Path):
    result = fetch(moto, "direct", tmp_path / "out")
    assert result.code == 0, result.stdout + result.stderr
    assert fetched(tmp_path / "out") == OBJECTS
    # What the server holds is what we checked the bytes against.
    head = moto.client("s3", "admin").head_object(Bucket="moto-data", Key="d/crc32.bin", ChecksumMode="ENABLED")
    assert base64.b64decode(head["ChecksumCRC32"]) == zlib.crc32(OBJECTS["d/crc32.bin"]).to_bytes(4, "big")
    head = moto.client("s3", "admin").head_object(Bucket="moto-data", Key="d/sha256.bin", ChecksumMode="ENABLED")
    assert base64.b64decode(head["ChecksumSHA256"]) == hashlib.sha256(OBJECTS["d/sha256.bin"]).digest()


@pytest.mark.parametrize(("key", "algorithm"), [("crc32.bin", "crc32"), ("sha256.bin", "sha256")])
def test_a_corrupted_body_fails_the_checksum_the_object_was_stored_with(
    moto: Moto, bucket: str, tmp_path: Path, key: str, algorithm: str
):
    with Relay(moto.endpoint) as relay:
        relay.add_fault(CorruptFault(match=key, times=None))
        result = fetch(moto, "direct", tmp_path / "out", ENDPOINT=relay.endpoint)
    assert result.code == 1
    assert f"{key}: {algorithm} checksum mismatch" in result.last["error"]
    assert not (tmp_path / "out" / key).exists()
