"""Drop-in compatibility: the env and command the real Kubeflow SDK produces, run as its container backend runs them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kubeflow.trainer.backends.container import utils as kf_container
from kubeflow.trainer.types import types as kf

from devkit.hubserver import HubServer
from devkit.programs import clean_env
from devkit.seaweed import SeaweedFS

IMAGES_DIR = Path(__file__).resolve().parents[1] / "images"  # images/<kind>-initializer/ holds what its /app holds
IMAGES = SimpleNamespace(dataset_initializer_image="dataset:dev", model_initializer_image="model:dev")


def run_as_container_backend(container: Any, workspace: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """`command` from `working_dir=/app` with exactly the SDK's env; only the /workspace volume is a host folder."""
    env = dict(container.env)
    assert env["OUTPUT_PATH"].startswith("/workspace/")
    env["OUTPUT_PATH"] = str(workspace / env["OUTPUT_PATH"].removeprefix("/workspace/"))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # `python` is the image's
    app = IMAGES_DIR / f"{container.command[-1].rsplit('.', 1)[-1]}-initializer"  # python -m pkg.initializers.<kind>
    return subprocess.run(container.command, cwd=app, env=clean_env({**env, **extra}), capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and ".initializer" not in p.parts}  # fmt: skip


def test_s3_dataset_from_the_kubeflow_sdks_env_and_command(seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path):
    s3.put_object(Bucket=bucket, Key="corpus/train.jsonl", Body=b'{"a": 1}\n')
    s3.put_object(Bucket=bucket, Key="corpus/skip.tmp", Body=b"x")
    dataset = kf.S3DatasetInitializer(
        storage_uri=f"s3://{bucket}/corpus", endpoint=seaweed.endpoint, access_key_id=seaweed.env()["ACCESS_KEY_ID"],
        secret_access_key=seaweed.env()["SECRET_ACCESS_KEY"], region="us-east-1", ignore_patterns=["*.tmp"],
    )  # fmt: skip
    container = kf_container.get_dataset_initializer(dataset, IMAGES)
    assert container.command == ["bash", "-c", "python -m pkg.initializers.dataset"]
    done = run_as_container_backend(container, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert files(tmp_path / "dataset") == {"train.jsonl": b'{"a": 1}\n'}


def test_hf_model_from_the_kubeflow_sdks_env_and_command(tmp_path: Path):
    with HubServer() as hub:
        hub.add_repo("org/tiny", {"config.json": b"{}", "pytorch_model.bin": b"B" * 64, "flax_model.msgpack": b"F"})
        model = kf.HuggingFaceModelInitializer(storage_uri="hf://org/tiny")  # default ignore list, sent explicitly
        container = kf_container.get_model_initializer(model, IMAGES)
        done = run_as_container_backend(container, tmp_path, HF_ENDPOINT=hub.endpoint)
    assert done.returncode == 0, done.stdout + done.stderr
    # The SDK always sends the default list; with no safetensors the .bin weights are still kept.
    assert files(tmp_path / "model") == {"config.json": b"{}", "pytorch_model.bin": b"B" * 64}


def test_an_exec_form_entrypoint_tolerates_the_sdks_command_as_arguments(
    seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path
):
    s3.put_object(Bucket=bucket, Key="a.txt", Body=b"a")
    env = {**seaweed.env(), "STORAGE_URI": f"s3://{bucket}", "OUTPUT_PATH": str(tmp_path / "out")}
    program = str(Path(sys.executable).parent / "dataset-initializer")
    done = subprocess.run([program, "bash", "-c", "python -m pkg.initializers.dataset"], env=clean_env(env),
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert files(tmp_path / "out") == {"a.txt": b"a"}


def test_cache_dataset_from_the_kubeflow_sdks_trainjob_initializer(seaweed: SeaweedFS, bucket: str, tmp_path: Path):
    """The Kubernetes backend's TrainJob initializer, as the controller hands it to the dataset-initializer container:
    STORAGE_URI plus the SDK's env, the runtime's TRAIN_JOB_NAME and CACHE_IMAGE, credentials from a Secret."""
    from kubeflow.trainer.backends.kubernetes import utils as kf_kubernetes
    from pyiceberg.table import StaticTable

    from devkit.iceberg import evolving_table, s3_properties, sql_catalog

    table = evolving_table(sql_catalog(tmp_path, f"s3://{bucket}/warehouse", seaweed), "reviews")
    dataset = kf.DataCacheInitializer(storage_uri="cache://shop/reviews", metadata_loc=table.metadata_location,
                                      num_data_nodes=3, head_cpu="1", worker_mem="2Gi")  # fmt: skip
    trainjob_initializer = kf_kubernetes.get_dataset_initializer(dataset)
    env = {"STORAGE_URI": trainjob_initializer.storage_uri, **{e.name: e.value for e in trainjob_initializer.env},
           "TRAIN_JOB_NAME": "job-7", "CACHE_IMAGE": "ghcr.io/kubeflow/trainer/data-cache:latest",
           **seaweed.env(), "OUTPUT_PATH": str(tmp_path / "workspace" / "dataset")}  # fmt: skip
    assert env["CLUSTER_SIZE"] == "4"
    program = str(Path(sys.executable).parent / "dataset-initializer")
    done = subprocess.run([program], env=clean_env(env), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    shards = sorted((tmp_path / "workspace" / "dataset").glob("shard-*"))
    assert [s.name for s in shards] == ["shard-0", "shard-1", "shard-2"]
    import pyarrow.parquet as pq

    rows = sum(pq.read_table(s).num_rows for s in shards)
    assert rows == StaticTable.from_metadata(table.metadata_location, s3_properties(seaweed)).scan().to_arrow().num_rows
