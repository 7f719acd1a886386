"""A real network's terms, emulated: every connection pays a round trip and is capped in rate.

S3 sets through `devkit.netem` in front of SeaweedFS, every tool at its defaults, at each round trip (5, 20, 50 and
80 ms: a region's own S3, a neighbouring one, further, another continent or a proxy): the small objects (N3) at 4 and
8 MB/s per connection against s5cmd, the fastest peer for them; the large-object set with small files beside (N2) at
8 MB/s against s5cmd, rclone and `aws s3 cp`; the one large object (N1) at 20 ms only, as its ratio barely moves with
the round trip. The Hub with the emulator in front of its CDN origin only (as the Hub's CDN caps each connection),
this tool vs `hf download`, at 20 ms and 8 MB/s, one round (`HUB_ROUNDS`). The large sets run at most `LARGE_ROUNDS`
rounds: their rounds agree closely and their ratios stand well clear of the goal (bench/results.md), and each round of
them takes the longest. Run with `make bench-network` (BENCH_ROUNDS,
BENCH_OUT; BENCH_RTTS_MS and BENCH_RATES_MB to choose other terms for the small objects, e.g. `BENCH_RTTS_MS=80
BENCH_RATES_MB=8`; BENCH_SETS to pick sets, e.g. `BENCH_SETS=N3` for the small objects only, NH names the Hub's).
"""

from __future__ import annotations

import itertools
import os
from functools import partial
from pathlib import Path
from typing import NamedTuple

from bench import hf, s3
from bench.harness import Result, measure, run_alone
from bench.s3 import PEERS, DataSet, MiB
from devkit.hubserver import HubServer
from devkit.netem import NetworkEmulator
from devkit.seaweed import ACCESS_KEY, SECRET_KEY, SeaweedFS

RTT = 0.02  # the Hub's terms
RATE = 8e6
RTTS = tuple(float(ms) / 1000 for ms in os.environ.get("BENCH_RTTS_MS", "5,20,50,80").split(","))
#: Per-connection caps for the small objects; the large sets run at `RATE`.
RATES = tuple(float(mb) * 1e6 for mb in os.environ.get("BENCH_RATES_MB", "4,8").split(","))
SETS_CHOSEN = os.environ.get("BENCH_SETS", "N1,N2,N3,NH").split(",")
#: The most rounds of the large sets (see the module's note).
LARGE_ROUNDS = 1
#: The Hub's set runs once: `hf download` holds one connection, so a round of it takes minutes at `RATE`, and its
#: ratio stands far from the goal either way (bench/results.md).
HUB_ROUNDS = 1

SETS = {
    "N1": DataSet("N1: one 256 MiB object", "net-1", [("blob.bin", 256 * MiB)]),
    "N2": DataSet(
        "N2: 4 x 64 MiB + 10 small",
        "net-2",
        [(f"model-{i:05d}-of-00004.safetensors", 64 * MiB) for i in range(4)]
        + [(f"config/file{i}.json", 3000 + i) for i in range(10)],
    ),
    "N3": DataSet("N3: 1000 x 64 KiB", "net-3", [(f"d{i % 10}/f{i:05d}.bin", 64 * 1024) for i in range(1000)]),
}
QUICK_SETS = {
    "N1": DataSet("N1: one 64 MiB object", "qnet-1", [("blob.bin", 64 * MiB)]),
    "N3": DataSet("N3: 200 x 64 KiB", "qnet-3", [(f"d{i % 10}/f{i:05d}.bin", 64 * 1024) for i in range(200)]),
}
PEER_NAMES = ("s5cmd", "rclone copy", "aws s3 cp")


class _Behind:
    """The SeaweedFS server as the tools see it: its endpoint is the emulator's."""

    def __init__(self, server: SeaweedFS, emulator: NetworkEmulator) -> None:
        self._server = server
        self.endpoint = emulator.url

    def env(self) -> dict[str, str]:
        return {**self._server.env(), "ENDPOINT": self.endpoint}


def rclone(server: _Behind, dataset: DataSet, out: Path) -> tuple[list[str], dict[str, str]]:
    env = {"RCLONE_CONFIG_SRC_TYPE": "s3", "RCLONE_CONFIG_SRC_PROVIDER": "Other",
           "RCLONE_CONFIG_SRC_ENDPOINT": server.endpoint, "RCLONE_CONFIG_SRC_ACCESS_KEY_ID": ACCESS_KEY,
           "RCLONE_CONFIG_SRC_SECRET_ACCESS_KEY": SECRET_KEY, "HOME": "/nonexistent"}  # fmt: skip
    return [str(PEERS / "rclone"), "copy", f"src:{dataset.bucket}", str(out)], env


CONTENDERS = {"initializers": s3.ours, "s5cmd": s3.s5cmd, "rclone copy": rclone, "aws s3 cp": s3.awscli}
#: The small objects are measured against s5cmd alone: the goal names it, and the others take several times longer.
SMALL_CONTENDERS = ("initializers", "s5cmd")


class Measurement(NamedTuple):
    key: str  # of SETS
    dataset: DataSet
    rtt: float
    rate: float
    most_rounds: int | None


def plan(quick: bool) -> list[Measurement]:
    """Every measurement of the chosen sets, those at the same terms together (one emulator each)."""
    if quick:
        return [Measurement(key, data, RTTS[-1], RATE, None) for key, data in QUICK_SETS.items() if key in SETS_CHOSEN]
    wanted = [("N1", rtt, RATE, LARGE_ROUNDS) for rtt in RTTS if rtt == RTT]
    wanted += [("N2", rtt, RATE, LARGE_ROUNDS) for rtt in RTTS]
    wanted += [("N3", rtt, rate, None) for rtt in RTTS for rate in RATES]
    chosen = [Measurement(key, SETS[key], rtt, rate, most) for key, rtt, rate, most in wanted if key in SETS_CHOSEN]
    return sorted(chosen, key=lambda m: (m.rtt, m.rate))


def s3_suite(rounds: int, out_root: Path, quick: bool) -> list[Result]:
    """Every chosen set at its terms: seeded once, then measured behind an emulator per pair of terms."""
    results: list[Result] = []
    measurements = plan(quick)
    if not measurements:
        return results
    with SeaweedFS.start() as server:
        for dataset in {m.key: m.dataset for m in measurements}.values():
            print(f"seeding {dataset.name} ...", flush=True)
            s3.seed(server, dataset, out_root)
        for (rtt, rate), group in itertools.groupby(measurements, key=lambda m: (m.rtt, m.rate)):
            with NetworkEmulator(server.endpoint, rtt=rtt, rate=rate) as emulator:
                behind = _Behind(server, emulator)
                for m in group:
                    names = SMALL_CONTENDERS if m.key == "N3" else CONTENDERS
                    contenders = {name: partial(CONTENDERS[name], behind, m.dataset) for name in names}
                    label = f"{m.key} {rtt * 1000:.0f} ms {rate / 1e6:.0f} MB/s"
                    most = min(rounds, m.most_rounds or rounds)
                    samples = measure(label, contenders, m.dataset.total, out_root, most, "initializers")
                    title = f"Network {m.dataset.name} ({terms_of(rtt, rate)})"
                    results.append(Result(title, m.dataset.total, samples, peer="s5cmd"))
    return results


def terms_of(rtt: float, rate: float) -> str:
    """A table title's network terms, as the goals read them back."""
    return f"RTT {rtt * 1000:.0f} ms, {rate / 1e6:.0f} MB/s per connection"


def hub_suite(rounds: int, out_root: Path, quick: bool) -> list[Result]:
    blob = out_root / "network-large.safetensors"
    with open(blob, "wb") as handle:
        for _ in range(128 if quick else 1024):
            handle.write(os.urandom(MiB))
    with HubServer() as hub, NetworkEmulator(hub.cdn_endpoint, rtt=RTT, rate=RATE) as cdn:
        hub.cdn_public_endpoint = cdn.url
        repo = "bench/network-large"
        hub.add_repo(repo, {"config.json": b"{}", "model.safetensors": blob})
        total = blob.stat().st_size + 2
        contenders = {"initializers": partial(hf.ours, hub, repo), "hf download": partial(hf.hf_download, hub, repo)}
        samples = measure("NH", contenders, total, out_root, min(rounds, HUB_ROUNDS), rerun="initializers")
        title = f"Network Hub: one {blob.stat().st_size >> 20} MiB LFS file (CDN: {terms_of(RTT, RATE)})"
    blob.unlink()
    return [Result(title, total, samples, peer="hf download")]


def suite(rounds: int, out_root: Path, quick: bool) -> list[Result]:
    hub = hub_suite(rounds, out_root, quick) if "NH" in SETS_CHOSEN else []
    return s3_suite(rounds, out_root, quick) + hub


if __name__ == "__main__":
    run_alone(suite)
