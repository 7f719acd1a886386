"""The `to_arrow` approach, the obvious peer of the cache source: the whole table in memory, sliced into shards.

`python -m bench.to_arrow_shards METADATA_LOC NODES OUTPUT` with the S3 settings in pyiceberg's own `PYICEBERG_*`-free
form: ENDPOINT, ACCESS_KEY_ID, SECRET_ACCESS_KEY (the contract's variables, as a user would hand them over).
"""

from __future__ import annotations

import os
import sys

import pyarrow.parquet as pq
from pyiceberg.table import StaticTable


def main(metadata_location: str, nodes: int, output: str) -> None:
    properties = {"s3.endpoint": os.environ["ENDPOINT"], "s3.access-key-id": os.environ["ACCESS_KEY_ID"],
                  "s3.secret-access-key": os.environ["SECRET_ACCESS_KEY"], "s3.region": "us-east-1"}  # fmt: skip
    table = StaticTable.from_metadata(metadata_location, properties).scan().to_arrow()
    start = 0
    for index in range(nodes):
        rows = table.num_rows // nodes + (1 if index < table.num_rows % nodes else 0)
        os.makedirs(f"{output}/shard-{index}")
        pq.write_table(table.slice(start, rows), f"{output}/shard-{index}/part-00000.parquet")
        start += rows


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
