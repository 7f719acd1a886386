"""`make bench`: every suite in one run, `bench/results.md` with a verdict per goal, and `bench/results.png`.

BENCH_QUICK=1 runs smaller sets once each, as a sanity check in under two minutes (its results are not
written over the committed ones unless BENCH_WRITE=1).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from bench import cache_server, hf, iceberg, memory, network, s3, scale, startup, volumes
from bench.harness import SECONDS_ONLY, Result, settings

HERE = Path(__file__).resolve().parent
CHART_PYTHON = s3.PEERS / "python"  # matplotlib lives with the peers, never in the product's environment


def _ratio(result: Result, name: str, other: str) -> float:
    medians = result.medians()
    return medians[name] / medians[other]


def _rss(result: Result, name: str) -> float:
    return statistics.median(s.rss_mb for s in result.samples[name])


def _rerun(result: Result) -> float:
    return result.samples["initializers re-run"][0].seconds


def goals(results: dict[str, list[Result]], boot: dict[str, list[float]]) -> list[tuple[str, str, bool]]:
    """(goal, measured, met) for every goal of the benchmark issues that this run covers."""
    rows: list[tuple[str, str, bool]] = []

    def check(goal: str, value: float, fmt: str, ok: Callable[[float], bool]) -> None:
        rows.append((goal, fmt.format(value), ok(value)))

    for result in results.get("network", []):
        label = result.title.split(":")[0].removeprefix("Network ")
        if label == "Hub":
            check("Network Hub 1 GiB: >= 4x hf download", _ratio(result, "initializers", "hf download"), "{:.1f}x",
                  lambda v: v >= 4)  # fmt: skip
        elif label == "N3":
            check("Network N3 1000 x 64 KiB: >= 1.0x s5cmd", _ratio(result, "initializers", "s5cmd"), "{:.2f}x",
                  lambda v: v >= 1.0)  # fmt: skip
        else:
            best = max(network.PEER_NAMES, key=lambda name: result.medians()[name])
            ratio = _ratio(result, "initializers", best)
            check(f"Network {label}: >= 2.0x the best peer ({best})", ratio, "{:.2f}x", lambda v: v >= 2.0)
    scaled = {result.title.split(" (")[0].removeprefix("Scale "): result for result in results.get("scale", [])}
    if "100 k x 1 KiB" in scaled:
        large, small = scaled["100 k x 1 KiB"], scaled.get("10 k x 1 KiB")
        check("Scale 100 k (ext4): >= 1.0x s5cmd", _ratio(large, "initializers", "s5cmd"), "{:.2f}x",
              lambda v: v >= 1.0)  # fmt: skip
        check("Scale 100 k: peak RSS <= 100 MB", _rss(large, "initializers"), "{:.0f} MB", lambda v: v <= 100)
        if small is not None:
            growth = _rss(large, "initializers") / _rss(small, "initializers")
            check("Scale 100 k: peak RSS <= 1.2x the 10 k run's", growth, "{:.2f}x", lambda v: v <= 1.2)
        listing = large.samples.get(f"{scale.LISTING_ALONE} {SECONDS_ONLY}")
        floor = f" (s5cmd only listing the objects: {listing[0].seconds:.2f} s)" if listing else ""
        check("Scale 100 k: re-run <= 2 s", _rerun(large), "{:.2f} s" + floor, lambda v: v <= 2)
    for result in results.get("s3", []):
        label = result.title.split(":")[0].removeprefix("S3 ")
        volume = "ext4" if result.title.endswith("(ext4)") else "tmpfs"
        synced = ""
        if s3.SYNCED in result.samples:  # like for like on a disk: s5cmd's files flushed as ours are
            synced = f" ({_ratio(result, 'initializers', s3.SYNCED):.2f}x {s3.SYNCED})"
        check(f"S3 {label} ({volume}): >= 1.0x s5cmd", _ratio(result, "initializers", "s5cmd"), "{:.2f}x" + synced,
              lambda v: v >= 1.0)  # fmt: skip
        if label == "A" and volume == "tmpfs":
            ceiling = _ratio(result, "initializers", "curl ceiling (bytes discarded)")
            check("S3 A (tmpfs): >= 0.85x the curl ceiling", ceiling, "{:.2f}x", lambda v: v >= 0.85)
            check("S3 A (tmpfs): peak RSS < 100 MB", _rss(result, "initializers"), "{:.0f} MB", lambda v: v < 100)
        if label == "B" and volume == "tmpfs":
            check("S3 B: re-run of a complete download < 1 s", _rerun(result), "{:.2f} s", lambda v: v < 1)
    for result in results.get("hf", []):
        ratio = _ratio(result, "initializers", "hf download")
        check(f"{result.title}: >= 1.0x hf download", ratio, "{:.2f}x", lambda v: v >= 1.0)
        check(f"{result.title}: re-run < 1 s", _rerun(result), "{:.2f} s", lambda v: v < 1)
    for result in results.get("iceberg", []):
        ratio = _ratio(result, "initializers", iceberg.PEER)
        memory = _rss(result, "initializers") / _rss(result, iceberg.PEER)
        check(f"{result.title}: >= 1.0x rows/s", ratio, "{:.2f}x", lambda v: v >= 1.0)
        check(f"{result.title}: <= 60% of the peak RSS", memory * 100, "{:.0f}%", lambda v: v <= 60)
    check("`model-initializer --help` < 0.25 s", statistics.median(boot["model-initializer --help"]), "{:.3f} s",
          lambda v: v < 0.25)  # fmt: skip
    return rows


def render(
    results: dict[str, list[Result]],
    boot: dict[str, list[float]],
    rounds: int,
    out_root: Path,
    out_filesystem: str,
    seconds: float,
    memory_note: str,
) -> str:
    met = goals(results, boot)
    lines = [
        "# Benchmark results",
        "",
        f"`make bench` on {platform.node() or 'this machine'}: {os.cpu_count()} cores, {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {rounds} interleaved rounds per data set, medians; "
        f"outputs written under {out_root} ({out_filesystem}) unless a table says ext4 (a loop device); the whole run "
        f"took {seconds / 60:.0f} min. Servers on loopback, behind the network emulator where a table says so "
        "(SeaweedFS for S3 and Iceberg data, our "
        "Hub server); the machine is shared, so read the ratios, not the absolute figures. Peak RSS by GNU time."
        + (f" Memory: {memory_note}." if memory_note else ""),
        "",
        "## Goals",
        "",
        "| goal | measured | met |",
        "|---|---|---|",
        *[f"| {goal} | {value} | {'yes' if ok else '**no**'} |" for goal, value, ok in met],
        "",
        "![MB/s or M rows/s per data set, relative to the best peer](results.png)",
        "",
        "## Tables",
        "",
    ]
    for suite_results in results.values():
        lines += [result.markdown() for result in suite_results]
    lines.append(startup.markdown(boot))
    return "\n".join(lines)


def chart(results: dict[str, list[Result]], target: Path) -> None:
    data = [{"title": r.title, "unit": r.unit, "medians": r.medians()} for rs in results.values() for r in rs]
    subprocess.run([str(CHART_PYTHON), str(HERE / "chart.py"), str(target)], input=json.dumps(data), text=True,
                   check=True)  # fmt: skip


def main() -> None:
    rounds, out_root, quick = settings()
    started = time.monotonic()
    out_filesystem = volumes.filesystem(out_root)
    with memory.as_on_a_node(out_root) as memory_note:
        boot = startup.measure_startup(startup.rounds())
        results = {"network": network.suite(rounds, out_root, quick), "scale": scale.suite(rounds, out_root, quick),
                   "s3": s3.suite(rounds, out_root, quick)}  # fmt: skip
        with volumes.ext4(8) as disk:
            results["s3"] += s3.suite(rounds, disk, quick, volume="ext4")
        results["hf"] = hf.suite(rounds, out_root, quick)
        results["iceberg"] = iceberg.suite(rounds, out_root, quick)
        results["cache-server"] = cache_server.suite(rounds, out_root, quick)
    shutil.rmtree(out_root, ignore_errors=True)
    report = render(results, boot, rounds, out_root, out_filesystem, time.monotonic() - started, memory_note)
    print("\n" + report)
    if not quick or os.environ.get("BENCH_WRITE") == "1":
        (HERE / "results.md").write_text(report)
        chart(results, HERE / "results.png")
        print(f"written: {HERE / 'results.md'}, {HERE / 'results.png'}")


if __name__ == "__main__":
    main()
