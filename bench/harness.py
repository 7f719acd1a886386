"""The benchmark harness: contenders run as separate processes, interleaved round by round, medians and ratios.

Machines here are shared and noisy, so only ratios measured side by side in one run mean anything: a change is
measured against the code before it in the same run, by BENCH_BEFORE (`with_before`).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from bench.memory import as_on_a_node
from devkit.programs import clean_env

TIME = "/usr/bin/time"

#: The rows of a table that give seconds rather than a rate: a contender's re-run over its complete output, and
#: a part of the work timed alone.
RERUN = "re-run"
SECONDS_ONLY = "(seconds, median of 3)"
#: Rounds per data set unless BENCH_ROUNDS says otherwise: three keep `make bench` within 30 minutes here, and
#: their median is the middle one; sets whose spread is narrow run fewer (see the suites).
ROUNDS = 3
_DROP_CACHES = Path("/proc/sys/vm/drop_caches")
#: A contender: given an empty output folder, the command and environment that fill it.
Contender = Callable[[Path], tuple[list[str], dict[str, str]]]
#: What the row of our program run from BENCH_BEFORE's code adds to its name.
BEFORE = " (before)"


@dataclass
class Sample:
    seconds: float
    cpu: float
    rss_mb: float


def settings() -> tuple[int, Path, bool]:
    """BENCH_ROUNDS, BENCH_OUT (the output filesystem) and BENCH_QUICK (fewer rounds, smaller sets)."""
    quick = os.environ.get("BENCH_QUICK", "") not in ("", "0")
    rounds = int(os.environ.get("BENCH_ROUNDS", "1" if quick else str(ROUNDS)))
    out_root = Path(os.environ.get("BENCH_OUT", "/dev/shm/initializers-bench"))  # tmpfs, as the goals name it
    out_root.mkdir(parents=True, exist_ok=True)
    return rounds, out_root, quick


def run_alone(suite: Callable[[int, Path, bool], list[Result]]) -> None:
    """One suite on its own (`make bench-s3` ...): its tables printed, its scratch space removed."""
    rounds, out_root, quick = settings()
    with as_on_a_node(out_root) as memory_note:
        results = suite(rounds, out_root, quick)
    shutil.rmtree(out_root, ignore_errors=True)
    print("\n" + "\n".join(result.markdown() for result in results))
    if memory_note:
        print(f"Memory: {memory_note}.")


def with_before(contenders: dict[str, Contender], ours: str) -> dict[str, Contender]:
    """`contenders`, and, when BENCH_BEFORE names the `src` folder of another checkout (the commit before a change),
    `ours` run from that code too, right after it: the same command and environment, PYTHONPATH pointing there, so
    that it runs in the same rounds and every table gets its row and the ratio of after to before."""
    source = os.environ.get("BENCH_BEFORE", "")
    if not source:
        return contenders
    if not (Path(source) / "initializers").is_dir():
        raise SystemExit(f"BENCH_BEFORE: {source!r} holds no initializers package; name another checkout's src folder")
    # Compiled now, as this checkout's code is by its earlier runs: else its first run alone would pay for it.
    subprocess.run([sys.executable, "-m", "compileall", "-q", source], check=True, stdout=subprocess.DEVNULL)

    def before(out: Path) -> tuple[list[str], dict[str, str]]:
        command, env = contenders[ours](out)
        return command, {**env, "PYTHONPATH": source}

    made: dict[str, Contender] = {}
    for name, contender in contenders.items():
        made[name] = contender
        if name == ours:
            made[ours + BEFORE] = before
    return made


def run_once(command: list[str], env: dict[str, str], scratch: Path) -> Sample:
    """Through GNU time: a child forked from this (large) process would report our RSS as its own peak."""
    report = scratch / "time.txt"
    started = time.perf_counter()
    done = subprocess.run(
        [TIME, "-f", "%U %S %M", "-o", str(report), *command],
        env=clean_env(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{command[0]} failed: {done.stderr[-2000:]}")
    user, system, rss_kb = report.read_text().split()[-3:]
    return Sample(seconds, float(user) + float(system), int(rss_kb) / 1024)


def size_of(root: Path) -> int:
    """Bytes of the fetched files, leaving out tools' bookkeeping folders."""
    return sum(
        p.stat().st_size for p in root.rglob("*") if p.is_file() and not {".initializer", ".cache"} & set(p.parts)
    )


def measure(
    label: str,
    contenders: dict[str, Contender],
    total: int,
    out_root: Path,
    rounds: int,
    rerun: str,
    found: Callable[[Path], int] = size_of,
    unit: str = "MB",
    discarding: Collection[str] = (),
    timed: dict[str, Contender] | None = None,
    cold: bool = False,
    finished: Callable[[str, Sample], None] | None = None,
) -> dict[str, list[Sample]]:
    """Every contender once per round, in a rotating order but for `rerun` (our program) last in the last round; then
    `rerun` again on its complete output, and the `timed` commands (a part of the work, such as a listing alone), in
    turns, for their median seconds. With BENCH_BEFORE, `rerun` run from that code is one more contender
    (`with_before`).

    `total` is the work in bytes (or another `unit` of a million things, e.g. rows), and `found` counts it in an
    output, so a contender that leaves anything out fails the benchmark instead of looking fast. Contenders in
    `discarding` write nothing (a ceiling) and must fail themselves when they received less. Before each contender
    the last one's output is removed and every filesystem synced, so that none pays for another's writeback; `cold`
    (outputs on a disk): the page cache is dropped too, so that each starts from the same cache. `finished` hears of
    every sample as it is taken (a long suite's rows, written as they come).
    """
    contenders = with_before(contenders, rerun)
    samples: dict[str, list[Sample]] = {name: [] for name in contenders}
    names = list(contenders)
    out = out_root / "out"
    for round_index in range(rounds):
        order = _rotated(names, round_index)
        if round_index == rounds - 1:  # its output is what the re-run goes over: no run of it again to make it so
            order.remove(rerun)
            order.append(rerun)
        for name in order:
            shutil.rmtree(out, ignore_errors=True)
            settle(cold)
            command, env = contenders[name](out)
            sample = run_once(command, env, out_root)
            if name not in discarding and found(out) != total:
                raise RuntimeError(f"{name} delivered {found(out)} of {total}")
            samples[name].append(sample)
            if finished is not None:
                finished(name, sample)
            print(
                f"  {label} round {round_index + 1} {name:<22} {total / sample.seconds / 1e6:8.1f} {unit}/s"
                f"  cpu {sample.cpu:5.2f} s  rss {sample.rss_mb:6.1f} MB",
                flush=True,
            )

    settle(cold)
    seconds_only = {f"{rerun} {RERUN}": contenders[rerun]}
    seconds_only.update((f"{name} {SECONDS_ONLY}", contender) for name, contender in (timed or {}).items())
    for name, seconds in _in_turns(seconds_only, out, out_root).items():
        samples[name] = [Sample(statistics.median(seconds), 0, 0)]
        if finished is not None:
            finished(name, samples[name][0])
    return samples


def _in_turns(contenders: dict[str, Contender], out: Path, scratch: Path, turns: int = 3) -> dict[str, list[float]]:
    """The seconds of each contender, run `turns` times in turns, in a rotating order: side by side, as the rounds
    are, rather than one contender's runs after the other's on a machine that changes."""
    seconds: dict[str, list[float]] = {name: [] for name in contenders}
    names = list(contenders)
    for turn in range(turns):
        for name in _rotated(names, turn):
            command, env = contenders[name](out)
            seconds[name].append(run_once(command, env, scratch).seconds)
    return seconds


def _rotated(names: list[str], turn: int) -> list[str]:
    shift = turn % len(names)
    return names[shift:] + names[:shift]


def settle(cold: bool) -> None:
    """Every filesystem synced, and the journal given a second after a deletion; `cold`: the page cache dropped
    too, which needs root (`page_cache_note` says whether it could be)."""
    os.sync()
    if cold and can_drop_page_cache():
        _DROP_CACHES.write_text("3")
    time.sleep(1.0)


def can_drop_page_cache() -> bool:
    return os.access(_DROP_CACHES, os.W_OK)


def page_cache_note() -> str:
    """What the ext4 tables' readers need to know about the cache between contenders."""
    if can_drop_page_cache():
        return "between contenders on ext4, every filesystem was synced and the page cache dropped"
    return "between contenders on ext4, every filesystem was synced; the page cache could not be dropped (not root)"


@dataclass
class Result:
    """One data set's measurements, ready for the tables and the chart."""

    title: str
    total: int
    samples: dict[str, list[Sample]]
    peer: str  # the contender ratios are taken against
    unit: str = "MB"

    def markdown(self) -> str:
        return table(self.title, self.total, self.samples, self.peer, self.unit)

    def medians(self) -> dict[str, float]:
        """Median rate per contender (MB/s or M rows/s), re-runs left out."""
        return {
            name: statistics.median(self.total / s.seconds / 1e6 for s in runs)
            for name, runs in self.samples.items()
            if not name.endswith((RERUN, SECONDS_ONLY))
        }


def table(title: str, total: int, samples: dict[str, list[Sample]], peer: str, unit: str = "MB") -> str:
    per, per_amount = ("GB", 1e9) if unit == "MB" else (unit, 1e6)  # CPU s per GB, or per M rows
    lines = [
        f"### {title} ({total / 1e6:.0f} {unit})",
        "",
        f"| contender | {unit}/s median (min-max) | CPU s/{per} | peak RSS MB (median, max) | vs {peer} |",
        "|---|---|---|---|---|",
    ]
    reference = statistics.median(total / s.seconds for s in samples[peer])
    digits = 2 if unit != "MB" else 0 if reference >= 10e6 else 1  # tiny files move a few MB/s: their tenths count
    medians: dict[str, tuple[float, float]] = {}  # rate, CPU per GB (or M rows)
    for name, runs in samples.items():
        if name.endswith(RERUN):
            lines.append(f"| {name} (complete output, nothing to fetch) | {runs[0].seconds:.2f} s | | | |")
            continue
        if name.endswith(SECONDS_ONLY):
            lines.append(f"| {name} | {runs[0].seconds:.2f} s | | | |")
            continue
        rates = [total / s.seconds / 1e6 for s in runs]
        cpu = statistics.median(s.cpu for s in runs) / (total / per_amount)
        ratio = statistics.median(rates) * 1e6 / reference
        medians[name] = (statistics.median(rates), cpu)
        lines.append(
            f"| {name} | {statistics.median(rates):.{digits}f} ({min(rates):.{digits}f}-{max(rates):.{digits}f}) | "
            f"{cpu:.2f} | "
            f"{statistics.median(s.rss_mb for s in runs):.0f}, {max(s.rss_mb for s in runs):.0f} | {ratio:.2f}x |"
        )
    after_before = [
        f"\n{after} against {name}: {medians[after][0] / medians[name][0]:.2f}x the rate, "
        f"{medians[after][1] / medians[name][1]:.2f}x the CPU per {per}.\n"
        for name in medians
        if name.endswith(BEFORE) and (after := name.removesuffix(BEFORE)) in medians
    ]
    return "\n".join(lines) + "\n" + "".join(after_before)
