"""Writing one shard part of an Iceberg table: a data file copied byte for byte, or a slice of its rows re-written, a
row group and a batch at a time (pyarrow's `ParquetFile`), so memory stays near one batch per worker whatever the
table's size: pyiceberg 0.12's own readers hold whole files (its scanner reads ahead 16 batches per file, its batch
reader submits every file at once). Projection onto the current schema (renamed, added and promoted columns, identity
partition values missing from a file) and positional deletes reuse pyiceberg's own functions, private in 0.12: hence the
pinned minor version.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import pyarrow_to_schema, schema_to_pyarrow
from pyiceberg.schema import prune_columns
from pyiceberg.table import FileScanTask, Table
from pyiceberg.types import ListType, MapType

from initializers.adapters.pyiceberg import column_projection_values, combine_positional_deletes, to_requested_schema
from initializers.cache.sharding import Span
from initializers.common.errors import FetchError

BATCH_ROWS = 65536
#: pyarrow's default codec: shards are read once, by training, and snappy encodes faster than zstd.
_CODEC = "snappy"
_READ_BUFFER = 1 << 20
_COPY_CHUNK = 8 << 20
_FIELD_ID = b"PARQUET:field_id"


@dataclass(frozen=True)
class Part(Span):
    """Live rows [start, stop) of one data file (deletes applied), for one shard; no task: an empty shard."""

    task: FileScanTask | None
    start: int
    stop: int
    deletes: list[pa.ChunkedArray] | None  # positions deleted in the data file, None when there are none

    @property
    def estimated_bytes(self) -> int:
        if self.task is None or not self.task.file.record_count:
            return 0
        return self.task.file.file_size_in_bytes * self.rows // self.task.file.record_count


def kept_rows(deletes: list[pa.ChunkedArray] | None, start: int, stop: int) -> int:
    """How many of the file's rows [start, stop) survive its positional deletes."""
    if not deletes:
        return stop - start
    return len(combine_positional_deletes(deletes, start, stop))


def reading_schema(table: Table) -> pa.Schema:
    """The Arrow schema of every shard: the table's current schema as pyarrow reads a Parquet file back. pyiceberg
    maps strings, binaries and lists to their `large_` Arrow types, which Parquet does not keep (readers get the plain
    ones), so a data file copied as it is and a re-written part read back the same."""
    schema = schema_to_pyarrow(table.schema(), include_field_ids=True)
    return pa.schema([field.with_type(_plain(field.type)) for field in schema], metadata=schema.metadata)


def _plain(arrow_type: pa.DataType) -> pa.DataType:
    if pa.types.is_large_string(arrow_type):
        return pa.string()
    if pa.types.is_large_binary(arrow_type):
        return pa.binary()
    if pa.types.is_large_list(arrow_type) or pa.types.is_list(arrow_type):
        return pa.list_(arrow_type.value_field.with_type(_plain(arrow_type.value_type)))
    if pa.types.is_struct(arrow_type):
        return pa.struct([field.with_type(_plain(field.type)) for field in arrow_type])
    if pa.types.is_map(arrow_type):
        return pa.map_(
            arrow_type.key_field.with_type(_plain(arrow_type.key_type)),
            arrow_type.item_field.with_type(_plain(arrow_type.item_type)),
        )
    return arrow_type


class PartWriter:
    """Everything about the table a part needs, resolved once: its I/O, schemas, partition specs."""

    def __init__(self, table: Table, file_io: Callable[[], FileIO], allow_copy: bool = True) -> None:
        """`file_io`: the FileIO to open the next data file with (made anew when credentials refresh)."""
        metadata = table.metadata
        self._allow_copy = allow_copy  # False: always re-write, to compare both ways of making a part
        self._file_io = file_io
        self._schema = table.schema()
        # As pyiceberg's own scan: a list's or map's own id is not a column to select, its elements' ids are.
        self._field_ids = {
            i for i in self._schema.field_ids if not isinstance(self._schema.find_type(i), (ListType, MapType))
        }
        self._specs = metadata.specs()
        self._name_mapping = metadata.name_mapping()
        self._format_version = metadata.format_version
        self._downcast_ns = metadata.format_version <= 2  # v1/v2 tables only know microseconds, as pyiceberg reads
        self.target = reading_schema(table)

    def write(self, parts: list[tuple[Part, str]], on_bytes: Callable[[int], None]) -> str:
        """Write the parts, cut from one data file read once, as whole Parquet files; return "copied" or "rewritten"."""
        first = parts[0][0]
        if first.task is None:
            for _, destination in parts:
                pq.write_table(self.target.empty_table(), destination, compression=_CODEC)
            return "rewritten"
        with self._file_io().new_input(first.task.file.file_path).open() as stream:
            parquet = pq.ParquetFile(stream, pre_buffer=False, buffer_size=_READ_BUFFER)
            if len(parts) == 1 and self._copyable(first, parquet):
                stream.seek(0)
                self._copy(stream, first.task, parts[0][1], on_bytes)
                return "copied"
            self._rewrite(parquet, first.task, parts, on_bytes)
            return "rewritten"

    def _copyable(self, part: Part, parquet: pq.ParquetFile) -> bool:
        """A byte copy is exact only for a whole file, without deletes, already in the current schema."""
        assert part.task is not None
        file = part.task.file
        return (
            self._allow_copy
            and part.deletes is None
            and part.start == 0
            and part.stop == file.record_count == parquet.metadata.num_rows
            and _same_schema(parquet.schema_arrow, self.target)
        )

    @staticmethod
    def _copy(stream: Any, task: FileScanTask, destination: str, on_bytes: Callable[[int], None]) -> None:
        copied = 0
        with open(destination, "wb") as out:
            while chunk := stream.read(_COPY_CHUNK):
                out.write(chunk)
                copied += len(chunk)
                on_bytes(len(chunk))
        if copied != task.file.file_size_in_bytes:
            raise FetchError(
                f"{task.file.file_path}: read {copied} bytes, the table's metadata says "
                f"{task.file.file_size_in_bytes}; the data file changed under the table"
            )

    def _rewrite(
        self,
        parquet: pq.ParquetFile,
        task: FileScanTask,
        parts: list[tuple[Part, str]],
        on_bytes: Callable[[int], None],
    ) -> None:
        """One pass over the rows the parts need, each batch projected once and routed to the parts it feeds."""
        file_schema = pyarrow_to_schema(
            parquet.schema_arrow,
            self._name_mapping,
            downcast_ns_timestamp_to_us=self._downcast_ns,
            format_version=self._format_version,
        )
        missing = column_projection_values(
            task.file, self._schema, self._schema, self._specs.get(task.file.spec_id), file_schema.field_ids
        )
        projection = prune_columns(file_schema, self._field_ids, select_full_types=False)
        deletes = parts[0][0].deletes
        span = Part(task, min(p.start for p, _ in parts), max(p.stop for p, _ in parts), deletes)
        row_groups, live, position = _row_groups_for(parquet.metadata, span)
        bytes_per_row = task.file.file_size_in_bytes / max(task.file.record_count, 1)
        written = [0] * len(parts)
        with contextlib.ExitStack() as writers_open:
            writers = [
                writers_open.enter_context(pq.ParquetWriter(destination, self.target, compression=_CODEC))
                for _, destination in parts
            ]
            batches = parquet.iter_batches(
                BATCH_ROWS, row_groups=row_groups, columns=[c.name for c in projection.columns], use_threads=False
            )
            for batch in batches:
                first, position = position, position + batch.num_rows
                if deletes:
                    batch = batch.take(combine_positional_deletes(deletes, first, position))
                low, high = max(span.start - live, 0), min(span.stop - live, batch.num_rows)
                if low < high:
                    rows = to_requested_schema(
                        self._schema,
                        projection,
                        batch.slice(low, high - low),
                        downcast_ns_timestamp_to_us=self._downcast_ns,
                        projected_missing_fields=missing,
                        allow_timestamp_tz_mismatch=True,
                    ).cast(self.target)
                    for index, (part, _) in enumerate(parts):  # rows[i] is live row live + low + i of the file
                        start = max(part.start - live - low, 0)
                        stop = min(part.stop - live - low, rows.num_rows)
                        if start < stop:
                            writers[index].write_batch(rows.slice(start, stop - start))
                            written[index] += stop - start
                    on_bytes(round((high - low) * bytes_per_row))
                live += batch.num_rows
                if live >= span.stop:
                    break
        _check_rows(task, [part for part, _ in parts], written)


def _row_groups_for(metadata: pq.FileMetaData, part: Part) -> tuple[list[int], int, int]:
    """The row groups holding the part's live rows, and the live and stored row number the first one starts at."""
    selected: list[int] = []
    live = position = 0
    first_live = first_position = 0
    for index in range(metadata.num_row_groups):
        rows = metadata.row_group(index).num_rows
        kept = kept_rows(part.deletes, position, position + rows)
        if live + kept > part.start and live < part.stop:
            if not selected:
                first_live, first_position = live, position
            selected.append(index)
        live += kept
        position += rows
    return selected, first_live, first_position


def _same_schema(found: pa.Schema, wanted: pa.Schema) -> bool:
    """Names, types, nullability and Iceberg field ids alike: what a reader of the file would notice."""
    return found.equals(wanted) and [_field_id(f) for f in found] == [_field_id(f) for f in wanted]


def _field_id(field: pa.Field) -> bytes | None:
    return (field.metadata or {}).get(_FIELD_ID)


def _check_rows(task: FileScanTask, parts: list[Part], written: list[int]) -> None:
    """Each part got the rows the table's metadata promises it: fewer means the data file changed under the table."""
    for part, count in zip(parts, written, strict=True):
        if count != part.rows:
            raise FetchError(
                f"{task.file.file_path}: found {count} of the {part.rows} rows the table's metadata promises "
                f"from row {part.start}; the data file changed under the table"
            )
