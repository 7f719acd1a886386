"""S3 side by side on SeaweedFS: this tool vs s5cmd, `aws s3 cp`, boto3's TransferManager, the original Kubeflow
approach (OpenDAL, one whole object at a time), the AWS Common Runtime's S3 client (Mountpoint's and
s3torchconnector's engine), obstore (Rust's `object_store`; one stream per object, and ranged reads) and a curl
ceiling (parallel signed ranged GETs, bytes discarded).

Over TLS as every cloud serves it, beside the plain rows: SeaweedFS serving S3 over HTTPS only with a certificate made
for the run, every peer trusting it as its users configure a private CA (AWS_CA_BUNDLE for ours, s5cmd and `aws s3
cp`; the CRT's TLS options, obstore's `root_certificate` and curl's `--cacert`, each given the file AWS_CA_BUNDLE
names); verification is never off. Every set but plain A leaves out boto3's TransferManager and OpenDAL (the slowest,
and their rank is plain A's), to keep `make bench` within 30 minutes; set A over TLS has our program on one core too
(`taskset -c 0`), to show whether the interpreter's lock caps it with two.

Run with `make bench-s3` (BENCH_ROUNDS, BENCH_OUT to choose the output filesystem, BENCH_SETS to pick sets: A, B, C,
D, in lower case for the same set over TLS; BENCH_QUICK for smaller sets and one round; BENCH_BEFORE for the code
before a change beside ours, `harness.with_before`).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from bench import harness, volumes
from bench.harness import Result, measure, run_alone
from devkit.programs import clean_env
from devkit.seaweed import ACCESS_KEY, REGION, SECRET_KEY, SeaweedFS

MiB = 1 << 20
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
    "D": DataSet("D: 4 x 256 MiB", "set-d", [(f"shard-{i:05d}.bin", 256 * MiB) for i in range(4)]),
}
#: The sets `make bench` measures: a lower-case key is the set over TLS (issue 66's goals name one large object and
#: 4 x 256 MiB). B over TLS (`b`) runs on demand: it adds about two minutes, and the handshakes of many small objects
#: are measured where they cost the most, through the network emulator (bench/network.py's N3 over TLS).
DEFAULT_SETS = "ABCad"


#: Sets of more objects than this are seeded by one `s5cmd cp` of a local folder tree: several times the rate of
#: boto3's PUTs, which would take over an hour for a million (the tree of a million is written in under a minute,
#: and s5cmd pushed it in 9.4 minutes here).
_MANY_OBJECTS = 10_000
_PAGE = 4096  # the unit tmpfs holds a file's bytes in
_INODE = 1024  # about what the kernel holds for each file beside its bytes (its inode and name)


def seed(server: SeaweedFS, dataset: DataSet, scratch: Path) -> None:
    s3 = server.client()
    s3.create_bucket(Bucket=dataset.bucket)
    if len(dataset.objects) > _MANY_OBJECTS:
        _seed_by_s5cmd(server, dataset, scratch)
        return
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


def _seed_by_s5cmd(server: SeaweedFS, dataset: DataSet, scratch: Path) -> None:
    """The objects as a folder tree, pushed by one `s5cmd cp`. The tree is on a tmpfs of its own when memory allows
    (half of what is available): written faster than on a disk, and dropped by unmounting it, not file by file
    (bench/results.md). Else it is under `scratch` (a disk), then removed."""
    pages = sum(-(-size // _PAGE) * _PAGE for _key, size in dataset.objects)
    if (pages + _INODE * len(dataset.objects)) * 2 <= volumes.memory_available():
        with volumes.tmpfs(pages) as root:
            _push_tree(server, dataset, root / "seed")
        return
    tree = scratch / "seed"
    shutil.rmtree(tree, ignore_errors=True)
    _push_tree(server, dataset, tree)
    shutil.rmtree(tree, ignore_errors=True)


def _push_tree(server: SeaweedFS, dataset: DataSet, tree: Path) -> None:
    """The objects written as files under `tree`, then pushed by one `s5cmd cp`."""
    folders: set[Path] = set()
    for key, size in dataset.objects:
        path = tree / key
        if path.parent not in folders:
            path.parent.mkdir(parents=True, exist_ok=True)
            folders.add(path.parent)
        path.write_bytes(os.urandom(size))
    upload = [str(PEERS / "s5cmd"), "--endpoint-url", server.endpoint, "cp", f"{tree}/", f"s3://{dataset.bucket}/"]
    subprocess.run(upload, env=clean_env(_aws_env(server)), check=True, stdout=subprocess.DEVNULL)


#: BENCH_QUICK: the same shapes, smaller, for a sanity check in under two minutes with everything else.
QUICK_SETS = {
    "A": DataSet("A: one 256 MiB object", "quick-a", [("blob.bin", 256 * MiB)]),
    "B": DataSet(
        "B: 300 x 64 KiB in nested folders", "quick-b", [(f"d{i % 10}/f{i:05d}.bin", 64 * 1024) for i in range(300)]
    ),
    "C": DataSet(
        "C: 4 x 40 MiB + 10 small",
        "quick-c",
        [(f"model-{i:05d}-of-00004.safetensors", 40 * MiB) for i in range(4)]
        + [(f"config/file{i}.json", 3000 + i) for i in range(10)],
    ),
    "D": DataSet("D: 4 x 64 MiB", "quick-d", [(f"shard-{i:05d}.bin", 64 * MiB) for i in range(4)]),
}

Command = Callable[[SeaweedFS, DataSet, Path], tuple[list[str], dict[str, str]]]


def ours(server: SeaweedFS, dataset: DataSet, out: Path) -> tuple[list[str], dict[str, str]]:
    env = {**server.env(), "STORAGE_URI": f"s3://{dataset.bucket}", "OUTPUT_PATH": str(out)}
    return [str(Path(sys.executable).parent / "dataset-initializer")], env


def one_core(server: SeaweedFS, dataset: DataSet, out: Path) -> tuple[list[str], dict[str, str]]:
    """Ours held to one core (`taskset -c 0`): beside the free run, whether the interpreter's lock caps it."""
    command, env = ours(server, dataset, out)
    return ["taskset", "-c", "0", *command], env


def trusting(server: SeaweedFS) -> dict[str, str]:
    """AWS_CA_BUNDLE naming the certificate of a server over TLS (none for plain HTTP): what the AWS SDKs read
    (botocore, s5cmd's aws-sdk-go) and the file the bench's other peers hand to their own TLS settings."""
    return {"AWS_CA_BUNDLE": str(server.certificate)} if server.certificate else {}


def _aws_env(server: SeaweedFS) -> dict[str, str]:
    return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION, "HOME": "/nonexistent", **trusting(server)}  # fmt: skip


def s5cmd(server: SeaweedFS, dataset: DataSet, out: Path) -> tuple[list[str], dict[str, str]]:
    command = [str(PEERS / "s5cmd"), "--endpoint-url", server.endpoint, "cp", f"s3://{dataset.bucket}/*", f"{out}/"]
    return command, _aws_env(server)


def s5cmd_synced(server: SeaweedFS, dataset: DataSet, out: Path) -> tuple[list[str], dict[str, str]]:
    """s5cmd, then `sync -f` on the output: its files on disk when it ends, as ours are when the manifest is written."""
    command, env = s5cmd(server, dataset, out)
    return ["sh", "-c", f"{shlex.join(command)} && sync -f {shlex.quote(str(out))}"], env


def s5cmd_list(server: SeaweedFS, dataset: DataSet, _out: Path) -> tuple[list[str], dict[str, str]]:
    """Only the listing of what `s5cmd` would fetch, its output discarded."""
    return [str(PEERS / "s5cmd"), "--endpoint-url", server.endpoint, "ls", f"s3://{dataset.bucket}/*"], _aws_env(server)


def awscli(server: SeaweedFS, dataset: DataSet, out: Path) -> tuple[list[str], dict[str, str]]:
    command = [str(PEERS / "aws"), "--endpoint-url", server.endpoint, "s3", "cp", "--recursive", "--only-show-errors",
               f"s3://{dataset.bucket}", str(out)]  # fmt: skip
    return command, _aws_env(server)


def _python_peer(
    module: str, server: SeaweedFS, dataset: DataSet, target: str, *extra: str
) -> tuple[list[str], dict[str, str]]:
    """A peer of bench/peers/, with the peers' Python but for boto3's (boto3 lives in ours)."""
    python = Path(sys.executable) if module.endswith("boto3_transfer") else PEERS / "python"
    env = {**_aws_env(server), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return [str(python), "-m", module, server.endpoint, dataset.bucket, target, *extra], env


def boto3_transfer(server: SeaweedFS, dataset: DataSet, out: Path) -> tuple[list[str], dict[str, str]]:
    return _python_peer("bench.peers.boto3_transfer", server, dataset, str(out))


def opendal_sequential(server: SeaweedFS, dataset: DataSet, out: Path) -> tuple[list[str], dict[str, str]]:
    return _python_peer("bench.peers.opendal_sequential", server, dataset, str(out))


def crt(server: SeaweedFS, dataset: DataSet, out: Path) -> tuple[list[str], dict[str, str]]:
    return _python_peer("bench.peers.crt_s3", server, dataset, str(out))


def obstore_stream(server: SeaweedFS, dataset: DataSet, out: Path) -> tuple[list[str], dict[str, str]]:
    return _python_peer("bench.peers.obstore_get", server, dataset, str(out))


def obstore_ranged(server: SeaweedFS, dataset: DataSet, out: Path) -> tuple[list[str], dict[str, str]]:
    return _python_peer("bench.peers.obstore_get", server, dataset, str(out), "ranged")


def curl_ceiling(server: SeaweedFS, dataset: DataSet, out: Path) -> tuple[list[str], dict[str, str]]:
    keys = out.parent / f"keys-{dataset.bucket}.txt"
    keys.write_text("".join(f"{key} {size}\n" for key, size in dataset.objects))
    return _python_peer("bench.peers.curl_ceiling", server, dataset, str(keys))


SYNCED = "s5cmd + sync -f"
CEILING = "curl ceiling (bytes discarded)"
ONE_CORE = "initializers on one core (taskset -c 0)"
CONTENDERS: dict[str, Command] = {
    "initializers": ours,
    "s5cmd": s5cmd,
    "aws s3 cp": awscli,
    "boto3 TransferManager": boto3_transfer,
    "OpenDAL sequential (Kubeflow's)": opendal_sequential,
    "AWS CRT (awscrt S3Client)": crt,
    "obstore, one stream": obstore_stream,
    "obstore, ranged": obstore_ranged,
    CEILING: curl_ceiling,
}
#: Over TLS, and on plain sets but A: the slowest peers left out (their ranks are set; see the module's note), which
#: keeps `make bench` within 30 minutes.
WITHOUT_THE_SLOWEST = {name: make for name, make in CONTENDERS.items() if name not in {"boto3 TransferManager",
                       "OpenDAL sequential (Kubeflow's)"}}  # fmt: skip

#: On a disk the goal is s5cmd's, plain and followed by `sync -f` (durability costs there); the slower peers' ranks
#: do not change with the filesystem, and leaving them out keeps `make bench` within 30 minutes.
ON_A_DISK: dict[str, Command] = {"initializers": ours, "s5cmd": s5cmd, SYNCED: s5cmd_synced}


def peer_names(names: Iterable[str]) -> list[str]:
    """The other tools among a table's contenders: not ours (on any number of cores), not the ceiling."""
    return [name for name in names if not name.startswith("initializers") and name != CEILING]


def _makers(key: str, tls: bool, volume: str) -> dict[str, Command]:
    if volume:
        return ON_A_DISK
    if not tls:
        return CONTENDERS if key == "A" else WITHOUT_THE_SLOWEST
    return {"initializers": ours, **({ONE_CORE: one_core} if key == "A" else {}), **WITHOUT_THE_SLOWEST}


def suite(rounds: int, out_root: Path, quick: bool, volume: str = "") -> list[Result]:
    """The loopback sets (plain HTTP, then over TLS: one server each); `volume` names the output filesystem in the
    titles when it is not the default, and measures the plain sets alone."""
    for tool in (PEERS / "s5cmd", PEERS / "aws", PEERS / "python", Path(harness.TIME)):
        if not tool.exists():
            sys.exit(f"{tool} is missing: run `make bench-install`")
    keys = os.environ.get("BENCH_SETS", DEFAULT_SETS)
    results = []
    for tls in (False, True):
        chosen = [key.upper() for key in keys if key.islower() == tls and not (tls and volume)]
        if not chosen:
            continue
        with SeaweedFS.start(tls=tls) as server:
            for key in chosen:
                dataset = QUICK_SETS[key] if quick else SETS[key]
                over = " over TLS" if tls else ""
                print(f"seeding {dataset.name}{over} ...", flush=True)
                seed(server, dataset, out_root)
                contenders = {name: partial(make, server, dataset) for name, make in _makers(key, tls, volume).items()}
                samples = measure(
                    dataset.name[:1] + over, contenders, dataset.total, out_root, rounds, "initializers",
                    discarding={CEILING}, cold=bool(volume),
                )  # fmt: skip
                title = f"S3 {dataset.name}{over}" + (f" ({volume})" if volume else "")
                results.append(Result(title, dataset.total, samples, peer="s5cmd"))
    return results


if __name__ == "__main__":
    run_alone(suite)
