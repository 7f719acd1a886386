"""Back to full speed after throttling: the same fetch calm and through a storm of `SlowDown`, side by side.

3000 objects of 8 KiB from loopback SeaweedFS, through the relay in both runs (its cost is the same for both): calm,
and with S3's `503 SlowDown` answered to every object GET for `STORM_SECONDS` once `STORM_AFTER` have gone through,
as S3 answers while it scales a prefix up. Reported, medians over the rounds: each run's seconds, what the storm cost
beyond its own length, and the storm's requests in its first and last second (the back-off). BENCH_SOURCE: the `src`
folder of another checkout to run instead of this one's (the commit before a change, for a before-and-after). Run with
`make bench-throttling`.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.harness import settings
from bench.s3 import DataSet, seed
from devkit.programs import clean_env
from devkit.relay import Relay, StatusFault
from devkit.seaweed import SeaweedFS

DATASET = DataSet("3000 x 8 KiB", "throttling", [(f"t/{i:05d}.bin", 8 << 10) for i in range(3000)])
STORM_AFTER = 300
STORM_SECONDS = 4.0
#: The goal: a storm costs at most its own length and this much more.
GOAL_EXTRA_SECONDS = 5.0


@dataclass
class StormRun:
    seconds: float
    first_second: int  # SlowDown answers in the storm's first second
    last_second: int  # and in its last


def fetch(server: SeaweedFS, relay: Relay, out: Path) -> float:
    """One run of the dataset program through `relay`; its seconds. Fails unless it exits 0 with every file."""
    env = {**server.env(), "ENDPOINT": relay.endpoint, "STORAGE_URI": f"s3://{DATASET.bucket}", "OUTPUT_PATH": str(out)}
    if source := os.environ.get("BENCH_SOURCE"):
        env["PYTHONPATH"] = source
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "initializers.dataset"], env=clean_env(env), capture_output=True)
    seconds = time.perf_counter() - started
    fetched = sum(1 for path in out.rglob("*.bin"))
    if done.returncode != 0 or fetched != len(DATASET.objects):
        raise RuntimeError(f"exit {done.returncode}, {fetched} files: {done.stdout[-2000:]!r}")
    return seconds


def storm(server: SeaweedFS, out: Path) -> StormRun:
    with Relay(server.endpoint) as relay:
        fault = relay.add_fault(
            StatusFault(status=503, times=None, match=f"/{DATASET.bucket}/t/", method="GET", after=STORM_AFTER,
                        lasting=STORM_SECONDS)
        )  # fmt: skip
        seconds = fetch(server, relay, out)
    began = fault.began_at or 0.0
    first = sum(1 for at in fault.struck_at if at < began + 1)
    last = sum(1 for at in fault.struck_at if at >= began + STORM_SECONDS - 1)
    return StormRun(seconds, first, last)


def calm(server: SeaweedFS, out: Path) -> float:
    with Relay(server.endpoint) as relay:
        return fetch(server, relay, out)


def main() -> None:
    rounds, out_root, _quick = settings()
    rounds = max(rounds, 3)
    calm_runs: list[float] = []
    storm_runs: list[StormRun] = []
    with SeaweedFS.start() as server:
        seed(server, DATASET, out_root)
        for round_index in range(rounds):
            for name in ("calm", "storm") if round_index % 2 == 0 else ("storm", "calm"):
                out = out_root / f"{name}-{round_index}"
                if name == "calm":
                    calm_runs.append(calm(server, out))
                    print(f"  round {round_index + 1} calm  {calm_runs[-1]:6.1f} s", flush=True)
                else:
                    storm_runs.append(storm(server, out))
                    run = storm_runs[-1]
                    print(f"  round {round_index + 1} storm {run.seconds:6.1f} s, SlowDown {run.first_second} in the "
                          f"first second, {run.last_second} in the last", flush=True)  # fmt: skip
                subprocess.run(["rm", "-rf", str(out)], check=True)
    calm_s = statistics.median(calm_runs)
    storm_s = statistics.median(run.seconds for run in storm_runs)
    extra = storm_s - calm_s - STORM_SECONDS
    print(
        f"\n### Throttling: {DATASET.name}, a {STORM_SECONDS:g} s storm of SlowDown after {STORM_AFTER} GETs "
        f"(loopback, through the relay; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{os.environ.get('BENCH_SOURCE') or 'this checkout'})\n\n"
        "| run | seconds, median (min-max) | SlowDown in the storm's first / last second |\n|---|---|---|\n"
        f"| calm | {calm_s:.1f} ({min(calm_runs):.1f}-{max(calm_runs):.1f}) | |\n"
        f"| storm | {storm_s:.1f} ({min(r.seconds for r in storm_runs):.1f}-{max(r.seconds for r in storm_runs):.1f})"
        f" | {statistics.median(r.first_second for r in storm_runs):.0f} / "
        f"{statistics.median(r.last_second for r in storm_runs):.0f} |\n\n"
        f"The storm cost {extra:+.1f} s beyond its {STORM_SECONDS:g} s (goal: at most {GOAL_EXTRA_SECONDS:g} s more).",
        flush=True,
    )


if __name__ == "__main__":
    main()
