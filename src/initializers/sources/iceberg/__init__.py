"""The cache:// source: an Iceberg table read with pyiceberg (`storage`, `parts`, `errors`) into Parquet shards
(`source`). This face declares it (`PLUGIN`); pyiceberg and pyarrow are imported when a cache:// URI is opened.
"""

from __future__ import annotations

from typing import Any

from initializers.config.anonymous import AnonymousAccess
from initializers.config.contract import Config, Kind
from initializers.config.registry import SourcePlugin
from initializers.sources.aws.options import BOTOCORE_VARIABLES, AwsOptions
from initializers.sources.iceberg.location import CacheLocation
from initializers.sources.iceberg.options import CacheOptions

_REFUSES = {
    "ignore_patterns": "every row of the table is sharded",
    "allow_patterns": "every row of the table is sharded",
    "max_bandwidth": "pyarrow reads the table's files",
}

_NOTES = {
    "shard_index": "For cache://, the one shard (of NUM_DATA_NODES) this node materialises.",
    "shard_count": "For cache://, unset or NUM_DATA_NODES: the table is sharded for its data nodes.",
}


def _open(uri: str, config: Config, _kind: Kind) -> Any:
    from initializers.sources.iceberg.source import IcebergSource

    return IcebergSource.from_config(uri, config)


#: The store, for the composition root (`initializers.sources.STORES`).
PLUGIN = SourcePlugin(
    "cache",
    CacheLocation.USAGE,
    (CacheOptions, AwsOptions, AnonymousAccess),
    lambda uri, _kind: CacheLocation.parse(uri),
    _open,
    kinds=("dataset",),  # a table's rows made into Parquet shards: a dataset, never a model
    splits_plan=False,
    refuses=_REFUSES,
    notes=_NOTES,
    also_reads=(*BOTOCORE_VARIABLES, "ARROW_DEFAULT_MEMORY_POOL"),
)
