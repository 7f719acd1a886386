"""A real network's terms, emulated: every connection pays a round trip and is capped in rate.

S3 sets through `devkit.netem` in front of SeaweedFS, every tool at its defaults, at each round trip (5, 20 and 80 ms:
a region's own S3, a neighbouring one, another continent or a proxy), 8 MB/s per connection: the small objects (N3)
against s5cmd, the fastest peer for them; the large-object set with small files beside (N2) against s5cmd, rclone and
`aws s3 cp`, at 20 and 80 ms (`LARGE_RTTS`); the one large object (N1) at 20 ms only. The large sets' ratios barely
move with the round trip, and the small objects' at 4 MB/s per connection barely differ from those at 8: the terms
once measured beside these (50 ms, 4 MB/s) are dropped from `make bench` to keep it within 30 minutes with the TLS rows
(bench/results.md, "Issue 66: the terms dropped from make bench"; BENCH_RTTS_MS and BENCH_RATES_MB bring them back).
Ten times the small objects (N4) at 5 and 80 ms (`MANY_RTTS`), 8 MB/s, against s5cmd, one round
(`MANY_ROUNDS`): at those round trips a run of N3 lasts a second or two, mostly start-up, listing and the ramp, while
N4's ten thousand requests show the pace once the ramp is done (a round at both round trips takes about a minute and a
half beside its seeding). Every run's connections are printed as the emulator counts them (opened, and the most open at
once): a tool's requests in flight, and what it pays in handshakes. The Hub with the emulator in front of its CDN origin
only (as the Hub's CDN caps each connection), this tool vs `hf download`, at 20 ms and 8 MB/s, one round (`HUB_ROUNDS`).
The large sets run at most `LARGE_ROUNDS` rounds: their rounds agree closely and their ratios stand well clear of the
goal (bench/results.md), and each round of them takes the longest.

Over TLS as the clouds serve it, beside the plain rows: SeaweedFS serving S3 over HTTPS alone (HTTP/1.1, as S3) with a
certificate made for the run, every peer trusting it as its users configure it (our program, s5cmd and `aws s3 cp`
through AWS_CA_BUNDLE, rclone through `--ca-cert`; verification never off); the emulator passes TLS through end to
end. Every set runs over TLS at `TLS_RTTS` (20 and 80 ms) alone, not at every round trip: 20 ms is where the
handshake's extra round trip weighs most against the transfer and the CPU per byte (the cost TLS adds) shows most,
80 ms where the handshake costs the most time per connection; the plain rows at 5 ms lie beside them
(bench/results.md), and a TLS copy of every term would double the suite's minutes. The Hub's set runs over TLS too,
on the same 256 MiB file (`HUB_MIB`): both of our Hub server's origins over HTTPS, `hf download` and our program
trusting the certificate through SSL_CERT_FILE (what huggingface_hub's httpx2 and our HUB_TRUST read).

Run with `make bench-network` (BENCH_ROUNDS, BENCH_OUT; BENCH_RTTS_MS and BENCH_RATES_MB to choose other terms for the
small objects, e.g. `BENCH_RTTS_MS=50 BENCH_RATES_MB=4,8`; BENCH_TLS_RTTS_MS for the TLS rows' round trips, empty for
none; BENCH_SETS to pick sets, e.g. `BENCH_SETS=N3,N4` for the small objects only, NH names the Hub's).
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
RTTS = tuple(float(ms) / 1000 for ms in os.environ.get("BENCH_RTTS_MS", "5,20,80").split(","))
#: Per-connection caps for the small objects; the large sets run at `RATE`.
RATES = tuple(float(mb) * 1e6 for mb in os.environ.get("BENCH_RATES_MB", "8").split(","))
#: The round trips measured over TLS too (see the module's note), every set at `RATE`.
TLS_RTTS = tuple(float(ms) / 1000 for ms in os.environ.get("BENCH_TLS_RTTS_MS", "20,80").split(",") if ms)
SETS_CHOSEN = os.environ.get("BENCH_SETS", "N1,N2,N3,N4,NH").split(",")
#: The most rounds of the large sets (see the module's note).
LARGE_ROUNDS = 1
#: The Hub's set runs once: `hf download` holds one connection, so a round of it takes minutes at `RATE`, and its
#: ratio stands far from the goal either way (bench/results.md).
HUB_ROUNDS = 1
#: The Hub's file, plain and over TLS: `hf download`'s one connection takes over two minutes for a GiB at `RATE`
#: (bench/results.md), which `make bench`'s 30 minutes cannot spare.
HUB_MIB = 256
#: The round trips of the large sets (N2), of those chosen (see the module's note).
LARGE_RTTS = (0.02, 0.08)
#: The round trips of the many small objects (N4), of those chosen, and its most rounds (see the module's note).
MANY_RTTS = (0.005, 0.08)
MANY_ROUNDS = 1

SETS = {
    "N1": DataSet("N1: one 256 MiB object", "net-1", [("blob.bin", 256 * MiB)]),
    "N2": DataSet(
        "N2: 4 x 64 MiB + 10 small",
        "net-2",
        [(f"model-{i:05d}-of-00004.safetensors", 64 * MiB) for i in range(4)]
        + [(f"config/file{i}.json", 3000 + i) for i in range(10)],
    ),
    "N3": DataSet("N3: 1000 x 64 KiB", "net-3", [(f"d{i % 10}/f{i:05d}.bin", 64 * 1024) for i in range(1000)]),
    "N4": DataSet("N4: 10 000 x 64 KiB", "net-4", [(f"d{i % 10}/f{i:05d}.bin", 64 * 1024) for i in range(10_000)]),
}
QUICK_SETS = {
    "N1": DataSet("N1: one 64 MiB object", "qnet-1", [("blob.bin", 64 * MiB)]),
    "N3": DataSet("N3: 200 x 64 KiB", "qnet-3", [(f"d{i % 10}/f{i:05d}.bin", 64 * 1024) for i in range(200)]),
}
PEER_NAMES = ("s5cmd", "rclone copy", "aws s3 cp")


class _Behind:
    """The SeaweedFS server as the tools see it: its endpoint is the emulator's (https when the server's is)."""

    def __init__(self, server: SeaweedFS, emulator: NetworkEmulator) -> None:
        self._server = server
        self.endpoint = emulator.url
        self.certificate = server.certificate

    def env(self) -> dict[str, str]:
        return {**self._server.env(), "ENDPOINT": self.endpoint}


def rclone(server: _Behind, dataset: DataSet, out: Path) -> tuple[list[str], dict[str, str]]:
    env = {"RCLONE_CONFIG_SRC_TYPE": "s3", "RCLONE_CONFIG_SRC_PROVIDER": "Other",
           "RCLONE_CONFIG_SRC_ENDPOINT": server.endpoint, "RCLONE_CONFIG_SRC_ACCESS_KEY_ID": ACCESS_KEY,
           "RCLONE_CONFIG_SRC_SECRET_ACCESS_KEY": SECRET_KEY, "HOME": "/nonexistent"}  # fmt: skip
    trust = ["--ca-cert", str(server.certificate)] if server.certificate else []
    return [str(PEERS / "rclone"), "copy", *trust, f"src:{dataset.bucket}", str(out)], env


#: s5cmd and `aws s3 cp` trust the server's certificate through AWS_CA_BUNDLE (`s3.trusting`), rclone by `--ca-cert`.
CONTENDERS = {"initializers": s3.ours, "s5cmd": s3.s5cmd, "rclone copy": rclone, "aws s3 cp": s3.awscli}
#: The small objects are measured against s5cmd alone: the goal names it, and the others take several times longer.
SMALL_CONTENDERS = ("initializers", "s5cmd")
#: The sets of small objects.
SMALL_SETS = ("N3", "N4")


class Measurement(NamedTuple):
    key: str  # of SETS
    dataset: DataSet
    rtt: float
    rate: float
    most_rounds: int | None
    tls: bool = False


def plan(quick: bool) -> list[Measurement]:
    """Every measurement of the chosen sets, those at the same terms together (one emulator each)."""
    if quick:
        return [
            Measurement(key, data, RTTS[-1], RATE, None, tls)
            for tls in (False, True)[: 2 if TLS_RTTS else 1]
            for key, data in QUICK_SETS.items()
            if key in SETS_CHOSEN
        ]
    wanted = [("N1", rtt, RATE, LARGE_ROUNDS, False) for rtt in RTTS if rtt == RTT]
    wanted += [("N2", rtt, RATE, LARGE_ROUNDS, False) for rtt in RTTS if rtt in LARGE_RTTS]
    wanted += [("N3", rtt, rate, None, False) for rtt in RTTS for rate in RATES]
    wanted += [("N4", rtt, RATE, MANY_ROUNDS, False) for rtt in RTTS if rtt in MANY_RTTS]
    wanted += [("N1", rtt, RATE, LARGE_ROUNDS, True) for rtt in TLS_RTTS if rtt == RTT]
    wanted += [("N2", rtt, RATE, LARGE_ROUNDS, True) for rtt in TLS_RTTS]
    wanted += [("N3", rtt, RATE, None, True) for rtt in TLS_RTTS]
    chosen = [Measurement(key, SETS[key], *terms) for key, *terms in wanted if key in SETS_CHOSEN]
    return sorted(chosen, key=lambda m: (m.tls, m.rtt, m.rate))


def s3_suite(rounds: int, out_root: Path, quick: bool) -> list[Result]:
    """Every chosen set at its terms: seeded once per server (plain HTTP, then over TLS), then measured behind an
    emulator per pair of terms."""
    results: list[Result] = []
    for tls, over in itertools.groupby(plan(quick), key=lambda m: m.tls):
        measurements = list(over)
        with SeaweedFS.start(tls=tls) as server:
            for dataset in {m.key: m.dataset for m in measurements}.values():
                print(f"seeding {dataset.name}{' over TLS' if tls else ''} ...", flush=True)
                s3.seed(server, dataset, out_root)
            for (rtt, rate), group in itertools.groupby(measurements, key=lambda m: (m.rtt, m.rate)):
                with NetworkEmulator(server.endpoint, rtt=rtt, rate=rate) as emulator:
                    behind = _Behind(server, emulator)
                    for m in group:
                        names = SMALL_CONTENDERS if m.key in SMALL_SETS else CONTENDERS
                        contenders = {name: partial(CONTENDERS[name], behind, m.dataset) for name in names}
                        label = f"{m.key}{' TLS' if tls else ''} {rtt * 1000:.0f} ms {rate / 1e6:.0f} MB/s"
                        most = min(rounds, m.most_rounds or rounds)
                        samples = measure(label, contenders, m.dataset.total, out_root, most, "initializers",
                                          finished=partial(_connections, label, emulator))  # fmt: skip
                        title = f"Network {m.dataset.name} ({terms_of(rtt, rate, tls)})"
                        results.append(Result(title, m.dataset.total, samples, peer="s5cmd"))
    return results


def _connections(label: str, emulator: NetworkEmulator, name: str, _sample: object) -> None:
    """The connections `name` opened through the emulator, and the most open at once; counted afresh for the next."""
    seen = emulator.connections
    print(f"  {label} {'':<8} {name:<22} connections: {seen.opened} opened, at most {seen.peak} at once", flush=True)
    seen.reset()


def terms_of(rtt: float, rate: float, tls: bool = False) -> str:
    """A table title's network terms, as the goals read them back (`over TLS, RTT 20 ms, ...` over TLS)."""
    return f"{'over TLS, ' if tls else ''}RTT {rtt * 1000:.0f} ms, {rate / 1e6:.0f} MB/s per connection"


def hub_suite(rounds: int, out_root: Path, quick: bool) -> list[Result]:
    """The Hub's set over plain HTTP, then over TLS (both origins; see the module's note)."""
    blob = out_root / "network-large.safetensors"
    with open(blob, "wb") as handle:
        for _ in range(128 if quick else HUB_MIB):
            handle.write(os.urandom(MiB))
    results = [_hub_set(blob, tls, rounds, out_root) for tls in (False, True)]
    blob.unlink()
    return results


def _hub_set(blob: Path, tls: bool, rounds: int, out_root: Path) -> Result:
    with HubServer(tls=tls) as hub, NetworkEmulator(hub.cdn_endpoint, rtt=RTT, rate=RATE) as cdn:
        hub.cdn_public_endpoint = cdn.url
        repo = "bench/network-large"
        hub.add_repo(repo, {"config.json": b"{}", "model.safetensors": blob})
        total = blob.stat().st_size + 2
        contenders = {"initializers": partial(hf.ours, hub, repo), "hf download": partial(hf.hf_download, hub, repo)}
        label = "NH TLS" if tls else "NH"
        samples = measure(label, contenders, total, out_root, min(rounds, HUB_ROUNDS), rerun="initializers")
        over = "Hub and CDN over TLS; " if tls else ""
        title = f"Network Hub: one {blob.stat().st_size >> 20} MiB LFS file ({over}CDN: {terms_of(RTT, RATE)})"
    return Result(title, total, samples, peer="hf download")


def suite(rounds: int, out_root: Path, quick: bool) -> list[Result]:
    hub = hub_suite(rounds, out_root, quick) if "NH" in SETS_CHOSEN else []
    return s3_suite(rounds, out_root, quick) + hub


if __name__ == "__main__":
    run_alone(suite)
