"""What durability costs: the dataset program with its syncfs checkpoints and with them disabled, side by side in
one run, into ext4 (a loop device, as a PVC on a disk) and tmpfs; plus, for the choice of syncfs, the same files
written with one fdatasync each instead. Prints medians of alternating rounds; `make bench-durability`."""

from __future__ import annotations

import ctypes
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from bench.volumes import ext4
from devkit.seaweed import SeaweedFS

ROUNDS = 3
SETS = {"small": (2000, 64 << 10), "big": (4, 64 << 20)}  # objects, bytes each
PROGRAM = "from initializers.dataset import main; main()"
WITHOUT_SYNC = "import initializers.destination.journal as j; j.sync_filesystem = lambda path: None; " + PROGRAM


def _program_seconds(env: dict[str, str], code: str, output: str) -> float:
    shutil.rmtree(output, ignore_errors=True)
    os.sync()
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env, "OUTPUT_PATH": output},
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode:
        raise RuntimeError(done.stdout[-2000:] + done.stderr[-2000:])
    return time.monotonic() - started


def _writes_seconds(root: str, count: int, size: int, sync_each: bool) -> float:
    """`count` files written by 8 threads and renamed into place, then one syncfs, or one fdatasync per file."""
    folder = tempfile.mkdtemp(dir=root)
    payload = os.urandom(size)
    os.sync()

    def write(index: int) -> None:
        temp = f"{folder}/{index}.part"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, payload)
        if sync_each:
            os.fdatasync(fd)
        os.close(fd)
        os.replace(temp, f"{folder}/{index}")

    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write, range(count)))
    if not sync_each:
        fd = os.open(folder, os.O_RDONLY)
        ctypes.CDLL(None).syncfs(fd)
        os.close(fd)
    seconds = time.monotonic() - started
    shutil.rmtree(folder)
    return seconds


def _median(measure: Callable[[], float]) -> str:
    return f"{statistics.median(measure() for _ in range(ROUNDS)):.2f}"


def main() -> None:
    with SeaweedFS.start() as seaweed, ext4(8) as mount:
        client = seaweed.client()
        client.create_bucket(Bucket="durability")
        for name, (count, size) in SETS.items():
            body = os.urandom(size)
            for index in range(count):
                client.put_object(Bucket="durability", Key=f"{name}/{index:05d}.bin", Body=body)
        tmpfs = tempfile.mkdtemp(dir="/dev/shm")
        print("volume set      program+syncfs  program-without  8 writers+syncfs  8 writers+fdatasync (s, medians)")
        try:
            for volume, root in (("ext4", str(mount)), ("tmpfs", tmpfs)):
                for name, (count, size) in SETS.items():
                    env = {**seaweed.env(), "STORAGE_URI": f"s3://durability/{name}", "LOG_FORMAT": "json"}
                    row = [
                        _median(partial(_program_seconds, env, PROGRAM, f"{root}/out")),
                        _median(partial(_program_seconds, env, WITHOUT_SYNC, f"{root}/out")),
                        _median(partial(_writes_seconds, root, count, size, sync_each=False)),
                        _median(partial(_writes_seconds, root, count, size, sync_each=True)),
                    ]
                    print(f"{volume:6s} {name:6s} " + "  ".join(f"{cell:>15s}" for cell in row), flush=True)
        finally:
            shutil.rmtree(tmpfs, ignore_errors=True)


if __name__ == "__main__":
    main()
