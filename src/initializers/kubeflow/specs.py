"""What runs an initializer elsewhere: the `docker run` / `podman run` arguments for one, and a Kubernetes
init-container spec, both with exactly the env the programs read (`sdk.program_env`); and the env Kubeflow's
controller gives an initializer container from a TrainJob (`trainjob_env`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from initializers.common.errors import ConfigError
from initializers.config.contract import Config
from initializers.kubeflow.sdk import WORKSPACE, DatasetInitializer, ModelInitializer, program_env


def docker_run_args(
    initializer: DatasetInitializer | ModelInitializer,
    workspace: str | Path,
    image: str,
    runtime: str = "docker",
    name: str | None = None,
    options: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """`docker run` / `podman run` for one initializer (plus `options`, e.g. `--network host`, and variables
    beyond the contract, e.g. HF_ENDPOINT), and the env to run it with.

    Values travel in the environment of the `docker` process (`-e NAME` without a value), never in the argument
    list, where any user of the machine could read a secret.
    """
    env = {**program_env(initializer), **(extra_env or {})}
    argv = [runtime, "run", "--rm", "-v", f"{Path(workspace).absolute()}:{WORKSPACE}", *options]
    if name:
        argv += ["--name", name]
    for variable in env:
        argv += ["-e", variable]
    return [*argv, image], env


def init_container(
    initializer: DatasetInitializer | ModelInitializer,
    image: str,
    volume: str = "initializer",
    secret: str | None = None,
) -> dict[str, object]:
    """A Kubernetes init-container spec (a plain dict) writing into the volume the trainer mounts at /workspace.

    With `secret`, secret variables (SECRET_ACCESS_KEY, ACCESS_TOKEN) come from that Secret, keyed by their names.
    """
    secret_names = {s.env for _, s in Config.settings() if s.secret}
    env: list[dict[str, object]] = []
    for variable, value in program_env(initializer).items():
        if secret and variable in secret_names:
            env.append({"name": variable, "valueFrom": {"secretKeyRef": {"name": secret, "key": variable}}})
        else:
            env.append({"name": variable, "value": value})
    return {
        "name": initializer.kind.program,
        "image": image,
        "env": env,
        "volumeMounts": [{"name": volume, "mountPath": WORKSPACE}],
    }


def trainjob_env(
    template_env: Sequence[Mapping[str, object]], storage_uri: str | None, env: Sequence[Mapping[str, object]]
) -> list[dict[str, object]]:
    """The env Kubeflow's controller gives an initializer container from a TrainJob's `initializer.dataset` (or
    `.model`): the runtime template's env, then STORAGE_URI from `storageUri`, then the TrainJob's `env`, each
    replacing a variable of the same name where it stands (so `$(STORAGE_URI)` in `env` expands).

    `storageUri` wins (kubeflow/trainer#3958; on master 8c0f505 a STORAGE_URI in `env` silently replaced it,
    #3955): a STORAGE_URI in `env` is refused beside `storageUri`, as that change refuses it at admission, and
    used without it.
    """
    names = [str(variable["name"]) for variable in env]
    if storage_uri is not None and "STORAGE_URI" in names:
        raise ConfigError(
            "STORAGE_URI: given both as storageUri and in env; Kubeflow refuses this TrainJob (storageUri wins)"
        )
    merged = [dict(variable) for variable in template_env]
    uri = [{"name": "STORAGE_URI", "value": storage_uri}] if storage_uri is not None else []
    for variable in [*uri, *env]:
        at = next((i for i, known in enumerate(merged) if known["name"] == variable["name"]), len(merged))
        merged[at : at + 1] = [dict(variable)]
    return merged
