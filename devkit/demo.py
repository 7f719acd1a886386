"""`make demo`: local S3 and Hub servers, a real model and a small dataset, every initializer in parallel."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

from devkit.hubserver import HubServer
from devkit.programs import ProgramResult, start_program
from devkit.samples import CORPUS_REPO, MINILM_REPO, minilm_files, tiny_corpus
from devkit.seaweed import SeaweedFS

WORKSPACE = Path("workspace")


def seed_s3(server: SeaweedFS) -> None:
    s3 = server.client()
    s3.create_bucket(Bucket="models")
    s3.create_bucket(Bucket="datasets")
    for path, source in minilm_files().items():
        s3.upload_file(str(source), "models", f"all-MiniLM-L6-v2/{path}")
    for path, body in tiny_corpus().items():
        s3.put_object(Bucket="datasets", Key=f"tiny-corpus/{path}", Body=body)


def main() -> None:
    shutil.rmtree(WORKSPACE, ignore_errors=True)
    print("starting a local S3 server (SeaweedFS) and a local Hub server, and seeding them ...", flush=True)
    with SeaweedFS.start() as s3, HubServer() as hub:
        seed_s3(s3)
        hub.add_repo(MINILM_REPO, minilm_files())
        hub.add_repo(CORPUS_REPO, tiny_corpus(), repo_type="dataset")
        steps = {
            ("s3", "dataset"): ("s3://datasets/tiny-corpus", s3.env()),
            ("s3", "model"): ("s3://models/all-MiniLM-L6-v2", s3.env()),
            ("hf", "dataset"): (f"hf://{CORPUS_REPO}", {"HF_ENDPOINT": hub.endpoint}),
            ("hf", "model"): (f"hf://{MINILM_REPO}", {"HF_ENDPOINT": hub.endpoint}),
        }
        started = time.monotonic()
        processes = {
            (scheme, kind): start_program(
                kind, {**env, "STORAGE_URI": uri, "OUTPUT_PATH": str(WORKSPACE / scheme / kind)}
            )
            for (scheme, kind), (uri, env) in steps.items()
        }
        results = {}
        for step, process in processes.items():
            stdout, stderr = process.communicate(timeout=300)
            results[step] = ProgramResult(process.returncode, stdout, stderr)
        wall = time.monotonic() - started
    print(f"\n{'step':<20} {'source':<45} {'exit':>4} {'files':>6} {'MB':>7} {'seconds':>8} {'MB/s':>7}")
    for (scheme, kind), result in results.items():
        name, uri, last = f"{kind}-initializer", steps[(scheme, kind)][0], result.last
        if result.code != 0:
            print(f"{name:<20} {uri:<45} {result.code:>4}  {last.get('error', result.stderr[-500:])}")
            continue
        print(f"{name:<20} {uri:<45} {result.code:>4} {last['files']:>6} {last['bytes'] / 1e6:>7.1f} "
              f"{last['seconds']:>8.2f} {last['mb_s']:>7.1f}")  # fmt: skip
    print(f"\nall four in parallel: {wall:.2f} s wall; files are in ./{WORKSPACE}/{{s3,hf}}/{{dataset,model}}, "
          "each with its manifest in .initializer/manifest.json")  # fmt: skip
    if any(result.code != 0 for result in results.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
