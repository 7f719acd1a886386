"""Every Pod template of deploy/ played as pods under podman (`make deploy-check`), with the images `make images`
builds, against SeaweedFS and the Hub server on loopback: the init containers fetch, a trainer stand-in reads every
file (a sidecar's Flight stream, for cache-flight.yaml) before the manifest's own trainer command runs, and each
pod's exit, its containers' exit codes and their termination messages are checked.

What a test changes in a manifest (devkit/pods.py does it, as the piece of Kubernetes it stands for would): a Job
becomes its pods; `docker.io/library/python:3.11-slim`, out of reach here, becomes the dataset image; the Secret's
placeholders become the test servers' keys, the ConfigMap's public key the test publisher's; endpoints point at the
loopback servers (ENDPOINT where a manifest names one, HF_ENDPOINT added; cache examples get the S3 credentials a
cluster's IRSA would give, and METADATA_LOC the test table's). Everything else runs as written: commands, env
names, mounts, users, read-only roots.

Fields podman 4.3 cannot play, and how each is checked instead:
- Job `completions`, `parallelism`, `completionMode: Indexed`: `job_pods` makes the pods the Job controller
  would (annotation and JOB_COMPLETION_INDEX) and they are played together. `backoffLimit`,
  `backoffLimitPerIndex`: no controller retries; a retried index is played again by hand (indexed-job.yaml).
- `restartPolicy: Always` on an init container (a native sidecar) and its `startupProbe`: the sidecar starts with
  the main containers, which wait for its probe's port, period and threshold before their command; stopping the
  pod ends it as the kubelet ends sidecars.
- `terminationMessagePath`: a host file mounted there, as the kubelet mounts one.
- `ports` (containerPort): informational in Kubernetes, published on the host by podman (two pods' sidecars would
  collide): dropped once the startupProbe's named port is resolved.
- `emptyDir`: podman 4.3 plays it as the named volume of that name, shared by every pod and kept; each pod's is
  renamed to one of its own and removed after it.
- `kind: Secret`: stored as podman's secret, read through `secretKeyRef` as written.
- `kind: ConfigMap` and a `configMap` volume: podman plays them when the ConfigMap is given to `kube play
  --configmap`, as a named volume of the ConfigMap's name (each key a file) kept after the pod; renamed to one of
  the test's own and removed after it.
- `kind: PersistentVolumeClaim` (`ReadWriteMany`, `storageClassName: nfs-client`, size): a named volume the
  pods share on one host; the POSIX lock that NFS would carry across nodes is taken on a local filesystem.
- `fsGroup`: podman does not apply it; the images' /workspace (group 0, group-writable) is what the volumes start
  from, as `fsGroup: 0` would leave them.
- `resources.requests` (scheduling) and `seccompProfile: RuntimeDefault` are passed to podman, not checked here.
- `kind: ServiceAccount`, `serviceAccountName` and the workload identity label (GKE's and AKS's): no metadata server
  or token webhook gives tokens here. The initializers get STORAGE_EMULATOR_HOST (Google's emulator, which takes no
  token) or a connection string with Azurite's development key (and its account for the manifest's).
- `kind: ClusterTrainingRuntime`: its replicated jobs' pods, with the env Kubeflow's controller builds from a
  TrainJob (`specs.trainjob_env`) and the restartPolicy JobSet's webhook defaults (OnFailure).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from devkit import images
from devkit.azurite import ACCOUNT as AZURE_ACCOUNT
from devkit.azurite import Azurite, connection_string
from devkit.fake_gcs import FakeGCS
from devkit.hubserver import HubServer
from devkit.iceberg import simple_table, sql_catalog
from devkit.pods import DEPLOY, PYTHON_IMAGE, Played, Pods, job_pods, load, pod_from_host, runtime_pods
from devkit.seaweed import SeaweedFS
from devkit.signing import key_pair, signed_model
from initializers.kubeflow import sdk, specs

MODEL_REPO = "sentence-transformers/all-MiniLM-L6-v2"
HUB_TOKEN = "hf_pods_token_5150"
MODEL = {"config.json": b'{"hidden_size": 384}', "tokenizer.json": b'{"model": {}}',
         "model.safetensors": os.urandom(400 * 1024)}  # fmt: skip
SKIPPED = {"pytorch_model.bin": os.urandom(1024), "README.md": b"# card"}  # the model default leaves them
CORPUS = {f"tiny-corpus/part-{i}.jsonl": os.urandom(64 * 1024 + i) for i in range(3)}
IMAGENET = {f"imagenet/train/n{i:04d}.tar": os.urandom((i % 5 + 1) * 48 * 1024) for i in range(12)}
TABLE_ROWS = 2000
#: The manifests these tests play; a new one in deploy/ must be played here too.
PLAYED = {"job.yaml", "secret.yaml", "shared-initializer.yaml", "indexed-job.yaml", "cache-shards.yaml",
          "cache-flight.yaml", "cluster-training-runtime.yaml", "signed-model.yaml",
          "gke-workload-identity.yaml", "aks-workload-identity.yaml"}  # fmt: skip


def digests(files: dict[str, bytes], strip: str = "") -> dict[str, str]:
    return {path.removeprefix(strip): hashlib.sha256(body).hexdigest() for path, body in files.items()}


def read_under(read: dict[str, dict[str, Any]], folder: str) -> dict[str, str]:
    """What a trainer stand-in read under `folder`, without the initializer's own records."""
    return {path.removeprefix(f"{folder}/"): entry["sha256"] for path, entry in read.items()
            if path.startswith(f"{folder}/") and "/.initializer/" not in path}  # fmt: skip


def on_disk(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*")
            if p.is_file() and ".initializer" not in p.parts}  # fmt: skip


def done(container: Any) -> dict[str, Any]:
    (event,) = [e for e in container.events() if e.get("event") == "done"]
    return event


@pytest.fixture(scope="module")
def hub() -> Iterator[HubServer]:
    """The model repo the examples name, private: only the Secret's token reads it."""
    with HubServer() as server:
        server.add_repo(MODEL_REPO, {**MODEL, **SKIPPED}, private=True)
        server.tokens[HUB_TOKEN] = {MODEL_REPO}
        server.cdn_public_endpoint = pod_from_host(server.cdn_endpoint)  # where LFS downloads are sent
        yield server


@pytest.fixture(scope="module")
def datasets(s3: Any) -> str:
    """The bucket the examples name, with the objects they fetch."""
    if "datasets" not in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
        s3.create_bucket(Bucket="datasets")
    for key, body in {**CORPUS, **IMAGENET}.items():
        s3.put_object(Bucket="datasets", Key=key, Body=body)
    return "datasets"


@pytest.fixture(scope="module")
def table(seaweed: SeaweedFS, s3: Any) -> str:
    """An Iceberg table of TABLE_ROWS rows on S3, as the cache examples read one; its metadata location."""
    s3.create_bucket(Bucket="pods-warehouse")
    with tempfile.TemporaryDirectory() as catalog:
        made = simple_table(sql_catalog(Path(catalog), "s3://pods-warehouse/warehouse", seaweed), "reviews", 4, 500)
    return made.metadata_location


@pytest.fixture
def pods(runtime: str) -> Iterator[Pods]:
    assert runtime == "podman", "the pods are played by podman kube play: install podman (make images does, on Debian)"
    with Pods() as made:
        yield made


def the_secret(pods: Pods, seaweed: SeaweedFS) -> None:
    (secret,) = load("secret.yaml")
    keys = seaweed.env()
    pods.secret(secret, {"ACCESS_KEY_ID": keys["ACCESS_KEY_ID"], "SECRET_ACCESS_KEY": keys["SECRET_ACCESS_KEY"],
                         "ACCESS_TOKEN": HUB_TOKEN})  # fmt: skip


def succeeded(played: list[Played]) -> list[Played]:
    """`played`, once every pod of it has succeeded (else what each one's containers did)."""
    assert all(pod.succeeded for pod in played), "\n".join(map(str, played))
    return played


def play_cache_example(pods: Pods, name: str, seaweed: SeaweedFS, table: str) -> list[Played]:
    (job,) = load(name)
    return succeeded(pods.play(*(pods.playable(pod, *cache_env(seaweed, table)) for pod in job_pods(job))))


def hub_endpoint(hub: HubServer) -> dict[str, dict[str, str]]:
    """The local Hub for the model initializer, whose manifests leave huggingface.co implied."""
    return {"model-initializer": {"HF_ENDPOINT": pod_from_host(hub.endpoint)}}


def cache_env(seaweed: SeaweedFS, table: str) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]:
    """For the cache examples' initializer: the test table's metadata file in place of the manifest's, and what a
    cluster would give it beside (S3 credentials: IRSA there; the endpoint: AWS's there)."""
    added = {**seaweed.env(), "ENDPOINT": pod_from_host(seaweed.endpoint)}
    return {"dataset-initializer": {"METADATA_LOC": table}}, {"dataset-initializer": added}


def test_every_manifest_in_deploy_is_played_and_uses_images_make_images_builds():
    assert {path.name for path in DEPLOY.glob("*.yaml")} == PLAYED
    made = {images.tag(kind) for kind in images.KINDS} | {PYTHON_IMAGE}
    templates = {"Job": job_pods, "ClusterTrainingRuntime": lambda runtime: list(runtime_pods(runtime).values())}
    for name in PLAYED - {"secret.yaml"}:
        pods = [pod for d in load(name) if d["kind"] in templates for pod in templates[d["kind"]](d)]
        used = {
            c["image"] for pod in pods for c in [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]
        }
        assert used and used <= made, f"{name}: {used - made}"


def test_job_fills_the_shared_volume_before_the_trainer_with_the_secret_as_env(
    pods: Pods, seaweed: SeaweedFS, datasets: str, hub: HubServer
):
    the_secret(pods, seaweed)
    (job,) = load("job.yaml")
    (pod,) = job_pods(job)
    endpoint = {"dataset-initializer": {"ENDPOINT": pod_from_host(seaweed.endpoint)}}
    (played,) = succeeded(pods.play(pods.playable(pod, endpoint, hub_endpoint(hub))))
    trainer = played.containers["trainer"]
    assert read_under(trainer.read(), "/workspace/dataset") == digests(CORPUS, "tiny-corpus/")
    assert read_under(trainer.read(), "/workspace/model") == digests(MODEL)
    assert "['.initializer', 'config.json', 'model.safetensors', 'tokenizer.json']" in trainer.log  # its own command
    assert played.containers["dataset-initializer"].message.startswith("done: 3 files, ")
    assert played.containers["model-initializer"].message.startswith("done: 3 files, ")
    asked = [r for r in hub.requests if MODEL_REPO in r.path]
    assert asked and all(r.authorized for r in asked), "the private repo is read with the Secret's token"


def seed_as_the_cloud_examples_name(make: Callable[[str], object], put: Callable[[str, str, bytes], object]) -> None:
    """The buckets or containers the Workload Identity examples name (`make` one), with what they fetch (`put`)."""
    for place in ("datasets", "models"):
        make(place)
    for name, body in CORPUS.items():
        put("datasets", name, body)
    for name, body in {**MODEL, **SKIPPED}.items():
        put("models", f"all-MiniLM-L6-v2/{name}", body)


@pytest.fixture(scope="module")
def gcs_buckets(fake_gcs: FakeGCS) -> FakeGCS:
    """The buckets gke-workload-identity.yaml names, with the objects it fetches."""
    seed_as_the_cloud_examples_name(fake_gcs.create_bucket, fake_gcs.put_object)
    return fake_gcs


def test_gke_workload_identity_fetches_from_cloud_storage_without_a_key(pods: Pods, gcs_buckets: FakeGCS):
    """The example as written, with Google's emulator standing in for Cloud Storage and for the metadata server's
    tokens (STORAGE_EMULATOR_HOST): what Workload Identity itself gives cannot be played here."""
    _service_account, job = load("gke-workload-identity.yaml")
    (pod,) = job_pods(job)
    emulator = {"STORAGE_EMULATOR_HOST": pod_from_host(gcs_buckets.endpoint)}
    added = {"dataset-initializer": emulator, "model-initializer": emulator}
    (played,) = succeeded(pods.play(pods.playable(pod, added=added)))
    trainer = played.containers["trainer"]
    assert read_under(trainer.read(), "/workspace/dataset") == digests(CORPUS, "tiny-corpus/")
    assert read_under(trainer.read(), "/workspace/model") == digests(MODEL)
    assert played.containers["model-initializer"].message.startswith("done: 3 files, ")


@pytest.fixture(scope="module")
def azure_containers(azurite: Azurite) -> Azurite:
    """The containers aks-workload-identity.yaml names, with the blobs it fetches."""
    seed_as_the_cloud_examples_name(azurite.create_container, azurite.put_blob)
    return azurite


def test_aks_workload_identity_fetches_from_azure_blob_storage_without_a_secret(pods: Pods, azure_containers: Azurite):
    """The example as written, with Azurite standing in for the account, and its development key for the token the
    workload identity webhook would give (azure-identity's exchange cannot be played here)."""
    _service_account, job = load("aks-workload-identity.yaml")
    (pod,) = job_pods(job)
    account = {"AZURE_STORAGE_ACCOUNT": AZURE_ACCOUNT}
    key = {"AZURE_STORAGE_CONNECTION_STRING": connection_string(pod_from_host(azure_containers.endpoint))}
    initializers = ("dataset-initializer", "model-initializer")
    replaced, added = dict.fromkeys(initializers, account), dict.fromkeys(initializers, key)
    (played,) = succeeded(pods.play(pods.playable(pod, replaced, added)))
    trainer = played.containers["trainer"]
    assert read_under(trainer.read(), "/workspace/dataset") == digests(CORPUS, "tiny-corpus/")
    assert read_under(trainer.read(), "/workspace/model") == digests(MODEL)
    assert played.containers["model-initializer"].message.startswith("done: 3 files, ")


def test_shared_initializer_trials_fetch_once_into_one_volume(pods: Pods, seaweed: SeaweedFS, hub: HubServer):
    the_secret(pods, seaweed)
    claim, *jobs = load("shared-initializer.yaml")
    pods.claim(claim)
    played = succeeded(
        pods.play(*(pods.playable(pod, added=hub_endpoint(hub)) for job in jobs for pod in job_pods(job)))
    )
    for number, trial in enumerate(played, 1):
        assert read_under(trial.containers["trainer"].read(), "/workspace/model") == digests(MODEL)
        assert f"trial {number} ['.initializer', 'config.json'" in trial.containers["trainer"].log
    fetched = sorted(done(trial.containers["model-initializer"])["fetched_files"] for trial in played)
    assert fetched == [0, 3], "one trial fetched, the other found the model complete"
    assert on_disk(pods.volume_folder("shared-initializer") / "model") == digests(MODEL)


def test_indexed_job_splits_the_download_over_its_pods_into_one_volume(pods: Pods, seaweed: SeaweedFS, datasets: str):
    the_secret(pods, seaweed)
    claim, job = load("indexed-job.yaml")
    pods.claim(claim)
    endpoint = {"dataset-initializer": {"ENDPOINT": pod_from_host(seaweed.endpoint)}}  # the manifest's is AWS's
    indexed = job_pods(job)
    played = succeeded(pods.play(*(pods.playable(pod, added=endpoint) for pod in indexed)))
    shares = [done(share.containers["dataset-initializer"]) for share in played]
    assert sum(share["fetched_files"] for share in shares) == len(IMAGENET) and all(s["fetched_files"] for s in shares)
    folder = pods.volume_folder("dataset") / "dataset"
    assert on_disk(folder) == digests(IMAGENET, "imagenet/")
    assert (folder / ".initializer" / "manifest.json").exists(), "the last share wrote the manifest"
    # backoffLimitPerIndex: no controller here, so a retry of index 2 is played by hand; it finds its share done.
    retry = indexed[2] | {"metadata": {**indexed[2]["metadata"], "name": "dataset-initializer-2-retry"}}
    (again,) = succeeded(pods.play(pods.playable(retry, added=endpoint)))
    assert done(again.containers["dataset-initializer"])["fetched_files"] == 0


def test_cache_shards_each_pod_materialises_and_reads_its_own_shard(pods: Pods, seaweed: SeaweedFS, table: str):
    played = play_cache_example(pods, "cache-shards.yaml", seaweed, table)
    rows = []
    for index, node in enumerate(played):
        read = node.containers["trainer"].read()
        shards = {path.split("/")[3] for path in read if path.endswith(".parquet")}
        assert shards == {f"shard-{index}"}, "only its own shard"
        rows.append(sum(entry.get("rows", 0) for entry in read.values()))
        assert node.containers["trainer"].log.strip().endswith(".parquet")  # its own `ls` of shard-<index>
    assert sum(rows) == TABLE_ROWS and all(rows), rows


def test_cache_flight_trainers_read_their_partitions_from_their_own_sidecar(pods: Pods, seaweed: SeaweedFS, table: str):
    played = play_cache_example(pods, "cache-flight.yaml", seaweed, table)
    counts = []
    for index, node in enumerate(played):
        (line,) = [x for x in node.containers["trainer"].log.splitlines() if x.startswith("partition")]
        assert line.startswith(f"partition {index} of 2: ")
        counts.append(int(line.split(": ")[1].split()[0]))
        server = node.containers["cache-server"]
        assert server.events()[-1]["event"] == "stopped", "ended by the pod's stop, exit 0"
    assert sum(counts) == TABLE_ROWS and all(counts), counts


def test_a_cache_initializer_fails_its_pod_on_an_api_error(pods: Pods, seaweed: SeaweedFS, table: str):
    """kubeflow/trainer#3835: upstream's cache initializer exited 0 on API errors; ours fails its init container, so
    the trainer never starts, and the termination message says why (never with the key)."""
    (job,) = load("cache-shards.yaml")
    replaced, added = cache_env(seaweed, table)
    added["dataset-initializer"]["SECRET_ACCESS_KEY"] = "wrong-pods-secret-88"
    (played,) = pods.play(pods.playable(job_pods(job)[0], replaced, added))
    assert played.play_code != 0 and not played.succeeded
    initializer = played.containers["dataset-initializer"]
    assert initializer.exit_code == 1 and initializer.message.startswith("failed (exit 1): ")
    assert "rejected" in initializer.message and "wrong-pods-secret-88" not in initializer.message + initializer.log
    assert played.containers["trainer"].status == "created", "the trainer never started"


def test_the_cluster_training_runtimes_initializers_run_a_trainjob(
    pods: Pods, seaweed: SeaweedFS, datasets: str, hub: HubServer
):
    """Its replicated jobs' pods, with the env the controller builds from a TrainJob whose initializer the SDK
    builder made (storageUri beside env, `specs.trainjob_env`)."""
    keys = seaweed.env()
    trainjob = {
        "dataset-initializer": sdk.S3DatasetInitializer(
            storage_uri=f"s3://{datasets}/tiny-corpus", endpoint=pod_from_host(seaweed.endpoint),
            access_key_id=keys["ACCESS_KEY_ID"], secret_access_key=keys["SECRET_ACCESS_KEY"]),
        "model-initializer": sdk.HuggingFaceModelInitializer(storage_uri=f"hf://{MODEL_REPO}", access_token=HUB_TOKEN),
    }  # fmt: skip
    pods.claim({"metadata": {"name": "initializer"}})
    made = []
    for name, pod in runtime_pods(load("cluster-training-runtime.yaml")[0]).items():
        (container,) = pod["spec"]["containers"]
        given = [{"name": k, "value": v} for k, v in sdk.kubernetes_env(trainjob[name]).items()]
        container["env"] = specs.trainjob_env(container.get("env", []), trainjob[name].storage_uri, given)
        made.append(pods.playable(pod, added=hub_endpoint(hub)))
    played = succeeded(pods.play(*made))
    folder = pods.volume_folder("initializer")
    assert on_disk(folder / "dataset") == digests(CORPUS, "tiny-corpus/")
    assert on_disk(folder / "model") == digests(MODEL)
    assert [job.containers[name].message.split(",")[0] for job, name in zip(played, trainjob, strict=True)] == [
        "done: 3 files"
    ] * 2


def test_signed_model_lands_only_while_its_signature_verifies(pods: Pods, seaweed: SeaweedFS, s3: Any, tmp_path: Path):
    """signed-model.yaml with the test publisher's key in its ConfigMap: the signed model lands, its manifest records
    the verdict and the trainer lists it; once one weight byte is flipped in S3, the init container fails naming the
    digest mismatch, leaves no manifest and no weights, and the trainer never starts."""
    keys = key_pair(tmp_path / "keys")
    files = signed_model(tmp_path / "publisher", keys, MODEL)
    if "models" not in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
        s3.create_bucket(Bucket="models")
    for key, body in files.items():
        s3.put_object(Bucket="models", Key=f"my-model/{key}", Body=body)  # where the manifest's STORAGE_URI points
    the_secret(pods, seaweed)
    config_map, job = load("signed-model.yaml")
    pods.config_map(config_map, {"signer.pub": keys.public.read_text()})
    (pod,) = job_pods(job)
    endpoint = {"model-initializer": {"ENDPOINT": pod_from_host(seaweed.endpoint)}}
    (played,) = succeeded(pods.play(pods.playable(pod, endpoint)))
    trainer = played.containers["trainer"]
    assert played.containers["model-initializer"].message.startswith(f"done: {len(files)} files, ")
    assert read_under(trainer.read(), "/workspace/model") == digests(files)
    assert str(sorted([".initializer", *files])) in trainer.log  # its own command's listing
    landed = pods.empty_dir_folder(pod["metadata"]["name"], "initializer") / "model"
    signature = json.loads((landed / ".initializer" / "manifest.json").read_text())["signature"]
    assert signature["verdict"] == "verified" and signature["mode"] == "enforce" and signature["method"] == "key"

    weights = bytearray(files["model.safetensors"])
    weights[len(weights) // 2] ^= 0x01
    s3.put_object(Bucket="models", Key="my-model/model.safetensors", Body=bytes(weights))
    tampered = pod | {"metadata": {**pod["metadata"], "name": f"{pod['metadata']['name']}-tampered"}}
    (failed,) = pods.play(pods.playable(tampered, endpoint))
    assert failed.play_code != 0 and not failed.succeeded
    initializer = failed.containers["model-initializer"]
    assert initializer.exit_code == 1 and initializer.message.startswith("failed (exit 1): "), failed
    assert "digest mismatch: model.safetensors is not the file the publisher signed" in initializer.message
    assert failed.containers["trainer"].status == "created", "the trainer never started"
    left = pods.empty_dir_folder(tampered["metadata"]["name"], "initializer") / "model"
    assert not (left / ".initializer" / "manifest.json").exists() and not (left / "model.safetensors").exists()
