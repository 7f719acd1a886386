"""Many files: 100 k objects of 1 KiB in `make bench`, and a million (about an ImageNet-sized set) on its own.

Loopback SeaweedFS, outputs on ext4 (as a PVC on a disk); this tool vs s5cmd followed by `sync -f` (its files on disk,
as ours are once the manifest is written: like for like; s5cmd without the sync is left out of `make bench` since
issue 66, to keep it within 30 minutes: it took as long, bench/results.md), the page cache dropped and every filesystem
synced between contenders: wall time, peak RSS, and this tool's re-run of the complete download, beside the time
s5cmd takes only to list the objects (a re-run must list them too, to see whether any changed). BENCH_SCALE_OBJECTS
sets the count; at most `MOST_ROUNDS` rounds run (one: at this size one run's spread is small against the gaps the
goals are about). Run with `make bench-scale`; `make bench-scale-1m` runs a million, seeded by one `s5cmd cp` of a
local tree (on a tmpfs of its own) in about ten minutes, and appends each row to bench/results.md as it is measured,
so that it can run in the background for as long as it takes.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from bench import s3, volumes
from bench.harness import Result, Sample, measure, page_cache_note, run_alone, settings
from bench.s3 import DataSet
from devkit.seaweed import SeaweedFS

LISTING_ALONE = "s5cmd ls (the listing alone)"
OBJECTS = int(os.environ.get("BENCH_SCALE_OBJECTS", "100000"))
QUICK_OBJECTS = 2000
MOST_ROUNDS = 1
#: ext4's default of one inode per 16 KiB: the volume must be large enough to hold that many files, twice (the seed
#: tree is written there too, before the rounds).
_BYTES_PER_FILE_ON_DISK = 40 << 10
RESULTS = Path(__file__).resolve().parent / "results.md"


def data_set(count: int) -> DataSet:
    amount = f"{count / 1e6:g} M" if count >= 1_000_000 else f"{count / 1000:g} k"
    return DataSet(f"{amount} x 1 KiB", f"scale-{count}", [(f"p{i % 100:02d}/o{i:07d}", 1024) for i in range(count)])


def suite(rounds: int, out_root: Path, quick: bool, append_to: Path | None = None) -> list[Result]:
    """`append_to`: a markdown file each measurement is appended to as it is taken."""
    dataset = data_set(QUICK_OBJECTS if quick else OBJECTS)
    disk_gb = max(4, -(-len(dataset.objects) * _BYTES_PER_FILE_ON_DISK // (1 << 30)))
    with SeaweedFS.start() as server, volumes.ext4(disk_gb) as disk:
        started = time.monotonic()
        print(f"seeding {dataset.name} ...", flush=True)
        s3.seed(server, dataset, disk)  # the disk holds the seed's tree when memory is short
        seeded = time.monotonic() - started
        print(f"seeded in {seeded / 60:.1f} min", flush=True)
        makers = {"initializers": s3.ours, s3.SYNCED: s3.s5cmd_synced}
        contenders = {name: partial(make, server, dataset) for name, make in makers.items()}
        listing = {LISTING_ALONE: partial(s3.s5cmd_list, server, dataset)}
        title = f"Scale {dataset.name} (loopback, ext4)"
        finished = None
        if append_to is not None:
            finished = _appending(append_to, title, dataset.total, seeded)
        samples = measure(
            dataset.name, contenders, dataset.total, disk, min(rounds, MOST_ROUNDS), "initializers", timed=listing,
            cold=True, finished=finished,
        )  # fmt: skip
    return [Result(title, dataset.total, samples, peer=s3.SYNCED)]


def _appending(path: Path, title: str, total: int, seeded: float) -> Callable[[str, Sample], None]:
    """A `measure` listener that appends each sample to `path` as a row, under a heading written now."""
    with open(path, "a") as out:
        out.write(
            f"\n### {title}, rows as measured ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
            f"{os.cpu_count()} cores, shared machine; seeded in {seeded / 60:.1f} min; {page_cache_note()})\n\n"
            "| contender | seconds | MB/s | CPU s | peak RSS MB |\n|---|---|---|---|---|\n"
        )

    def finished(name: str, sample: Sample) -> None:
        with open(path, "a") as out:
            rate = f"{total / sample.seconds / 1e6:.1f}" if sample.cpu else ""
            cpu, rss = (f"{sample.cpu:.1f}", f"{sample.rss_mb:.0f}") if sample.cpu else ("", "")
            out.write(f"| {name} | {sample.seconds:.1f} | {rate} | {cpu} | {rss} |\n")

    return finished


if __name__ == "__main__":
    if "--append" in sys.argv:
        rounds, out_root, quick = settings()
        for result in suite(rounds, out_root, quick, append_to=RESULTS):
            print(result.markdown())
    else:
        run_alone(suite)
