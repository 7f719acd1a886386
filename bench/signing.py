"""What SIGNATURE=enforce costs: a signed 1 GiB model (4 x 256 MiB weights, configs, `model.sig`) fetched by the model
program from SeaweedFS and from our Hub server on loopback with SIGNATURE=off and =enforce, alternating, run by run.

Two uploads of the same files: multipart (as `aws s3 cp` uploads large files: the ETag is no MD5, so the fetch
checks sizes and If-Match only) and single-part (the ETag is the MD5, which the fetch verifies). S3 answers to ranged
GETs carry no SHA-256, so under enforce every weight file is hashed once more, from the page cache, with SHA-256.
The Hub vouches for its LFS files' SHA-256, which the fetch verifies: there enforce reads no weight file again.

Run with `python -m bench.signing` (BENCH_ROUNDS, BENCH_OUT as for the other suites).
"""

from __future__ import annotations

import os
import statistics
import sys
from functools import partial
from pathlib import Path

from bench.harness import Contender, Result, Sample, measure, run_alone, size_of
from devkit.hubserver import HubServer
from devkit.seaweed import SeaweedFS
from devkit.signing import SIGNATURE, key_pair, sign

MiB = 1 << 20
WEIGHTS = [(f"model-{i:05d}-of-00004.safetensors", 256 * MiB) for i in range(4)]
SMALL = {"config.json": b'{"model_type": "llama"}', "tokenizer.json": b'{"version": "1.0"}'}
OFF, ENFORCE = "SIGNATURE=off", "SIGNATURE=enforce"
REPO = "bench/signed"


def _model(folder: Path) -> None:
    """The publisher's folder: random weights and small files, signed with a new key in `folder / keys`."""
    for name, size in WEIGHTS:
        path = folder / name
        if not path.exists() or path.stat().st_size != size:
            with open(path, "wb") as handle:
                for _ in range(size // MiB):
                    handle.write(os.urandom(MiB))
    for name, content in SMALL.items():
        (folder / name).write_bytes(content)


def _seed(server: SeaweedFS, bucket: str, model: Path, multipart: bool) -> None:
    s3 = server.client()
    s3.create_bucket(Bucket=bucket)
    for path in sorted(p for p in model.iterdir() if p.is_file()):
        if multipart:
            s3.upload_file(str(path), bucket, path.name)
        else:
            with open(path, "rb") as body:
                s3.put_object(Bucket=bucket, Key=path.name, Body=body)


def _from_s3(server: SeaweedFS, bucket: str, trust: dict[str, str], out: Path) -> tuple[list[str], dict[str, str]]:
    env = {**server.env(), "STORAGE_URI": f"s3://{bucket}", "OUTPUT_PATH": str(out), **trust}
    return [str(Path(sys.executable).parent / "model-initializer")], env


def _from_hub(hub: HubServer, trust: dict[str, str], out: Path) -> tuple[list[str], dict[str, str]]:
    env = {"STORAGE_URI": f"hf://{REPO}", "OUTPUT_PATH": str(out), "HF_ENDPOINT": hub.endpoint, **trust}
    return [str(Path(sys.executable).parent / "model-initializer")], env


def _model_bytes(out: Path) -> int:
    """The model's bytes in `out`, without the signature (which SIGNATURE=off, selecting by default, leaves out)."""
    return size_of(out) - ((out / SIGNATURE).stat().st_size if (out / SIGNATURE).exists() else 0)


def _summary(samples: dict[str, list[Sample]]) -> str:
    """Medians side by side, and what enforce adds."""
    off, enforce = samples[OFF], samples[ENFORCE]
    wall = [statistics.median(s.seconds for s in runs) for runs in (off, enforce)]
    cpu = [statistics.median(s.cpu for s in runs) for runs in (off, enforce)]
    return (
        f"Medians of {len(off)} runs each: wall {wall[0]:.2f} s off, {wall[1]:.2f} s enforce "
        f"({(wall[1] / wall[0] - 1) * 100:+.0f}%); CPU (user+sys) {cpu[0]:.2f} s off, {cpu[1]:.2f} s enforce "
        f"({cpu[1] - cpu[0]:+.2f} s, {(cpu[1] / cpu[0] - 1) * 100:+.0f}%). CPU per run, off: "
        f"{', '.join(f'{s.cpu:.2f}' for s in off)}; enforce: {', '.join(f'{s.cpu:.2f}' for s in enforce)}.\n"
    )


def suite(rounds: int, out_root: Path, quick: bool) -> list[Result]:
    publisher = out_root / "publisher"
    publisher.mkdir(parents=True, exist_ok=True)
    _model(publisher)
    keys = key_pair(out_root / "keys")
    sign(publisher, keys)
    trust = {"SIGNATURE": "enforce", "SIGNATURE_PUBLIC_KEY": str(keys.public)}
    total = sum(p.stat().st_size for p in publisher.iterdir() if p.is_file() and p.name != SIGNATURE)
    runs = out_root / "runs"
    runs.mkdir(exist_ok=True)
    results = []

    def compare(title: str, contenders: dict[str, Contender]) -> None:
        samples = measure(title, contenders, total, runs, rounds, ENFORCE, found=_model_bytes)
        print(_summary(samples), flush=True)
        results.append(Result(f"Signed model, {title}", total, samples, peer=OFF))

    with SeaweedFS.start() as server:
        for multipart in (True, False):
            bucket = "signed-multipart" if multipart else "signed-single-part"
            print(f"seeding {bucket} ...", flush=True)
            _seed(server, bucket, publisher, multipart)
            title = f"S3 {'multipart' if multipart else 'single-part'} upload"
            compare(
                title, {OFF: partial(_from_s3, server, bucket, {}), ENFORCE: partial(_from_s3, server, bucket, trust)}
            )
    with HubServer() as hub:
        hub.add_repo(REPO, {p.name: p for p in publisher.iterdir() if p.is_file()})
        compare("Hub (LFS weights)", {OFF: partial(_from_hub, hub, {}), ENFORCE: partial(_from_hub, hub, trust)})
    return results


if __name__ == "__main__":
    run_alone(suite)
