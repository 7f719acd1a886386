"""`make demo`: local S3, Hub, Cloud Storage and Azure Blob servers, a real model and a small dataset, fetched the
way a user would script it.

The part between the markers is what a user copies: build the initializers with `initializers.kubeflow.sdk` and start
them with `initializers.kubeflow.runner`, exactly as the Kubeflow SDK's container backend would run the images.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from devkit import playground
from devkit.samples import CORPUS_REPO, MINILM_REPO
from initializers.kubeflow import runner, sdk

WORKSPACE = Path("workspace")


def main() -> None:
    shutil.rmtree(WORKSPACE, ignore_errors=True)
    print("starting a local S3 server (SeaweedFS), a Hub server and Google's and Microsoft's storage emulators, "
          "seeding them ...", flush=True)  # fmt: skip
    with tempfile.TemporaryDirectory() as root, playground.running(Path(root)) as servers:
        s3, hub, gcs, azure = servers.s3, servers.hub, servers.gcs, servers.azure
        credentials = {"endpoint": s3.endpoint, "access_key_id": s3.env()["ACCESS_KEY_ID"],
                       "secret_access_key": s3.env()["SECRET_ACCESS_KEY"], "region": "us-east-1"}  # fmt: skip
        # --- what a user copies -------------------------------------------------------------------------------
        from_s3 = sdk.Initializer(
            dataset=sdk.S3DatasetInitializer(storage_uri="s3://datasets/tiny-corpus", **credentials),
            model=sdk.S3ModelInitializer(storage_uri="s3://models/all-MiniLM-L6-v2", **credentials),
        )
        from_hub = sdk.Initializer(
            dataset=sdk.HuggingFaceDatasetInitializer(storage_uri=f"hf://{CORPUS_REPO}"),
            model=sdk.HuggingFaceModelInitializer(storage_uri=f"hf://{MINILM_REPO}"),
        )
        # Cloud Storage's credentials come from the pod (Workload Identity); here the emulator takes none.
        from_gcs = sdk.Initializer(
            dataset=sdk.GcsDatasetInitializer(storage_uri="gs://datasets/tiny-corpus", emulator_host=gcs.endpoint),
            model=sdk.GcsModelInitializer(storage_uri="gs://models/all-MiniLM-L6-v2", emulator_host=gcs.endpoint),
        )
        # Azure's: a connection string here (Azurite's); on AKS, workload identity and no secret at all.
        from_azure = sdk.Initializer(
            dataset=sdk.AzureDatasetInitializer(storage_uri="az://datasets/tiny-corpus",
                                                connection_string=azure.connection_string),
            model=sdk.AzureModelInitializer(storage_uri="az://models/all-MiniLM-L6-v2",
                                            connection_string=azure.connection_string),
        )  # fmt: skip
        # Kubeflow's cache initializer has no credential fields: on Kubernetes they come from a Secret.
        from_table = sdk.Initializer(
            dataset=sdk.DataCacheInitializer(
                storage_uri="cache://shop/reviews", metadata_loc=servers.metadata_loc, num_data_nodes=2
            ),
        )
        s3_secret = {name.upper(): value for name, value in credentials.items()}
        started = time.monotonic()
        quiet = {"on_line": lambda _step, _line: None}  # the steps' own logs; print_tagged (the default) shows them
        results = {
            "s3": runner.run(from_s3, WORKSPACE / "s3", **quiet),
            "hf": runner.run(from_hub, WORKSPACE / "hf", extra_env={"HF_ENDPOINT": hub.endpoint}, **quiet),
            "gs": runner.run(from_gcs, WORKSPACE / "gs", **quiet),
            "az": runner.run(from_azure, WORKSPACE / "az", **quiet),
            "cache": runner.run(from_table, WORKSPACE / "cache", extra_env=s3_secret, **quiet),
        }
        # -------------------------------------------------------------------------------------------------------
        wall = time.monotonic() - started
    print(f"\n{'step':<20} {'source':<45} {'files':>6} {'MB':>7} {'seconds':>8} {'MB/s':>7}")
    for scheme, steps in results.items():
        initializer = {"s3": from_s3, "hf": from_hub, "gs": from_gcs, "az": from_azure, "cache": from_table}[scheme]
        for step in filter(None, (initializer.dataset, initializer.model)):
            done = json.loads(steps[step.kind.program].logs[-1])
            print(f"{step.kind.program:<20} {step.storage_uri:<45} {done['files']:>6} {done['bytes'] / 1e6:>7.1f} "
                  f"{done['seconds']:>8.2f} {done['mb_s']:>7.1f}")  # fmt: skip
    table = json.loads((WORKSPACE / "cache" / "dataset" / ".initializer" / "manifest.json").read_text())["source"]
    shards = ", ".join(f"{shard['path']}: {shard['rows']} rows" for shard in table["shards"])
    print(f"\nthe Iceberg table (snapshot {table['snapshot_id']}, {table['rows']} rows) as shards: {shards}")
    print(f"all five runs, each pair in parallel: {wall:.2f} s wall; files are in ./{WORKSPACE}/{{s3,hf,gs,az}}/"
          f"{{dataset,model}} and ./{WORKSPACE}/cache/dataset, each with .initializer/manifest.json")  # fmt: skip


if __name__ == "__main__":
    try:
        main()
    except runner.InitializerFailed as failure:
        sys.exit(f"demo failed:\n{failure}")
