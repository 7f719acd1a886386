"""S3 side-by-side benchmark: this tool vs the peers users would pick, interleaved rounds, medians and ratios.

Run with `make bench-s3` (BENCH_ROUNDS, BENCH_OUT to choose the output filesystem, BENCH_SETS to pick sets).
Each contender is a separate process timed with os.wait4, so wall time, CPU and peak RSS are its own.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from devkit.programs import clean_env
from devkit.seaweed import ACCESS_KEY, REGION, SECRET_KEY, SeaweedFS

MiB = 1 << 20
TIME = "/usr/bin/time"
PEERS = Path(__file__).resolve().parents[1] / ".venvs" / "peers" / "bin"


@dataclass(frozen=True)
class DataSet:
    name: str
    bucket: str
    objects: list[tuple[str, int]]  # key, size

    @property
    def total(self) -> int:
        return sum(size for _, size in self.objects)


SETS = {
    "A": DataSet("A: one 1 GiB object", "set-a", [("blob.bin", 1024 * MiB)]),
    "B": DataSet(
        "B: 2000 x 64 KiB in nested folders",
        "set-b",
        [(f"d{i % 10}/e{i % 7}/f{i:05d}.bin", 64 * 1024) for i in range(2000)],
    ),
    "C": DataSet(
        "C: 4 x 200 MiB + 10 small",
        "set-c",
        [(f"model-{i:05d}-of-00004.safetensors", 200 * MiB) for i in range(4)]
        + [(f"config/file{i}.json", 3000 + i) for i in range(10)],
    ),
}


def seed(server: SeaweedFS, dataset: DataSet, scratch: Path) -> None:
    s3 = server.client()
    s3.create_bucket(Bucket=dataset.bucket)
    from concurrent.futures import ThreadPoolExecutor

    def put(item: tuple[str, int]) -> None:
        key, size = item
        if size > 64 * MiB:
            path = scratch / "upload.bin"
            if not path.exists() or path.stat().st_size != size:
                with open(path, "wb") as handle:
                    for _ in range(size // MiB):
                        handle.write(os.urandom(MiB))
            s3.upload_file(str(path), dataset.bucket, key)
        else:
            s3.put_object(Bucket=dataset.bucket, Key=key, Body=os.urandom(size))

    large = [o for o in dataset.objects if o[1] > 64 * MiB]
    for item in large:
        put(item)
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, [o for o in dataset.objects if o[1] <= 64 * MiB]))


Command = Callable[[SeaweedFS, DataSet, Path], tuple[list[str], dict[str, str]]]


def ours(server: SeaweedFS, dataset: DataSet, out: Path) -> tuple[list[str], dict[str, str]]:
    env = {**server.env(), "STORAGE_URI": f"s3://{dataset.bucket}", "OUTPUT_PATH": str(out)}
    return [str(Path(sys.executable).parent / "dataset-initializer")], env


def _aws_env() -> dict[str, str]:
    return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION, "HOME": "/nonexistent"}  # fmt: skip


def s5cmd(server: SeaweedFS, dataset: DataSet, out: Path) -> tuple[list[str], dict[str, str]]:
    command = [str(PEERS / "s5cmd"), "--endpoint-url", server.endpoint, "cp", f"s3://{dataset.bucket}/*", f"{out}/"]
    return command, _aws_env()


def awscli(server: SeaweedFS, dataset: DataSet, out: Path) -> tuple[list[str], dict[str, str]]:
    command = [str(PEERS / "aws"), "--endpoint-url", server.endpoint, "s3", "cp", "--recursive", "--only-show-errors",
               f"s3://{dataset.bucket}", str(out)]  # fmt: skip
    return command, _aws_env()


CONTENDERS: dict[str, Command] = {"initializers": ours, "s5cmd": s5cmd, "aws s3 cp": awscli}


@dataclass
class Sample:
    seconds: float
    cpu: float
    rss_mb: float


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
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and ".initializer" not in p.parts)


def measure(server: SeaweedFS, dataset: DataSet, out_root: Path, rounds: int) -> dict[str, list[Sample]]:
    samples: dict[str, list[Sample]] = {name: [] for name in CONTENDERS}
    names = list(CONTENDERS)
    for round_index in range(rounds):
        order = names[round_index % len(names) :] + names[: round_index % len(names)]
        for name in order:
            out = out_root / "out"
            shutil.rmtree(out, ignore_errors=True)
            os.sync()
            time.sleep(1.0)  # let the filesystem journal settle after the deletion
            command, env = CONTENDERS[name](server, dataset, out)
            sample = run_once(command, env, out_root)
            got = size_of(out)
            if got != dataset.total:
                raise RuntimeError(f"{name} wrote {got} bytes of {dataset.total}")
            samples[name].append(sample)
            rate = dataset.total / sample.seconds / 1e6
            print(
                f"  {dataset.name[:2]} round {round_index + 1} {name:<13} {rate:8.1f} MB/s"
                f"  cpu {sample.cpu:5.2f} s  rss {sample.rss_mb:6.1f} MB",
                flush=True,
            )
        if round_index == rounds - 1:
            command, env = ours(server, dataset, out_root / "out")
            shutil.rmtree(out_root / "out", ignore_errors=True)
            run_once(command, env, out_root)
            rerun = [run_once(command, env, out_root).seconds for _ in range(3)]
            samples["initializers re-run"] = [Sample(statistics.median(rerun), 0, 0)]
    return samples


def table(dataset: DataSet, samples: dict[str, list[Sample]]) -> str:
    lines = [
        f"### {dataset.name} ({dataset.total / 1e6:.0f} MB)",
        "",
        "| contender | MB/s median (min-max) | CPU s/GB | peak RSS MB | vs s5cmd |",
        "|---|---|---|---|---|",
    ]
    peer = statistics.median(dataset.total / s.seconds for s in samples["s5cmd"])
    for name, runs in samples.items():
        if name.endswith("re-run"):
            lines.append(f"| {name} (complete output, nothing to fetch) | {runs[0].seconds:.2f} s | | | |")
            continue
        rates = [dataset.total / s.seconds / 1e6 for s in runs]
        cpu = statistics.median(s.cpu for s in runs) / (dataset.total / 1e9)
        rss = max(s.rss_mb for s in runs)
        lines.append(f"| {name} | {statistics.median(rates):.0f} ({min(rates):.0f}-{max(rates):.0f}) | {cpu:.2f} | "
                     f"{rss:.0f} | {statistics.median(rates) * 1e6 / peer:.2f}x |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    rounds = int(os.environ.get("BENCH_ROUNDS", "5"))
    out_root = Path(os.environ.get("BENCH_OUT", "/tmp/initializers-bench"))
    chosen = os.environ.get("BENCH_SETS", "ABC")
    for tool in (PEERS / "s5cmd", PEERS / "aws", Path(TIME)):
        if not tool.exists():
            sys.exit(f"{tool} is missing: run `make bench-install`")
    out_root.mkdir(parents=True, exist_ok=True)
    report: list[str] = []
    with SeaweedFS.start() as server:
        for key in chosen:
            dataset = SETS[key]
            print(f"seeding {dataset.name} ...", flush=True)
            seed(server, dataset, out_root)
            report.append(table(dataset, measure(server, dataset, out_root, rounds)))
    shutil.rmtree(out_root, ignore_errors=True)
    print("\n" + "\n".join(report))


if __name__ == "__main__":
    main()
