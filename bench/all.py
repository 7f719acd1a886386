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

from bench import cache_server, clouds, hf, iceberg, memory, network, s3, scale, startup, volumes
from bench.harness import SECONDS_ONLY, Result, page_cache_note, settings

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results.md"
#: `make bench` owns results.md down to this line; what follows it (separate runs, the issues' figures) is kept.
KEPT_BELOW = "<!-- make bench writes the report above this line and keeps what follows -->"
CHART_PYTHON = s3.PEERS / "python"  # matplotlib lives with the peers, never in the product's environment


def _ratio(result: Result, name: str, other: str) -> float:
    medians = result.medians()
    return medians[name] / medians[other]


def _rss(result: Result, name: str) -> float:
    return statistics.median(s.rss_mb for s in result.samples[name])


def _cpu_per_gb(result: Result, name: str) -> float:
    return statistics.median(s.cpu for s in result.samples[name]) / (result.total / 1e9)


def _rerun(result: Result) -> float:
    return result.samples["initializers re-run"][0].seconds


def goals(results: dict[str, list[Result]], boot: dict[str, list[float]]) -> list[tuple[str, str, bool]]:
    """(goal, measured, met) for every goal of the benchmark issues that this run covers."""
    rows: list[tuple[str, str, bool]] = []

    def check(goal: str, value: float, fmt: str, ok: Callable[[float], bool]) -> None:
        rows.append((goal, fmt.format(value), ok(value)))

    for result in results.get("network", []):
        label, _, terms = result.title.removeprefix("Network ").partition(" (")
        label, terms = label.split(":")[0], terms.removesuffix(")")
        if label == "Hub":  # "Network Hub: one 256 MiB LFS file (Hub and CDN over TLS; CDN: RTT 20 ms, ...)"
            mib = result.total >> 20
            size = f"{mib >> 10} GiB" if mib >= 1024 else f"{mib} MiB"
            over = " over TLS" if "over TLS" in terms else ""
            check(f"Network Hub {size}{over}: >= 4x hf download", _ratio(result, "initializers", "hf download"),
                  "{:.1f}x", lambda v: v >= 4)  # fmt: skip
        elif label in network.SMALL_SETS:
            name = result.title.removeprefix("Network ").split(" (")[0].replace(":", "")  # "N3 1000 x 64 KiB"
            check(f"Network {name}, {terms}: >= 1.0x s5cmd", _ratio(result, "initializers", "s5cmd"), "{:.2f}x",
                  lambda v: v >= 1.0)  # fmt: skip
        else:
            best = max(network.PEER_NAMES, key=lambda name: result.medians()[name])
            ratio = _ratio(result, "initializers", best)
            check(f"Network {label}, {terms}: >= 2.0x the best peer ({best})", ratio, "{:.2f}x", lambda v: v >= 2.0)
    for result in results.get("clouds", []):
        label, _, terms = result.title.partition(" (")
        label, terms = label.split(":")[0], terms.removesuffix(")")  # "GCS N3"; "fake-gcs-server, RTT 20 ms, ..."
        goal = 1.0 if label.endswith("N3") else 2.0  # the small objects, else the large
        check(f"{label}, {terms}: >= {goal:.1f}x {clouds.RCLONE}", _ratio(result, "initializers", clouds.RCLONE),
              "{:.2f}x", lambda v, goal=goal: v >= goal)  # fmt: skip
        over = " over TLS" if "over TLS" in terms else ""
        check(f"{label}{over}: peak RSS < 100 MB", _rss(result, "initializers"), "{:.0f} MB", lambda v: v < 100)
    scaled = results.get("scale", [])
    if scaled:
        large = scaled[-1]
        name = large.title.split(" (")[0].removeprefix("Scale ")
        check(f"Scale {name} (ext4): >= 1.0x {s3.SYNCED} wall", _ratio(large, "initializers", s3.SYNCED), "{:.2f}x",
              lambda v: v >= 1.0)  # fmt: skip
        check(f"Scale {name}: peak RSS <= 100 MB", _rss(large, "initializers"), "{:.0f} MB", lambda v: v <= 100)
        listing = large.samples[f"{scale.LISTING_ALONE} {SECONDS_ONLY}"][0].seconds
        check(f"Scale {name}: re-run <= 1.2x the fastest listing-only ({listing:.2f} s, s5cmd ls)",
              _rerun(large) / listing, "{:.2f}x" + f" ({_rerun(large):.2f} s)", lambda v: v <= 1.2)  # fmt: skip
    for result in results.get("s3", []):
        label = result.title.split(":")[0].removeprefix("S3 ")
        volume = "ext4" if result.title.endswith("(ext4)") else "tmpfs"
        peers = s3.peer_names(result.medians())
        fastest = max(peers, key=lambda name: result.medians()[name])
        if s3.SYNCED in result.samples:  # a disk: like for like, s5cmd's files flushed as ours are
            check(f"S3 {label} (ext4): >= 1.0x {s3.SYNCED}", _ratio(result, "initializers", s3.SYNCED), "{:.2f}x"
                  + f" ({_ratio(result, 'initializers', 's5cmd'):.2f}x s5cmd alone)", lambda v: v >= 1.0)  # fmt: skip
            cpu = _cpu_per_gb(result, "initializers") / _cpu_per_gb(result, "s5cmd")
            check(f"S3 {label} (ext4): CPU per GB <= 0.8x s5cmd's", cpu, "{:.2f}x", lambda v: v <= 0.8)
        elif result.title.endswith("over TLS"):  # issue 66: the fastest peer's wall time and the least CPU per GB
            check(f"S3 {label} over TLS: >= 1.0x the fastest peer ({fastest})", _ratio(result, "initializers", fastest),
                  "{:.2f}x", lambda v: v >= 1.0)  # fmt: skip
            if label in ("A", "D"):
                thrifty = min(peers, key=lambda name: _cpu_per_gb(result, name))
                cpu = _cpu_per_gb(result, "initializers") / _cpu_per_gb(result, thrifty)
                check(f"S3 {label} over TLS: CPU per GB <= 0.9x the lowest peer's ({thrifty})", cpu, "{:.2f}x"
                      + f" ({_cpu_per_gb(result, 'initializers'):.2f} s/GB)", lambda v: v <= 0.9)  # fmt: skip
        elif label in ("A", "C"):
            check(f"S3 {label} (tmpfs): >= 1.0x the fastest peer ({fastest})", _ratio(result, "initializers", fastest),
                  "{:.2f}x", lambda v: v >= 1.0)  # fmt: skip
        else:
            check(f"S3 {label} (tmpfs): >= 1.0x s5cmd", _ratio(result, "initializers", "s5cmd"), "{:.2f}x",
                  lambda v: v >= 1.0)  # fmt: skip
        if label == "A" and volume == "tmpfs" and s3.ONE_CORE not in result.samples:
            ceiling = _ratio(result, "initializers", s3.CEILING)
            check("S3 A (tmpfs): >= 0.85x the curl ceiling", ceiling, "{:.2f}x", lambda v: v >= 0.85)
            check("S3 A (tmpfs): peak RSS < 100 MB", _rss(result, "initializers"), "{:.0f} MB", lambda v: v < 100)
        if label == "B" and volume == "tmpfs" and not result.title.endswith("over TLS"):
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
    minutes: dict[str, float],
    pending: list[str],
) -> str:
    """The report; `pending` names the suites not run yet (it is written after each suite, so a stopped run keeps
    what it measured)."""
    met = goals(results, boot)
    spent = ", ".join(f"{name} {spent:.0f}" for name, spent in minutes.items())
    so_far = f"; not run yet: {', '.join(pending)}" if pending else ""
    lines = [
        "# Benchmark results",
        "",
        f"`make bench` on {platform.node() or 'this machine'}: {os.cpu_count()} cores, {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {rounds} interleaved rounds per data set, medians; "
        f"outputs written under {out_root} ({out_filesystem}) unless a table says ext4 (a loop device); the whole run "
        f"took {seconds / 60:.0f} min ({spent}){so_far}; "
        f"{page_cache_note()}. Servers on loopback, behind the network emulator where a table says so "
        "(SeaweedFS for S3 and Iceberg data, fake-gcs-server and Azurite for GCS and Azure, our Hub server); the "
        "machine is shared, so read the ratios, not the absolute figures. Peak RSS by GNU time."
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


def _on_ext4(rounds: int, quick: bool) -> list[Result]:
    """The loopback S3 sets again, onto a disk."""
    with volumes.ext4(8) as disk:
        return s3.suite(rounds, disk, quick, volume="ext4")


def chart(results: dict[str, list[Result]], target: Path) -> None:
    data = [{"title": r.title, "unit": r.unit, "medians": r.medians()} for rs in results.values() for r in rs]
    subprocess.run([str(CHART_PYTHON), str(HERE / "chart.py"), str(target)], input=json.dumps(data), text=True,
                   check=True)  # fmt: skip


def main() -> None:
    rounds, out_root, quick = settings()
    write = not quick or os.environ.get("BENCH_WRITE") == "1"
    started = time.monotonic()
    minutes: dict[str, float] = {}
    out_filesystem = volumes.filesystem(out_root)
    with memory.as_on_a_node(out_root) as memory_note:
        boot = startup.measure_startup(startup.rounds())
        suites: dict[str, Callable[[], list[Result]]] = {
            "network": lambda: network.suite(rounds, out_root, quick),
            "scale": lambda: scale.suite(rounds, out_root, quick),
            "s3": lambda: s3.suite(rounds, out_root, quick) + _on_ext4(rounds, quick),
            "hf": lambda: hf.suite(rounds, out_root, quick),
            "iceberg": lambda: iceberg.suite(rounds, out_root, quick),
            "cache-server": lambda: cache_server.suite(rounds, out_root, quick),
            "clouds": lambda: clouds.suite(rounds, out_root, quick),
        }
        results: dict[str, list[Result]] = {}
        for name, run in suites.items():
            suite_started = time.monotonic()
            results[name] = run()
            minutes[name] = (time.monotonic() - suite_started) / 60
            print(f"{name}: {minutes[name]:.1f} min", flush=True)
            report = render(results, boot, rounds, out_root, out_filesystem, time.monotonic() - started, memory_note,
                            minutes, [later for later in suites if later not in results])  # fmt: skip
            if write:
                write_report(report)
    shutil.rmtree(out_root, ignore_errors=True)
    print("\n" + report)
    if write:
        chart(results, HERE / "results.png")
        print(f"written: {RESULTS}, {HERE / 'results.png'}")


def write_report(report: str) -> None:
    """The report over results.md's own part, what follows `KEPT_BELOW` kept."""
    _, _, kept = RESULTS.read_text().partition(KEPT_BELOW) if RESULTS.exists() else ("", "", "")
    RESULTS.write_text(f"{report}\n\n{KEPT_BELOW}{kept}")


if __name__ == "__main__":
    main()
