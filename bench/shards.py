"""Work per share when initializers split the work (`make bench-shards`), one run, printed as tables.

1. A prefix of 2000 objects of mixed sizes on SeaweedFS, split N = 1, 2, 4, 8 ways: each share run alone
   through a counting relay (files, bytes and requests per share; balance = largest share / (total / N)).
2. The cache source on a 10 M-row table in 10 data files, per-node shards for N = 2, 4, 8: rows written and
   bytes read from storage per shard, against 1/N of the table plus one data file.
3. Through the network emulator (20 ms round trip, 8 MB/s per connection), 400 x 1 MiB: one initializer with 16
   connections vs 4 shares at once with 4 each (the same connection budget): wall time, alternating rounds.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.iceberg import FILE_ROWS, make_table
from devkit.iceberg import NAMESPACE
from devkit.netem import NetworkEmulator
from devkit.relay import Relay
from devkit.seaweed import SeaweedFS

KiB = 1024
MIXED_SIZES = [1 * KiB, 4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB, 1024 * KiB, 4096 * KiB]
CACHE_FILES = 10
NETWORK_ROUNDS = 2


def _program(env: dict[str, str]) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "initializers.dataset"]
    return subprocess.Popen(command, env={**os.environ, **env, "LOG_FORMAT": "json"}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip


def _finished(process: subprocess.Popen[str]) -> list[dict[str, Any]]:
    stdout, _ = process.communicate()
    events = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    if process.returncode:
        raise RuntimeError(events[-1] if events else stdout[-2000:])
    return events


def _event(events: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(event for event in events if event["event"] == name)


def split_prefix(seaweed: SeaweedFS, work: Path) -> None:
    rng = random.Random(17)
    sizes = [rng.choice(MIXED_SIZES) for _ in range(2000)]
    client = seaweed.client()
    client.create_bucket(Bucket="shares")
    blob = os.urandom(max(MIXED_SIZES))
    for index, size in enumerate(sizes):
        client.put_object(Bucket="shares", Key=f"mixed/{index:05d}.bin", Body=blob[:size])
    total = sum(sizes)
    print(f"\n## 2000 objects, {total / 1e6:.1f} MB in all (largest {max(sizes) / 1e6:.1f} MB)\n")
    print("| N | share | files | MB | object GETs | listing pages | MB at the relay |")
    print("|---|---|---|---|---|---|---|")
    with Relay(seaweed.endpoint) as relay:
        for count in (1, 2, 4, 8):
            output = work / f"split-{count}"
            largest = 0
            for index in range(count):
                relay.reset()
                env = {**seaweed.env(), "ENDPOINT": relay.endpoint, "STORAGE_URI": "s3://shares/mixed",
                       "OUTPUT_PATH": str(output)}  # fmt: skip
                if count > 1:
                    env |= {"SHARD_INDEX": str(index), "SHARD_COUNT": str(count)}
                events = _finished(_program(env))
                share = _event(events, "share") if count > 1 else {"files": 2000, "bytes": total}
                largest = max(largest, share["bytes"])
                gets = len(relay.traffic.object_gets())
                pages = len(relay.traffic.requests) - gets
                print(f"| {count} | {index} | {share['files']} | {share['bytes'] / 1e6:.1f} | {gets} | {pages} | "
                      f"{relay.traffic.body_bytes / 1e6:.1f} |")  # fmt: skip
            print(f"| {count} | balance | | largest / (total/N) = {largest / (total / count):.3f} | | | |")
            shutil.rmtree(output)


def cache_shards(seaweed: SeaweedFS, work: Path) -> None:
    seaweed.client().create_bucket(Bucket="bench")
    metadata = make_table(seaweed, work, "bench", CACHE_FILES, evolve=False)
    data_bytes = sum(o["Size"] for o in seaweed.client().list_objects_v2(Bucket="bench", Prefix="warehouse")["Contents"]
                     if "/data/" in o["Key"])  # fmt: skip
    rows = CACHE_FILES * FILE_ROWS
    print(f"\n## Cache: {rows / 1e6:.0f} M rows in {CACHE_FILES} data files, {data_bytes / 1e6:.1f} MB\n")
    print("| N | shard | rows | MB read from storage | data files read | goal: 1/N + one file (MB) | seconds |")
    print("|---|---|---|---|---|---|---|")
    with Relay(seaweed.endpoint) as relay:
        for count in (2, 4, 8):
            goal = data_bytes / count + data_bytes / CACHE_FILES
            for index in range(count):
                relay.reset()
                output = work / f"cache-{count}-{index}"
                env = {**seaweed.env(), "ENDPOINT": relay.endpoint, "STORAGE_URI": f"cache://{NAMESPACE}/bench",
                       "METADATA_LOC": metadata, "NUM_DATA_NODES": str(count), "SHARD_INDEX": str(index),
                       "OUTPUT_PATH": str(output)}  # fmt: skip
                started = time.monotonic()
                _finished(_program(env))
                seconds = time.monotonic() - started
                source = json.loads((output / ".initializer" / "manifest.json").read_text())["source"]
                files = {path for path in relay.traffic.object_gets() if "/data/" in path}
                read = relay.traffic.body_bytes
                print(f"| {count} | {index} | {source['shards'][index]['rows']} | {read / 1e6:.1f} | {len(files)} | "
                      f"{goal / 1e6:.1f} | {seconds:.1f} |")  # fmt: skip
                shutil.rmtree(output)


def network(seaweed: SeaweedFS, work: Path) -> None:
    client = seaweed.client()
    client.create_bucket(Bucket="shares-net")
    blob = os.urandom(1024 * KiB)
    for index in range(400):
        client.put_object(Bucket="shares-net", Key=f"net/{index:04d}.bin", Body=blob)
    print("\n## 400 x 1 MiB through 20 ms / 8 MB/s per connection: 1 x 16 connections vs 4 shares x 4\n")
    print("| round | one initializer, MAX_WORKERS=16 (s) | 4 shares at once, MAX_WORKERS=4 each (s) |")
    print("|---|---|---|")
    with NetworkEmulator(seaweed.endpoint, rtt=0.02, rate=8e6) as emulator:
        base = {**seaweed.env(), "ENDPOINT": emulator.url, "STORAGE_URI": "s3://shares-net/net"}
        for round_number in range(NETWORK_ROUNDS):
            output = work / "net-one"
            started = time.monotonic()
            _finished(_program({**base, "OUTPUT_PATH": str(output), "MAX_WORKERS": "16"}))
            one = time.monotonic() - started
            shutil.rmtree(output)
            output = work / "net-four"
            started = time.monotonic()
            shares = [_program({**base, "OUTPUT_PATH": str(output), "MAX_WORKERS": "4", "SHARD_INDEX": str(index),
                                "SHARD_COUNT": "4"}) for index in range(4)]  # fmt: skip
            for process in shares:
                _finished(process)
            four = time.monotonic() - started
            shutil.rmtree(output)
            print(f"| {round_number + 1} | {one:.2f} | {four:.2f} |")


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-shards-", dir="/dev/shm"))
    try:
        with SeaweedFS.start() as seaweed:
            split_prefix(seaweed, work)
            network(seaweed, work)
            cache_shards(seaweed, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
