"""How the cache source reaches the table's storage: sessions that expire mid-run are renewed (moto's STS, through a
relay that makes them short), a bucket in another region is followed, data files it cannot read are refused at plan
time."""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path
from typing import Any

import boto3
import botocore.exceptions
import pyarrow as pa
import pyarrow.orc as orc
import pytest
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.typedef import Record

from devkit.iceberg import rows, simple_table, sql_catalog
from devkit.moto import REGION, Moto
from devkit.programs import ProgramResult, run_program, start_program, wait_for_event
from devkit.relay import Relay, StatusFault
from devkit.seaweed import SeaweedFS

#: Seconds a stopped materialisation may take to exit: it needs well under one, the crawling data files many more.
#: Only catches a stop that waits for them, not a measure of speed.
STOP_CEILING_SECONDS = 15.0

SESSION_SECONDS = 1.5


def _run(env: dict[str, str], output: Path, metadata: str, **extra: str) -> ProgramResult:
    return run_program(
        "dataset",
        {"STORAGE_URI": "cache://shop/reviews", "METADATA_LOC": metadata, "NUM_DATA_NODES": "2",
         "OUTPUT_PATH": str(output), **env, **extra},
    )  # fmt: skip


def _manifest(output: Path) -> dict[str, Any]:
    return json.loads((output / ".initializer" / "manifest.json").read_text())


def _signers(relay: Relay, path_part: str) -> list[str]:
    """The access key id and region scope each request whose path contains `path_part` was signed with."""
    return [
        re.search(r"Credential=([^,]+),", headers.get("authorization", "")).group(1)  # type: ignore[union-attr]
        for (_, path), headers in zip(relay.traffic.requests, relay.traffic.headers, strict=True)
        if path_part in path and "authorization" in headers
    ]


def test_an_assumed_roles_sessions_expiring_mid_run_are_renewed(moto: Moto, tmp_path: Path) -> None:
    """Each session lives 1.5 s; reading the 8 data files takes longer, each file well under that."""
    admin_key, admin_secret = moto.keys["admin"]
    moto.client("s3", "admin").create_bucket(Bucket="cache-sessions")
    storage = {"s3.endpoint": moto.endpoint, "s3.access-key-id": admin_key, "s3.secret-access-key": admin_secret,
               "s3.region": REGION}  # fmt: skip
    table = simple_table(sql_catalog(tmp_path, "s3://cache-sessions/warehouse", storage), "reviews", 8, 2000)
    data_bytes = sum(task.file.file_size_in_bytes for task in table.scan().plan_files())
    role = moto.client("iam", "admin").get_role(RoleName="s3-reader")["Role"]["Arn"]
    with Relay(moto.endpoint) as relay:
        relay.session_lifetime = SESSION_SECONDS
        relay.slow_paths, relay.bytes_per_second = "/data/", data_bytes / 8 / 0.3  # ~0.3 s per data file
        env = {**moto.env("reader"), "ENDPOINT": relay.endpoint, "IAM_ROLE": role, "MAX_WORKERS": "1"}
        result = _run(env, tmp_path / "out", table.metadata_location)
    assert result.code == 0, result.stdout + result.stderr
    issued = relay.sessions_issued
    assert max(issued.values()) - min(issued.values()) > SESSION_SECONDS, "the run outlasted a session"
    data_signers = {signer.split("/")[0] for signer in _signers(relay, "/data/")}
    assert len(data_signers) >= 2 and data_signers <= set(issued), "data files read with several issued sessions"
    assert _manifest(tmp_path / "out")["source"]["rows"] == 8 * 2000


def test_a_session_that_expires_is_refused_in_s3s_words(moto: Moto) -> None:
    """The relay's expiry is real: a request signed with an expired session gets S3's ExpiredToken."""
    role = moto.client("iam", "admin").get_role(RoleName="s3-reader")["Role"]["Arn"]
    key, secret = moto.keys["reader"]
    with Relay(moto.endpoint) as relay:
        relay.session_lifetime = 0.0
        sts = boto3.client("sts", endpoint_url=relay.endpoint, region_name=REGION, aws_access_key_id=key,
                           aws_secret_access_key=secret)  # fmt: skip
        session = sts.assume_role(RoleArn=role, RoleSessionName="expiry-probe")["Credentials"]
        s3 = boto3.client("s3", endpoint_url=relay.endpoint, region_name=REGION,
                          aws_access_key_id=session["AccessKeyId"], aws_secret_access_key=session["SecretAccessKey"],
                          aws_session_token=session["SessionToken"])  # fmt: skip
        with pytest.raises(botocore.exceptions.ClientError, match="ExpiredToken"):
            s3.list_objects_v2(Bucket="anything")


def test_a_table_in_a_bucket_of_another_region_is_followed(seaweed: SeaweedFS, bucket: str, tmp_path: Path) -> None:
    table = simple_table(sql_catalog(tmp_path, f"s3://{bucket}/warehouse", seaweed), "reviews", 2, 500)
    with Relay(seaweed.endpoint) as relay:
        relay.add_fault(StatusFault(status=301, body=b"", headers={"x-amz-bucket-region": "eu-west-1"}, times=1))
        result = _run({**seaweed.env(), "ENDPOINT": relay.endpoint}, tmp_path / "out", table.metadata_location)
    assert result.code == 0, result.stdout + result.stderr
    moved = result.named("bucket in another region")
    assert len(moved) == 1 and moved[0]["bucket_region"] == "eu-west-1"
    scopes = _signers(relay, f"/{bucket}/")
    assert "/us-east-1/s3/" in scopes[0] and len(scopes) > 4
    assert all("/eu-west-1/s3/" in scope for scope in scopes[1:]), "pyarrow signs for the bucket's region"
    assert _manifest(tmp_path / "out")["source"]["region"] == "eu-west-1"


def test_a_data_file_whose_reads_fail_transiently_is_read_again(
    seaweed: SeaweedFS, bucket: str, tmp_path: Path
) -> None:
    table = simple_table(sql_catalog(tmp_path, f"s3://{bucket}/warehouse", seaweed), "reviews", 2, 500)
    with Relay(seaweed.endpoint) as relay:
        # More failures in a row than pyarrow's own retries absorb (it tries 3 times).
        failing = relay.add_fault(StatusFault(status=503, match="/data/", method="GET", times=8))
        result = _run({**seaweed.env(), "ENDPOINT": relay.endpoint}, tmp_path / "out", table.metadata_location)
    assert result.code == 0, result.stdout + result.stderr
    assert failing.hits == 8 and result.named("waiting to retry")
    assert _manifest(tmp_path / "out")["source"]["rows"] == 2 * 500


def test_a_data_file_denied_is_not_retried(seaweed: SeaweedFS, bucket: str, tmp_path: Path) -> None:
    table = simple_table(sql_catalog(tmp_path, f"s3://{bucket}/warehouse", seaweed), "reviews", 2, 500)
    denied = b"<?xml version='1.0'?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
    with Relay(seaweed.endpoint) as relay:
        relay.add_fault(StatusFault(status=403, body=denied, match="/data/", times=None))
        result = _run({**seaweed.env(), "ENDPOINT": relay.endpoint}, tmp_path / "out", table.metadata_location)
    assert result.code == 1, result.stdout + result.stderr
    assert "access denied" in result.last["error"] and "/data/" in result.last["error"]
    assert not result.named("waiting to retry")
    assert not (tmp_path / "out" / ".initializer" / "manifest.json").exists()


def test_a_signal_stops_a_materialisation_promptly_leaving_nothing_that_looks_complete(
    seaweed: SeaweedFS, bucket: str, tmp_path: Path
) -> None:
    table = simple_table(sql_catalog(tmp_path, f"s3://{bucket}/warehouse", seaweed), "reviews", 4, 20000)
    output = tmp_path / "out"
    with Relay(seaweed.endpoint) as relay:
        relay.slow_paths, relay.bytes_per_second = "/data/", 64 * 1024  # each data file takes many seconds
        env = {**seaweed.env(), "ENDPOINT": relay.endpoint, "STORAGE_URI": "cache://shop/reviews",
               "METADATA_LOC": table.metadata_location, "NUM_DATA_NODES": "2", "OUTPUT_PATH": str(output)}  # fmt: skip
        process = start_program("dataset", env)
        wait_for_event(process, "fetching")
        while relay.traffic.body_bytes == 0:  # into the data files
            time.sleep(0.02)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=STOP_CEILING_SECONDS)
    assert process.returncode == 1 and "stopped by SIGTERM" in stderr.strip().splitlines()[-1]
    assert not (output / ".initializer" / "manifest.json").exists()
    assert not list(output.glob("shard-*/*")) and not list((output / ".initializer" / "tmp").glob("*"))


@pytest.mark.parametrize("file_format", [FileFormat.ORC, FileFormat.AVRO])
def test_data_files_other_than_parquet_are_refused_before_any_is_read(file_format: FileFormat, tmp_path: Path) -> None:
    table = simple_table(sql_catalog(tmp_path, f"file://{tmp_path}/warehouse"), "reviews", 1, 100)
    other = tmp_path / f"warehouse/extra.{file_format.value.lower()}"
    columns = pa.table(rows(100, 100), schema=table.schema().as_arrow())
    orc.write_table(columns, str(other))  # refused by the format the table's metadata gives it, never opened
    data_file = DataFile.from_args(
        content=DataFileContent.DATA, file_path=f"file://{other}", file_format=file_format, partition=Record(),
        record_count=100, file_size_in_bytes=other.stat().st_size,
    )  # fmt: skip
    data_file.spec_id = 0
    with table.transaction() as transaction, transaction.update_snapshot().fast_append() as append:
        append.append_data_file(data_file)
    table = table.refresh()
    result = _run({}, tmp_path / "out", table.metadata_location)
    assert result.code == 1, result.stdout + result.stderr
    error = result.last["error"]
    assert str(other) in error and f"in {file_format.value} format" in error and "Parquet data files only" in error
    assert not (tmp_path / "out" / ".initializer" / "manifest.json").exists()
    assert not list((tmp_path / "out").glob("shard-*/*")), "refused before any part is written"
