"""Merge-on-read delete files for test tables, as Spark and Flink write them.

pyiceberg 0.12 deletes copy-on-write only (it rewrites the data files), so a table with position or equality
delete files, which readers must apply, cannot be made with its public API. These helpers write such a delete
file with the table's own FileIO, describe it in a delete manifest and commit it through the table's catalog in a
new snapshot that keeps every existing manifest, as Java's `RowDelta` does. They reuse pyiceberg's snapshot
producer, manifest writer and Parquet statistics; the private parts (`_FastAppendFiles`) are why the minor
version of pyiceberg is pinned.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.expressions import In
from pyiceberg.expressions.visitors import _InclusiveMetricsEvaluator
from pyiceberg.io.pyarrow import (
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
    schema_to_pyarrow,
)
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriterV2,
)
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation, SnapshotSummaryCollector, Summary, update_snapshot_summaries
from pyiceberg.table.update.snapshot import _FastAppendFiles
from pyiceberg.typedef import EMPTY_DICT, Record
from pyiceberg.types import LongType, NestedField, StringType

#: The spec's schema of a position delete file, with its reserved field ids (pyiceberg's own has `pos` as int).
POSITION_DELETE_SCHEMA = Schema(
    NestedField(2147483546, "file_path", StringType(), required=True),
    NestedField(2147483545, "pos", LongType(), required=True),
)
#: Untruncated bounds: a position delete file whose file_path bounds are equal is matched to that one data file.
_FULL_METRICS = {"write.metadata.metrics.default": "full"}


def add_position_deletes(table: Table, data_file_path: str, positions: Sequence[int]) -> Table:
    """Commit one positional delete file (Parquet, columns file_path + pos, Iceberg reserved field ids 2147483546 /
    2147483545) that deletes `positions` (0-based row numbers) of the data file at `data_file_path`, in a new
    snapshot; return the refreshed table.

    The delete file carries the data file's partition and spec id, so that readers index it with that file.
    """
    target = next((data_file for data_file in _live_data_files(table) if data_file.file_path == data_file_path), None)
    if target is None:
        raise ValueError(f"no live data file {data_file_path} in the current snapshot of {table.name()}")
    rows = sorted(set(positions))
    if not rows or rows[0] < 0 or rows[-1] >= target.record_count:
        raise ValueError(f"positions must be in [0, {target.record_count}) and not empty: {positions}")
    columns = {"file_path": [data_file_path] * len(rows), "pos": rows}
    delete_file = _write_delete_file(
        table, POSITION_DELETE_SCHEMA, columns, DataFileContent.POSITION_DELETES, target.spec_id, target.partition
    )
    return _commit(table, [delete_file])


def add_equality_deletes(table: Table, column: str, values: Sequence[Any]) -> Table:
    """Commit one equality delete file on `column` (equality_ids = that column's field id) deleting rows whose
    column equals one of `values`; return the refreshed table.

    Equality deletes apply only to data files of their own partition (unless unpartitioned), so on a partitioned
    table one delete file is written per partition (and spec) holding a data file whose column bounds may contain
    one of `values`; each such file lists all `values`, which is harmless where a value is absent. If no data
    file may hold any of `values`, nothing could be deleted and ValueError is raised.
    """
    schema = table.schema()
    field = schema.find_field(column)
    delete_schema = schema.select(column)
    may_match = _InclusiveMetricsEvaluator(schema, In(column, list(values))).eval
    partitions: dict[tuple[int, Record], None] = {}
    for data_file in _live_data_files(table):
        if may_match(data_file):
            partitions[(data_file.spec_id, data_file.partition)] = None
    if not partitions:
        raise ValueError(f"no data file of {table.name()} may hold {column} in {values}")
    columns = {field.name: list(values)}
    delete_files = [
        _write_delete_file(table, delete_schema, columns, DataFileContent.EQUALITY_DELETES, spec_id, partition, field)
        for spec_id, partition in partitions
    ]
    return _commit(table, delete_files)


def _live_data_files(table: Table) -> list[DataFile]:
    """The data files of the current snapshot, with the spec id and partition their manifests give them."""
    snapshot = table.current_snapshot()
    if snapshot is None:
        return []
    return [
        entry.data_file
        for manifest in snapshot.manifests(table.io)
        if manifest.content == ManifestContent.DATA
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True)
    ]


def _write_delete_file(
    table: Table,
    schema: Schema,
    columns: dict[str, list[Any]],
    content: DataFileContent,
    spec_id: int,
    partition: Record,
    equality_field: NestedField | None = None,
) -> DataFile:
    """Write `columns` as Parquet with field ids under the table's data folder and describe it as a delete file."""
    rows = pa.Table.from_pydict(columns, schema=schema_to_pyarrow(schema, include_field_ids=True))
    path = f"{table.location().rstrip('/')}/data/{content.name.lower()}-{uuid.uuid4()}.parquet"
    output = table.io.new_output(path)
    with output.create() as stream, pq.ParquetWriter(stream, rows.schema) as writer:
        writer.write_table(rows)
    statistics = data_file_statistics_from_parquet_metadata(
        parquet_metadata=writer.writer.metadata,
        stats_columns=compute_statistics_plan(schema, _FULL_METRICS),
        parquet_column_mapping=parquet_path_to_id_mapping(schema),
    )
    delete_file = DataFile.from_args(
        content=content,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=partition,
        file_size_in_bytes=len(output),
        sort_order_id=None,
        equality_ids=[equality_field.field_id] if equality_field is not None else None,
        key_metadata=None,
        **statistics.to_serialized_dict(),
    )
    delete_file.spec_id = spec_id  # from_args ignores it: pyiceberg sets it when reading a manifest
    return delete_file


def _commit(table: Table, delete_files: list[DataFile]) -> Table:
    """Commit `delete_files` in one snapshot through the table's catalog, as a fast append of delete manifests."""
    if (version := table.metadata.format_version) != 2:
        raise ValueError(f"delete files are written to format-version 2 tables only, {table.name()} is v{version}")
    with table.transaction() as transaction:
        producer = _RowDelta(operation=Operation.DELETE, transaction=transaction, io=table.io)
        for delete_file in delete_files:
            producer.append_data_file(delete_file)
        producer.commit()
    return table.refresh()


class _DeleteManifestWriter(ManifestWriterV2):
    """pyiceberg's v2 manifest writer, but for a delete manifest: readers only look for delete files in those."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class _RowDelta(_FastAppendFiles):
    """A fast append (every existing manifest kept, no validation) whose added files go to delete manifests."""

    def _manifests(self) -> list[ManifestFile]:
        by_spec: dict[int, list[DataFile]] = defaultdict(list)
        for delete_file in self._added_data_files:
            by_spec[delete_file.spec_id].append(delete_file)
        manifests = []
        for spec_id, delete_files in by_spec.items():
            output = self.new_manifest_output()
            with _DeleteManifestWriter(
                self.spec(spec_id), self.schema(), output, self._snapshot_id, self._compression
            ) as writer:
                for delete_file in delete_files:
                    writer.add_entry(
                        ManifestEntry.from_args(
                            status=ManifestEntryStatus.ADDED, snapshot_id=self._snapshot_id, data_file=delete_file
                        )
                    )
            manifests.append(writer.to_manifest_file())
        return manifests + self._existing_manifests()

    def _summary(self, snapshot_properties: dict[str, str] = EMPTY_DICT) -> Summary:
        """The base summary, but each file's partition is rendered with its own spec, not the default one."""
        metadata = self._transaction.table_metadata
        collector = SnapshotSummaryCollector()
        for delete_file in self._added_data_files:
            collector.add_file(delete_file, metadata.schema(), metadata.specs()[delete_file.spec_id])
        parent = metadata.snapshot_by_id(self._parent_snapshot_id) if self._parent_snapshot_id is not None else None
        return update_snapshot_summaries(
            Summary(operation=self._operation, **collector.build(), **snapshot_properties),
            parent.summary if parent is not None else None,
        )
