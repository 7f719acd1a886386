"""A real network's terms, emulated: every connection pays a round trip and is capped in rate.

S3 sets through `devkit.netem` in front of SeaweedFS, every tool at its defaults (this tool, s5cmd, rclone,
`aws s3 cp`), at each round trip (5, 20 and 80 ms: a region's own S3, a neighbouring one, another continent or a
proxy) and each per-connection cap (8 and 32 MB/s, as S3 serves one request); the Hub with the emulator in front of
its CDN origin only (as the Hub's CDN caps each connection), this tool vs `hf download`, at 20 ms and 8 MB/s. Run
with `make bench-network` (BENCH_ROUNDS, BENCH_OUT; BENCH_RTTS_MS and BENCH_RATES_MB to choose other terms, e.g.
`BENCH_RTTS_MS=80 BENCH_RATES_MB=8`).
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

from bench import hf, s3
from bench.harness import Result, measure, run_alone
from bench.s3 import PEERS, DataSet, MiB
from devkit.hubserver import HubServer
from devkit.netem import NetworkEmulator
from devkit.seaweed import ACCESS_KEY, SECRET_KEY, SeaweedFS

RTT = 0.02  # the Hub's terms
RATE = 8e6
RTTS = tuple(float(ms) / 1000 for ms in os.environ.get("BENCH_RTTS_MS", "5,20,80").split(","))
RATES = tuple(float(mb) * 1e6 for mb in os.environ.get("BENCH_RATES_MB", "8,32").split(","))

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


def s3_suite(rounds: int, out_root: Path, quick: bool) -> list[Result]:
    """Every set at every round trip and cap: seeded once, then measured behind an emulator per pair of terms."""
    results = []
    sets = (QUICK_SETS if quick else SETS).values()
    terms = [(RTTS[-1], RATES[0])] if quick else [(rtt, rate) for rtt in RTTS for rate in RATES]
    with SeaweedFS.start() as server:
        for dataset in sets:
            print(f"seeding {dataset.name} ...", flush=True)
            s3.seed(server, dataset, out_root)
        for rtt, rate in terms:
            with NetworkEmulator(server.endpoint, rtt=rtt, rate=rate) as emulator:
                behind = _Behind(server, emulator)
                for dataset in sets:
                    contenders = {name: partial(make, behind, dataset) for name, make in CONTENDERS.items()}
                    label = f"{dataset.name[:2]} {rtt * 1000:.0f} ms {rate / 1e6:.0f} MB/s"
                    samples = measure(label, contenders, dataset.total, out_root, rounds, "initializers")
                    title = f"Network {dataset.name} ({terms_of(rtt, rate)})"
                    results.append(Result(title, dataset.total, samples, peer="s5cmd"))
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
        samples = measure("NH", contenders, total, out_root, rounds, rerun="initializers")
        title = f"Network Hub: one {blob.stat().st_size >> 20} MiB LFS file (CDN: {terms_of(RTT, RATE)})"
    blob.unlink()
    return [Result(title, total, samples, peer="hf download")]


def suite(rounds: int, out_root: Path, quick: bool) -> list[Result]:
    return s3_suite(rounds, out_root, quick) + hub_suite(rounds, out_root, quick)


if __name__ == "__main__":
    run_alone(suite)
