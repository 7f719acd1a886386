"""Iceberg tables for tests, benchmarks and the demo, made with pyiceberg's SqlCatalog on sqlite.

The warehouse is a local folder (`file://`) or a bucket on the local SeaweedFS; either way the programs
are pointed at the table's metadata file, as Kubeflow's data cache is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.transforms import BucketTransform, IdentityTransform
from pyiceberg.types import DoubleType, FloatType, LongType, NestedField, StringType

from devkit.seaweed import ACCESS_KEY, SECRET_KEY, SeaweedFS

NAMESPACE = "shop"
#: Small row groups, so that files have several and a part can skip the ones before its rows.
ROW_GROUP_ROWS = 500


def sql_catalog(root: Path, warehouse: str, s3: SeaweedFS | dict[str, str] | None = None) -> SqlCatalog:
    """A catalog whose sqlite database lives in `root`; `warehouse` is `file://...` or `s3://bucket/prefix`, on
    SeaweedFS or on the S3 server that `s3` gives pyiceberg's `s3.*` properties of."""
    properties = {"uri": f"sqlite:///{root}/catalog.db", "warehouse": warehouse}
    if s3 is not None:
        properties |= s3 if isinstance(s3, dict) else s3_properties(s3)
    catalog = SqlCatalog("tests", **properties)
    catalog.create_namespace_if_not_exists(NAMESPACE)
    return catalog


def s3_properties(s3: SeaweedFS) -> dict[str, str]:
    return {
        "s3.endpoint": s3.endpoint,
        "s3.access-key-id": ACCESS_KEY,
        "s3.secret-access-key": SECRET_KEY,
        "s3.region": "us-east-1",
    }


def rows(first: int, count: int, lang: str | None = None) -> dict[str, list[Any]]:
    """Deterministic rows with ids first .. first+count-1, in the columns of `evolving_table`'s first schema."""
    ids = list(range(first, first + count))
    columns: dict[str, list[Any]] = {
        "id": ids,
        "split": ["train" if i % 5 else "test" for i in ids],
        "text": [f"review {i}: " + "good " * (i % 7) for i in ids],
        "score": [float(i % 100) / 4 for i in ids],
    }
    if lang is not None:
        columns["lang"] = [lang] * count
    return columns


_FIRST_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("split", pa.string()),
        pa.field("text", pa.string()),
        pa.field("score", pa.float32()),
    ]
)


def evolving_table(catalog: SqlCatalog, name: str) -> Table:
    """A table with a history, as tables in production have one.

    Partitioned by `split` (identity) and `bucket(4, id)`; three appends; a delete (pyiceberg rewrites the
    affected files); then the schema evolves: `text` renamed to `body`, `score` promoted from float to double,
    a `lang` column added (null in older files); and one more append in the new schema.
    """
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "split", StringType()),
        NestedField(3, "text", StringType()),
        NestedField(4, "score", FloatType()),
    )
    spec = PartitionSpec(
        PartitionField(2, 1000, IdentityTransform(), "split"),
        PartitionField(1, 1001, BucketTransform(4), "id_bucket"),
    )
    table = catalog.create_table(
        f"{NAMESPACE}.{name}",
        schema,
        partition_spec=spec,
        properties={"write.parquet.row-group-limit": str(ROW_GROUP_ROWS)},
    )
    for first in (0, 3000, 6000):
        table.append(pa.table(rows(first, 3000), schema=_FIRST_SCHEMA))
    table.delete(EqualTo("split", "test"))  # rows with id % 5 == 0
    with table.update_schema() as update:
        update.rename_column("text", "body")
        update.update_column("score", field_type=DoubleType())
        update.add_column("lang", StringType())
    appended = rows(9000, 2000, lang="en")
    appended["body"] = appended.pop("text")
    table.append(pa.table(appended, schema=table.schema().as_arrow()))
    return table


def simple_table(catalog: SqlCatalog, name: str, files: int, rows_per_file: int) -> Table:
    """An unpartitioned table written in `files` appends, never changed since: every file can be copied as it is."""
    table = catalog.create_table(
        f"{NAMESPACE}.{name}", _FIRST_SCHEMA, properties={"write.parquet.row-group-limit": str(ROW_GROUP_ROWS)}
    )
    for index in range(files):
        table.append(pa.table(rows(index * rows_per_file, rows_per_file), schema=_FIRST_SCHEMA))
    return table


#: The fields of a data file's manifest entry that `recorded_as` carries over.
_DATA_FILE_FIELDS = ("content", "file_path", "file_format", "partition", "record_count", "file_size_in_bytes",
                     "column_sizes", "value_counts", "null_value_counts", "nan_value_counts", "lower_bounds",
                     "upper_bounds", "split_offsets", "sort_order_id")  # fmt: skip


def recorded_as(table: Table, **fields: Any) -> Table:
    """The table with its first data file recorded anew in another snapshot, with `fields` of its manifest entry
    changed (`record_count=-5`), as a faulty writer might record it; the refreshed table."""
    from pyiceberg.manifest import DataFile

    data_file = next(iter(table.scan().plan_files())).file
    changed = DataFile.from_args(**{name: getattr(data_file, name) for name in _DATA_FILE_FIELDS} | fields)
    changed.spec_id = data_file.spec_id
    with table.transaction() as transaction, transaction.update_snapshot().overwrite() as overwrite:
        overwrite.delete_data_file(data_file)
        overwrite.append_data_file(changed)
    return table.refresh()
