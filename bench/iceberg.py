"""Iceberg side by side: the cache source vs `StaticTable.scan().to_arrow()` + `pyarrow.parquet.write_table`.

Tables on the local SeaweedFS, 1 M-row data files, 4 data nodes. Sets: 1, 5 and 10 M rows as written (whole
files can be copied), and 5 M rows after a schema change (every part re-written). Run with `make bench-iceberg`
(BENCH_ROUNDS, BENCH_OUT, BENCH_SETS: any of 1, 5, X, E; BENCH_QUICK: 1 and 5, one round).
"""

from __future__ import annotations

import os
import sys
import tempfile
from functools import partial
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.harness import Result, measure, run_alone
from devkit.iceberg import NAMESPACE, sql_catalog
from devkit.seaweed import SeaweedFS

NODES = 4
FILE_ROWS = 1_000_000
BIN = Path(sys.executable).parent
PEER = "to_arrow + write_table"


def _rows(first: int, count: int) -> pa.Table:
    ids = pa.array(range(first, first + count), pa.int64())
    words = pc.cast(pc.multiply(ids, 2654435761), pa.string())  # a different-looking number per row
    return pa.table(
        {
            "id": ids,
            "text": pc.binary_join_element_wise("review ", words, ": a fine product, would buy again", ""),
            "label": pc.cast(pc.bit_wise_and(ids, pa.scalar(3, pa.int64())), pa.int32()),
            "score": pc.divide(pc.cast(pc.bit_wise_and(ids, pa.scalar(1023, pa.int64())), pa.float64()), 7.0),
        }
    )


def make_table(s3: SeaweedFS, catalog_dir: Path, name: str, files: int, evolve: bool) -> str:
    catalog = sql_catalog(catalog_dir, "s3://bench/warehouse", s3)
    table = catalog.create_table(f"{NAMESPACE}.{name}", _rows(0, 1).schema)
    for index in range(files):
        table.append(_rows(index * FILE_ROWS, FILE_ROWS))
    if evolve:  # every data file now differs from the current schema: no part can be a byte copy
        with table.update_schema() as update:
            update.rename_column("text", "body")
    return table.metadata_location


def ours(s3: SeaweedFS, metadata: str, out: Path) -> tuple[list[str], dict[str, str]]:
    env = {**s3.env(), "STORAGE_URI": f"cache://{NAMESPACE}/bench", "METADATA_LOC": metadata,
           "NUM_DATA_NODES": str(NODES), "OUTPUT_PATH": str(out)}  # fmt: skip
    return [str(BIN / "dataset-initializer")], env


def to_arrow(s3: SeaweedFS, metadata: str, out: Path) -> tuple[list[str], dict[str, str]]:
    return [str(BIN / "python"), "-m", "bench.to_arrow_shards", metadata, str(NODES), str(out)], {
        **s3.env(),
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
    }


def rows_in(out: Path) -> int:
    return sum(pq.ParquetFile(part).metadata.num_rows for part in out.glob("shard-*/*.parquet"))


def suite(rounds: int, out_root: Path, quick: bool) -> list[Result]:
    sets = {
        "1": ("1 M rows", 1, False),
        "5": ("5 M rows", 5, False),
        "X": ("10 M rows", 10, False),
        "E": ("5 M rows, schema changed", 5, True),
    }
    results = []
    with SeaweedFS.start() as s3, tempfile.TemporaryDirectory() as catalog_dir:
        s3.client().create_bucket(Bucket="bench")
        for key in os.environ.get("BENCH_SETS", "15" if quick else "15XE"):
            title, files, evolve = sets[key]
            metadata = make_table(s3, Path(catalog_dir), f"t{key}", files, evolve)
            contenders = {"initializers": partial(ours, s3, metadata), PEER: partial(to_arrow, s3, metadata)}
            rows = files * FILE_ROWS
            samples = measure(key, contenders, rows, out_root, rounds, "initializers", rows_in, "M rows")
            results.append(Result(f"Iceberg {title}, {NODES} shards", rows, samples, peer=PEER, unit="M rows"))
    return results


if __name__ == "__main__":
    run_alone(suite)
