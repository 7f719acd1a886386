"""S3's answers in its own words, through a relay in front of SeaweedFS: region redirects followed, archived
objects, KMS denials and Requester Pays buckets explained, each with exit 1 and nothing that looks complete."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devkit.programs import ProgramResult, run_program
from devkit.relay import Relay, StatusFault
from devkit.seaweed import SeaweedFS

OBJECTS = {"d/a.txt": b"alpha", "d/frozen.bin": b"cold bytes", "d/secret.bin": b"kms bytes"}


def error_body(code: str, message: str, **fields: str) -> bytes:
    extra = "".join(f"<{name}>{value}</{name}>" for name, value in fields.items())
    return f"<?xml version='1.0'?><Error><Code>{code}</Code><Message>{message}</Message>{extra}</Error>".encode()


@pytest.fixture
def relay(seaweed: SeaweedFS, s3: Any, bucket: str) -> Iterator[Relay]:
    for key, body in OBJECTS.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    with Relay(seaweed.endpoint) as relay:
        yield relay


def fetch(seaweed: SeaweedFS, relay: Relay, bucket: str, output: Path, **extra: str) -> ProgramResult:
    env = {**seaweed.env(), "ENDPOINT": relay.endpoint, "STORAGE_URI": f"s3://{bucket}/d", "OUTPUT_PATH": str(output)}
    return run_program("dataset", {**env, **extra})


def complete(output: Path) -> bool:
    return (output / ".initializer" / "manifest.json").exists()


@pytest.mark.parametrize(
    ("status", "body", "headers"),
    [
        (301, error_body("PermanentRedirect", "The bucket you are attempting to access must be addressed using the "
                         "specified endpoint."), {"x-amz-bucket-region": "eu-west-1"}),
        (400, error_body("AuthorizationHeaderMalformed", "the region 'us-east-1' is wrong; expecting 'eu-west-1'",
                         Region="eu-west-1"), {}),
    ],
    ids=["301-with-header", "400-with-region-in-body"],
)  # fmt: skip
def test_a_bucket_in_another_region_is_followed_once_and_logged(
    seaweed: SeaweedFS, relay: Relay, bucket: str, tmp_path: Path, status: int, body: bytes, headers: dict[str, str]
):
    relay.add_fault(StatusFault(status=status, body=body, headers=headers, match="list-type", times=1))
    result = fetch(seaweed, relay, bucket, tmp_path / "out")
    assert result.code == 0, result.stdout + result.stderr
    moved = result.named("bucket in another region")
    assert len(moved) == 1 and moved[0]["bucket_region"] == "eu-west-1" and moved[0]["configured_region"] == "us-east-1"
    # Every request after the redirect is signed for the bucket's region.
    scopes = [h["authorization"].split("Credential=")[1].split(",")[0] for h in relay.traffic.headers]
    assert "/us-east-1/s3/" in scopes[0] and all("/eu-west-1/s3/" in scope for scope in scopes[1:])
    manifest = json.loads((tmp_path / "out" / ".initializer" / "manifest.json").read_text())
    assert manifest["source"]["region"] == "eu-west-1"


def test_an_archived_object_in_the_listing_is_refused_before_any_transfer(
    seaweed: SeaweedFS, relay: Relay, bucket: str, tmp_path: Path
):
    relay.injected[bucket] = {"d/zz-archive.parquet": b"never read"}
    relay.storage_classes["d/zz-archive.parquet"] = "DEEP_ARCHIVE"
    result = fetch(seaweed, relay, bucket, tmp_path / "out", MAX_WORKERS="1")
    assert result.code == 1
    error = result.last["error"]
    assert f"s3://{bucket}/d/zz-archive.parquet is in the DEEP_ARCHIVE storage class" in error and "restore" in error
    assert not complete(tmp_path / "out")
    assert not any("zz-archive" in path for _, path in relay.traffic.requests if "list-type" not in path)


@pytest.mark.parametrize(
    ("key", "body", "expected"),
    [
        ("frozen.bin", error_body("InvalidObjectState", "The operation is not valid for the object's storage class"),
         "is archived (Glacier or Deep Archive) and has no restored copy (InvalidObjectState)"),
        ("secret.bin", error_body("AccessDenied", "User: arn:aws:iam::1:user/u is not authorized to perform: "
                                  "kms:Decrypt on resource: arn:aws:kms:eu-west-1:1:key/k"),
         "encrypted with a KMS key the credentials may not use (kms:Decrypt)"),
        ("a.txt", error_body("AccessDenied", "Access Denied"), "the credentials lack permission (s3:GetObject)"),
    ],
    ids=["invalid-object-state", "kms", "plain-access-denied"],
)  # fmt: skip
def test_a_denied_read_says_why_in_s3s_words(
    seaweed: SeaweedFS, relay: Relay, bucket: str, tmp_path: Path, key: str, body: bytes, expected: str
):
    relay.add_fault(StatusFault(status=403, body=body, match=key, method="GET", times=None))
    result = fetch(seaweed, relay, bucket, tmp_path / "out")
    assert result.code == 1
    assert f"s3://{bucket}/d/{key}" in result.last["error"] and expected in result.last["error"], result.last
    assert not complete(tmp_path / "out")


def test_requester_pays_is_suggested_on_a_denial_and_then_sent_on_every_request(
    seaweed: SeaweedFS, relay: Relay, bucket: str, tmp_path: Path
):
    # S3 refuses a Requester Pays bucket to a request without the header as it refuses any other: AccessDenied.
    relay.add_fault(StatusFault(status=403, body=error_body("AccessDenied", "Access Denied"), match="list-type"))
    refused = fetch(seaweed, relay, bucket, tmp_path / "refused")
    assert refused.code == 1 and "Requester Pays bucket (REQUEST_PAYER=requester)" in refused.last["error"]
    relay.clear_faults()
    relay.reset()
    paid = fetch(seaweed, relay, bucket, tmp_path / "paid", REQUEST_PAYER="requester")
    assert paid.code == 0, paid.stdout + paid.stderr
    assert relay.traffic.headers and all(h.get("x-amz-request-payer") == "requester" for h in relay.traffic.headers)
    assert all("x-amz-request-payer" in h["authorization"] for h in relay.traffic.headers)  # signed, as S3 requires
