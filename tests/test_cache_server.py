"""`cache-server` against a reader written from Kubeflow's data-cache protocol (`devkit.flight.read_partition`, as
its `DataCacheDataset` reads), on loopback, over tables materialised from SeaweedFS by the dataset program.

The reference for the rows is the materialisation itself, read directly: the shards in order, each shard's parts in
order (table order); and pyiceberg's own reading of the table, as a multiset.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight
import pyarrow.parquet as pq
import pytest
import yaml
from pyiceberg.table import StaticTable

from devkit import docs
from devkit.flight import CacheServer, read_partition
from devkit.iceberg import evolving_table, s3_properties, simple_table, sql_catalog
from devkit.iceberg_deletes import add_position_deletes
from devkit.programs import run_program
from devkit.seaweed import SeaweedFS
from initializers.cache.flight import partition_of

NODES = 3
#: Generous, for a shared machine: the server itself gives open streams 5 s.
STOP_CEILING = 20.0


def _materialise(metadata: str, seaweed: SeaweedFS, out: Path, **extra: str) -> None:
    env = {**seaweed.env(), "STORAGE_URI": "cache://shop/reviews", "METADATA_LOC": metadata,
           "NUM_DATA_NODES": str(NODES), "OUTPUT_PATH": str(out), "REGION": "us-east-1", **extra}  # fmt: skip
    result = run_program("dataset", env)
    assert result.code == 0, result.stdout + result.stderr


def _in_table_order(out: Path) -> pa.Table:
    """The materialisation read directly: shard-0's parts in order, then shard-1's, ..."""
    parts = [
        pq.read_table(part)
        for shard in range(NODES)
        for part in sorted((out / f"shard-{shard}").glob("part-*.parquet"))
    ]
    return pa.concat_tables(parts).replace_schema_metadata(None)


def _multiset(table: pa.Table) -> Counter[str]:
    return Counter(json.dumps(row, sort_keys=True) for row in table.to_pylist())


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory, seaweed: SeaweedFS, s3: Any) -> dict[str, Any]:
    """Two materialisations from one bucket: the evolving table (copy-on-write deletes, renamed, promoted and added
    columns) with merge-on-read position deletes on top, 9195 rows; and a small table of 59 rows."""
    root = tmp_path_factory.mktemp("cache-server")
    s3.create_bucket(Bucket="cache-server")
    catalog = sql_catalog(root, "s3://cache-server/warehouse", seaweed)
    table = evolving_table(catalog, "reviews")
    largest = max(table.scan().plan_files(), key=lambda task: (task.file.record_count, task.file.file_path)).file
    table = add_position_deletes(table, largest.file_path, [0, 1, 2, 250, largest.record_count - 1])
    (root / "small").mkdir()
    small = simple_table(sql_catalog(root / "small", "s3://cache-server/small", seaweed), "reviews", 2, 30)
    small = add_position_deletes(small, sorted(t.file.file_path for t in small.scan().plan_files())[1], [7])
    _materialise(table.metadata_location, seaweed, root / "large")
    _materialise(small.metadata_location, seaweed, root / "small-out")
    reference = StaticTable.from_metadata(table.metadata_location, s3_properties(seaweed)).scan().to_arrow()
    return {"large": root / "large", "small": root / "small-out", "reference": reference, "root": root}


@pytest.fixture(scope="module")
def server(tables: dict[str, Any]) -> Iterator[CacheServer]:
    with CacheServer(tables["large"], tables["root"] / "large.log") as running:
        yield running


@pytest.fixture(scope="module")
def small_server(tables: dict[str, Any]) -> Iterator[CacheServer]:
    with CacheServer(tables["small"], tables["root"] / "small.log") as running:
        yield running


def _assert_split(address: str, total: int, whole: pa.Table) -> list[pa.Table]:
    partitions = [read_partition(address, index, total) for index in range(total)]
    sizes = [partition.num_rows for partition in partitions]
    assert max(sizes) - min(sizes) <= 1, sizes
    assert sizes == sorted(sizes, reverse=True), "the larger partitions come first, as the shards do"
    # Contiguous in table order, every row once: the partitions laid end to end are the table.
    assert pa.concat_tables(partitions).equals(whole)
    return partitions


@pytest.mark.parametrize("total", [1, 2, 3, 7, 64])
def test_every_split_is_the_table_once_in_order_and_balanced(
    server: CacheServer, tables: dict[str, Any], total: int
) -> None:
    whole = _in_table_order(tables["large"])
    assert whole.num_rows == tables["reference"].num_rows == 9200 - 5
    partitions = _assert_split(server.address, total, whole)
    assert partitions[0].schema.names == ["id", "split", "body", "score", "lang"], "data columns only"
    assert partitions[0].schema.field("score").type == pa.float64()
    assert _multiset(pa.concat_tables(partitions)) == _multiset(tables["reference"].cast(whole.schema))


def test_as_many_partitions_as_data_nodes_are_the_shards(server: CacheServer, tables: dict[str, Any]) -> None:
    for index in range(NODES):
        shard = pq.read_table(tables["large"] / f"shard-{index}").replace_schema_metadata(None)
        assert read_partition(server.address, index, NODES).equals(shard)


@pytest.mark.parametrize("total", [25, 59, 70])
def test_more_partitions_than_rows_per_shard_or_in_the_table(
    small_server: CacheServer, tables: dict[str, Any], total: int
) -> None:
    """59 rows, about 20 per shard: partitions of 2 or 3 rows, of one row each, and of one row or none."""
    partitions = _assert_split(small_server.address, total, _in_table_order(tables["small"]))
    assert all(partition.schema == partitions[0].schema for partition in partitions)


def test_the_flight_info_names_the_partition_rows_and_the_advertised_location(server: CacheServer) -> None:
    info = flight.FlightClient(server.address).get_flight_info(flight.FlightDescriptor.for_path("1", "7"))
    assert info.total_records == 1314  # 9195 rows: 4 partitions of 1314, 3 of 1313
    (endpoint,) = info.endpoints
    assert [location.uri.decode() for location in endpoint.locations] == [server.address]
    assert info.schema.names == ["id", "split", "body", "score", "lang"]


def test_concurrent_readers_each_get_their_own_partition(server: CacheServer, tables: dict[str, Any]) -> None:
    whole = _in_table_order(tables["large"])
    total = 8
    results: dict[int, pa.Table] = {}
    failures: list[BaseException] = []
    start = threading.Barrier(total * 2)

    def reader(index: int, round_: int) -> None:
        try:
            start.wait()
            results[index + total * round_] = read_partition(server.address, index, total)
        except BaseException as exc:  # reported below, in the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=reader, args=(i, r)) for r in range(2) for i in range(total)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    assert pa.concat_tables([results[i] for i in range(total)]).equals(whole)
    assert all(results[i].equals(results[i + total]) for i in range(total))


def test_the_deploy_examples_trainer_reads_its_partition(server: CacheServer, tables: dict[str, Any]) -> None:
    """deploy/cache-flight.yaml's trainer script as it is, its Service name pointed at this server."""
    job = yaml.safe_load((Path(__file__).resolve().parents[1] / "deploy" / "cache-flight.yaml").read_text())
    script = job["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    script = script.replace("{os.environ['TRAIN_JOB_NAME']}-cache-service:50051", f"127.0.0.1:{server.port}")
    for index in range(2):
        done = subprocess.run([sys.executable, "-c", script], env={**os.environ, "JOB_COMPLETION_INDEX": str(index)},
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout == f"partition {index} of 2: {4598 - index} rows\n"


@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        (["3", "3"], "partition index 3 is out of range: 3 partitions are numbered 0 to 2"),
        (["0", "0"], "total must be at least 1"),
        (["a", "2"], "index must be an integer, 0 or more; got 'a'"),
        (["-1", "2"], "got '-1'"),
        (["1", " 2"], "got ' 2'"),
        (["1"], "got 1 parts"),
        (["1", "2", "3"], "got 3 parts"),
    ],
)
def test_a_bad_descriptor_is_a_flight_error_and_the_server_goes_on(
    server: CacheServer, path: list[str], fragment: str
) -> None:
    client = flight.FlightClient(server.address)
    with pytest.raises(flight.FlightError, match=fragment):
        client.get_flight_info(flight.FlightDescriptor.for_path(*path))
    assert read_partition(server.address, 0, 2).num_rows == 4598


def test_a_command_descriptor_and_a_foreign_ticket_are_refused(server: CacheServer) -> None:
    client = flight.FlightClient(server.address)
    with pytest.raises(flight.FlightError, match="expected a path descriptor"):
        client.get_flight_info(flight.FlightDescriptor.for_command(b"SELECT *"))
    with pytest.raises(flight.FlightError, match="not a ticket this server issued"):
        client.do_get(flight.Ticket(b'{"partition": [5, 2]}')).read_all()
    with pytest.raises(flight.FlightError, match="not a ticket this server issued"):
        client.do_get(flight.Ticket(b"rows 0-100")).read_all()
    assert any(event["event"] == "refused" for event in server.events())
    assert read_partition(server.address, 0, 1).num_rows == 9195


# -- refusing to start: exit 1 naming the folder or file, exit 2 naming the variable --------------------------


def _refused(folder: Path, *fragments: str, code: int = 1, **env: str) -> None:
    result = run_program("cache_server", {"OUTPUT_PATH": str(folder), "PORT": "9", **env}, timeout=60)
    assert result.code == code, result.stdout + result.stderr
    assert result.last["event"] == "failed"
    for fragment in fragments:
        assert fragment in result.last["error"], result.last


def test_a_folder_without_a_manifest_is_refused(tmp_path: Path) -> None:
    _refused(tmp_path, f"{tmp_path} holds no complete materialisation", "cache:// STORAGE_URI")
    _refused(tmp_path / "never-made", str(tmp_path / "never-made"))


def test_a_materialisation_missing_a_part_is_refused(tables: dict[str, Any], tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(tables["small"]), str(copy)], check=True)
    (victim,) = sorted(copy.glob("shard-1/part-*.parquet"))[:1]
    victim.unlink()
    _refused(copy, str(victim), "incomplete")


def test_a_part_changed_since_the_manifest_is_refused(tables: dict[str, Any], tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(tables["small"]), str(copy)], check=True)
    (victim,) = sorted(copy.glob("shard-0/part-*.parquet"))[:1]
    with open(victim, "r+b") as handle:
        handle.truncate(victim.stat().st_size - 10)
    _refused(copy, str(victim), "the manifest says", "it changed since")


def test_another_sources_download_is_refused(seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path) -> None:
    s3.put_object(Bucket=bucket, Key="d/train.parquet", Body=b"PAR1")
    done = run_program("dataset", {**seaweed.env(), "STORAGE_URI": f"s3://{bucket}/d", "OUTPUT_PATH": str(tmp_path)})
    assert done.code == 0, done.stdout + done.stderr
    _refused(tmp_path, f"{tmp_path} holds 's3://{bucket}/d', not a cache:// materialisation")


def test_one_nodes_shard_is_refused(tables: dict[str, Any], seaweed: SeaweedFS, tmp_path: Path) -> None:
    manifest = json.loads((tables["small"] / ".initializer" / "manifest.json").read_text())
    _materialise(manifest["source"]["metadata_location"], seaweed, tmp_path, SHARD_INDEX="1")
    _refused(tmp_path, f"{tmp_path} holds only shard-1 of the table")


def test_a_bad_port_is_a_configuration_error(tables: dict[str, Any]) -> None:
    _refused(tables["small"], "PORT: expected a port number, 1 to 65535, got '70000'", code=2, PORT="70000")


# -- stopping ------------------------------------------------------------------------------------------------


def _exits_within(process: subprocess.Popen[bytes], ceiling: float) -> int:
    try:
        return process.wait(ceiling)
    except subprocess.TimeoutExpired:
        pytest.fail(f"cache-server still running {ceiling} s after the signal")


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """400 000 rows in a local warehouse: more than gRPC buffers for a reader that stops reading."""
    root = tmp_path_factory.mktemp("wide")
    table = simple_table(sql_catalog(root, f"file://{root}/warehouse"), "reviews", files=2, rows_per_file=200_000)
    env = {"STORAGE_URI": "cache://shop/reviews", "METADATA_LOC": table.metadata_location, "NUM_DATA_NODES": "2",
           "OUTPUT_PATH": str(root / "out")}  # fmt: skip
    assert run_program("dataset", env).code == 0
    return root / "out"


@pytest.mark.parametrize(("signum", "stalled"), [(signal.SIGTERM, True), (signal.SIGINT, False)])
def test_a_stop_signal_ends_the_server_even_with_a_reader_that_stopped_reading(
    wide: Path, tmp_path: Path, signum: int, stalled: bool
) -> None:
    """A reader takes one batch of the whole table and reads no more: its stream stays open, and the server must stop
    anyway, within the generous ceiling. The stream ends in an error, never as a partition that looks complete."""
    running = CacheServer(wide, tmp_path / "log")
    try:
        if stalled:
            info = flight.FlightClient(running.address).get_flight_info(flight.FlightDescriptor.for_path("0", "1"))
            reader = flight.FlightClient(info.endpoints[0].locations[0]).do_get(info.endpoints[0].ticket)
            assert reader.read_chunk().data.num_rows > 0
        os.kill(running.process.pid, signum)
        code = _exits_within(running.process, STOP_CEILING)
    finally:
        running.stop()
    assert code == 0, running.log.read_text()
    stopped = [event for event in running.events() if event["event"] == "stopped"]
    assert stopped, running.log.read_text()
    assert stopped[0]["signal"] == signal.Signals(signum).name
    if stalled:
        with pytest.raises(pa.ArrowException):  # FlightError among them
            reader.read_all()
    else:
        assert stopped[0]["streams_ended"] is True


def test_the_partition_rule_as_a_pure_function() -> None:
    assert partition_of([b"0", b"1"]) == (0, 1)
    assert partition_of([b"6", b"7"]) == (6, 7)
    with pytest.raises(ValueError, match="out of range"):
        partition_of([b"7", b"7"])


def test_the_docs_list_the_servers_variables_as_its_schema_declares_them() -> None:
    from initializers.cache_server import ServerConfig
    from initializers.config.settings import settings_of

    section = docs.section(docs.page("docs/cache.md"), "## Reading a cache")
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    listed = {name.strip(" `") for row in rows for name in row.replace(", or", ",").split(",")}
    declared = {name for _, setting in settings_of(ServerConfig) for name in (setting.env, *setting.fallback_env)}
    assert listed == declared
