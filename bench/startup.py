"""Start-up: `model-initializer --help` and a configuration error, side by side with `python -c pass`.

Every run of a program pays this before its first request, so heavy imports (botocore, huggingface_hub,
pyarrow, pyiceberg, structlog) are deferred to the code that needs them. Also how soon a stop is heard: the time
until the program catches SIGTERM (its first line's handler, as /proc shows it), from which on any stop reads as
`stopped by ...`. Run with `make bench-startup`.
"""

from __future__ import annotations

import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.harness import settings
from devkit.programs import catches, clean_env

BIN = Path(sys.executable).parent
CASES = {
    "python -c pass": ([sys.executable, "-c", "pass"], {}),
    "model-initializer --help": ([str(BIN / "model-initializer"), "--help"], {}),
    "model-initializer, a configuration error (exit 2)": ([str(BIN / "model-initializer")], {"STORAGE_URI": "gs://x"}),
    "dataset-initializer --help": ([str(BIN / "dataset-initializer"), "--help"], {}),
}
#: The row of the time until a stop is heard, rather than a command's whole run.
HEARD = "dataset-initializer, until a stop is heard (SIGTERM caught)"


def measure_startup(rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(rounds):
        for name, (command, env) in CASES.items():
            started = time.perf_counter()
            subprocess.run(command, env=clean_env(env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - started)
        times.setdefault(HEARD, []).append(until_a_stop_is_heard([str(BIN / "dataset-initializer")]))
    return times


def until_a_stop_is_heard(command: list[str]) -> float:
    """Seconds from starting `command` until it catches SIGTERM (Python alone never does); the process is then
    killed."""
    started = time.perf_counter()
    process = subprocess.Popen(command, env=clean_env({}), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while process.poll() is None and not catches(process.pid, signal.SIGTERM):
            time.sleep(0.0002)
        return time.perf_counter() - started
    finally:
        process.kill()
        process.wait()


def markdown(times: dict[str, list[float]]) -> str:
    baseline = statistics.median(times["python -c pass"])
    lines = ["### Start-up", "", "| command | wall s median (min-max) | minus `python -c pass` |", "|---|---|---|"]
    for name, runs in times.items():
        median = statistics.median(runs)
        lines.append(f"| {name} | {median:.3f} ({min(runs):.3f}-{max(runs):.3f}) | {median - baseline:+.3f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    print(markdown(measure_startup(rounds())))


def rounds() -> int:
    """Start-up runs are short: three times the data sets' rounds, at least 15."""
    return max(settings()[0], 5) * 3


if __name__ == "__main__":
    main()
