"""Millions of files, scaled down to what a shared machine seeds in minutes: 10 k and 100 k objects of 1 KiB.

Loopback SeaweedFS, outputs on ext4 (as a PVC on a disk); this tool vs s5cmd: wall time, peak RSS, and this
tool's re-run of the complete download, beside the time s5cmd takes only to list the objects (a re-run must list
them too, to see whether any changed). Run with `make bench-scale` (BENCH_ROUNDS).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from bench import s3, volumes
from bench.harness import Result, measure, run_alone
from bench.s3 import DataSet
from devkit.seaweed import SeaweedFS

SETS = {
    "10k": DataSet("10 k x 1 KiB", "scale-10k", [(f"p{i % 100:02d}/o{i:06d}", 1024) for i in range(10_000)]),
    "100k": DataSet("100 k x 1 KiB", "scale-100k", [(f"p{i % 100:02d}/o{i:06d}", 1024) for i in range(100_000)]),
}
LISTING_ALONE = "s5cmd ls (the listing alone)"
QUICK_SETS = {"10k": DataSet("2 k x 1 KiB", "qscale-2k", [(f"p{i % 10}/o{i:06d}", 1024) for i in range(2000)])}


def suite(rounds: int, out_root: Path, quick: bool) -> list[Result]:
    results = []
    with SeaweedFS.start() as server, volumes.ext4(4) as disk:
        for dataset in (QUICK_SETS if quick else SETS).values():
            print(f"seeding {dataset.name} ...", flush=True)
            s3.seed(server, dataset, out_root)
            contenders = {name: partial(s3.CONTENDERS[name], server, dataset) for name in ("initializers", "s5cmd")}
            listing = {LISTING_ALONE: partial(s3.s5cmd_list, server, dataset)}
            samples = measure(dataset.name, contenders, dataset.total, disk, rounds, "initializers", timed=listing)
            results.append(Result(f"Scale {dataset.name} (loopback, ext4)", dataset.total, samples, peer="s5cmd"))
    return results


if __name__ == "__main__":
    run_alone(suite)
