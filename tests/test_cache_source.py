"""The cache source against real tables: pyiceberg's SqlCatalog writes them, on SeaweedFS or a local warehouse.

The reference for every result is pyiceberg's own reading, `StaticTable.from_metadata(...).scan().to_arrow()`:
the union of the shards must equal it as a multiset of rows, in one Arrow schema, balanced within one row.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.table import StaticTable

from devkit import docs
from devkit.iceberg import evolving_table, recorded_as, rows, s3_properties, simple_table, sql_catalog
from devkit.iceberg_deletes import add_equality_deletes, add_position_deletes
from devkit.programs import ProgramResult, run_program
from devkit.proxy import Proxy
from devkit.seaweed import SeaweedFS


def _run(env: dict[str, str], output: Path, metadata: str, nodes: int = 3, **extra: str) -> ProgramResult:
    return run_program(
        "dataset",
        {"STORAGE_URI": "cache://shop/reviews", "METADATA_LOC": metadata, "NUM_DATA_NODES": str(nodes),
         "OUTPUT_PATH": str(output), **env, **extra},
    )  # fmt: skip


def _reference(metadata: str, properties: dict[str, str] | None = None) -> pa.Table:
    return StaticTable.from_metadata(metadata, properties or {}).scan().to_arrow()


def _multiset(table: pa.Table) -> Counter[str]:
    return Counter(json.dumps(row, sort_keys=True) for row in table.to_pylist())


def _shards(output: Path) -> list[pa.Table]:
    folders = sorted(output.glob("shard-*"), key=lambda p: int(p.name.split("-")[1]))
    return [pq.read_table(folder) for folder in folders]


def _manifest(output: Path) -> dict[str, Any]:
    return json.loads((output / ".initializer" / "manifest.json").read_text())


def _assert_sharded(output: Path, reference: pa.Table, nodes: int) -> list[pa.Table]:
    shards = _shards(output)
    assert len(shards) == nodes
    counts = [shard.num_rows for shard in shards]
    assert max(counts) - min(counts) <= 1, counts
    assert all(shard.schema == shards[0].schema for shard in shards), "every shard must have one schema"
    assert _multiset(pa.concat_tables(shards)) == _multiset(reference.cast(shards[0].schema))
    source = _manifest(output)["source"]
    assert source["rows"] == reference.num_rows and source["data_nodes"] == nodes
    assert [s["rows"] for s in source["shards"]] == counts
    assert [s["files"] for s in source["shards"]] == [len(list(output.glob(f"shard-{i}/*"))) for i in range(nodes)]
    return shards


@pytest.fixture
def s3_table(tmp_path: Path, seaweed: SeaweedFS, bucket: str) -> Any:
    catalog = sql_catalog(tmp_path, f"s3://{bucket}/warehouse", seaweed)
    return evolving_table(catalog, "reviews")


@pytest.fixture
def local_catalog(tmp_path: Path) -> Any:
    return sql_catalog(tmp_path, f"file://{tmp_path}/warehouse")


def test_evolving_partitioned_table_on_s3_becomes_balanced_shards(
    s3_table: Any, seaweed: SeaweedFS, tmp_path: Path
) -> None:
    result = _run(seaweed.env(), tmp_path / "out", s3_table.metadata_location, REGION="us-east-1")
    assert result.code == 0, result.stdout + result.stderr
    reference = _reference(s3_table.metadata_location, s3_properties(seaweed))
    shards = _assert_sharded(tmp_path / "out", reference, 3)
    assert shards[0].schema.names == ["id", "split", "body", "score", "lang"]  # the current schema, renamed column
    assert shards[0].schema.field("score").type == pa.float64()  # promoted from float
    assert reference.num_rows == 9200  # 9000 appended, 1800 deleted, 2000 appended after the schema changed
    source = _manifest(tmp_path / "out")["source"]
    assert source["snapshot_id"] == s3_table.current_snapshot().snapshot_id
    assert source["table_location"] == s3_table.location()
    assert [field["name"] for field in source["schema"]["fields"]] == ["id", "split", "body", "score", "lang"]
    assert "lang: string" in source["arrow_schema"]
    assert seaweed.env()["SECRET_ACCESS_KEY"] not in result.stdout + result.stderr


def test_local_warehouse_and_cluster_size_as_kubeflow_sends_it(local_catalog: Any, tmp_path: Path) -> None:
    table = evolving_table(local_catalog, "reviews")
    plain_path = table.metadata_location.removeprefix("file://")
    out = tmp_path / "out"
    env = {"STORAGE_URI": "cache://shop/reviews", "METADATA_LOC": plain_path, "CLUSTER_SIZE": "5",
           "OUTPUT_PATH": str(out), "HEAD_CPU": "2", "WORKER_MEM": "4Gi", "TRAIN_JOB_NAME": "job-1",
           "READINESS_PERIOD_SECONDS": "10", "READINESS_FAILURE_THRESHOLD": "3",
           "CACHE_READY_TIMEOUT_SECONDS": "900"}  # fmt: skip
    result = run_program("dataset", env)
    assert result.code == 0, result.stdout + result.stderr
    _assert_sharded(out, _reference(table.metadata_location), 4)
    written = sum(p.stat().st_size for p in out.glob("shard-*/*"))
    assert result.last["bytes"] == result.last["fetched_bytes"] == written == _manifest(out)["total_bytes"]
    source = _manifest(out)["source"]
    assert source["kubeflow"] == {"head_cpu": "2", "worker_mem": "4Gi", "train_job_name": "job-1",
                                  "readiness_period_seconds": "10", "readiness_failure_threshold": "3",
                                  "cache_ready_timeout_seconds": 900}  # fmt: skip
    assert source["metadata_location"] == plain_path


def test_positional_deletes_from_other_engines_are_applied(local_catalog: Any, tmp_path: Path) -> None:
    table = simple_table(local_catalog, "reviews", files=3, rows_per_file=2000)
    first_file = sorted(task.file.file_path for task in table.scan().plan_files())[0]
    table = add_position_deletes(table, first_file, [0, 1, 499, 500, 1999])
    reference = _reference(table.metadata_location)
    assert reference.num_rows == 6000 - 5
    result = _run({}, tmp_path / "out", table.metadata_location, nodes=4)
    assert result.code == 0, result.stdout + result.stderr
    _assert_sharded(tmp_path / "out", reference, 4)


def test_unchanged_files_are_copied_byte_for_byte(local_catalog: Any, tmp_path: Path) -> None:
    """Three files of 3000 rows over 3 nodes: each shard is exactly one data file, copied as it is."""
    table = simple_table(local_catalog, "reviews", files=3, rows_per_file=3000)
    result = _run({}, tmp_path / "out", table.metadata_location, nodes=3)
    assert result.code == 0, result.stdout + result.stderr
    data_files = sorted(Path(t.file.file_path.removeprefix("file://")) for t in table.scan().plan_files())
    parts = sorted((tmp_path / "out").glob("shard-*/*.parquet"))
    assert len(parts) == 3
    assert sorted(p.read_bytes() for p in parts) == sorted(f.read_bytes() for f in data_files)
    _assert_sharded(tmp_path / "out", _reference(table.metadata_location), 3)


def test_copied_and_rewritten_parts_hold_the_same_rows(local_catalog: Any, tmp_path: Path) -> None:
    from initializers.sources.iceberg.parts import Part, PartWriter

    table = simple_table(local_catalog, "reviews", files=1, rows_per_file=1700)
    (task,) = table.scan().plan_files()
    part = Part(task, 0, task.file.record_count, None)
    copied, rewritten = tmp_path / "copied.parquet", tmp_path / "rewritten.parquet"
    assert PartWriter(table, lambda: table.io).write([(part, str(copied))], lambda _n: None) == "copied"
    assert (
        PartWriter(table, lambda: table.io, allow_copy=False).write([(part, str(rewritten))], lambda _n: None)
        == "rewritten"
    )
    assert copied.read_bytes() != rewritten.read_bytes()
    assert pq.read_table(copied).equals(pq.read_table(rewritten))


def test_unchanged_snapshot_is_a_no_op_and_a_new_one_rematerialises(local_catalog: Any, tmp_path: Path) -> None:
    table = evolving_table(local_catalog, "reviews")
    out = tmp_path / "out"
    assert _run({}, out, table.metadata_location, nodes=4).code == 0
    before = {p: p.stat().st_mtime_ns for p in out.glob("shard-*/*")}

    again = _run({}, out, table.metadata_location, nodes=4)
    assert again.code == 0 and again.named("up to date"), again.stderr
    assert {p: p.stat().st_mtime_ns for p in out.glob("shard-*/*")} == before

    appended = rows(20000, 1000, lang="de")
    appended["body"] = appended.pop("text")
    table.append(pa.table(appended, schema=table.schema().as_arrow()))
    fresh = _run({}, out, table.metadata_location, nodes=4)
    assert fresh.code == 0, fresh.stdout + fresh.stderr
    assert fresh.named("listed")[0]["already_done"] == 0
    _assert_sharded(out, _reference(table.metadata_location), 4)
    assert _manifest(out)["source"]["snapshot_id"] == table.current_snapshot().snapshot_id


def test_fewer_data_nodes_remove_the_stale_shards(local_catalog: Any, tmp_path: Path) -> None:
    table = evolving_table(local_catalog, "reviews")
    out = tmp_path / "out"
    assert _run({}, out, table.metadata_location, nodes=5).code == 0
    result = _run({}, out, table.metadata_location, nodes=2)
    assert result.code == 0, result.stdout + result.stderr
    assert sorted(p.name for p in out.glob("shard-*")) == ["shard-0", "shard-1"]
    _assert_sharded(out, _reference(table.metadata_location), 2)


def test_fewer_rows_than_nodes_leave_empty_shards_with_the_schema(local_catalog: Any, tmp_path: Path) -> None:
    table = simple_table(local_catalog, "reviews", files=1, rows_per_file=2)
    result = _run({}, tmp_path / "out", table.metadata_location, nodes=4)
    assert result.code == 0, result.stdout + result.stderr
    shards = _assert_sharded(tmp_path / "out", _reference(table.metadata_location), 4)
    assert [s.num_rows for s in shards] == [1, 1, 0, 0]


# -- failures: exit 1, a message naming what is wrong, nothing that looks complete -----------------------------


def _assert_failed(result: ProgramResult, output: Path, *fragments: str) -> None:
    assert result.code == 1, result.stdout + result.stderr
    for fragment in fragments:
        assert fragment in result.last["error"], result.last
    assert not (output / ".initializer" / "manifest.json").exists()
    assert not list(output.glob("shard-*/*"))


def test_missing_metadata_file(local_catalog: Any, seaweed: SeaweedFS, bucket: str, tmp_path: Path) -> None:
    result = _run({}, tmp_path / "out", str(tmp_path / "nope.metadata.json"))
    _assert_failed(result, tmp_path / "out", "METADATA_LOC", "nope.metadata.json", "no such file")
    result = _run(seaweed.env(), tmp_path / "out", f"s3://{bucket}/t/metadata/v9.metadata.json")
    _assert_failed(result, tmp_path / "out", f"s3://{bucket}/t/metadata/v9.metadata.json", "no such file")


@pytest.mark.parametrize("content", [b'{"hello": "world"}', b"\x00\x01 not json at all"])
def test_a_file_that_is_not_iceberg_metadata(content: bytes, tmp_path: Path) -> None:
    bogus = tmp_path / "v1.metadata.json"
    bogus.write_bytes(content)
    result = _run({}, tmp_path / "out", str(bogus))
    _assert_failed(result, tmp_path / "out", str(bogus), "is not an Iceberg table metadata file")


def test_access_denied(s3_table: Any, seaweed: SeaweedFS, tmp_path: Path) -> None:
    env = {**seaweed.env(), "SECRET_ACCESS_KEY": "wrong-secret-5d4c3b"}
    result = _run(env, tmp_path / "out", s3_table.metadata_location)
    _assert_failed(result, tmp_path / "out", "S3 denied opening", "SignatureDoesNotMatch", "SECRET_ACCESS_KEY")
    assert "wrong-secret-5d4c3b" not in result.stdout + result.stderr


def test_unreachable_storage(s3_table: Any, seaweed: SeaweedFS, tmp_path: Path) -> None:
    env = {**seaweed.env(), "ENDPOINT": "http://127.0.0.1:9"}
    result = _run(env, tmp_path / "out", s3_table.metadata_location)
    _assert_failed(result, tmp_path / "out", f"cannot open {s3_table.metadata_location}", "Connection refused")


def test_aws_endpoint_url_stands_in_for_an_unset_endpoint(s3_table: Any, seaweed: SeaweedFS, tmp_path: Path) -> None:
    """As botocore reads it, for the metadata and pyarrow's reads of the data files alike."""
    env = {name: value for name, value in seaweed.env().items() if name != "ENDPOINT"}
    env |= {"AWS_ENDPOINT_URL": seaweed.endpoint, "HOME": str(tmp_path), "AWS_EC2_METADATA_DISABLED": "true"}
    result = _run(env, tmp_path / "out", s3_table.metadata_location)
    assert result.code == 0, result.stdout + result.stderr
    _assert_sharded(tmp_path / "out", _reference(s3_table.metadata_location, s3_properties(seaweed)), 3)


def test_through_a_proxy_named_by_the_environment(s3_table: Any, seaweed: SeaweedFS, tmp_path: Path) -> None:
    with Proxy(credentials=("user", "proxy-pass-2f")) as proxy:
        env = {**seaweed.env(), "HTTP_PROXY": proxy.url.replace("http://", "http://user:proxy-pass-2f@")}
        result = _run(env, tmp_path / "out", s3_table.metadata_location)
    assert result.code == 0, result.stdout + result.stderr
    assert any(target.startswith(seaweed.endpoint) for target in proxy.log.targets("GET"))  # the data files
    assert "proxy-pass-2f" not in result.stdout + result.stderr


def test_equality_deletes_are_refused(local_catalog: Any, tmp_path: Path) -> None:
    table = simple_table(local_catalog, "reviews", files=2, rows_per_file=100)
    table = add_equality_deletes(table, "id", [3, 4])
    result = _run({}, tmp_path / "out", table.metadata_location)
    _assert_failed(result, tmp_path / "out", "has equality deletes", "compact the table")


@pytest.mark.parametrize(("field", "says"), [("record_count", "is -5, outside"), ("file_size_in_bytes", "is -5 bytes")])
def test_a_data_file_recorded_with_a_negative_count_is_refused(
    local_catalog: Any, tmp_path: Path, field: str, says: str
) -> None:
    """Avro holds a manifest's counts to 64 bits, not to 0 or more: a record_count of -5 landed a shard 5 rows short,
    exit 0, before the manifests were read through `store/answers.py`."""
    table = recorded_as(simple_table(local_catalog, "reviews", files=2, rows_per_file=10), **{field: -5})
    result = _run({}, tmp_path / "out", table.metadata_location)
    _assert_failed(result, tmp_path / "out", f"reading the manifests of the table at {table.metadata_location}",
                   f"the {field} of ", says)  # fmt: skip


def test_a_table_without_rows(local_catalog: Any, tmp_path: Path) -> None:
    never_written = local_catalog.create_table("shop.empty", pa.schema([pa.field("id", pa.int64())]))
    result = _run({}, tmp_path / "out", never_written.metadata_location)
    _assert_failed(result, tmp_path / "out", "has no snapshot, so no rows")

    emptied = simple_table(local_catalog, "reviews", files=1, rows_per_file=10)
    emptied.delete(AlwaysTrue())
    result = _run({}, tmp_path / "out", emptied.metadata_location)
    _assert_failed(result, tmp_path / "out", "has no rows at its current snapshot")


def test_a_stale_shard_is_never_left_looking_complete(local_catalog: Any, tmp_path: Path) -> None:
    """A table whose data file vanished: the run fails with exit 1 (which keeps a trainer from starting), and no
    manifest claims what is not on disk: either a shard of the new snapshot landed first and the manifest stays
    withdrawn, or none did and OUTPUT_PATH is left as found, the earlier snapshot's manifest back over its shards
    exactly as they were."""
    table = simple_table(local_catalog, "reviews", files=2, rows_per_file=100)
    out = tmp_path / "out"
    assert _run({}, out, table.metadata_location, nodes=2).code == 0
    before = {path: path.read_bytes() for path in out.rglob("*") if path.is_file() and ".initializer" not in path.parts}
    manifest_before = (out / ".initializer" / "manifest.json").read_bytes()
    table.append(pa.table(rows(500, 10), schema=table.schema().as_arrow()))
    newest = max((t.file.file_path for t in table.scan().plan_files()), key=lambda p: os.stat(p[7:]).st_mtime_ns)
    os.unlink(newest.removeprefix("file://"))
    result = _run({}, out, table.metadata_location, nodes=2)
    assert result.code == 1 and "no such file" in result.last["error"], result.stderr
    manifest = out / ".initializer" / "manifest.json"
    if manifest.exists():
        assert manifest.read_bytes() == manifest_before
        assert {path: path.read_bytes() for path in before} == before, "the shards it lists are as they were"


def test_anonymous_reads_a_table_in_a_public_bucket(seaweed: SeaweedFS, s3: Any, tmp_path: Path) -> None:
    from devkit.seaweed import PUBLIC_BUCKET

    s3.create_bucket(Bucket=PUBLIC_BUCKET) if PUBLIC_BUCKET not in _buckets(s3) else None
    catalog = sql_catalog(tmp_path, f"s3://{PUBLIC_BUCKET}/anonymous-test", seaweed)
    table = simple_table(catalog, "reviews", files=2, rows_per_file=300)
    result = _run({"ENDPOINT": seaweed.endpoint, "ANONYMOUS": "true"}, tmp_path / "out", table.metadata_location, 2)
    assert result.code == 0, result.stdout + result.stderr
    _assert_sharded(tmp_path / "out", _reference(table.metadata_location, s3_properties(seaweed)), 2)


def _buckets(s3: Any) -> set[str]:
    return {b["Name"] for b in s3.list_buckets()["Buckets"]}


def test_the_docs_reading_example_reads_one_shard(
    local_catalog: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = evolving_table(local_catalog, "reviews")
    out = tmp_path / "dataset"
    assert _run({}, out, table.metadata_location, nodes=2).code == 0
    example = docs.first_block(docs.page("docs/cache.md"), "python")
    monkeypatch.setenv("RANK", "1")
    scope: dict[str, Any] = {}
    exec(example.replace("/workspace/dataset", str(out)), scope)  # the page's own code, as a node runs it
    assert scope["shard"].count_rows() == 4600 and scope["batch"].num_rows > 0


def test_nested_columns_survive_renames(local_catalog: Any, tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("tags", pa.list_(pa.string())),
                        ("meta", pa.struct([("a", pa.int32()), ("b", pa.string())])),
                        ("attrs", pa.map_(pa.string(), pa.float64()))])  # fmt: skip
    table = local_catalog.create_table("shop.reviews", schema)
    for first in (0, 500, 1000):
        ids = range(first, first + 500)
        table.append(pa.table({"id": list(ids), "tags": [[f"t{i}", "x"] if i % 3 else None for i in ids],
                               "meta": [{"a": i, "b": str(i)} for i in ids], "attrs": [[("k", i / 2)] for i in ids]},
                              schema=schema))  # fmt: skip
    with table.update_schema() as update:
        update.rename_column("tags", "labels")
    result = _run({}, tmp_path / "out", table.metadata_location, nodes=2)
    assert result.code == 0, result.stdout + result.stderr
    shards = _assert_sharded(tmp_path / "out", _reference(table.metadata_location), 2)
    assert shards[0].schema.names == ["id", "labels", "meta", "attrs"]


@pytest.mark.parametrize(
    ("message", "denied"),
    [
        ("When reading information for key 'w/metadata/00006-22f0.metadata.json' in bucket 'b': AWS Error "
         "ACCESS_DENIED during HeadObject operation: No response body.", True),
        ("When reading information for key 'w/data/00007-403-9f1c.parquet' in bucket 'b': AWS Error NO_SUCH_KEY "
         "during HeadObject operation: No response body.", False),
        ("Path does not exist 'b/w/data/00007-403-9f1c.parquet'. Detail: [errno 2] No such file or directory", False),
    ],
    ids=["access-denied", "missing-file-named-403", "missing-path-named-403"],
)  # fmt: skip
def test_storage_errors_are_classified_by_the_aws_error_type_not_by_digits(message: str, denied: bool) -> None:
    from initializers.sources.iceberg.errors import explain_os_error

    explained = explain_os_error(OSError(message), None)
    assert explained.startswith("access denied") is denied and message in explained
