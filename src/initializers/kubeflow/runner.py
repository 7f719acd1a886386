"""A local runner: the Kubeflow SDK container backend's initializer step, in miniature, for users without Kubeflow.

Both programs start in parallel (as processes, or as images through podman or docker), each log line is streamed
tagged with its step and kept per step, `initializer_timeout` is enforced, and a failure raises naming the step,
its exit code and its last log lines. The images get the same env the Kubeflow SDK would give them.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from initializers.common.errors import ConfigError
from initializers.kubeflow.sdk import (
    WORKSPACE,
    ContainerBackendConfig,
    DataCacheInitializer,
    DatasetInitializer,
    Initializer,
    ModelInitializer,
    program_env,
    shard_variables,
)
from initializers.kubeflow.specs import docker_run_args
from initializers.process.stopping import stoppable

LineSink = Callable[[str, str], None]


def print_tagged(step: str, line: str) -> None:
    """A step's log line on stderr, where the programs write theirs, tagged with the step."""
    print(f"[{step}] {line}", file=sys.stderr, flush=True)


@dataclass
class StepResult:
    step: str
    exit_code: int | None  # None: killed at the timeout
    seconds: float
    logs: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class InitializerFailed(RuntimeError):
    def __init__(self, failed: list[StepResult]) -> None:
        self.failed = failed
        parts = []
        for result in failed:
            status = "timed out" if result.exit_code is None else f"exited with {result.exit_code}"
            tail = "\n".join(f"    {line}" for line in result.logs[-10:])
            parts.append(f"{result.step} {status}; last log lines:\n{tail}")
        super().__init__("\n".join(parts))


def run(
    initializer: Initializer,
    workspace: str | Path,
    *,
    backend: str = "process",
    config: ContainerBackendConfig | None = None,
    extra_env: Mapping[str, str] | None = None,
    run_options: Sequence[str] = (),
    on_line: LineSink = print_tagged,
    shards: int = 1,
) -> dict[str, StepResult]:
    """Run the configured initializers in parallel into `workspace`; raise InitializerFailed if any step fails.
    `on_line(step, line)` gets every line they print, one at a time. With `shards` > 1, each step runs as that many
    initializers splitting its plan (SHARD_INDEX / SHARD_COUNT), named `<program>-<index>`, all writing the step's
    folder; a cache step is refused, since its shards belong on the nodes that read them. With an image backend the
    workspace is made group-writable for group 0, so a runner started as root gets the files from the images' own user
    (10001:0) rather than from root (see workspace_owner.py)."""
    config = config or ContainerBackendConfig()
    steps = [step for step in (initializer.dataset, initializer.model) if step is not None]
    Path(workspace).mkdir(parents=True, exist_ok=True)
    if backend != "process":
        os.chmod(workspace, 0o775)
    children: list[_Child] = []
    with _signals_stop():
        try:
            for step in steps:
                if shards > 1 and isinstance(step, DataCacheInitializer):
                    raise ConfigError("shards: a cache step materialises one shard per node, on that node's volume")
                for index in range(shards):
                    name = step.kind.program if shards == 1 else f"{step.kind.program}-{index}"
                    extra = {**(extra_env or {}), **(shard_variables(index, shards) if shards > 1 else {})}
                    children.append(_start(step, name, Path(workspace), backend, config, extra, run_options))
            results = _wait(children, config.initializer_timeout, on_line)
        except BaseException:
            for child in children:
                child.stop()
            raise
    failed = [result for result in results.values() if not result.ok]
    if failed:
        raise InitializerFailed(failed)
    return results


@contextlib.contextmanager
def _signals_stop() -> Iterator[None]:
    """In the main thread, SIGTERM and SIGINT raise Stopped wherever it is (it only starts and waits for the
    children), so that the children are stopped on the way out."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    with stoppable(None, lambda: "the initializers") as stop, stop.interruptible():
        yield


@dataclass
class _Child:
    """One step's process: the program itself, or the `podman run` / `docker run` client of its container."""

    name: str
    process: subprocess.Popen[str]
    container: tuple[str, str] | None = None  # (runtime, container name)

    def stop(self) -> None:
        """SIGTERM (the programs clean up and exit within seconds), then SIGKILL; a container is removed as well,
        since killing its client may leave it running."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.container is not None:
            runtime, name = self.container
            subprocess.run([runtime, "rm", "--force", name], capture_output=True, check=False)


def _wait(children: list[_Child], timeout: float, on_line: LineSink) -> dict[str, StepResult]:
    started = time.monotonic()
    results = {child.name: StepResult(child.name, None, 0.0) for child in children}
    turn = threading.Lock()

    def one_at_a_time(name: str, line: str) -> None:  # each child has a reader thread; callers need not be thread-safe
        with turn:
            on_line(name, line)

    readers = [
        threading.Thread(target=_read, args=(child.process, results[child.name], one_at_a_time), daemon=True)
        for child in children
    ]
    for reader in readers:
        reader.start()
    deadline = started + timeout
    for child in children:
        try:
            results[child.name].exit_code = child.process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.stop()
        results[child.name].seconds = time.monotonic() - started
    for reader in readers:
        reader.join(5)
    return results


def _start(
    step: DatasetInitializer | ModelInitializer,
    name: str,
    workspace: Path,
    backend: str,
    config: ContainerBackendConfig,
    extra_env: Mapping[str, str],
    run_options: Sequence[str],
) -> _Child:
    if backend == "process":
        env = {**program_env(step), **extra_env}
        env["OUTPUT_PATH"] = str(workspace.absolute() / env["OUTPUT_PATH"].removeprefix(f"{WORKSPACE}/"))
        command = [sys.executable, "-m", f"initializers.{step.kind.name}"]
        return _Child(name, _popen(command, {**os.environ, **env}))
    if backend not in ("podman", "docker"):
        raise ValueError(f"backend: expected process, podman or docker, got {backend!r}")
    container = f"{name}-{uuid.uuid4().hex[:12]}"
    argv, env = docker_run_args(step, workspace, config.image_for(step), backend, container, run_options, extra_env)
    return _Child(name, _popen(argv, {**os.environ, **env}), (backend, container))


def _popen(command: list[str], env: Mapping[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )


def _read(process: subprocess.Popen[str], result: StepResult, on_line: LineSink) -> None:
    assert process.stdout is not None
    for raw in process.stdout:
        line = raw.rstrip("\n")
        result.logs.append(line)
        on_line(result.step, line)
