"""The Kubernetes examples users copy (deploy/): valid against the Kubernetes schemas, offline, strictly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography.hazmat.primitives import serialization

from devkit import images
from initializers.cache_server import DEFAULT_PORT, ServerConfig
from initializers.config.contract import Config
from initializers.config.settings import settings_of
from initializers.config.signing import SigningOptions
from initializers.sources import DATASET, MODEL
from initializers.sources.iceberg.options import CacheOptions
from initializers.sources.iceberg.source import data_nodes, node_shard

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
VALIDATE = str(Path(sys.executable).parent / "kubernetes-validate")


def validate(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([VALIDATE, "--strict", "--quiet", *map(str, paths)], capture_output=True, text=True)


def test_core_manifests_are_valid():
    manifests = ("job.yaml", "secret.yaml", "shared-initializer.yaml", "indexed-job.yaml", "cache-shards.yaml",
                 "cache-flight.yaml", "signed-model.yaml")  # fmt: skip
    result = validate(*(DEPLOY / name for name in manifests))
    assert result.returncode == 0, result.stdout + result.stderr


_RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                       "projected", "secret"}  # fmt: skip


def restricted_violations(pod: dict[str, Any]) -> list[str]:
    """What breaks the Pod Security Standards' "restricted" profile (baseline included), field by field, plus our
    own rules: a read-only root filesystem and a memory limit in every container."""
    found = []
    context = pod.get("securityContext", {})
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(field):
            found.append(field)
    for volume in pod.get("volumes", []):
        if not set(volume) - {"name"} <= _RESTRICTED_VOLUMES:
            found.append(f"volume {volume['name']}: {sorted(set(volume) - {'name'})}")
    for container in [*pod.get("initContainers", []), *pod["containers"]]:
        name, own = container["name"], container.get("securityContext", {})
        merged = {**context, **own}
        if own.get("privileged"):
            found.append(f"{name}: privileged")
        if own.get("allowPrivilegeEscalation") is not False:
            found.append(f"{name}: allowPrivilegeEscalation must be false")
        capabilities = own.get("capabilities", {})
        if "ALL" not in capabilities.get("drop", []) or set(capabilities.get("add", [])) - {"NET_BIND_SERVICE"}:
            found.append(f"{name}: capabilities must drop ALL and add at most NET_BIND_SERVICE")
        if merged.get("runAsNonRoot") is not True or merged.get("runAsUser") == 0:
            found.append(f"{name}: must run as non-root")
        if merged.get("seccompProfile", {}).get("type") not in ("RuntimeDefault", "Localhost"):
            found.append(f"{name}: seccompProfile must be RuntimeDefault or Localhost")
        if any(port.get("hostPort") for port in container.get("ports", [])):
            found.append(f"{name}: hostPort")
        if own.get("readOnlyRootFilesystem") is not True:
            found.append(f"{name}: readOnlyRootFilesystem must be true")
        if "memory" not in container.get("resources", {}).get("limits", {}):
            found.append(f"{name}: no memory limit")
    return found


def _pod_specs() -> list[tuple[str, dict[str, Any]]]:
    specs = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document["kind"] == "Job":
                specs.append((f"{path.name} {document['metadata']['name']}", document["spec"]["template"]["spec"]))
            elif document["kind"] == "ClusterTrainingRuntime":
                for job in document["spec"]["template"]["spec"]["replicatedJobs"]:
                    specs.append((f"{path.name} {job['name']}", job["template"]["spec"]["template"]["spec"]))
    return specs


def test_every_pod_in_deploy_meets_the_restricted_pod_security_profile():
    specs = _pod_specs()
    # job.yaml, the two HPO trials, the runtime's two initializer jobs, the indexed job, the cache-sharded trainer,
    # the trainer reading the cache over Flight from its sidecar, the signed model's, those reading Cloud Storage and
    # Azure Blob Storage
    assert len(specs) == 11
    assert {name: restricted_violations(pod) for name, pod in specs} == {name: [] for name, _ in specs}


def test_the_restricted_check_does_find_violations():
    (_, pod), *_ = _pod_specs()
    loosened = yaml.safe_load(yaml.safe_dump(pod))
    loosened["securityContext"].pop("seccompProfile")
    loosened["containers"][0]["securityContext"] = {"capabilities": {"add": ["SYS_ADMIN"]}}
    loosened["volumes"].append({"name": "host", "hostPath": {"path": "/"}})
    found = restricted_violations(loosened)
    assert any("allowPrivilegeEscalation" in f for f in found) and any("capabilities" in f for f in found)
    assert any("seccompProfile" in f for f in found) and any("hostPath" in f for f in found)


def test_the_shared_initializer_trials_share_one_volume_and_one_initializer():
    documents = list(yaml.safe_load_all((DEPLOY / "shared-initializer.yaml").read_text()))
    claim = documents[0]
    assert claim["kind"] == "PersistentVolumeClaim" and claim["spec"]["accessModes"] == ["ReadWriteMany"]
    jobs = documents[1:]
    assert len(jobs) == 2
    specs = [job["spec"]["template"]["spec"] for job in jobs]
    assert all(spec["volumes"][0]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"] for spec in specs)
    assert specs[0]["initContainers"] == specs[1]["initContainers"]


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
    known = {setting.env for _, setting in Config.settings(DATASET)}
    assert {variable["name"] for variable in container["env"]} <= known
    assert container["image"] == images.tag(name.split("-")[0])
    secrets = {s.env for _, s in Config.settings(DATASET) if s.secret}
    for variable in container["env"]:
        if variable["name"] in secrets:
            assert "valueFrom" in variable, f"{variable['name']} must come from a Secret"


def test_the_indexed_job_splits_its_plan_over_its_completions():
    _, job = yaml.safe_load_all((DEPLOY / "indexed-job.yaml").read_text())
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["parallelism"] == job["spec"]["completions"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    env = {variable["name"]: variable.get("value") for variable in container["env"]}
    assert env["SHARD_COUNT"] == str(job["spec"]["completions"]) and "SHARD_INDEX" not in env  # the job's index
    config = Config.from_env({**{k: v for k, v in env.items() if v}, "JOB_COMPLETION_INDEX": "3"}, kind=DATASET)
    assert config.shard() == (3, 4)


def test_the_cache_sharded_trainer_materialises_its_own_shard():
    job = yaml.safe_load((DEPLOY / "cache-shards.yaml").read_text())
    (init,) = job["spec"]["template"]["spec"]["initContainers"]
    env = {variable["name"]: variable for variable in init["env"]}
    assert env["NUM_DATA_NODES"]["value"] == str(job["spec"]["completions"])
    assert "job-completion-index" in env["SHARD_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"]
    config = Config.from_env({"NUM_DATA_NODES": env["NUM_DATA_NODES"]["value"], "SHARD_INDEX": "2"}, kind=DATASET)
    assert node_shard(config, data_nodes(config.options(CacheOptions))) == 2


def test_the_flight_trainer_reads_from_its_own_sidecar_under_kubeflows_service_name():
    job = yaml.safe_load((DEPLOY / "cache-flight.yaml").read_text())
    pod = job["spec"]["template"]["spec"]
    initializer, server = pod["initContainers"]
    assert initializer["image"] == server["image"] == images.tag("dataset")
    assert "restartPolicy" not in initializer and server["restartPolicy"] == "Always"  # a native sidecar, after it
    assert server["command"] == ["cache-server"]
    env = {variable["name"]: variable["value"] for variable in server["env"]}
    assert set(env) <= {s.env for _, s in settings_of(ServerConfig)}
    config = ServerConfig.from_env(env)
    initialized = {v["name"]: v["value"] for v in initializer["env"]}["OUTPUT_PATH"]
    assert config.output_path == initialized and config.port == DEFAULT_PORT
    assert (
        server["ports"][0]["containerPort"] == config.port and server["startupProbe"]["tcpSocket"]["port"] == "flight"
    )
    assert server["volumeMounts"][0]["readOnly"] is True
    (trainer,) = pod["containers"]
    job_name = {variable["name"]: variable["value"] for variable in trainer["env"]}["TRAIN_JOB_NAME"]
    (alias,) = pod["hostAliases"]
    assert alias == {"ip": config.advertised(), "hostnames": [f"{job_name}-cache-service"]}
    assert f"total = {job['spec']['completions']}" in trainer["command"][-1]


def test_the_signed_model_job_reads_its_key_from_the_mounted_config_map(tmp_path: Path):
    """SIGNATURE_PUBLIC_KEY names the file the ConfigMap's key is mounted as, and that file holds a key the check
    accepts: the settings, with the mount laid out here, pass the run's own checks."""
    config_map, job = yaml.safe_load_all((DEPLOY / "signed-model.yaml").read_text())
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["initContainers"]
    env = {variable["name"]: variable.get("value") for variable in container["env"]}
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "model-signer"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "model-signer"]
    assert volume["configMap"]["name"] == config_map["metadata"]["name"] and mount["readOnly"] is True
    (key_name,) = config_map["data"]
    assert env["SIGNATURE"] == "enforce" and env["SIGNATURE_PUBLIC_KEY"] == f"{mount['mountPath']}/{key_name}"
    mounted = tmp_path / key_name
    mounted.write_text(config_map["data"][key_name])
    signing = Config.from_env({"SIGNATURE": "enforce", "SIGNATURE_PUBLIC_KEY": str(mounted)}, kind=MODEL).options(
        SigningOptions
    )
    assert signing.trust() == ("key", str(mounted))
    serialization.load_pem_public_key(mounted.read_bytes())
