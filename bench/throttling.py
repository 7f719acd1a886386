"""Back to full speed after throttling: the same fetch calm and through a storm of `SlowDown`, side by side.

3000 objects of 8 KiB from loopback SeaweedFS, through the relay in both runs (its cost is the same for both): calm,
and with S3's `503 SlowDown` answered to every object GET for `STORM_SECONDS` once `STORM_AFTER` have gone through,
as S3 answers while it scales a prefix up. Reported, medians over the rounds: each run's seconds, what the storm cost
beyond its own length, and the storm's requests in its first and last second (the back-off). BENCH_BEFORE: the `src`
folder of another checkout (the commit before a change), run in turns with this one's in the same rounds, for a
before-and-after side by side. Run with `make bench-throttling`.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

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
T = TypeVar("T")


@dataclass
class StormRun:
    seconds: float
    first_second: int  # SlowDown answers in the storm's first second
    last_second: int  # and in its last


def fetch(server: SeaweedFS, relay: Relay, out: Path, source: str | None) -> float:
    """One run of the dataset program (`source`: the `src` folder it runs from, None: this checkout's) through
    `relay`; its seconds. Fails unless it exits 0 with every file."""
    env = {**server.env(), "ENDPOINT": relay.endpoint, "STORAGE_URI": f"s3://{DATASET.bucket}", "OUTPUT_PATH": str(out)}
    if source:
        env["PYTHONPATH"] = source
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "initializers.dataset"], env=clean_env(env), capture_output=True)
    seconds = time.perf_counter() - started
    fetched = sum(1 for path in out.rglob("*.bin"))
    if done.returncode != 0 or fetched != len(DATASET.objects):
        raise RuntimeError(f"exit {done.returncode}, {fetched} files: {done.stderr[-2000:]!r}")
    return seconds


def storm(server: SeaweedFS, out: Path, source: str | None) -> StormRun:
    with Relay(server.endpoint) as relay:
        fault = relay.add_fault(
            StatusFault(status=503, times=None, match=f"/{DATASET.bucket}/t/", method="GET", after=STORM_AFTER,
                        lasting=STORM_SECONDS)
        )  # fmt: skip
        seconds = fetch(server, relay, out, source)
    began = fault.began_at or 0.0
    first = sum(1 for at in fault.struck_at if at < began + 1)
    last = sum(1 for at in fault.struck_at if at >= began + STORM_SECONDS - 1)
    return StormRun(seconds, first, last)


def calm(server: SeaweedFS, out: Path, source: str | None) -> float:
    with Relay(server.endpoint) as relay:
        return fetch(server, relay, out, source)


def main() -> None:
    rounds, out_root, _quick = settings()
    rounds = max(rounds, 3)
    sources = {"this checkout": None, **({"before": before} if (before := os.environ.get("BENCH_BEFORE")) else {})}
    calm_runs: dict[str, list[float]] = {name: [] for name in sources}
    storm_runs: dict[str, list[StormRun]] = {name: [] for name in sources}
    with SeaweedFS.start() as server:
        seed(server, DATASET, out_root)
        for round_index in range(rounds):
            for name, source in _rotated(list(sources.items()), round_index):
                for weather in ("calm", "storm") if round_index % 2 == 0 else ("storm", "calm"):
                    out = out_root / f"{weather}-{round_index}"
                    if weather == "calm":
                        calm_runs[name].append(calm(server, out, source))
                        print(f"  round {round_index + 1} {name:<13} calm  {calm_runs[name][-1]:6.1f} s", flush=True)
                    else:
                        run = storm(server, out, source)
                        storm_runs[name].append(run)
                        print(
                            f"  round {round_index + 1} {name:<13} storm {run.seconds:6.1f} s, SlowDown "
                            f"{run.first_second} in its first second, {run.last_second} in its last",
                            flush=True,
                        )
                    subprocess.run(["rm", "-rf", str(out)], check=True)
    print(
        f"\n### Throttling: {DATASET.name}, a {STORM_SECONDS:g} s storm of SlowDown after {STORM_AFTER} GETs "
        f"(loopback, through the relay; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
        f"{rounds} rounds, {os.cpu_count()} cores, shared machine{'; before: ' + before if before else ''})\n\n"
        "| code | calm s, median (min-max) | storm s, median (min-max) | the storm's cost beyond its length "
        f"(goal <= {GOAL_EXTRA_SECONDS:g} s) | SlowDown in its first / last second |\n|---|---|---|---|---|",
        flush=True,
    )
    for name in sources:
        calm_s, storms = calm_runs[name], [run.seconds for run in storm_runs[name]]
        extra = statistics.median(storms) - statistics.median(calm_s) - STORM_SECONDS
        first = statistics.median(run.first_second for run in storm_runs[name])
        last = statistics.median(run.last_second for run in storm_runs[name])
        print(
            f"| {name} | {statistics.median(calm_s):.1f} ({min(calm_s):.1f}-{max(calm_s):.1f}) | "
            f"{statistics.median(storms):.1f} ({min(storms):.1f}-{max(storms):.1f}) | {extra:+.1f} s | "
            f"{first:.0f} / {last:.0f} |",
            flush=True,
        )


def _rotated(items: list[T], turn: int) -> list[T]:
    shift = turn % len(items)
    return items[shift:] + items[:shift]


if __name__ == "__main__":
    main()
