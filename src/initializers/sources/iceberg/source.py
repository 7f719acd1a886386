"""The cache source: an Apache Iceberg table, read with pyiceberg, delivered as balanced Parquet shards. Kubeflow's data
cache names a table (`cache://SCHEMA/TABLE`) and its metadata file (METADATA_LOC). The table's current snapshot is laid
out as one folder per data node, `shard-<i>/`, whose row counts differ by at most one, so node i reads `shard-<i>` with
no cache cluster at all. A shard is made of parts, one per data file it overlaps, in table order, each written by
`parts` (a byte copy where exact). Every part's version names the snapshot and schema, so an unchanged table is a no-op
and a new snapshot or schema re-materialises the shards.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from initializers.cache.sharding import cut, shard_sizes
from initializers.common.errors import ConfigError, FetchError, first_line
from initializers.common.remote_file import RemoteFile
from initializers.config.contract import Config
from initializers.sources.aws.access import Role, access_from
from initializers.sources.iceberg.errors import explain_os_error, pyarrow_transient
from initializers.sources.iceberg.location import CacheLocation
from initializers.sources.iceberg.options import CacheOptions
from initializers.sources.iceberg.storage import S3_SCHEMES, TableStorage
from initializers.store import answers
from initializers.store.contract import Advice, Maker
from initializers.store.retry import retrying

if TYPE_CHECKING:  # pyarrow and pyiceberg load only once the configuration is known to be valid
    from pyiceberg.table import FileScanTask, StaticTable, Table

    from initializers.sources.iceberg.parts import Part, PartWriter

_T = TypeVar("_T")


def shard_folder(index: int) -> str:
    return f"shard-{index}"


class IcebergSource(Maker):
    owned_folders = "shard-*"
    pins_versions = True  # METADATA_LOC or the catalog names one metadata file: one snapshot, whatever comes later

    def __init__(self, location: CacheLocation, config: Config) -> None:
        options = config.options(CacheOptions)
        self.location = location
        self._metadata_location = _metadata_location(options.metadata_loc)
        self._nodes = data_nodes(options)
        #: SHARD_INDEX: this node materialises only its own shard, reading only the data files that overlap it.
        self._only = node_shard(config, self._nodes)
        if self._only is not None:
            self.owned_folders = shard_folder(self._only)
        access = access_from(config, Role.given(options.iam_role, "IAM_ROLE"))
        self._storage = TableStorage(config, self._metadata_location, access)
        self._description: dict[str, Any] = {"uri": str(location), "metadata_location": self._metadata_location}
        recorded = options.kubeflow.recorded()
        if recorded:
            self._description["kubeflow"] = recorded
        self._parts: dict[str, Part] = {}
        self._writer: PartWriter | None = None

    @classmethod
    def from_config(cls, uri: str, config: Config) -> IcebergSource:
        return cls(CacheLocation.parse(uri), config)

    def describe(self) -> dict[str, Any]:
        return dict(self._description)

    def advice(self) -> Advice:
        return Advice(workers=2, max_workers=2)  # CPU-bound decoding and encoding: about one worker per core

    def list_files(self) -> Iterator[RemoteFile]:
        from initializers.sources.iceberg.parts import Part, PartWriter, kept_rows

        table = self._open_table()
        snapshot = table.current_snapshot()
        where = f"the table at {self._metadata_location}"
        if snapshot is None:
            raise FetchError(f"{where} has no snapshot, so no rows: nothing to download")
        from initializers.adapters.pyiceberg import read_all_delete_files

        tasks = sorted(
            self._retrying(
                "plan", f"the data files of {where}", lambda: _plan_files(table, snapshot.snapshot_id, where)
            ),
            key=lambda t: t.file.file_path,
        )
        deletes = self._retrying("read", f"the delete files of {where}", lambda: read_all_delete_files(table.io, tasks))
        live = [kept_rows(deletes.get(t.file.file_path), 0, t.file.record_count) for t in tasks]
        if not sum(live):
            raise FetchError(f"{where} has no rows at its current snapshot {snapshot.snapshot_id}: nothing to download")
        self._writer = writer = PartWriter(table, self._storage.file_io)
        schema = table.schema()
        version = f"snapshot {snapshot.snapshot_id} schema {schema.schema_id}"
        mine = range(self._nodes) if self._only is None else (self._only,)  # the shards this node materialises
        files_per_shard = [0] * self._nodes
        for piece in cut(live, self._nodes):
            if piece.shard not in mine:
                continue
            task = tasks[piece.input]
            part = Part(task, piece.start, piece.stop, deletes.get(task.file.file_path))
            yield self._add(
                piece.shard, files_per_shard, part, f"{version}: {task.file.file_path}[{piece.start}:{piece.stop}]"
            )
        for shard in mine:  # fewer rows than data nodes: the node still finds its folder, with the schema and no rows
            if not files_per_shard[shard]:
                yield self._add(shard, files_per_shard, Part(None, 0, 0, None), f"{version}: no rows")
        self._description.update(
            table_location=table.metadata.location,
            snapshot_id=snapshot.snapshot_id,
            schema_id=schema.schema_id,
            schema=json.loads(schema.model_dump_json()),
            arrow_schema=writer.target.to_string(show_field_metadata=False, show_schema_metadata=False),
            rows=sum(live),
            data_nodes=self._nodes,
            **({} if self._only is None else {"shard": self._only}),
            shards=[
                {
                    "path": shard_folder(i),
                    "rows": rows,
                    "files": files_per_shard[i] if i in mine else None,
                }
                for i, rows in enumerate(shard_sizes(sum(live), self._nodes))
            ],
        )

    def _add(self, shard: int, files_per_shard: list[int], part: Part, version: str) -> RemoteFile:
        path = f"{shard_folder(shard)}/part-{files_per_shard[shard]:05d}.parquet"
        files_per_shard[shard] += 1
        self._parts[path] = part
        locator = part.task.file.file_path if part.task else f"{self.location} (empty shard)"
        return RemoteFile(path, part.estimated_bytes, version, locator, exact_size=False)

    def made_with(self, file: RemoteFile) -> str:
        return file.locator  # the data file: its parts are cut in one pass over it

    def make(self, files: list[tuple[RemoteFile, str]], on_bytes: Callable[[int], None]) -> None:
        writer = self._writer
        assert writer is not None, "list_files runs first"
        parts = [(self._parts[file.path], destination) for file, destination in files]
        self._retrying("read", files[0][0].locator, lambda: writer.write(parts, on_bytes))

    def _open_table(self) -> StaticTable:
        from pyiceberg.table import StaticTable

        if self._storage.locate():  # through the bucket's signed GETs, which retry by themselves
            self._description["region"] = self._storage.region
        return self._retrying(
            "open",
            f"METADATA_LOC {self._metadata_location}",
            lambda: StaticTable.from_metadata(self._metadata_location, self._storage.properties()),
            metadata=True,
        )

    def _retrying(self, verb: str, what: str, call: Callable[[], _T], metadata: bool = False) -> _T:
        """`call()` under the one retry policy, failures worded by `_translated_errors` (pyarrow's retries spent)."""

        def attempt() -> _T:
            with self._translated_errors(what, metadata):
                return call()

        return retrying(verb, what, attempt)

    @contextlib.contextmanager
    def _translated_errors(self, what: str, metadata: bool = False) -> Iterator[None]:
        """pyarrow's and pyiceberg's exceptions as messages that say what failed and what to check."""
        from pydantic import ValidationError
        from pyiceberg.exceptions import ValidationError as IcebergValidationError

        try:
            yield
        except FetchError:
            raise
        except FileNotFoundError:
            raise FetchError(f"{what}: no such file") from None
        except PermissionError as exc:
            raise FetchError(f"{what}: permission denied ({exc})") from None
        except (ValidationError, IcebergValidationError, json.JSONDecodeError, UnicodeDecodeError) as exc:
            if metadata:
                raise FetchError(f"{what} is not an Iceberg table metadata file: {first_line(exc)}") from None
            raise FetchError(f"{what}: {first_line(exc)}") from None
        except OSError as exc:
            explained = explain_os_error(exc, self._storage.endpoint)
            raise pyarrow_transient(exc, explained) or FetchError(f"{what}: {explained}") from None
        except ValueError as exc:  # pyiceberg's refusals (unsupported formats, deletes, types) are ValueErrors
            raise FetchError(f"{what}: {first_line(exc)}") from None


def data_nodes(options: CacheOptions) -> int:
    """How many shards the cache source writes: NUM_DATA_NODES, or CLUSTER_SIZE - 1 as Kubeflow sends it."""
    from_cluster = None if options.cluster_size is None else options.cluster_size - 1
    if from_cluster is None and options.num_data_nodes is None:
        raise ConfigError(
            "NUM_DATA_NODES is not set (nor CLUSTER_SIZE, data nodes + 1, as Kubeflow sends it): the cache "
            "source needs the number of data nodes to shard the table for"
        )
    if from_cluster is not None and options.num_data_nodes is not None and from_cluster != options.num_data_nodes:
        raise ConfigError(
            f"CLUSTER_SIZE={options.cluster_size} means {from_cluster} data nodes, but NUM_DATA_NODES="
            f"{options.num_data_nodes}; set only one of them"
        )
    nodes = options.num_data_nodes if options.num_data_nodes is not None else from_cluster
    assert nodes is not None
    if nodes < 2:
        given = (
            f"NUM_DATA_NODES={nodes}" if options.num_data_nodes is not None else f"CLUSTER_SIZE={options.cluster_size}"
        )
        raise ConfigError(f"{given}: the cache source needs at least 2 data nodes, got {nodes}")
    return nodes


def node_shard(config: Config, nodes: int) -> int | None:
    """SHARD_INDEX as the cache source reads it: the one shard (of `nodes`) this node materialises (None: all), not a
    share of a plan split over SHARD_COUNT initializers; SHARD_COUNT may only repeat the number of data nodes."""
    if config.shard_count is not None and config.shard_count != nodes:
        raise ConfigError(
            f"SHARD_COUNT={config.shard_count}, but the table is sharded for {nodes} data nodes "
            "(NUM_DATA_NODES / CLUSTER_SIZE); leave SHARD_COUNT unset"
        )
    if config.shard_index is None and config.shard_count is None:
        return None
    return config.share_of(nodes)[0]


def _plan_files(table: Table, snapshot_id: int, where: str) -> list[FileScanTask]:
    """The snapshot's data files with their deletes; refused before any is read when some cannot be (equality
    deletes, ORC or Avro data files), since a half-materialised table is of no use."""
    from pyiceberg.manifest import FileFormat

    try:
        tasks = list(table.scan(snapshot_id=snapshot_id).plan_files())
    except ValueError as exc:
        if "equality deletes" not in str(exc):
            raise
        raise FetchError(
            f"{where} has equality deletes, which pyiceberg cannot apply; compact the table (rewrite its data "
            "files, e.g. Spark's rewrite_data_files) and try again"
        ) from None
    with answers.read_from(table.metadata_location, "reading the manifests of the table"):
        for task in tasks:  # Avro bounds them to 64 bits; below 0, a row count would land a shard short of rows
            answers.count(task.file.record_count, f"the record_count of {task.file.file_path}")
            answers.size(task.file.file_size_in_bytes, f"the file_size_in_bytes of {task.file.file_path}")
    for task in tasks:
        if task.file.file_format != FileFormat.PARQUET:
            raise FetchError(
                f"{task.file.file_path} is a data file of {where} in {task.file.file_format.value} format; the cache "
                "source reads Parquet data files only: rewrite the table's data files as Parquet "
                "(write.format.default=parquet, then e.g. Spark's rewrite_data_files)"
            )
    return tasks


def _metadata_location(value: str | None) -> str:
    if not value:
        raise ConfigError(
            "METADATA_LOC is not set: the cache source reads the table from its metadata file, "
            "e.g. s3://bucket/warehouse/db/table/metadata/v3.metadata.json"
        )
    scheme = urlsplit(value).scheme.lower()
    if scheme in (*S3_SCHEMES, "file"):
        return value
    if scheme and len(scheme) > 1:  # a one-letter scheme is a Windows drive, not ours
        raise ConfigError(f"METADATA_LOC: scheme {scheme}:// is not supported; expected s3://, s3a:// or a local path")
    return os.path.abspath(value)
