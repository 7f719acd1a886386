"""deploy/'s Kubernetes examples played as pods by `podman kube play`, with the images `make images` builds.

Podman 4.3 (Debian 12) plays Pods with init containers, emptyDir and persistentVolumeClaim volumes (named
volumes), hostAliases, env from `fieldRef` and `secretKeyRef`, securityContext (runAsUser/runAsGroup,
readOnlyRootFilesystem, allowPrivilegeEscalation, capabilities, seccompProfile) and resources. What it lacks is
made here, as the piece of Kubernetes that would do it does it, and nothing else of a manifest is changed:
- Jobs: `job_pods` makes a Job's pods as its controller does (an Indexed Job's with the completion-index
  annotation and JOB_COMPLETION_INDEX); `Pods.play` runs them together, as `parallelism` = `completions` has it.
- Secrets: `Pods.secret` stores a Secret's data as podman keeps one for `secretKeyRef` (JSON of base64 values).
- ConfigMaps: podman 4.3 mounts a `configMap` volume from a ConfigMap given to `kube play --configmap`, as the
  named volume of the ConfigMap's name (each key a file), kept after the pod; `Pods.config_map` gives one to
  every play, and its volume is removed with the pods.
- Native sidecars (an init container with `restartPolicy: Always`): started beside the main containers, which
  wait for the sidecar's `startupProbe` (tcpSocket) as the kubelet would; the pod is stopped once they have ended,
  as the kubelet ends sidecars, so the sidecar's own exit on SIGTERM is seen.
- `ports`: informational in Kubernetes, but podman publishes each on the host (two pods' sidecars would collide):
  dropped, once a probe's named port is resolved.
- terminationMessagePath: a host file mounted there per container, as the kubelet mounts one.
- emptyDir: podman 4.3 plays one as the named volume of the same name, shared by every pod that names it and
  kept after them; here each pod's gets a name of its own, removed with the pod.
- The network: each pod has its own namespace through slirp4netns (its own loopback, as a pod's), which shows
  the host's loopback, where the test servers listen, at HOST_LOOPBACK.
Podman's names are the machine's, so every pod, volume, secret and ConfigMap gets a suffix of the test's own.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from devkit import images

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
HOST_LOOPBACK = "10.0.2.2"
NETWORK = "slirp4netns:allow_host_loopback=true"
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
#: podman removes an init container once it has run; kept, its exit code and log stay readable.
KEEP_INIT_CONTAINERS = {"io.podman.annotations.init.container.type": "always"}
TERMINATION_LOG = "/dev/termination-log"
#: The examples' trainer image, from a registry this machine cannot reach: the dataset image stands in (Python and
#: pyarrow, as cache-flight.yaml's trainer uses it).
PYTHON_IMAGE = "docker.io/library/python:3.11-slim"
PLAY_SECONDS = 600  # a safety net for a hung podman, far beyond any pod here

#: The trainer stand-in, run as `python -c STAND_IN PLAN COMMAND...`: it waits for the sidecars' startupProbes
#: (PLAN's "probes": port, period, failure threshold), reads every file under PLAN's "read" folders and prints one
#: JSON line of {path: {size, sha256[, rows]}} (rows: of a Parquet file), then runs the manifest's own COMMAND.
STAND_IN = """\
import hashlib, json, os, socket, sys, time
plan = json.loads(sys.argv[1])
for port, period, attempts in plan["probes"]:
    for _ in range(attempts):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=period).close()
            break
        except OSError:
            time.sleep(period)
    else:
        sys.exit(f"startupProbe failed: nothing listens on port {port}")
seen = {}
for root in plan["read"]:
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as handle:
                digest = hashlib.file_digest(handle, "sha256").hexdigest()
            seen[path] = {"size": os.path.getsize(path), "sha256": digest}
            if name.endswith(".parquet"):
                import pyarrow.parquet
                seen[path]["rows"] = pyarrow.parquet.ParquetFile(path).metadata.num_rows
print(json.dumps({"stand_in": seen}), flush=True)
os.execvp(sys.argv[2], sys.argv[2:])
"""


def load(name: str) -> list[dict[str, Any]]:
    """The documents of deploy/`name`."""
    return list(yaml.safe_load_all((DEPLOY / name).read_text()))


def pod_from_host(url: str) -> str:
    """A loopback server's URL as a pod reaches it."""
    return url.replace("127.0.0.1", HOST_LOOPBACK)


def job_pods(job: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A Job's pods as its controller makes them, one per completion: an Indexed Job's annotated with its
    completion index, which every container also reads as JOB_COMPLETION_INDEX (through `fieldRef`, as there)."""
    spec = job["spec"]
    pods = []
    for index in range(spec.get("completions", 1)):
        template = copy.deepcopy(spec["template"])
        metadata = {**template.get("metadata", {}), "name": f"{job['metadata']['name']}-{index}"}
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}
        if spec.get("completionMode") == "Indexed":
            metadata["annotations"] = {**metadata.get("annotations", {}), INDEX_ANNOTATION: str(index)}
            reference = {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_ANNOTATION}']"}}
            for container in _all_containers(pod["spec"]):
                container.setdefault("env", []).append({"name": "JOB_COMPLETION_INDEX", "valueFrom": reference})
        pods.append(pod)
    return pods


def runtime_pods(runtime: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A ClusterTrainingRuntime's pod per replicated job (each one pod), by the job's name, with the restartPolicy
    JobSet's webhook gives a template without one (OnFailure; podman's default, Always, would rerun a finished
    initializer forever)."""
    pods = {}
    for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        (pod,) = job_pods({"metadata": {"name": job["name"]}, "spec": job["template"]["spec"]})
        pod["spec"].setdefault("restartPolicy", "OnFailure")
        pods[job["name"]] = pod
    return pods


def _all_containers(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("initContainers", []), *spec["containers"]]


def set_env(container: dict[str, Any], values: Mapping[str, str], *, named: bool) -> None:
    """Each of `values` in place of the variable the manifest `named` (its value or valueFrom), or added after the
    rest; either way a ValueError when the manifest says otherwise, so that a misspelt name is not papered over."""
    env = container.setdefault("env", [])
    for name, value in values.items():
        at = next((i for i, variable in enumerate(env) if variable["name"] == name), None)
        if (at is not None) != named:
            raise ValueError(f"{container['name']}: the manifest {'names no' if named else 'already names'} {name}")
        if at is None:
            env.append({"name": name, "value": value})
        else:
            env[at] = {"name": name, "value": value}


@dataclass(frozen=True)
class Container:
    status: str  # podman's: "exited", or "created" for one never started
    exit_code: int
    log: str
    message: str  # what it left at its terminationMessagePath

    def events(self) -> list[dict[str, Any]]:
        """Its JSON log lines."""
        return [json.loads(line) for line in self.log.splitlines() if line.startswith("{")]

    def read(self) -> dict[str, dict[str, Any]]:
        """What the trainer stand-in read: {path: {size, sha256[, rows]}}."""
        return next(event["stand_in"] for event in self.events() if "stand_in" in event)


@dataclass(frozen=True)
class Played:
    play_code: int  # `podman kube play`'s: not 0 when an init container failed (Kubernetes' Init:Error)
    play_error: str
    containers: dict[str, Container]

    def __str__(self) -> str:
        """What an assertion shows: podman's error, then each container's state, message and log."""
        parts = [f"play: {self.play_code} {self.play_error}"]
        for name, c in self.containers.items():
            parts.append(f"--- {name}: {c.status} {c.exit_code} message={c.message!r}\n{c.log}")
        return "\n".join(parts)

    @property
    def succeeded(self) -> bool:
        """Kubernetes' phase Succeeded: every container ran and exited 0."""
        return self.play_code == 0 and all(c.status == "exited" and c.exit_code == 0 for c in self.containers.values())


class Pods:
    """One test's pods, secrets, ConfigMaps and volumes, under names of its own, all removed by `close`."""

    def __init__(self) -> None:
        self.suffix = uuid.uuid4().hex[:8]
        self.folder = Path(tempfile.mkdtemp(prefix="initializers-pods-"))
        os.chmod(self.folder, 0o755)  # the termination files are the containers' users'
        self._pods: list[str] = []
        self._volumes: list[str] = []
        self._secrets: list[str] = []
        self._config_maps: list[Path] = []  # each play's `--configmap` files
        self._sidecars: dict[str, list[str]] = {}  # by pod

    def __enter__(self) -> Pods:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def name(self, name: str) -> str:
        return f"{name}-{self.suffix}"

    def secret(self, manifest: Mapping[str, Any], values: Mapping[str, str]) -> None:
        """A Secret, `values` in place of its placeholders, stored as podman reads one for `secretKeyRef`: its data
        (stringData merged in, as the API server merges it) as JSON of base64 values."""
        text = {**manifest.get("stringData", {}), **values}
        data = {**manifest.get("data", {}), **{key: base64.b64encode(v.encode()).decode() for key, v in text.items()}}
        file = self.folder / "secret.json"
        file.write_text(json.dumps(data))
        name = self.name(manifest["metadata"]["name"])
        _podman("secret", "create", name, str(file))
        file.unlink()
        self._secrets.append(name)

    def config_map(self, manifest: Mapping[str, Any], values: Mapping[str, str]) -> None:
        """A ConfigMap, `values` in place of its data's keys (a ValueError for a key it has not: no misspelt key
        papered over), given to every later play; podman makes it the named volume a `configMap` volume mounts."""
        unknown = set(values) - set(manifest.get("data", {}))
        if unknown:
            raise ValueError(f"ConfigMap {manifest['metadata']['name']} has no key {sorted(unknown)}")
        name = self.name(manifest["metadata"]["name"])
        made = {
            **manifest,
            "metadata": {**manifest["metadata"], "name": name},
            "data": {**manifest.get("data", {}), **values},
        }
        file = self.folder / f"{name}.configmap.yaml"
        file.write_text(json.dumps(made))
        self._config_maps.append(file)
        self._volumes.append(name)

    def claim(self, manifest: Mapping[str, Any]) -> None:
        """A PersistentVolumeClaim as the named volume podman mounts for it: one volume every pod here shares, as
        ReadWriteMany would have it."""
        name = self.name(manifest["metadata"]["name"])
        _podman("volume", "create", name)
        self._volumes.append(name)

    def volume_folder(self, claim: str) -> Path:
        """Where a claim's volume lives on this host (rootful podman), to check what the pods left in it."""
        return _mountpoint(self.name(claim))

    def empty_dir_folder(self, pod: str, volume: str) -> Path:
        """Where a pod's emptyDir `volume` (named as `playable` renames it) lives on this host, likewise."""
        return _mountpoint(f"{self.name(pod)}-{volume}")

    def playable(
        self,
        pod: Mapping[str, Any],
        replaced: Mapping[str, Mapping[str, str]] = {},
        added: Mapping[str, Mapping[str, str]] = {},
    ) -> dict[str, Any]:
        """`pod` as podman plays it (see the module's docstring), with {container: {variable: value}}: `replaced`
        in place of the manifest's (endpoints), `added` where it names none (what a cluster would provide)."""
        pod = copy.deepcopy(dict(pod))
        name = self.name(pod["metadata"]["name"])
        pod["metadata"] = {**pod["metadata"], "name": name}
        pod["metadata"]["annotations"] = {**pod["metadata"].get("annotations", {}), **KEEP_INIT_CONTAINERS}
        spec = pod["spec"]
        renamed = {}  # emptyDir volumes: podman plays one as the named volume of its name, shared by every pod
        for volume in spec.get("volumes", []):
            if "persistentVolumeClaim" in volume:
                volume["persistentVolumeClaim"]["claimName"] = self.name(volume["persistentVolumeClaim"]["claimName"])
            if "configMap" in volume:
                volume["configMap"]["name"] = self.name(volume["configMap"]["name"])
            if "emptyDir" in volume:
                renamed[volume["name"]] = volume["name"] = f"{name}-{volume['name']}"
                self._volumes.append(volume["name"])
        trainers = spec["containers"] if spec.get("initContainers") else []
        sidecars = [c for c in spec.get("initContainers", []) if c.get("restartPolicy") == "Always"]
        spec["initContainers"] = [c for c in spec.get("initContainers", []) if c not in sidecars]
        probes = [_startup_probe(sidecar) for sidecar in sidecars]
        for sidecar in sidecars:
            sidecar.pop("restartPolicy")
        spec["containers"] = [*spec["containers"], *sidecars]
        self._sidecars[name] = [sidecar["name"] for sidecar in sidecars]
        for container in _all_containers(spec):
            if container["image"] == PYTHON_IMAGE:
                container["image"] = images.tag("dataset")
            for variable in container.get("env", []):
                if "secretKeyRef" in variable.get("valueFrom", {}):
                    reference = variable["valueFrom"]["secretKeyRef"]
                    reference["name"] = self.name(reference["name"])
            container.pop("ports", None)  # informational in Kubernetes; podman would publish each on the host
            set_env(container, replaced.get(container["name"], {}), named=True)
            set_env(container, added.get(container["name"], {}), named=False)
            for mount in container.get("volumeMounts", []):
                mount["name"] = renamed.get(mount["name"], mount["name"])
            self._termination_file(spec, name, container)
        for trainer in trainers:
            read = [m["mountPath"] for m in trainer.get("volumeMounts", []) if m.get("readOnly")]
            plan = {"read": read, "probes": probes}
            trainer["command"] = ["python", "-c", STAND_IN, json.dumps(plan), *trainer["command"]]
        return pod

    def _termination_file(self, spec: dict[str, Any], pod: str, container: dict[str, Any]) -> None:
        """A host file at the container's terminationMessagePath, writable by any user, as the kubelet provides."""
        file = self.folder / f"{pod}.{container['name']}.termination"
        file.touch()
        os.chmod(file, 0o666)
        volume = f"termination-{len(spec.get('volumes', []))}"
        spec.setdefault("volumes", []).append({"name": volume, "hostPath": {"path": str(file), "type": "File"}})
        path = container.get("terminationMessagePath", TERMINATION_LOG)
        container.setdefault("volumeMounts", []).append({"name": volume, "mountPath": path})

    def play(self, *pods: Mapping[str, Any]) -> list[Played]:
        """Play `pods` (each made `playable`) together and wait for each: its init containers, then its main
        containers; then stop it (ending its sidecars, as the kubelet does) and report every container."""
        started = []
        for pod in pods:
            name = pod["metadata"]["name"]
            file = self.folder / f"{name}.yaml"
            file.write_text(json.dumps(pod))  # JSON is YAML, and podman reads it as written
            self._pods.append(name)
            config_maps = [f"--configmap={config_map}" for config_map in self._config_maps]
            argv = [images.engine(), "kube", "play", f"--network={NETWORK}", *config_maps, str(file)]
            started.append(subprocess.Popen(argv, env=images.engine_env(), stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, text=True))  # fmt: skip
        played = []
        for pod, process in zip(pods, started, strict=True):
            _, error = process.communicate(timeout=PLAY_SECONDS)
            name, spec = pod["metadata"]["name"], pod["spec"]
            mains = [c["name"] for c in spec["containers"] if c["name"] not in self._sidecars[name]]
            if _podman("pod", "exists", name, check=False).returncode != 0:
                raise RuntimeError(f"podman kube play made no pod {name}: {error}")
            if process.returncode == 0:
                _podman("wait", *(f"{name}-{container}" for container in mains))
            _podman("pod", "stop", "--time=30", name)
            reported = {c["name"]: self._report(name, c) for c in _all_containers(spec)}
            played.append(Played(process.returncode, error, reported))
        return played

    def _report(self, pod: str, container: Mapping[str, Any]) -> Container:
        full = f"{pod}-{container['name']}"
        (state,) = json.loads(_podman("container", "inspect", full).stdout)
        logs = _podman("logs", full)
        message = (self.folder / f"{pod}.{container['name']}.termination").read_text()
        return Container(state["State"]["Status"], state["State"]["ExitCode"], logs.stdout + logs.stderr, message)

    def close(self) -> None:
        for name in self._pods:
            _podman("pod", "rm", "--force", name, check=False)
        for name in self._volumes:
            _podman("volume", "rm", "--force", name, check=False)
        for name in self._secrets:
            _podman("secret", "rm", name, check=False)
        shutil.rmtree(self.folder, ignore_errors=True)


def _startup_probe(sidecar: Mapping[str, Any]) -> tuple[int, int, int]:
    """A sidecar's tcpSocket startupProbe as (port, period, failure threshold), a named port resolved."""
    probe = sidecar["startupProbe"]
    port = probe["tcpSocket"]["port"]
    if isinstance(port, str):
        (port,) = [p["containerPort"] for p in sidecar.get("ports", []) if p.get("name") == port]
    return port, probe.get("periodSeconds", 10), probe.get("failureThreshold", 3)


def _mountpoint(volume: str) -> Path:
    found = _podman("volume", "inspect", "--format", "{{.Mountpoint}}", volume)
    return Path(found.stdout.strip())


def _podman(*words: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([images.engine(), *words], env=images.engine_env(), capture_output=True, text=True,
                          check=check, timeout=PLAY_SECONDS)  # fmt: skip
