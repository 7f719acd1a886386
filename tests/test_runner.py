"""The local runner (the container backend's initializer step in miniature) and the container/Pod spec builders."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client import ApiClient, V1Container

from devkit.relay import Relay
from devkit.seaweed import SeaweedFS
from initializers.common.errors import ConfigError, Stopped
from initializers.kubeflow import runner, sdk, specs

BODY = os.urandom(512 * 1024)


@pytest.fixture
def slow(seaweed: SeaweedFS, s3: Any, bucket: str) -> Iterator[tuple[Relay, str]]:
    for key in ("data/a.bin", "model/model.safetensors"):
        s3.put_object(Bucket=bucket, Key=key, Body=BODY)
    with Relay(seaweed.endpoint) as relay:
        relay.bytes_per_second = 256 * 1024  # about 2 s per step
        yield relay, bucket


def both(seaweed: SeaweedFS, relay: Relay, bucket: str, data: str = "data") -> sdk.Initializer:
    keys = {"endpoint": relay.endpoint, "access_key_id": seaweed.env()["ACCESS_KEY_ID"],
            "secret_access_key": seaweed.env()["SECRET_ACCESS_KEY"], "region": "us-east-1"}  # fmt: skip
    return sdk.Initializer(
        dataset=sdk.S3DatasetInitializer(storage_uri=f"s3://{bucket}/{data}", **keys),
        model=sdk.S3ModelInitializer(storage_uri=f"s3://{bucket}/model", **keys),
    )


def test_both_steps_run_in_parallel_with_logs_per_step(seaweed: SeaweedFS, slow: tuple[Relay, str], tmp_path: Path):
    relay, bucket = slow
    lines: list[tuple[str, str]] = []
    results = runner.run(both(seaweed, relay, bucket), tmp_path, on_line=lambda step, line: lines.append((step, line)))
    assert (tmp_path / "dataset" / "a.bin").read_bytes() == BODY
    assert (tmp_path / "model" / "model.safetensors").read_bytes() == BODY
    assert {step for step, _ in lines} == {"dataset-initializer", "model-initializer"}
    # Each step takes seconds behind the slow relay: run together, each one's first line comes before the other's last.
    order = [step for step, _ in lines]
    first = {step: order.index(step) for step in set(order)}
    last = {step: len(order) - 1 - order[::-1].index(step) for step in set(order)}
    assert first["model-initializer"] < last["dataset-initializer"], "the steps ran one after the other"
    assert first["dataset-initializer"] < last["model-initializer"], "the steps ran one after the other"
    assert all(r.ok and '"event": "done"' in r.logs[-1] for r in results.values())


def test_a_step_past_the_timeout_is_stopped_and_reported(seaweed: SeaweedFS, slow: tuple[Relay, str], tmp_path: Path):
    relay, bucket = slow
    config = sdk.ContainerBackendConfig(initializer_timeout=1)
    with pytest.raises(runner.InitializerFailed) as failure:
        runner.run(both(seaweed, relay, bucket), tmp_path, config=config, on_line=lambda *_: None)
    assert {r.step for r in failure.value.failed} == {"dataset-initializer", "model-initializer"}
    assert "timed out" in str(failure.value)
    assert not (tmp_path / "model" / ".initializer" / "manifest.json").exists()


def _programs_writing_into(folder: Path) -> list[int]:
    """Processes other than this one whose environment names `folder` (the programs' OUTPUT_PATHs do)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if str(folder).encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:  # gone meanwhile, or not ours to read
                continue
    return found


def test_a_runner_stopped_by_a_signal_stops_its_children(seaweed: SeaweedFS, slow: tuple[Relay, str], tmp_path: Path):
    relay, bucket = slow
    running: list[int] = []

    def stop_once_started(_step: str, line: str) -> None:
        if '"event": "fetching"' in line and not running:
            running.extend(_programs_writing_into(tmp_path))
            os.kill(os.getpid(), signal.SIGTERM)  # as a pod deletion or `kill` would stop the runner

    with pytest.raises(Stopped, match="stopped by SIGTERM"):
        runner.run(both(seaweed, relay, bucket), tmp_path, on_line=stop_once_started)
    assert len(running) == 2, "both programs were running when the signal came"
    assert _programs_writing_into(tmp_path) == []
    assert not (tmp_path / "dataset" / ".initializer" / "manifest.json").exists()


def test_each_step_as_three_shares_splitting_its_plan(seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path):
    bodies = {f"data/{i:02d}.bin": os.urandom(1024 * (i + 1)) for i in range(12)}
    for key, body in bodies.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    s3.put_object(Bucket=bucket, Key="model/model.safetensors", Body=BODY)
    with Relay(seaweed.endpoint) as relay:
        results = runner.run(both(seaweed, relay, bucket), tmp_path, shards=3, on_line=lambda *_: None)
    assert sorted(results) == [f"{kind}-initializer-{i}" for kind in ("dataset", "model") for i in range(3)]
    assert {f"data/{p.name}": p.read_bytes() for p in (tmp_path / "dataset").glob("*.bin")} == bodies
    assert (tmp_path / "model" / "model.safetensors").read_bytes() == BODY
    for kind in ("dataset", "model"):
        completed = [
            name for name, r in results.items() if name.startswith(kind) and '"set complete"' in "".join(r.logs)
        ]
        assert len(completed) == 1, "one share of each step writes its manifest"
        assert (tmp_path / kind / ".initializer" / "manifest.json").exists()


def test_shares_are_refused_for_a_cache_step(tmp_path: Path):
    cache = sdk.DataCacheInitializer(storage_uri="cache://shop/reviews", metadata_loc="s3://b/m.metadata.json",
                                     num_data_nodes=2)  # fmt: skip
    with pytest.raises(ConfigError, match="one shard per node"):
        runner.run(sdk.Initializer(dataset=cache), tmp_path, shards=2, on_line=lambda *_: None)


def test_one_failing_step_is_named_with_its_exit_code_and_last_lines(
    seaweed: SeaweedFS, slow: tuple[Relay, str], tmp_path: Path
):
    relay, bucket = slow
    relay.bytes_per_second = None
    with pytest.raises(runner.InitializerFailed) as failure:
        runner.run(both(seaweed, relay, bucket, data="no-such-prefix"), tmp_path, on_line=lambda *_: None)
    (failed,) = failure.value.failed
    assert failed.step == "dataset-initializer" and failed.exit_code == 1
    assert "dataset-initializer exited with 1" in str(failure.value) and "has no files" in str(failure.value)
    assert (tmp_path / "model" / "model.safetensors").read_bytes() == BODY


@pytest.mark.slow  # runs both programs as processes, through the runner
def test_both_failing_steps_are_reported(tmp_path: Path):
    initializer = sdk.Initializer(
        dataset=sdk.S3DatasetInitializer(storage_uri="s3://b/x", endpoint="http://127.0.0.1:9"),
        model=sdk.HuggingFaceModelInitializer(storage_uri="hf://org/none"),
    )
    with pytest.raises(runner.InitializerFailed) as failure:
        runner.run(initializer, tmp_path, extra_env={"HF_ENDPOINT": "http://127.0.0.1:9", "AWS_ACCESS_KEY_ID": "a",
                   "AWS_SECRET_ACCESS_KEY": "b"}, on_line=lambda *_: None)  # fmt: skip
    assert {r.step for r in failure.value.failed} == {"dataset-initializer", "model-initializer"}


def test_docker_run_keeps_secrets_out_of_the_argument_list(tmp_path: Path):
    model = sdk.S3ModelInitializer(storage_uri="s3://b/m", access_key_id="id", secret_access_key="s3cr3t-value")
    argv, env = specs.docker_run_args(model, tmp_path, "localhost/model-initializer:dev", runtime="podman")
    assert argv[:3] == ["podman", "run", "--rm"] and argv[-1] == "localhost/model-initializer:dev"
    assert f"{tmp_path}:/workspace" in argv and "-e" in argv and "SECRET_ACCESS_KEY" in argv
    assert not any("s3cr3t-value" in word for word in argv)
    assert env["SECRET_ACCESS_KEY"] == "s3cr3t-value" and env["OUTPUT_PATH"] == "/workspace/model"


def test_init_container_spec_takes_secrets_from_a_secret():
    dataset = sdk.HuggingFaceDatasetInitializer(storage_uri="hf://org/ds", access_token="hf_x")
    spec = specs.init_container(dataset, "ghcr.io/x/dataset-initializer:1", secret="hub-token")
    assert spec["name"] == "dataset-initializer"
    assert {
        "name": "ACCESS_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": "hub-token", "key": "ACCESS_TOKEN"}},
    } in spec["env"]
    assert {"name": "OUTPUT_PATH", "value": "/workspace/dataset"} in spec["env"]
    assert spec["volumeMounts"] == [{"name": "initializer", "mountPath": "/workspace"}]
    # The Kubernetes client's own models accept it (deserialize reads a response's `data`).
    container = ApiClient().deserialize(SimpleNamespace(data=json.dumps(spec)), V1Container)
    assert container.env[0].name == "STORAGE_URI" and container.volume_mounts[0].mount_path == "/workspace"


def test_a_trainjobs_storage_uri_wins_as_kubeflow_resolves_it():
    """kubeflow/trainer#3958: storageUri replaces the runtime's STORAGE_URI where it stands and comes before the
    TrainJob's env (whose `$(STORAGE_URI)` then expands); STORAGE_URI in env is refused beside storageUri, used
    alone."""
    template = [{"name": "STORAGE_URI", "value": "hf://runtime/default"}, {"name": "LOG_LEVEL", "value": "info"}]
    env = [{"name": "REVISION", "value": "$(STORAGE_URI)"}, {"name": "LOG_LEVEL", "value": "debug"}]
    assert specs.trainjob_env(template, "hf://org/ds", env) == [
        {"name": "STORAGE_URI", "value": "hf://org/ds"}, {"name": "LOG_LEVEL", "value": "debug"},
        {"name": "REVISION", "value": "$(STORAGE_URI)"},
    ]  # fmt: skip
    assert [v["name"] for v in specs.trainjob_env([], "hf://org/ds", env)] == ["STORAGE_URI", "REVISION", "LOG_LEVEL"]
    with pytest.raises(ConfigError, match=r"^STORAGE_URI: given both as storageUri and in env"):
        specs.trainjob_env([], "hf://org/ds", [{"name": "STORAGE_URI", "value": "hf://other/repo"}])
    alone = specs.trainjob_env(template, None, [{"name": "STORAGE_URI", "value": "s3://b/p"}])
    assert alone[0] == {"name": "STORAGE_URI", "value": "s3://b/p"} and len(alone) == 2


def test_the_runner_runs_a_cache_initializer_with_credentials_as_a_secret_would_give_them(
    seaweed: SeaweedFS, bucket: str, tmp_path: Path
):
    from devkit.iceberg import simple_table, sql_catalog

    table = simple_table(sql_catalog(tmp_path, f"s3://{bucket}/warehouse", seaweed), "reviews", 3, 400)
    cache = sdk.DataCacheInitializer("cache://shop/reviews", metadata_loc=table.metadata_location, num_data_nodes=2)
    assert sdk.program_env(cache) == {"STORAGE_URI": "cache://shop/reviews", "OUTPUT_PATH": "/workspace/dataset",
                                      "METADATA_LOC": table.metadata_location, "CLUSTER_SIZE": "3"}  # fmt: skip
    results = runner.run(sdk.Initializer(dataset=cache), tmp_path / "ws", extra_env=seaweed.env())
    assert results["dataset-initializer"].ok
    manifest = json.loads((tmp_path / "ws" / "dataset" / ".initializer" / "manifest.json").read_text())
    assert [shard["rows"] for shard in manifest["source"]["shards"]] == [600, 600]
