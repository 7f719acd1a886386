"""MAX_BANDWIDTH: the token bucket on a driven clock, and the cap on a real run against SeaweedFS, as a ceiling."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from devkit.driven_clock import DrivenClock
from devkit.programs import run_program
from devkit.seaweed import SeaweedFS
from initializers.transfer.bandwidth import BURST_SECONDS, TokenBucket


class Collecting:
    def __init__(self) -> None:
        self.written = 0
        self.rewound = False

    def write(self, data: memoryview) -> None:
        self.written += len(data)

    def rewind(self) -> None:
        self.rewound, self.written = True, 0


def test_takers_wait_until_the_rate_allows_their_bytes():
    clock = DrivenClock()
    bucket = TokenBucket(1000, clock)
    for _ in range(4):
        bucket.take(500)
    assert clock.sleeps == [0.5, 0.5, 0.5, 0.5]  # 2000 bytes in 2 s: the bucket starts empty


def test_an_idle_bucket_saves_up_only_a_short_burst():
    clock = DrivenClock()
    bucket = TokenBucket(1000, clock)
    clock.now += 60
    bucket.take(int(1000 * BURST_SECONDS))
    assert clock.sleeps == []
    bucket.take(250)
    assert clock.sleeps == [0.25]


def test_a_metered_sink_takes_before_it_writes_and_passes_everything_on():
    clock = DrivenClock()
    sink = Collecting()
    metered = TokenBucket(100, clock).metered(sink)
    metered.write(memoryview(b"x" * 50))
    assert metered.written == sink.written == 50 and clock.sleeps == [0.5]
    metered.rewind()
    assert sink.rewound and metered.written == 0


def test_the_cap_holds_for_all_connections_of_a_run(seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path):
    """Four objects fetched in parallel, capped at 256 KiB/s: the run's own rate (bytes over its seconds) stays
    within the cap, which one bucket per connection would let go four times over. Only this side is bounded: a loaded
    machine can only slow a run, never speed it up, so no load makes this fail. That the bucket passes bytes at its
    rate and no slower is shown above on a driven clock, where no load can blur it."""
    cap = 256 << 10
    for i in range(4):
        s3.put_object(Bucket=bucket, Key=f"m/part-{i}.bin", Body=os.urandom(768 << 10))
    env = {**seaweed.env(), "STORAGE_URI": f"s3://{bucket}/m", "OUTPUT_PATH": str(tmp_path), "MAX_BANDWIDTH": "256K"}
    result = run_program("dataset", env)
    assert result.code == 0, result.stderr
    (done,) = result.named("done")
    assert done["fetched_bytes"] == 3 << 20
    assert done["fetched_bytes"] / done["seconds"] < 1.15 * cap, done
