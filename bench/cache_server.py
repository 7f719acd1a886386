"""cache-server side by side with reading the shards directly: rows/s and MB/s to N concurrent readers.

A table on the local SeaweedFS (bench.iceberg's rows, 1 M-row data files) is materialised once with 4 data nodes;
then, for N = 1, 2, 4 readers, each a process of its own (`bench.table_reader`): N Kubeflow-style Flight readers of
partition i of N from a fresh `cache-server` on loopback, against N readers of shards i, i + N, ... with
pyarrow.parquet. Peak RSS is the server's for Flight (the readers' largest beside it), the largest reader's for the
direct reads. Run with `make bench-cache-server` (BENCH_ROUNDS; BENCH_QUICK: 1 M rows, one round; else 5 M).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import Result, Sample, run_alone
from bench.iceberg import FILE_ROWS, NODES, make_table
from devkit.flight import CacheServer
from devkit.iceberg import NAMESPACE
from devkit.programs import run_program
from devkit.seaweed import SeaweedFS

READERS = (1, 2, 4)
FLIGHT = "cache-server (Flight)"
DIRECT = "pyarrow.parquet (shards directly)"
_TICK = os.sysconf("SC_CLK_TCK")


def _readers(how: str, where: str, count: int) -> tuple[float, list[dict[str, float]]]:
    """N reader processes at once: the wall seconds until the last is done, and what each reported."""
    started = time.perf_counter()
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "bench.table_reader", how, where, str(index), str(count)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for index in range(count)
    ]
    outputs = [process.communicate()[0] for process in processes]
    seconds = time.perf_counter() - started
    if any(process.returncode for process in processes):
        raise RuntimeError(f"a {how} reader failed: {outputs}")
    return seconds, [json.loads(output) for output in outputs]


def _server_usage(pid: int) -> tuple[float, float]:
    """CPU seconds and peak RSS (MB) of a running process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / _TICK
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return cpu, int(status["VmHWM"].split()[0]) / 1024


def _checked(reports: list[dict[str, float]], rows: int) -> int:
    if sum(report["rows"] for report in reports) != rows:
        raise RuntimeError(f"the readers got {sum(r['rows'] for r in reports)} of {rows} rows")
    return int(sum(report["bytes"] for report in reports))


def suite(rounds: int, out_root: Path, quick: bool) -> list[Result]:
    files = 1 if quick else 5
    rows = files * FILE_ROWS
    folder = out_root / "cache-server-table"
    with SeaweedFS.start() as s3, tempfile.TemporaryDirectory() as catalog_dir:
        s3.client().create_bucket(Bucket="bench")
        metadata = make_table(s3, Path(catalog_dir), "served", files, evolve=False)
        made = run_program("dataset", {**s3.env(), "STORAGE_URI": f"cache://{NAMESPACE}/served",
                                       "METADATA_LOC": metadata, "NUM_DATA_NODES": str(NODES),
                                       "OUTPUT_PATH": str(folder)})  # fmt: skip
        if made.code:
            raise RuntimeError(made.stderr[-2000:])
    results = []
    for count in READERS:
        samples: dict[str, list[Sample]] = {FLIGHT: [], DIRECT: []}
        arrow_bytes = 0
        for round_index in range(rounds):
            with CacheServer(folder, out_root / "cache-server.log") as server:
                seconds, reports = _readers("flight", server.address, count)
                cpu, rss = _server_usage(server.process.pid)
            arrow_bytes = _checked(reports, rows)
            readers_cpu = sum(report["cpu"] for report in reports)
            samples[FLIGHT].append(Sample(seconds, cpu + readers_cpu, rss))
            reader_rss = max(report["rss_mb"] for report in reports)
            seconds_direct, direct = _readers("parquet", str(folder), count)
            _checked(direct, rows)
            samples[DIRECT].append(
                Sample(seconds_direct, sum(r["cpu"] for r in direct), max(r["rss_mb"] for r in direct))
            )
            print(f"  {count} readers round {round_index + 1}: Flight {rows / seconds / 1e6:.2f} M rows/s "
                  f"{arrow_bytes / seconds / 1e6:.0f} MB/s (server RSS {rss:.0f} MB, readers {reader_rss:.0f} MB); "
                  f"direct {rows / seconds_direct / 1e6:.2f} M rows/s {arrow_bytes / seconds_direct / 1e6:.0f} MB/s",
                  flush=True)  # fmt: skip
        flight_mb_s = statistics.median(arrow_bytes / s.seconds / 1e6 for s in samples[FLIGHT])
        direct_mb_s = statistics.median(arrow_bytes / s.seconds / 1e6 for s in samples[DIRECT])
        title = (f"Cache server, {count} reader{'s' if count > 1 else ''}: {arrow_bytes / 1e6:.0f} MB of Arrow data, "
                 f"{flight_mb_s:.0f} MB/s over Flight, {direct_mb_s:.0f} MB/s directly")  # fmt: skip
        results.append(Result(title, rows, samples, peer=DIRECT, unit="M rows"))
    return results


if __name__ == "__main__":
    run_alone(suite)
