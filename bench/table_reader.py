"""One reader of the cache-server benchmark, a process of its own: its share of a materialised table, read over
Arrow Flight as Kubeflow's `DataCacheDataset` reads, or from the Parquet shards directly.

`python -m bench.table_reader flight ADDRESS INDEX TOTAL` or `python -m bench.table_reader parquet FOLDER INDEX TOTAL`
prints one JSON line: rows, Arrow bytes, CPU seconds and peak RSS of this process.
"""

from __future__ import annotations

import json
import resource
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa


def over_flight(address: str, index: int, total: int) -> Iterator[pa.RecordBatch]:
    import pyarrow.flight as flight

    info = flight.FlightClient(address).get_flight_info(flight.FlightDescriptor.for_path(str(index), str(total)))
    for endpoint in info.endpoints:
        for chunk in flight.FlightClient(endpoint.locations[0]).do_get(endpoint.ticket):
            yield chunk.data


def from_shards(folder: str, index: int, total: int) -> Iterator[pa.RecordBatch]:
    """Every `total`-th shard from shard `index` on (the shards are balanced, so the shares are too), its parts in
    order."""
    import pyarrow.parquet as pq

    shards = sorted(Path(folder).glob("shard-*"), key=lambda shard: int(shard.name.removeprefix("shard-")))
    for shard in shards[index::total]:
        for part in sorted(shard.glob("part-*.parquet")):
            yield from pq.ParquetFile(part).iter_batches(use_threads=False)


def main(how: str, where: str, index: int, total: int) -> None:
    rows = size = 0
    for batch in (over_flight if how == "flight" else from_shards)(where, index, total):
        rows += batch.num_rows
        size += batch.nbytes
    usage = resource.getrusage(resource.RUSAGE_SELF)
    # VmHWM, not ru_maxrss: that one survives exec, so it would report the (large) benchmark process that forked us.
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    print(json.dumps({"rows": rows, "bytes": size, "cpu": usage.ru_utime + usage.ru_stime,
                      "rss_mb": int(status["VmHWM"].split()[0]) / 1024}))  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
