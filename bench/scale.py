"""Millions of files: 1 M objects of 1 KiB, about as many as an ImageNet-sized set.

Loopback SeaweedFS, outputs on ext4 (as a PVC on a disk); this tool vs s5cmd followed by `sync -f` (its files on
disk, as ours are once the manifest is written: like for like, and a third less time than also timing s5cmd
alone): wall time, peak RSS, and this tool's re-run of the
complete download, beside the time s5cmd takes only to list the objects (a re-run must list them too, to see
whether any changed). BENCH_SCALE_OBJECTS sets the count; a million take the longest of any suite (seeding alone runs
at several hundred objects a second), so at most `MOST_ROUNDS` rounds run. Run with `make bench-scale`
(BENCH_ROUNDS).
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

from bench import s3, volumes
from bench.harness import Result, measure, run_alone
from bench.s3 import DataSet
from devkit.seaweed import SeaweedFS

LISTING_ALONE = "s5cmd ls (the listing alone)"
OBJECTS = int(os.environ.get("BENCH_SCALE_OBJECTS", "1000000"))
QUICK_OBJECTS = 2000
MOST_ROUNDS = 3
#: ext4's default of one inode per 16 KiB: the volume must be large enough to hold that many files.
_BYTES_PER_FILE_ON_DISK = 20 << 10


def data_set(count: int) -> DataSet:
    amount = f"{count / 1e6:g} M" if count >= 1_000_000 else f"{count / 1000:g} k"
    return DataSet(f"{amount} x 1 KiB", f"scale-{count}", [(f"p{i % 100:02d}/o{i:07d}", 1024) for i in range(count)])


def suite(rounds: int, out_root: Path, quick: bool) -> list[Result]:
    dataset = data_set(QUICK_OBJECTS if quick else OBJECTS)
    disk_gb = max(4, -(-len(dataset.objects) * _BYTES_PER_FILE_ON_DISK // (1 << 30)))
    with SeaweedFS.start() as server, volumes.ext4(disk_gb) as disk:
        print(f"seeding {dataset.name} ...", flush=True)
        s3.seed(server, dataset, out_root)
        makers = {"initializers": s3.ours, s3.SYNCED: s3.s5cmd_synced}
        contenders = {name: partial(make, server, dataset) for name, make in makers.items()}
        listing = {LISTING_ALONE: partial(s3.s5cmd_list, server, dataset)}
        samples = measure(
            dataset.name, contenders, dataset.total, disk, min(rounds, MOST_ROUNDS), "initializers", timed=listing
        )
    return [Result(f"Scale {dataset.name} (loopback, ext4)", dataset.total, samples, peer=s3.SYNCED)]


if __name__ == "__main__":
    run_alone(suite)
