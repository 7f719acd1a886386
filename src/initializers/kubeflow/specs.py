"""What runs an initializer elsewhere: `docker run` / `podman run` arguments and a Kubernetes init-container spec, both
with exactly the env the programs read (`sdk.program_env`), for one step or an `sdk.Initializer`'s; and the env
Kubeflow's controller gives an initializer container from a TrainJob (`trainjob_env`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal, get_args

from initializers.common.errors import ConfigError
from initializers.config.contract import Config
from initializers.kubeflow.sdk import STEPS, WORKSPACE, DatasetInitializer, Initializer, ModelInitializer, program_env

Step = Literal["dataset", "model"]


def one_step(
    initializer: Initializer | DatasetInitializer | ModelInitializer, step: Step | None
) -> DatasetInitializer | ModelInitializer:
    """The one step a container runs: `initializer` itself, or the step an `Initializer` holds (`step` names which when
    it holds both). A call that names no single step is a TypeError, as a missing argument is: the configuration itself
    is valid (a ConfigError, exit 2 in the programs, says a value is wrong), only the call is ambiguous."""
    if step is not None and step not in get_args(Step):
        raise ValueError(f"step: expected 'dataset' or 'model', got {step!r}")
    if isinstance(initializer, Initializer):
        held = {name: part for name in get_args(Step) if (part := getattr(initializer, name)) is not None}
        if step is None and len(held) > 1:
            raise TypeError(
                "this Initializer holds both a dataset and a model, and a container runs one: pass "
                'initializer.dataset or initializer.model, or add step="dataset" or step="model"'
            )
        if not held or (step is not None and step not in held):
            raise TypeError(f"this Initializer holds no {step or 'dataset or model'}")
        return held[step] if step is not None else next(iter(held.values()))
    if not isinstance(initializer, DatasetInitializer | ModelInitializer):
        given = type(initializer)
        raise TypeError(
            f"expected an initializers.kubeflow.sdk Initializer or step ({', '.join(s.__name__ for s in STEPS)}), "
            f"got {given.__module__}.{given.__qualname__}"
        )
    if step is not None and step != initializer.kind.name:
        raise TypeError(f"step={step!r}, but {type(initializer).__name__} is a {initializer.kind.name}'s step")
    return initializer


def docker_run_args(
    initializer: Initializer | DatasetInitializer | ModelInitializer,
    workspace: str | Path,
    image: str,
    runtime: str = "docker",
    name: str | None = None,
    options: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
    *,
    step: Step | None = None,
) -> tuple[list[str], dict[str, str]]:
    """`docker run` / `podman run` for one step (see `one_step`), plus `options` (e.g. `--network host`) and variables
    beyond the contract (`extra_env`, e.g. HF_ENDPOINT). Returns (argv, env) to run as `subprocess.run(argv,
    env={**os.environ, **env})`; secret values are only in env. The argument list names each variable (`-e NAME`, no
    value) for docker to take from its own environment: any user of the machine can read an argument list."""
    env = {**program_env(one_step(initializer, step)), **(extra_env or {})}
    argv = [runtime, "run", "--rm", "-v", f"{Path(workspace).absolute()}:{WORKSPACE}", *options]
    if name:
        argv += ["--name", name]
    for variable in env:
        argv += ["-e", variable]
    return [*argv, image], env


def init_container(
    initializer: Initializer | DatasetInitializer | ModelInitializer,
    image: str,
    volume: str = "initializer",
    secret: str | None = None,
    *,
    step: Step | None = None,
) -> dict[str, object]:
    """A Kubernetes init-container spec for one step (see `one_step`), writing into the trainer's /workspace volume.
    With `secret`, secret variables (SECRET_ACCESS_KEY, ACCESS_TOKEN) come from that Secret, keyed by their names."""
    initializer = one_step(initializer, step)
    secret_names = {s.env for _, s in Config.settings(initializer.kind) if s.secret}
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
    `.model`): the runtime template's env, then STORAGE_URI from `storageUri`, then the TrainJob's `env`, each replacing
    a variable of the same name where it stands (so `$(STORAGE_URI)` in `env` expands). `storageUri` wins
    (kubeflow/trainer#3958; on master 8c0f505 a STORAGE_URI in `env` silently replaced it, #3955): a STORAGE_URI in
    `env` is refused beside `storageUri`, as that change refuses it at admission, and used without it."""
    if storage_uri is not None and any(variable["name"] == "STORAGE_URI" for variable in env):
        raise ConfigError(
            "STORAGE_URI: given both as storageUri and in env; Kubeflow refuses this TrainJob (storageUri wins)"
        )
    merged = [dict(variable) for variable in template_env]
    uri = [{"name": "STORAGE_URI", "value": storage_uri}] if storage_uri is not None else []
    for variable in [*uri, *env]:
        at = next((i for i, known in enumerate(merged) if known["name"] == variable["name"]), len(merged))
        merged[at : at + 1] = [dict(variable)]
    return merged
