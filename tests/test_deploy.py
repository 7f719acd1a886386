"""The Kubernetes examples users copy (deploy/): valid against the Kubernetes schemas, offline, strictly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from devkit import images
from initializers.contract import Config

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
VALIDATE = str(Path(sys.executable).parent / "kubernetes-validate")


def validate(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([VALIDATE, "--strict", "--quiet", *map(str, paths)], capture_output=True, text=True)


def test_core_manifests_are_valid():
    result = validate(DEPLOY / "job.yaml", DEPLOY / "secret.yaml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_validator_does_reject_a_wrong_field(tmp_path: Path):
    broken = (DEPLOY / "job.yaml").read_text().replace("initContainers:", "initContainer:")
    (tmp_path / "job.yaml").write_text(broken)
    assert validate(tmp_path / "job.yaml").returncode != 0


def test_the_runtime_fragments_pod_specs_are_valid(tmp_path: Path):
    runtime = yaml.safe_load((DEPLOY / "cluster-training-runtime.yaml").read_text())
    jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    assert {job["name"] for job in jobs} == {"dataset-initializer", "model-initializer"}
    for job in jobs:
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": job["name"]},
               "spec": job["template"]["spec"]["template"]["spec"]}  # fmt: skip
        (tmp_path / f"{job['name']}.yaml").write_text(yaml.safe_dump(pod))
        result = validate(tmp_path / f"{job['name']}.yaml")
        assert result.returncode == 0, result.stdout + result.stderr
        (container,) = pod["spec"]["containers"]
        assert container["name"] == job["name"] and container["image"] == images.tag(job["name"].split("-")[0])
        assert container["volumeMounts"] == [{"name": "initializer", "mountPath": "/workspace"}]


@pytest.mark.parametrize("name", ["dataset-initializer", "model-initializer"])
def test_the_jobs_init_containers_speak_the_contract(name: str):
    job = yaml.safe_load((DEPLOY / "job.yaml").read_text())
    (container,) = [c for c in job["spec"]["template"]["spec"]["initContainers"] if c["name"] == name]
    known = {setting.env for _, setting in Config.settings()}
    assert {variable["name"] for variable in container["env"]} <= known
    assert container["image"] == images.tag(name.split("-")[0])
    secrets = {s.env for _, s in Config.settings() if s.secret}
    for variable in container["env"]:
        if variable["name"] in secrets:
            assert "valueFrom" in variable, f"{variable['name']} must come from a Secret"
