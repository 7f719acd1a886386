"""The real images, built and run with podman (installed and made ready by the fixture when missing, never skipped)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kubeflow.trainer.backends.container import utils as kf_container
from kubeflow.trainer.types import types as kf

from devkit import docs, images
from devkit.hubserver import HubServer
from devkit.moto import REGION, Moto, allow
from devkit.relay import Relay
from devkit.seaweed import SeaweedFS
from devkit.signing import key_pair, signed_model
from initializers.process.workspace_owner import IMAGE_USER

POD_GROUP = 4242  # a pod's fsGroup, given to the container as podman's --group-add
WEB_OBJECTS = {f"d/{i}.bin": os.urandom(256 * 1024) for i in range(6)}


@pytest.fixture
def folder() -> Iterator[Path]:
    """The host folder mounted at /workspace, group-writable for group 0 as documented, under a parent that other
    users can traverse (pytest's own temporary folders are private to root)."""
    parent = Path(tempfile.mkdtemp(prefix="initializers-images-"))
    os.chmod(parent, 0o755)
    workspace = parent / "workspace"
    workspace.mkdir(mode=0o775)
    os.chmod(workspace, 0o775)
    yield workspace
    shutil.rmtree(parent, ignore_errors=True)


def image_argv(
    runtime: str, image: str, folder: Path, env: dict[str, str], options: list[str] = (), command: list[str] = ()
) -> list[str]:
    argv = [runtime, "run", "--rm", "--network", "host", f"--volume={folder}:/workspace"]
    argv += [f"--env={name}={value}" for name, value in env.items()]
    return [*argv, *options, image, *command]


def run_image(
    runtime: str, image: str, folder: Path, env: dict[str, str], options: list[str] = (), command: list[str] = ()
) -> subprocess.CompletedProcess:
    return subprocess.run(image_argv(runtime, image, folder, env, options, command), env=images.engine_env(),
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def last_event(result: subprocess.CompletedProcess) -> dict[str, Any]:
    return json.loads(result.stderr.strip().splitlines()[-1])


def test_the_model_image_fills_the_volume_from_s3(runtime: str, seaweed: SeaweedFS, s3: Any, bucket: str, folder: Path):
    s3.put_object(Bucket=bucket, Key="m/config.json", Body=b"{}")
    s3.put_object(Bucket=bucket, Key="m/model.safetensors", Body=b"S" * 4096)
    env = {**seaweed.env(), "STORAGE_URI": f"s3://{bucket}/m"}
    result = run_image(runtime, images.tag("model"), folder, env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (folder / "model" / "model.safetensors").read_bytes() == b"S" * 4096
    # Readable by another UID (a non-root training container): files 0644, folders 0755.
    reader = subprocess.run(["setpriv", "--reuid=4242", "--regid=4242", "--clear-groups", "cat",
                             str(folder / "model" / "config.json")], capture_output=True)  # fmt: skip
    assert reader.returncode == 0 and reader.stdout == b"{}"
    assert (folder / "model").stat().st_uid == 10001, "written by the image's non-root user"


def test_the_dataset_image_run_as_the_kubeflow_container_backend_runs_it(runtime: str, folder: Path):
    with HubServer() as hub:
        hub.add_repo("org/corpus", {"train.jsonl": b'{"a": 1}\n'}, repo_type="dataset")
        dataset = kf.HuggingFaceDatasetInitializer(storage_uri="hf://org/corpus")
        images_config = SimpleNamespace(dataset_initializer_image=images.tag("dataset"), model_initializer_image="-")
        container = kf_container.get_dataset_initializer(dataset, images_config)
        # The SDK keeps the entrypoint and passes its command, from working_dir /app.
        env = {**container.env, "HF_ENDPOINT": hub.endpoint}
        result = run_image(runtime, container.image, folder, env, ["--workdir=/app"], container.command)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (folder / "dataset" / "train.jsonl").read_bytes() == b'{"a": 1}\n'


def test_the_compatibility_command_itself_works_in_the_image(runtime: str, folder: Path):
    with HubServer() as hub:
        hub.add_repo("org/corpus", {"a.txt": b"a"}, repo_type="dataset")
        env = {"STORAGE_URI": "hf://org/corpus", "OUTPUT_PATH": "/workspace/dataset", "HF_ENDPOINT": hub.endpoint}
        options = ["--workdir=/app", "--entrypoint=bash"]
        result = run_image(
            runtime, images.tag("dataset"), folder, env, options, ["-c", "python -m pkg.initializers.dataset"]
        )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (folder / "dataset" / "a.txt").read_bytes() == b"a"


def test_bad_credentials_exit_non_zero_and_the_last_line_says_why(
    runtime: str, seaweed: SeaweedFS, s3: Any, bucket: str, folder: Path
):
    s3.put_object(Bucket=bucket, Key="x", Body=b"x")
    env = {**seaweed.env(), "SECRET_ACCESS_KEY": "wrong-image-secret-77", "STORAGE_URI": f"s3://{bucket}"}
    result = run_image(runtime, images.tag("model"), folder, env)
    assert result.returncode == 1
    assert "credentials were rejected" in last_event(result)["error"]
    assert "wrong-image-secret-77" not in result.stdout + result.stderr


@pytest.mark.parametrize(("user", "owner"), [(None, 10001), ("12345:0", 12345)])
def test_non_root_in_a_group_writable_workspace_and_an_arbitrary_uid_in_group_0(
    runtime: str, seaweed: SeaweedFS, s3: Any, bucket: str, folder: Path, user: str | None, owner: int
):
    """The fixture's workspace is root's, group-writable (an emptyDir, a prepared folder): the image drops from root
    to its own user; under --user it never was root."""
    s3.put_object(Bucket=bucket, Key="d/a.bin", Body=b"a")
    extra = [f"--user={user}"] if user else []
    result = run_image(
        runtime, images.tag("dataset"), folder, {**seaweed.env(), "STORAGE_URI": f"s3://{bucket}/d"}, extra
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (folder / "dataset" / "a.bin").read_bytes() == b"a"
    assert {p.stat().st_uid for p in (folder / "dataset").rglob("*")} == {owner}


def test_a_workspace_made_by_the_kubeflow_sdk_as_a_workstation_user(
    runtime: str, seaweed: SeaweedFS, s3: Any, bucket: str, folder: Path
):
    """The SDK's container backend creates the host folder with os.makedirs (0755, its user's) and runs the image
    with its command from /app: the image writes as that user, so the user can read and delete the files."""
    s3.put_object(Bucket=bucket, Key="m/config.json", Body=b"{}")
    os.chown(folder, 4242, 4343)
    os.chmod(folder, 0o755)
    model = kf.S3ModelInitializer(storage_uri=f"s3://{bucket}/m", endpoint=seaweed.endpoint, region="us-east-1",
                                  access_key_id=seaweed.env()["ACCESS_KEY_ID"],
                                  secret_access_key=seaweed.env()["SECRET_ACCESS_KEY"])  # fmt: skip
    images_config = SimpleNamespace(dataset_initializer_image="-", model_initializer_image=images.tag("model"))
    container = kf_container.get_model_initializer(model, images_config)
    result = run_image(runtime, container.image, folder, container.env, ["--workdir=/app"], container.command)
    assert result.returncode == 0, result.stdout + result.stderr
    switched = [json.loads(line) for line in result.stderr.splitlines() if "workspace's user" in line]
    assert switched and (switched[0]["uid"], switched[0]["gid"]) == (4242, 4343)
    assert {(p.stat().st_uid, p.stat().st_gid) for p in (folder / "model").rglob("*")} == {(4242, 4343)}


def test_a_workspace_only_root_may_write_keeps_root(
    runtime: str, seaweed: SeaweedFS, s3: Any, bucket: str, folder: Path
):
    """Rootless podman maps the invoking user to root, so a folder of theirs looks root's 0755 inside: stay root."""
    s3.put_object(Bucket=bucket, Key="m/config.json", Body=b"{}")
    os.chmod(folder, 0o755)
    env = {**seaweed.env(), "STORAGE_URI": f"s3://{bucket}/m"}
    result = run_image(runtime, images.tag("model"), folder, env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (folder / "model" / "config.json").stat().st_uid == 0


@pytest.fixture(scope="module")
def web_identity() -> Iterator[tuple[Moto, str]]:
    """moto without IAM enforcement (only so does it answer an unsigned AssumeRoleWithWebIdentity), a role, a bucket."""
    with Moto.start() as server:
        role = server.add_role("web-reader", server.add_user("admin", allow("*")), allow("s3:GetObject"))
        server.client("s3", "admin").create_bucket(Bucket="fsgroup")
        for key, body in WEB_OBJECTS.items():
            server.client("s3", "admin").put_object(Bucket="fsgroup", Key=key, Body=body)
        yield server, role


def _projected_token(folder: Path, group: int, mode: int) -> list[str]:
    """A service-account token as Kubernetes projects it (root's, its group, `mode`), mounted where EKS puts it;
    returns the podman options that mount it."""
    token = folder.parent / "token"
    token.write_text("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwb2QifQ.c2ln")
    os.chown(token, 0, group)
    os.chmod(token, mode)
    return [f"--volume={token}:/var/run/secrets/eks.amazonaws.com/serviceaccount/token:ro"]


def _web_identity_env(endpoint: str, role: str) -> dict[str, str]:
    return {"STORAGE_URI": "s3://fsgroup/d", "ENDPOINT": endpoint, "REGION": REGION, "MAX_WORKERS": "1",
            "AWS_ROLE_ARN": role, "AWS_ENDPOINT_URL_STS": endpoint,
            "AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/secrets/eks.amazonaws.com/serviceaccount/token"}  # fmt: skip


def test_a_token_readable_through_the_pods_group_is_read_after_the_drop_at_every_refresh(
    runtime: str, web_identity: tuple[Moto, str], folder: Path
):
    """The image drops root for its own user, keeping the pod's group: the token (0440, group fsGroup) is read
    again for every web identity session, each 1.5 s long, over a run of about 3 s."""
    server, role = web_identity
    with Relay(server.endpoint) as relay:
        relay.session_lifetime = 1.5
        relay.slow_paths, relay.bytes_per_second = "/fsgroup/d/", 512 * 1024  # 0.5 s per object, one at a time
        options = [*_projected_token(folder, POD_GROUP, 0o440), f"--group-add={POD_GROUP}"]
        result = run_image(runtime, images.tag("dataset"), folder, _web_identity_env(relay.endpoint, role), options)
    assert result.returncode == 0, result.stdout + result.stderr
    switched = [json.loads(line) for line in result.stderr.splitlines() if "workspace's user" in line]
    assert (switched[0]["uid"], switched[0]["gid"], switched[0]["groups"]) == (*IMAGE_USER, [POD_GROUP])
    assert len(relay.sessions_issued) >= 3, "the token file was read again for each new session"
    fetched = {f"d/{p.name}": p.read_bytes() for p in (folder / "dataset").glob("*.bin")}
    assert fetched == WEB_OBJECTS


def test_a_token_the_images_user_could_not_read_keeps_root_saying_why(
    runtime: str, web_identity: tuple[Moto, str], folder: Path
):
    server, role = web_identity
    options = _projected_token(folder, 0, 0o400)  # a Secret without fsGroup: root's alone
    result = run_image(runtime, images.tag("dataset"), folder, _web_identity_env(server.endpoint, role), options)
    assert result.returncode == 0, result.stdout + result.stderr
    stayed = [json.loads(line) for line in result.stderr.splitlines() if '"running as root"' in line]
    assert "AWS_WEB_IDENTITY_TOKEN_FILE" in stayed[0]["reason"] and "unreadable as uid 10001" in stayed[0]["reason"]
    assert (folder / "dataset" / "0.bin").stat().st_uid == 0


#: A Pod Security "restricted" container: no capabilities, no privilege escalation, a read-only root filesystem
#: without podman's own tmpfs mounts (Kubernetes gives none), and an arbitrary non-root user in group 0.
LOCKED_DOWN = ["--read-only", "--read-only-tmpfs=false", "--cap-drop=ALL", "--security-opt=no-new-privileges",
               "--user=10001:0"]  # fmt: skip


def test_both_images_work_locked_down_as_a_restricted_pod_runs_them(
    runtime: str, seaweed: SeaweedFS, s3: Any, bucket: str, folder: Path
):
    """S3 and the Hub (whose client keeps its files under OUTPUT_PATH) with nothing writable but the volume; a
    failure leaves its reason in the termination-message file, as Kubernetes mounts it."""
    s3.put_object(Bucket=bucket, Key="m/model.safetensors", Body=b"W" * 5000)
    message = folder.parent / "termination-log"
    message.write_text("")
    os.chmod(message, 0o666)
    options = [*LOCKED_DOWN, f"--volume={message}:/dev/termination-log"]
    result = run_image(runtime, images.tag("model"), folder, {**seaweed.env(), "STORAGE_URI": f"s3://{bucket}/m"},
                       options)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert (folder / "model" / "model.safetensors").read_bytes() == b"W" * 5000
    assert message.read_text().startswith("done: 1 files, 5000 bytes in /workspace/model")
    with HubServer() as hub:
        hub.add_repo("org/corpus", {"train.jsonl": b"{}\n"}, repo_type="dataset")
        result = run_image(runtime, images.tag("dataset"), folder,
                           {"STORAGE_URI": "hf://org/corpus", "HF_ENDPOINT": hub.endpoint}, options)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert (folder / "dataset" / "train.jsonl").read_bytes() == b"{}\n"
    failed = run_image(runtime, images.tag("dataset"), folder,
                       {**seaweed.env(), "STORAGE_URI": f"s3://{bucket}/nothing-here", "OUTPUT_PATH": "/workspace/x"},
                       options)  # fmt: skip
    assert failed.returncode == 1
    assert message.read_text() == f"failed (exit 1): {last_event(failed)['error']}"


def test_the_model_image_checks_a_signature_with_the_key_mounted_read_only_locked_down(
    runtime: str, seaweed: SeaweedFS, s3: Any, bucket: str, folder: Path, tmp_path: Path
):
    """SIGNATURE=enforce in the image (the signing extra), the key a read-only file as a ConfigMap mounts it."""
    trust = folder.parent / "model-signer"
    keys = key_pair(trust)
    for path in (trust, *trust.iterdir()):
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    files = signed_model(tmp_path / "publisher", keys, {"config.json": b"{}", "model.safetensors": os.urandom(70_000)})
    for key, body in files.items():
        s3.put_object(Bucket=bucket, Key=f"m/{key}", Body=body)
    env = {**seaweed.env(), "STORAGE_URI": f"s3://{bucket}/m", "SIGNATURE": "enforce",
           "SIGNATURE_PUBLIC_KEY": f"/etc/model-signer/{keys.public.name}"}  # fmt: skip
    options = [*LOCKED_DOWN, f"--volume={trust}:/etc/model-signer:ro"]
    result = run_image(runtime, images.tag("model"), folder, env, options)
    assert result.returncode == 0, result.stdout + result.stderr
    manifest = json.loads((folder / "model" / ".initializer" / "manifest.json").read_text())
    assert manifest["signature"]["verdict"] == "verified"
    s3.put_object(Bucket=bucket, Key="m/model.safetensors", Body=os.urandom(70_000))
    tampered = run_image(runtime, images.tag("model"), folder, env, options)
    assert tampered.returncode == 1
    assert "digest mismatch: model.safetensors" in last_event(tampered)["error"]
    assert not (folder / "model" / "model.safetensors").exists()


#: Lists the installed modules of these packages that have no bytecode beside them.
UNCOMPILED = """
import importlib.util, pathlib, sys
for name in sys.argv[1:]:
    for source in pathlib.Path(importlib.util.find_spec(name).origin).parent.rglob("*.py"):
        if not pathlib.Path(importlib.util.cache_from_source(str(source))).exists():
            print(source)
"""


#: Each image's own packages, and the signing extra (SIGNATURE) in both.
COMPILED = [("model", ["initializers", "huggingface_hub", "structlog", "click", "model_signing", "OpenSSL"]),
            ("dataset", ["initializers", "pyiceberg", "pyarrow", "model_signing", "OpenSSL"])]  # fmt: skip


@pytest.mark.parametrize(("kind", "packages"), COMPILED)
def test_every_module_of_the_images_is_compiled_when_they_are_built(
    runtime: str, folder: Path, kind: str, packages: list[str]
):
    """A pod's root filesystem is read-only (and the images never write bytecode): a module shipped without it is
    compiled again at every start, a few tenths of a second for the Iceberg source's libraries."""
    result = run_image(runtime, images.tag(kind), folder, {}, ["--entrypoint=python", *LOCKED_DOWN],
                       ["-c", UNCOMPILED, *packages])  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""


def test_the_runner_runs_both_images_in_parallel(
    runtime: str, seaweed: SeaweedFS, s3: Any, bucket: str, folder: Path, monkeypatch: pytest.MonkeyPatch
):
    from initializers.kubeflow import runner, sdk

    s3.put_object(Bucket=bucket, Key="m/model.safetensors", Body=b"W" * 1000)
    monkeypatch.setenv("CONTAINERS_CONF", images.engine_env()["CONTAINERS_CONF"])
    with HubServer() as hub:
        hub.add_repo("org/corpus", {"train.jsonl": b"{}\n"}, repo_type="dataset")
        initializer = sdk.Initializer(
            dataset=sdk.HuggingFaceDatasetInitializer(storage_uri="hf://org/corpus"),
            model=sdk.S3ModelInitializer(storage_uri=f"s3://{bucket}/m", endpoint=seaweed.endpoint,
                                         access_key_id=seaweed.env()["ACCESS_KEY_ID"],
                                         secret_access_key=seaweed.env()["SECRET_ACCESS_KEY"]),
        )  # fmt: skip
        config = sdk.ContainerBackendConfig(images.tag("dataset"), images.tag("model"), initializer_timeout=120)
        results = runner.run(initializer, folder, backend=runtime, config=config, run_options=["--network=host"],
                             extra_env={"HF_ENDPOINT": hub.endpoint}, on_line=lambda *_: None)  # fmt: skip
    assert all(result.ok for result in results.values())
    assert (folder / "dataset" / "train.jsonl").read_bytes() == b"{}\n"
    assert (folder / "model" / "model.safetensors").read_bytes() == b"W" * 1000


def test_a_runner_stopped_mid_run_leaves_no_container_behind(
    runtime: str, seaweed: SeaweedFS, s3: Any, bucket: str, folder: Path, monkeypatch: pytest.MonkeyPatch
):
    from initializers.common.errors import Stopped
    from initializers.kubeflow import runner, sdk

    s3.put_object(Bucket=bucket, Key="m/model.safetensors", Body=os.urandom(4 << 20))
    monkeypatch.setenv("CONTAINERS_CONF", images.engine_env()["CONTAINERS_CONF"])
    with Relay(seaweed.endpoint) as relay:
        relay.bytes_per_second = 256 * 1024  # 16 s: the signal comes long before the end
        model = sdk.S3ModelInitializer(storage_uri=f"s3://{bucket}/m", endpoint=relay.endpoint,
                                       access_key_id=seaweed.env()["ACCESS_KEY_ID"],
                                       secret_access_key=seaweed.env()["SECRET_ACCESS_KEY"])  # fmt: skip
        config = sdk.ContainerBackendConfig(images.tag("dataset"), images.tag("model"), initializer_timeout=120)

        def stop_once_fetching(_step: str, line: str) -> None:
            if '"event": "fetching"' in line:
                os.kill(os.getpid(), signal.SIGTERM)

        with pytest.raises(Stopped):
            runner.run(sdk.Initializer(model=model), folder, backend=runtime, config=config,
                       run_options=["--network=host"], on_line=stop_once_fetching)  # fmt: skip
    listed = subprocess.run([runtime, "ps", "--all", "--format", "{{.Names}}"], env=images.engine_env(),
                            capture_output=True, text=True, check=True)  # fmt: skip
    assert not [name for name in listed.stdout.split() if name.startswith("model-initializer-")]
    assert not (folder / "model" / ".initializer" / "manifest.json").exists()


def test_the_docs_docker_run_example_runs(runtime: str, folder: Path):
    example = docs.first_block(docs.page("docs/images.md"), "sh")
    words = shlex.split(example.replace("\\\n", " "))
    assert words[:2] == ["docker", "run"] and words[-1] == images.tag("model")
    with HubServer() as hub:
        hub.add_repo("sentence-transformers/all-MiniLM-L6-v2", {"config.json": b"{}", "model.safetensors": b"M"})
        # The same words, with podman for docker, this test's folder for $PWD/workspace, and the local Hub.
        argv = [runtime, *[w.replace("$PWD/workspace", str(folder)) for w in words[1:-1]], "--network=host",
                f"--env=HF_ENDPOINT={hub.endpoint}", words[-1]]  # fmt: skip
        done = subprocess.run(argv, env=images.engine_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (folder / "model" / "model.safetensors").read_bytes() == b"M"


def test_the_dataset_image_shards_an_iceberg_table(runtime: str, seaweed: SeaweedFS, bucket: str, folder: Path):
    """The cache extra in the image: pyiceberg reads the table on S3, the shards land in the volume; locked down as
    a restricted pod runs it, since pyarrow must not need a writable root filesystem either."""
    from devkit.iceberg import simple_table, sql_catalog

    with tempfile.TemporaryDirectory() as catalog_dir:
        table = simple_table(sql_catalog(Path(catalog_dir), f"s3://{bucket}/warehouse", seaweed), "reviews", 2, 500)
    env = {**seaweed.env(), "STORAGE_URI": "cache://shop/reviews", "METADATA_LOC": table.metadata_location,
           "CLUSTER_SIZE": "3"}  # fmt: skip
    result = run_image(runtime, images.tag("dataset"), folder, env, LOCKED_DOWN)
    assert result.returncode == 0, result.stdout + result.stderr
    manifest = json.loads((folder / "dataset" / ".initializer" / "manifest.json").read_text())
    assert [shard["rows"] for shard in manifest["source"]["shards"]] == [500, 500]
    assert sorted(p.name for p in (folder / "dataset").glob("shard-*")) == ["shard-0", "shard-1"]


def test_the_dataset_image_serves_a_materialisation_over_flight(runtime: str, folder: Path, tmp_path: Path):
    """cache-server in the dataset image, locked down as a restricted pod runs it: a Kubeflow-style reader gets every
    row, split in two; SIGTERM (forwarded by podman, as the kubelet sends it) stops it with exit 0."""
    from devkit.flight import read_partition
    from devkit.iceberg import simple_table, sql_catalog
    from devkit.ports import free_port
    from devkit.programs import run_program

    table = simple_table(sql_catalog(tmp_path, f"file://{tmp_path}/warehouse"), "reviews", 2, 500)
    made = run_program("dataset", {"STORAGE_URI": "cache://shop/reviews", "METADATA_LOC": table.metadata_location,
                                   "NUM_DATA_NODES": "2", "OUTPUT_PATH": str(folder / "dataset")})  # fmt: skip
    assert made.code == 0, made.stdout + made.stderr
    port = free_port()
    env = {"PORT": str(port), "BIND_ADDRESS": "127.0.0.1", "ADVERTISE_HOST": "127.0.0.1", "LOG_FORMAT": "json"}
    log = tmp_path / "server.log"
    argv = image_argv(runtime, images.tag("dataset"), folder, env, [*LOCKED_DOWN, "--entrypoint=cache-server"])
    with open(log, "wb") as out:
        server = subprocess.Popen(argv, env=images.engine_env(), stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while '"serving"' not in log.read_text():
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        halves = [read_partition(f"grpc://127.0.0.1:{port}", index, 2) for index in range(2)]
        assert [half.num_rows for half in halves] == [500, 500]
        assert sorted(halves[0]["id"].to_pylist() + halves[1]["id"].to_pylist()) == list(range(1000))
        server.send_signal(signal.SIGTERM)
        assert server.wait(60) == 0, log.read_text()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert json.loads(log.read_text().strip().splitlines()[-1])["event"] == "stopped"


@pytest.fixture(scope="session")
def docker_api(runtime: str) -> Iterator[str]:
    """podman's Docker-compatible API on a private socket: what the Kubeflow SDK's container backend talks to."""
    from devkit.processes import stop_process_group

    if runtime != "podman":  # a running docker serves the API itself
        yield "unix:///var/run/docker.sock"
        return
    folder = Path(tempfile.mkdtemp(prefix="initializers-podman-api-"))
    socket = folder / "podman.sock"
    service = subprocess.Popen(
        [runtime, "system", "service", "--time=0", f"unix://{socket}"],
        env=images.engine_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while not socket.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert socket.exists(), "podman system service did not open its socket"
    yield f"unix://{socket}"
    stop_process_group(service)
    shutil.rmtree(folder, ignore_errors=True)


def _readme_trainer_client(docker_api: str) -> Any:
    """The front page's Kubeflow SDK example, as a user copies it, pointed at this machine's container API."""
    example = docs.first_block(docs.page("README.md").split("With the Kubeflow SDK, keep your")[1], "python")
    example = example.replace("ContainerBackendConfig(", f"ContainerBackendConfig(container_host={docker_api!r}, "
                              "container_runtime='docker', ")  # fmt: skip
    scope: dict[str, Any] = {}
    exec(example, scope)
    return scope["client"]


def unique_job_name() -> str:
    """A job name no other run on this machine uses: the SDK names the containers after it (`<job>-model-initializer`),
    and two suites at once on one container engine must not ask for the same names."""
    return f"job-{uuid.uuid4().hex[:8]}"


def test_the_kubeflow_sdks_container_backend_runs_both_images_as_a_drop_in(
    docker_api: str, seaweed: SeaweedFS, s3: Any, bucket: str, tmp_path: Path
):
    """The SDK's own step (`_run_initializers`, which `train()` calls): both images in parallel, its env, command,
    /app working directory and bind mount, into a workdir made as the SDK makes it (os.makedirs, 0755, its user's).
    The network is the host's, where the test servers listen; `train()` would make a bridge network per job."""
    s3.put_object(Bucket=bucket, Key="data/train.jsonl", Body=b'{"a": 1}\n')
    s3.put_object(Bucket=bucket, Key="model/config.json", Body=b"{}")
    job = unique_job_name()
    workdir = tmp_path / job
    os.makedirs(workdir, mode=0o755)
    os.chown(workdir, 4242, 4242)
    os.chmod(tmp_path, 0o755)
    keys = dict(endpoint=seaweed.endpoint, access_key_id=seaweed.env()["ACCESS_KEY_ID"], region="us-east-1",
                secret_access_key=seaweed.env()["SECRET_ACCESS_KEY"])  # fmt: skip
    initializer = kf.Initializer(
        dataset=kf.S3DatasetInitializer(storage_uri=f"s3://{bucket}/data", **keys),
        model=kf.S3ModelInitializer(storage_uri=f"s3://{bucket}/model", **keys),
    )
    _readme_trainer_client(docker_api).backend._run_initializers(job, initializer, str(workdir), "host")
    assert (workdir / "dataset" / "train.jsonl").read_bytes() == b'{"a": 1}\n'
    assert (workdir / "model" / "config.json").read_bytes() == b"{}"
    assert {p.stat().st_uid for p in workdir.rglob("*")} == {4242}, "the SDK's user owns what the images wrote"


def test_the_kubeflow_sdk_reports_our_last_log_line_on_failure(
    docker_api: str, seaweed: SeaweedFS, bucket: str, tmp_path: Path
):
    job = unique_job_name()
    workdir = tmp_path / job
    os.makedirs(workdir)
    model = kf.S3ModelInitializer(storage_uri=f"s3://{bucket}/model", endpoint=seaweed.endpoint, region="us-east-1",
                                  access_key_id="wrong-key", secret_access_key="wrong-sdk-secret-31")  # fmt: skip
    with pytest.raises(RuntimeError) as raised:
        backend = _readme_trainer_client(docker_api).backend
        backend._run_initializers(job, kf.Initializer(model=model), str(workdir), "host")
    assert "model-initializer failed with exit code 1" in str(raised.value)
    assert "credentials were rejected" in str(raised.value)
    assert "wrong-sdk-secret-31" not in str(raised.value)
